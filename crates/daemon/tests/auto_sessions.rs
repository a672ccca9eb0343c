//! `sources = ["auto"]` (the default): the daemon, started with no configuration file and no
//! `DISPLAY` or `XAUTHORITY` in its environment, finds the machine's sessions by itself and
//! follows each one's focus for the session's user (`src/sources/auto/`, docs/desktops.md).
//!
//! Real X servers (Xvfb, with an auth cookie) and real X client windows that set `_NET_WM_PID`;
//! the test plays the window manager (it sets `_NET_ACTIVE_WINDOW`, as an EWMH window manager
//! does). The daemon is the fixture's `daemon-defaults` role: the built-in defaults, with only
//! its socket, journal and cgroups in the test's directory.
//!
//! logind is absent on this machine (no systemd, no system bus), so discovery through it runs
//! against a stand-in logind on a private `dbus-daemon` (the daemon's `DBUS_SYSTEM_BUS_ADDRESS`);
//! and the Wayland compositors are absent too, so their discovery runs on a fixture
//! `/run/user` tree whose sockets are listened on by processes named as the compositors
//! (copies of the fixture binary: `sway`, `Hyprland`, …). Everything else is the real thing.
//!
//! Needs root for the X tests (servers and windows run as uid 65534, the stand-in for a desktop
//! user; 65533 is another user) and the Debian packages `xvfb` and `dbus-daemon`.

#[path = "common/any_user.rs"]
mod any_user;
#[path = "common/bus.rs"]
mod bus;
#[path = "common/desktop.rs"]
mod desktop;
#[path = "auto_sessions/wayland.rs"]
mod wayland;
#[path = "auto_sessions/xserver.rs"]
mod xserver;

use desktop::*;
use wayland::*;
use xserver::*;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use uxsched_client::control::{SessionStatus, Status};
use uxsched_daemon::sources::auto::{self, procs, xdisplay, Follower};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt, PropMode};
use x11rb::wrapper::ConnectionExt as _;

/// The desktop user, and another one.
const USER: u32 = 65534;
const OTHER: u32 = 65533;

/// How long a status may take to show what a test waits for.
const WAIT: Duration = Duration::from_secs(20);

/// A directory every user can enter.
fn open_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// The session of display `:n` in a status.
fn session(s: &Status, n: u32) -> Option<&SessionStatus> {
    let suffix = format!(" on :{n}");
    s.sessions
        .iter()
        .find(|x| x.desktop.ends_with(&suffix) || x.desktop.contains(&format!("{suffix} (")))
}

fn followed(s: &Status, n: u32) -> bool {
    session(s, n).is_some_and(|x| x.followed)
}

