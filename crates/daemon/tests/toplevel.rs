//! The `toplevel` source (`src/sources/wayland/toplevel.rs`): the fallback for a Wayland
//! compositor without an IPC of its own, through wlr-foreign-toplevel-management, which names a
//! window's app id and never its process.
//!
//! A real sway headless (it offers the protocol) run by uid 65533, real Wayland clients (foot
//! and mousepad, GTK 3 on Wayland), and the daemon:
//! - with `sources = ["toplevel"]` (sway's own source not used), following the compositor its
//!   environment names: the focus follows `swaymsg` between foot and mousepad; root's foot
//!   on the user's compositor is refused; two foots are nothing in front, with the reason in
//!   `status`;
//! - with no configuration (`sources = ["auto"]`), when sway's IPC socket is not there: the
//!   session (in `/run/user/65533`) is followed by the `toplevel` fallback.
//!
//! And KWin 5.27 (`kwin_wayland --virtual`), which does not offer the protocol: the source says
//! so and does not start. Needs root and the Debian packages sway, foot, mousepad, kwin-wayland
//! and dbus-daemon (scripts/setup.sh).

#[path = "common/any_user.rs"]
#[allow(dead_code)]
mod any_user;
#[path = "common/desktop.rs"]
mod desktop;
#[path = "auto_sessions/wayland.rs"]
mod wayland;

use desktop::*;
use wayland::*;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use uxsched_client::control::{self, Request, Status};
use uxsched_daemon::sources::auto::{self, procs};

/// The desktop user: not 65534, whose runtime directory `/run/user/65534` other tests make and
/// remove while they run (the `auto` test's sway would lose its sockets).
const USER: u32 = 65533;
/// How long a status may take to show what a step waits for.
const WAIT: Duration = Duration::from_secs(10);

/// A directory `user` owns (0700 for a runtime directory, 0755 for a home).
fn users_dir(user: u32, mode: u32) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(d.path(), Some(user), Some(user)).unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    d
}

/// sway headless as `user` in `runtime`: (sway, its IPC socket, its display socket).
fn sway(user: u32, runtime: &Path, home: &Path) -> (Kill, PathBuf, PathBuf) {
    let config = home.join("sway.conf");
    // No Xwayland: probes of the X sockets (the `auto` daemon's) would start it lazily, and it
    // can outlive sway.
    std::fs::write(&config, "xwayland disable\n").unwrap();
    let log = home.join("sway.log");
    LOGS.lock().unwrap().push(log.clone());
    let log = std::fs::File::create(log).unwrap();
    let mut c = Command::new("sway");
    c.arg("-c")
        .arg(&config)
        .current_dir("/")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", runtime)
        .env("WLR_BACKENDS", "headless")
        .env("WLR_LIBINPUT_NO_DEVICES", "1")
        .env("WLR_RENDERER", "pixman")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .uid(user)
        .gid(user);
    let sway = Kill(c.spawn().expect("sway (Debian package sway)"));
    let find = |pred: &dyn Fn(&str) -> bool| {
        std::fs::read_dir(runtime)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| pred(&p.file_name().unwrap().to_string_lossy()))
    };
    let (mut ipc, mut display) = (None, None);
    wait_until("sway's sockets", Duration::from_secs(15), || {
        ipc = find(&|n| n.starts_with("sway-ipc."));
        display = find(&|n| auto::runtime::is_wayland_socket(n));
        let l = procs::listening();
        [&ipc, &display]
            .iter()
            .all(|p| p.as_ref().is_some_and(|p| procs::is_listened(&l, p)))
    });
    (sway, ipc.unwrap(), display.unwrap())
}

/// mousepad (GTK 3, app id `mousepad`) on the compositor at `display`, as `USER`.
fn mousepad(display: &Path, runtime: &Path, home: &Path) -> Kill {
    let log = home.join("mousepad.log");
    LOGS.lock().unwrap().push(log.clone());
    let log = std::fs::File::create(log).unwrap();
    let mut c = Command::new("mousepad");
    c.current_dir("/")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", runtime)
        .env("WAYLAND_DISPLAY", display)
        .env("GDK_BACKEND", "wayland")
        .env("NO_AT_BRIDGE", "1")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .uid(USER)
        .gid(USER);
    Kill(c.spawn().expect("mousepad (Debian package mousepad)"))
}

/// The daemon with `sources = ["toplevel"]`, `WAYLAND_DISPLAY` and `XDG_RUNTIME_DIR` in its
/// environment (as a daemon run inside the session has); stopped with SIGTERM.
struct Daemon {
    child: Kill,
    dir: tempfile::TempDir,
    socket: PathBuf,
}