#[test]
#[ignore = "needs root and Xvfb: make test runs it as root"]
fn an_unprivileged_users_xvfb_is_found_with_no_configuration_and_only_its_users_windows_count() {
    assert!(
        root(),
        "runs X servers and windows as uid {USER}: needs root"
    );
    let _serial = serial();
    let dir = open_dir();
    let n = free_display();
    let (auth, cookie) = cookie_file(dir.path(), n, USER);
    let _server = xvfb(n, USER, Some(&auth));
    // Beside it, a socket that answers garbage, run by the user: a session whose source cannot
    // connect, reported, retried at a bounded rate, and nothing else.
    let garbage = (n + 1..400)
        .find(|k| !xdisplay::socket_of(Path::new(xdisplay::X11_DIR), *k).exists())
        .unwrap();
    let garbage_socket = xdisplay::socket_of(Path::new(xdisplay::X11_DIR), garbage);
    let mut bad = Command::new(any_user::exe_for_any_user())
        .args(["listen", "xgarbage"])
        .env("UXSCHED_TEST_DIR", &garbage_socket)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .uid(USER)
        .gid(USER)
        .spawn()
        .unwrap();
    let ready = BufReader::new(bad.stdout.take().unwrap()).lines().next();
    let _bad = Kill(bad);
    assert!(matches!(ready, Some(Ok(l)) if l == "ready"));

    let mut d = Daemon::start(&[]);
    let s = d.wait_for("the display found and followed", WAIT, |s| followed(s, n));
    let x = session(&s, n).unwrap();
    assert_eq!(x.uid, Some(USER), "{x:?}");
    assert_eq!(x.source.as_deref(), Some("x11"));
    assert!(
        x.user_how.as_deref().unwrap().contains("runs Xvfb on"),
        "{x:?}"
    );
    assert!(s
        .discovery
        .as_deref()
        .unwrap()
        .contains("logind is not used"));
    let s = d.wait_for("the garbage display reported", WAIT, |s| {
        session(s, garbage).is_some_and(|x| !x.followed && x.problem.is_some())
    });
    assert_eq!(session(&s, garbage).unwrap().uid, Some(USER));

    let (_a, pid_a, win_a) = window(n, &auth, USER, None);
    activate(n, &cookie, win_a);
    d.wait_for("the user's window in front", WAIT, |s| {
        s.focus == Some(pid_a as i32)
    });

    // Windows naming root's process (pid 1) and another user's: refused, nothing in front.
    let other = Kill(Command::new("sleep").arg("60").uid(OTHER).spawn().unwrap());
    for claim in [1, other.0.id()] {
        let (_h, _, win_h) = window(n, &auth, 0, Some(claim));
        activate(n, &cookie, win_h);
        // Nothing of this display's in front (another session's focus may be, on a machine
        // with a desktop of its own).
        d.wait_for(&format!("a window naming pid {claim} refused"), WAIT, |s| {
            session(s, n).is_some_and(|x| x.focus.is_none()) && s.focus != Some(claim as i32)
        });
        assert!(
            d.log().contains(&format!("not acted on: pid {claim} ")),
            "{}",
            d.log()
        );
        activate(n, &cookie, win_a);
        d.wait_for("the user's window in front again", WAIT, |s| {
            s.focus == Some(pid_a as i32)
        });
    }
    // The garbage server was retried at a bounded rate: its failure said at info level once.
    let said = d
        .log()
        .lines()
        .filter(|l| l.contains(" INFO ") && l.contains("x11 source: cannot connect"))
        .count();
    assert!(said <= 2, "said {said} times:\n{}", d.log());
    assert!(d
        .status()
        .sources
        .iter()
        .any(|x| x.name == "auto" && x.alive));
}

#[test]
#[ignore = "needs root and Xvfb: make test runs it as root"]
fn a_root_xorg_with_the_users_cookie_follows_the_user_and_one_without_says_why_not() {
    assert!(
        root(),
        "runs X servers as root and windows as uid {USER}: needs root"
    );
    let _serial = serial();
    let dir = open_dir();
    // The display manager's case: the server runs as root, its cookie file is the user's.
    let n = free_display();
    let (auth, cookie) = cookie_file(dir.path(), n, USER);
    let _server = xvfb(n, 0, Some(&auth));
    // And a root server nobody's session is on.
    let lonely = (n + 1..400)
        .find(|k| !xdisplay::socket_of(Path::new(xdisplay::X11_DIR), *k).exists())
        .unwrap();
    let _lonely = xvfb(lonely, 0, None);

    let mut d = Daemon::start(&[]);
    let s = d.wait_for("the root server's display followed", WAIT, |s| {
        followed(s, n) && session(s, lonely).is_some()
    });
    let x = session(&s, n).unwrap();
    assert_eq!(x.uid, Some(USER), "{x:?}");
    assert!(
        x.user_how
            .as_deref()
            .unwrap()
            .contains("owns the server's cookie file"),
        "{x:?}"
    );
    let (_a, pid_a, win_a) = window(n, &auth, USER, None);
    activate(n, &cookie, win_a);
    d.wait_for("the user's window in front", WAIT, |s| {
        s.focus == Some(pid_a as i32)
    });

    // The lonely display: not followed, and why, in status and in doctor's words.
    let l = session(&s, lonely).unwrap();
    assert!(!l.followed && l.source.is_none(), "{l:?}");
    let why = format!("Xvfb on :{lonely} runs as root and no session user could be found");
    assert!(l.problem.as_deref().unwrap().contains(&why), "{l:?}");
    let text = auto::report::doctor(&d.socket, Ok(&s), None, &["auto".into()], None, true);
    assert!(text.contains(&format!("NOT followed: {why}")), "{text}");
    assert!(text.contains("what to do: log in on it"), "{text}");
    assert!(text.contains("followed by the x11 source"), "{text}");
    // doctor with no daemon: the same discovery, run by itself, says the same.
    let found = auto::Discovery::new(auto::Roots::default()).run(&auto::Options::default());
    let text = auto::report::doctor(
        Path::new("/nonexistent"),
        Err("not running".into()),
        Some(&found),
        &["auto".into()],
        None,
        true,
    );
    assert!(text.contains(&format!("NOT followed: {why}")), "{text}");
    assert!(
        text.contains("would be followed by the x11 source"),
        "{text}"
    );
}

/// A stand-in logind on a private bus: the sessions a test gives it.
#[path = "auto_sessions/logind_standin.rs"]
mod logind_standin;

#[test]
#[ignore = "needs root, Xvfb and dbus-daemon: make test runs it as root"]
fn loginds_session_names_the_user_of_a_root_display_and_a_remote_one_is_not_followed() {
    assert!(
        root(),
        "runs X servers as root and windows as uid {USER}: needs root"
    );
    let _serial = serial();
    let dir = open_dir();
    // Two root servers without cookie files: only logind can say whose they are.
    let n = free_display();
    let (auth, cookie) = cookie_file(dir.path(), n, 0);
    let _server = xvfb(n, 0, Some(&auth));
    let remote = (n + 1..400)
        .find(|k| !xdisplay::socket_of(Path::new(xdisplay::X11_DIR), *k).exists())
        .unwrap();
    let _remote = xvfb(remote, 0, None);
    let bus = bus::SystemBus::start();
    let session = |id: &str, n: u32, remote: bool| logind_standin::Session {
        id: id.into(),
        uid: USER,
        kind: "x11",
        display: format!(":{n}"),
        active: true,
        remote,
    };
    let _logind = logind_standin::serve(
        &bus.address,
        vec![session("1", n, false), session("2", remote, true)],
    );

    // The discovery a daemon runs, on that bus.
    let mut disc = auto::Discovery::new(auto::Roots {
        logind: auto::LogindAt::Address(bus.address.clone()),
        ..auto::Roots::default()
    });
    let found = disc.run(&auto::Options::default());
    assert!(found.how.starts_with("logind"), "{}", found.how);
    let mine = |k: u32| {
        found
            .sessions
            .iter()
            .find(|s| s.desktop.starts_with(&format!("Xvfb on :{k} ")))
            .unwrap_or_else(|| panic!(":{k} not found: {found:#?}"))
    };
    let s = mine(n);
    assert_eq!(s.plan, Ok(Follower::X11 { display: n }));
    assert_eq!(s.user.as_ref().unwrap().0, USER);
    assert!(s.found.ends_with("logind session 1"), "{s:?}");
    assert_eq!(s.active, Some(true));
    let r = mine(remote);
    assert!(
        r.plan.as_ref().unwrap_err().why.contains("remote session"),
        "{r:?}"
    );

    // The daemon, with that bus as its system bus, follows the user's window on the root server
    // (the user's window: the user reads root's cookie here only because the test gives it).
    let pub_auth = dir.path().join("user-cookie");
    write_cookie(&pub_auth, n, &cookie, USER);
    let mut d = Daemon::start(&[("DBUS_SYSTEM_BUS_ADDRESS", &bus.address)]);
    d.wait_for("the display logind names followed", WAIT, |s| {
        followed(s, n)
    });
    let (_a, pid_a, win_a) = window(n, &pub_auth, USER, None);
    activate(n, &cookie, win_a);
    let s = d.wait_for("the user's window in front", WAIT, |s| {
        s.focus == Some(pid_a as i32)
    });
    assert!(s.discovery.as_deref().unwrap().starts_with("logind"));
}