impl Daemon {
    fn start(display: &Path, runtime: &Path) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let socket = p.join("uxsched.sock");
        let config = p.join("uxsched.toml");
        std::fs::write(
            &config,
            format!(
                "socket = \"{}\"\njournal = \"{}\"\ncgroup_name = \"uxsched-test-toplevel-{}\"\n\
                 log_level = \"debug\"\nsources = [\"toplevel\"]\nmin_focus_interval_ms = 0\n\
                 [tracker]\nstore = \"{}\"\nlever = \"fair\"\n",
                socket.display(),
                p.join("journal.sqlite").display(),
                std::process::id(),
                p.join("tracker.sqlite").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(p.join("daemon.log")).unwrap();
        let child = Command::new(any_user::FIXTURE)
            .arg("daemon")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("UXSCHED_TEST_CONFIG", &config)
            .env("WAYLAND_DISPLAY", display.file_name().unwrap())
            .env("XDG_RUNTIME_DIR", runtime)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let d = Daemon {
            child: Kill(child),
            dir,
            socket,
        };
        wait_until("the daemon answers", Duration::from_secs(30), || {
            control::call(&d.socket, &Request::Status).is_ok()
        });
        d
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    /// The status once `cond` holds, within [`WAIT`].
    fn wait_for(&self, what: &str, cond: impl Fn(&Status) -> bool) -> Status {
        let end = std::time::Instant::now() + WAIT;
        loop {
            let s = control::call(&self.socket, &Request::Status)
                .unwrap_or_else(|e| panic!("status: {e}\n{}", self.log()))
                .status
                .unwrap();
            if cond(&s) {
                return s;
            }
            if std::time::Instant::now() > end {
                panic!(
                    "timed out waiting for: {what}\nstatus: {s:#?}\nlog:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let child = &mut self.child.0;
        // SAFETY: kill has no memory preconditions; the pid is our child's, not yet reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while child.try_wait().ok().flatten().is_none() && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        if std::thread::panicking() {
            eprintln!("--- daemon log:\n{}", self.log());
        }
    }
}

/// The `toplevel` source's error in a status (why it names nothing), or "".
fn why(s: &Status) -> String {
    let t = s.sources.iter().find(|x| x.name == "toplevel");
    t.and_then(|t| t.error.clone()).unwrap_or_default()
}

fn pid(k: &Kill) -> i32 {
    k.0.id() as i32
}

#[test]
#[ignore = "needs root, sway, foot and mousepad: make test runs it as root"]
fn the_window_list_names_the_focused_apps_process_and_nothing_when_it_cannot_tell() {
    assert!(root(), "runs sway as uid {USER}: needs root");
    let _serial = serial();
    let (runtime, home) = (users_dir(USER, 0o700), users_dir(USER, 0o755));
    let _logs = ShowLogsIfFailed;
    let (_sway, ipc, display) = sway(USER, runtime.path(), home.path());
    let d = Daemon::start(&display, runtime.path());
    d.wait_for("the toplevel source runs", |s| {
        s.sources.iter().any(|x| x.name == "toplevel" && x.alive)
    });

    // Root's terminal on the user's compositor: the one foot client is root's, never named.
    let root_rt = tempfile::tempdir().unwrap();
    let root_foot = foot(&display, root_rt.path(), None);
    let s = d.wait_for("root's foot refused", |s| why(s).contains("root's"));
    assert_eq!(s.focus, None);
    assert!(
        why(&s).contains(&format!("pid {}", pid(&root_foot))),
        "{s:#?}"
    );

    let m = mousepad(&display, runtime.path(), home.path());
    d.wait_for("mousepad in front", |s| {
        s.focus == Some(pid(&m)) && why(s).is_empty()
    });
    let t1 = foot(&display, runtime.path(), Some(USER));
    // Two foot clients now (root's and the user's): which one is in front cannot be told.
    let s = d.wait_for("two foots: nothing", |s| {
        why(s).contains("2 Wayland clients")
    });
    assert_eq!(s.focus, None, "{s:#?}");
    drop(root_foot);
    swaymsg(&ipc, &format!("[pid={}] focus", pid(&t1)));
    d.wait_for("the user's foot in front", |s| s.focus == Some(pid(&t1)));
    swaymsg(&ipc, "[app_id=mousepad] focus");
    d.wait_for("swaymsg: mousepad", |s| s.focus == Some(pid(&m)));
    swaymsg(&ipc, "[app_id=foot] focus");
    d.wait_for("swaymsg: foot", |s| s.focus == Some(pid(&t1)));

    // Two instances of one app: nothing in front, and why.
    let t2 = foot(&display, runtime.path(), Some(USER));
    let s = d.wait_for("a second foot: nothing", |s| {
        s.focus.is_none() && why(s).contains("2 Wayland clients")
    });
    let w = why(&s);
    assert!(
        w.contains(&pid(&t1).to_string()) && w.contains(&pid(&t2).to_string()),
        "{w}"
    );
    assert!(w.contains("cannot be told apart"), "{w}");
    swaymsg(&ipc, "[app_id=mousepad] focus");
    d.wait_for("mousepad again", |s| {
        s.focus == Some(pid(&m)) && why(s).is_empty()
    });
    drop(t2);
    swaymsg(&ipc, &format!("[pid={}] focus", pid(&t1)));
    d.wait_for("one foot again", |s| s.focus == Some(pid(&t1)));
}

#[test]
#[ignore = "needs root, sway and foot: make test runs it as root"]
fn auto_follows_a_compositor_without_its_own_ipc_through_the_window_list() {
    assert!(root(), "runs sway as uid {USER}: needs root");
    let _serial = serial();
    let runtime = RuntimeDir::of(USER);
    let home = users_dir(USER, 0o755);
    let _logs = ShowLogsIfFailed;
    let (_sway, ipc, display) = sway(USER, &runtime.path, home.path());
    // Without its IPC socket sway is, to discovery, a compositor like labwc or wayfire.
    std::fs::remove_file(&ipc).unwrap();
    let mut d = desktop::Daemon::start(&[]);
    let t1 = foot(&display, &runtime.path, Some(USER));
    // This session's own focus: the daemon follows every session of the machine, and another
    // test's may have the last focus change.
    let mine = |s: &Status| {
        s.sessions
            .iter()
            .find(|x| x.found.starts_with(&*runtime.path.to_string_lossy()))
            .cloned()
    };
    let s = d.wait_for("the session followed by toplevel", WAIT, |s| {
        mine(s).is_some_and(|x| {
            x.source.as_deref() == Some("toplevel") && x.followed && x.focus == Some(pid(&t1))
        })
    });
    let x = mine(&s).unwrap();
    assert!(x.desktop.starts_with("sway (Wayland"), "{x:#?}");
    assert_eq!(x.uid, Some(USER), "{x:#?}");
}

#[test]
#[ignore = "needs root, kwin_wayland and dbus-daemon: make test runs it as root"]
fn a_compositor_without_the_protocol_is_said_to_offer_none() {
    // dbus-daemon needs its user in the password database: nobody (65534).
    const KWIN_USER: u32 = 65534;
    assert!(root(), "runs KWin as uid {KWIN_USER}: needs root");
    let _serial = serial();
    let (runtime, home) = (users_dir(KWIN_USER, 0o700), users_dir(KWIN_USER, 0o755));
    let _logs = ShowLogsIfFailed;
    let as_user = |program: &Path| {
        let mut c = Command::new(program);
        c.current_dir("/")
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", home.path())
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env(
                "DBUS_SESSION_BUS_ADDRESS",
                format!("unix:path={}", runtime.path().join("bus").display()),
            )
            .stdin(Stdio::null())
            .uid(KWIN_USER)
            .gid(KWIN_USER);
        c
    };
    let mut bus = as_user(Path::new("dbus-daemon"));
    bus.args(["--session", "--nofork", "--nopidfile"])
        .arg(format!(
            "--address=unix:path={}",
            runtime.path().join("bus").display()
        ));
    let _bus = Kill(
        bus.spawn()
            .expect("dbus-daemon (Debian package dbus-daemon)"),
    );
    // A copy: kwin_wayland's file capability makes exec fail where the bounding set lacks it.
    let kwin_bin = home.path().join("kwin_wayland");
    std::fs::copy("/usr/bin/kwin_wayland", &kwin_bin)
        .expect("kwin_wayland (Debian package kwin-wayland)");
    let log = home.path().join("kwin.log");
    LOGS.lock().unwrap().push(log.clone());
    let log = std::fs::File::create(log).unwrap();
    let mut kwin = as_user(&kwin_bin);
    kwin.args([
        "--virtual",
        "--no-lockscreen",
        "--socket",
        "wayland-uxsched",
    ])
    .stdout(log.try_clone().unwrap())
    .stderr(log);
    let _kwin = Kill(kwin.spawn().unwrap());
    let display = runtime.path().join("wayland-uxsched");
    wait_until("KWin's socket", Duration::from_secs(20), || {
        procs::is_listened(&procs::listening(), &display)
    });
    let (tx, _rx) = std::sync::mpsc::channel();
    let e = uxsched_daemon::sources::wayland::toplevel::spawn(display, false, tx).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::Unsupported, "{e}");
    let e = e.to_string();
    assert!(
        e.contains("no focus source: kwin_wayland offers no wlr-foreign-toplevel-management")
            && e.contains("uxsched focus PID"),
        "{e}"
    );
}

/// A Wayland server that offers no globals, as a compositor without the protocol looks to a
/// client: it answers `wl_display.sync` (`wl_callback.done`, then `wl_display.delete_id`) and
/// ignores every other request. It listens on `path` as `uid` (a thread of the test takes that
/// effective uid for the bind and listen, so `SO_PEERCRED` names it as a compositor's names
/// its user); it stops when dropped.
struct BareCompositor {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BareCompositor {
    fn listen(path: &Path, uid: u32) -> BareCompositor {
        use std::sync::atomic::Ordering;
        let path = path.to_owned();
        let listener = std::thread::spawn(move || {
            let keep = -1 as libc::c_long;
            // SAFETY: a raw syscall with integer arguments; it changes this thread's creds only.
            let r = unsafe { libc::syscall(libc::SYS_setresuid, keep, uid as libc::c_long, keep) };
            assert_eq!(r, 0, "setresuid: {}", std::io::Error::last_os_error());
            std::os::unix::net::UnixListener::bind(&path).unwrap()
        })
        .join()
        .unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((c, _)) => {
                        std::thread::spawn(move || serve_bare(c));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        BareCompositor {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for BareCompositor {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One client of [`BareCompositor`]: each request is an object id, then its size and opcode.
fn serve_bare(mut c: std::os::unix::net::UnixStream) {
    use std::io::{Read, Write};
    c.set_nonblocking(false).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut head = [0u8; 8];
    while c.read_exact(&mut head).is_ok() {
        let object = u32::from_ne_bytes(head[..4].try_into().unwrap());
        let word = u32::from_ne_bytes(head[4..].try_into().unwrap());
        let (size, opcode) = ((word >> 16) as usize, word & 0xffff);
        let mut args = vec![0u8; size.saturating_sub(8)];
        if c.read_exact(&mut args).is_err() {
            return;
        }
        // wl_display (object 1) request 0: sync(new_id callback).
        if object == 1 && opcode == 0 && args.len() >= 4 {
            let callback = u32::from_ne_bytes(args[..4].try_into().unwrap());
            let mut out = Vec::new();
            for (obj, op, arg) in [(callback, 0u32, 0u32), (1, 1, callback)] {
                out.extend_from_slice(&obj.to_ne_bytes());
                out.extend_from_slice(&((12u32 << 16) | op).to_ne_bytes());
                out.extend_from_slice(&arg.to_ne_bytes());
            }
            if c.write_all(&out).is_err() {
                return;
            }
        }
    }
}

#[test]
#[ignore = "needs root: listens in /run/user/65533 as that user"]
fn auto_says_which_compositor_offers_no_window_list_and_what_to_do() {
    assert!(root(), "listens as uid {USER}: needs root");
    let _serial = serial();
    let runtime = RuntimeDir::of(USER);
    let _compositor = BareCompositor::listen(&runtime.path.join("wayland-1"), USER);
    let mut d = desktop::Daemon::start(&[]);
    let s = d.wait_for("the session's reason", WAIT, |s| {
        s.sessions.iter().any(|x| {
            x.found.starts_with(&*runtime.path.to_string_lossy())
                && x.problem
                    .as_deref()
                    .is_some_and(|p| p.contains("no focus source"))
        })
    });
    let x = s
        .sessions
        .iter()
        .find(|x| x.found.starts_with(&*runtime.path.to_string_lossy()))
        .unwrap();
    let p = x.problem.clone().unwrap_or_default();
    assert!(
        p.contains("offers no wlr-foreign-toplevel-management")
            && p.contains("use `uxsched focus PID` or the app API"),
        "{x:#?}"
    );
    assert_eq!((x.source.as_deref(), x.followed), (Some("toplevel"), false));
    // Said in plain words too, as `uxsched status` and `uxsched doctor` print it.
    let text = auto::report::render(std::slice::from_ref(x), true);
    assert!(
        text.contains("NOT followed by the toplevel source: no focus source:"),
        "{text}"
    );
}