/// A copy of the fixture named `name` in `bin`: a process its name (`comm`) calls so.
fn named_fixture(bin: &Path, name: &str) -> PathBuf {
    let p = bin.join(name);
    std::fs::copy(any_user::exe_for_any_user(), &p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// The fixture's `listen KIND` as `uid`, run from `exe`, its sockets in `dir`; once ready.
fn listen(exe: &Path, kind: &str, dir: &Path, uid: u32) -> Kill {
    let mut c = Command::new(exe);
    c.args(["listen", kind])
        .env("UXSCHED_TEST_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    if root() {
        c.uid(uid).gid(uid);
    }
    let mut child = c.spawn().unwrap();
    let ready = BufReader::new(child.stdout.take().unwrap()).lines().next();
    let guard = Kill(child);
    assert!(
        matches!(ready, Some(Ok(ref l)) if l == "ready"),
        "{kind}: {ready:?}"
    );
    guard
}

/// Discovery of the Wayland compositors on a fixture `/run/user` tree (no compositor runs
/// here): each is found by its own socket and served by a process named as it; a dead one's
/// socket, one that names another user's pid, and root's directory are not followed.
#[test]
fn compositors_are_found_in_a_runtime_tree_and_each_gets_its_source_or_a_reason() {
    // Alone: its listeners run as the same user as the other tests' compositors, and a
    // listener is asked who it is once per socket (`procs::listener_in`).
    let _serial = serial();
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    let user = if me == 0 { USER } else { me };
    let bin = open_dir();
    let tree = open_dir();
    let home = tree.path().join(user.to_string());
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&home, Some(user), Some(user)).unwrap();
    let sway = listen(&named_fixture(bin.path(), "sway"), "sway", &home, user);
    let _hypr = listen(
        &named_fixture(bin.path(), "Hyprland"),
        "hyprland",
        &home,
        user,
    );
    let _niri = listen(&named_fixture(bin.path(), "niri"), "niri", &home, user);
    let _gnome = listen(
        &named_fixture(bin.path(), "gnome-shell"),
        "wayland-4",
        &home,
        user,
    );
    let _weston = listen(
        &named_fixture(bin.path(), "weston"),
        "wayland-5",
        &home,
        user,
    );
    // A compositor that crashed: its socket file is left, nobody listens.
    drop(std::os::unix::net::UnixListener::bind(home.join("wayland-9")).unwrap());
    // A socket that names pid 1 (root's) as its sway: listened on, but by a liar.
    let _liar =
        std::os::unix::net::UnixListener::bind(home.join(format!("sway-ipc.{user}.1.sock")))
            .unwrap();
    // Root's runtime directory (as root only: nobody else can make one that is root's).
    let root_dir = tree.path().join("0");
    let _root_wayland = root().then(|| {
        std::fs::create_dir(&root_dir).unwrap();
        std::os::unix::net::UnixListener::bind(root_dir.join("wayland-6")).unwrap()
    });
    let empty_x = tempfile::tempdir().unwrap();
    let roots = auto::Roots {
        x11_dir: empty_x.path().to_owned(),
        runtime: tree.path().to_owned(),
        logind: auto::LogindAt::Off,
    };
    let mut disc = auto::Discovery::new(roots);
    let found = disc.run(&auto::Options::default());
    let plan_of = |desktop: &str| {
        found
            .sessions
            .iter()
            .find(|s| s.desktop == desktop)
            .unwrap_or_else(|| panic!("no {desktop}: {found:#?}"))
            .plan
            .clone()
    };
    let sway_pid = sway.0.id();
    assert_eq!(
        plan_of("sway (Wayland wayland-1)"),
        Ok(Follower::Sway(
            home.join(format!("sway-ipc.{user}.{sway_pid}.sock"))
        ))
    );
    assert!(matches!(
        plan_of("Hyprland (Wayland wayland-2)"),
        Ok(Follower::Hyprland(d)) if d.starts_with(home.join("hypr"))
    ));
    assert!(matches!(
        plan_of("niri (Wayland wayland-3)"),
        Ok(Follower::Niri(p)) if p.starts_with(&home)
    ));
    assert_eq!(
        plan_of("GNOME Shell (Wayland wayland-4)"),
        Ok(Follower::Mutter)
    );
    // A compositor without an IPC of its own gets the `toplevel` fallback on its display.
    assert_eq!(
        plan_of("weston (Wayland wayland-5)"),
        Ok(Follower::Toplevel(home.join("wayland-5")))
    );
    let liar = found
        .sessions
        .iter()
        .find(|s| s.found.ends_with(&format!("sway-ipc.{user}.1.sock")))
        .expect("the liar's socket is reported");
    assert!(
        liar.plan.as_ref().unwrap_err().why.contains("names pid 1"),
        "{liar:?}"
    );
    assert!(
        !found
            .sessions
            .iter()
            .any(|s| s.desktop.contains("wayland-9")),
        "{found:#?}"
    );
    if root() {
        let r = found
            .sessions
            .iter()
            .find(|s| s.desktop.contains("wayland-6"))
            .expect("root's compositor is reported");
        assert!(r.plan.as_ref().unwrap_err().why.contains("root's session"));
    }
    for s in &found.sessions {
        if s.plan.is_ok() {
            assert_eq!(s.user.as_ref().map(|u| u.0), Some(user), "{s:?}");
        }
    }
    // Sessions come and go: sway exits, and the next round does not find it.
    drop(sway);
    let again = disc.run(&auto::Options::default());
    assert!(
        !again.sessions.iter().any(|s| s.desktop.starts_with("sway")),
        "{again:#?}"
    );
    assert_eq!(again.sessions.len(), found.sessions.len() - 1);
    // A compositor listed by itself in `sources` is left to that source.
    let opts = auto::Options {
        configured: [uxsched_daemon::types::SourceName::Niri].into(),
        ..Default::default()
    };
    let left = disc.run(&opts);
    let niri = left
        .sessions
        .iter()
        .find(|s| s.desktop.starts_with("niri"))
        .unwrap();
    assert!(niri
        .plan
        .as_ref()
        .unwrap_err()
        .why
        .contains("configured in `sources`"));
}

/// The first case: sway headless run by a user in its runtime directory, a Wayland
/// terminal in it, and the daemon with no configuration file finds the session, follows the
/// focus as `swaymsg` moves it, and refuses a client of another user (root).
#[test]
#[ignore = "needs root, sway and foot: make test runs it as root"]
fn a_users_sway_is_found_with_no_configuration_and_its_focus_followed() {
    assert!(root(), "runs sway as uid {USER}: needs root");
    let _serial = serial();
    let runtime = RuntimeDir::of(USER);
    let home = open_dir();
    LOGS.lock().unwrap().push(home.path().join("sway.log"));
    let _logs = ShowLogsIfFailed; // dropped before `home`, which holds sway's log
    let config = home.path().join("sway.conf");
    std::fs::write(&config, "# sway's defaults\n").unwrap();
    let log = std::fs::File::create(home.path().join("sway.log")).unwrap();
    let mut sway = Command::new("sway");
    sway.arg("-c")
        .arg(&config)
        .current_dir("/") // not the crate's directory, unreachable from a clone in /root
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home.path())
        .env("XDG_RUNTIME_DIR", &runtime.path)
        .env("WLR_BACKENDS", "headless")
        .env("WLR_LIBINPUT_NO_DEVICES", "1")
        .env("WLR_RENDERER", "pixman")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .uid(USER)
        .gid(USER);
    let _sway = Kill(sway.spawn().expect("sway (Debian package sway)"));
    let find = |pred: &dyn Fn(&str) -> bool| {
        std::fs::read_dir(&runtime.path)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| pred(&p.file_name().unwrap().to_string_lossy()))
    };
    let mut ipc = None;
    let mut display = None;
    wait_until("sway's sockets", Duration::from_secs(15), || {
        ipc = find(&|n| n.starts_with("sway-ipc."));
        display = find(&|n| auto::runtime::is_wayland_socket(n));
        let l = procs::listening();
        [&ipc, &display]
            .iter()
            .all(|p| p.as_ref().is_some_and(|p| procs::is_listened(&l, p)))
    });
    let (ipc, display) = (ipc.unwrap(), display.unwrap());

    let mut d = Daemon::start(&[]);
    let s = d.wait_for("the sway session followed", WAIT, |s| {
        s.sessions
            .iter()
            .any(|x| x.desktop.starts_with("sway (Wayland") && x.followed)
    });
    let x = s
        .sessions
        .iter()
        .find(|x| x.desktop.starts_with("sway"))
        .unwrap();
    assert_eq!((x.uid, x.source.as_deref()), (Some(USER), Some("sway")));
    let t1 = foot(&display, &runtime.path, Some(USER));
    d.wait_for("the first terminal in front", WAIT, |s| {
        s.focus == Some(t1.0.id() as i32)
    });
    let t2 = foot(&display, &runtime.path, Some(USER));
    d.wait_for("the second terminal in front", WAIT, |s| {
        s.focus == Some(t2.0.id() as i32)
    });
    swaymsg(&ipc, &format!("[pid={}] focus", t1.0.id()));
    d.wait_for("focus moved by swaymsg", WAIT, |s| {
        s.focus == Some(t1.0.id() as i32)
    });
    let root_rt = tempfile::tempdir().unwrap();
    let _root_term = foot(&display, root_rt.path(), None);
    let root_pid = _root_term.0.id() as i32;
    d.wait_for("root's terminal refused", WAIT, |s| {
        let sway = s.sessions.iter().find(|x| x.desktop.starts_with("sway"));
        sway.is_some_and(|x| x.focus.is_none()) && s.focus != Some(root_pid)
    });
    swaymsg(&ipc, &format!("[pid={}] focus", t2.0.id()));
    d.wait_for("back to the user's terminal", WAIT, |s| {
        s.focus == Some(t2.0.id() as i32)
    });
}
