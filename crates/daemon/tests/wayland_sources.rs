//! The Wayland compositors' focus sources (src/sources/wayland/).
//!
//! sway runs for real: headless (`WLR_BACKENDS=headless`, the pixman renderer) as uid 65534
//! with its own runtime directory, with real `foot` terminals as clients; focus moves with
//! `swaymsg`; a terminal started by root on that compositor is refused; when sway exits, the
//! focus is cleared and the source's thread ends. Needs root and the Debian packages `sway` and
//! `foot`.
//!
//! KWin 5.27 runs for real too: `kwin_wayland --virtual --xwayland` as uid 65534 on a private
//! session bus, with `xterm` clients through its Xwayland; the source loads its script, follows
//! activations, refuses a root process a client of the user claims, clears the focus when KWin
//! goes and ends with the bus. Needs root and `kwin-wayland`, `xwayland`, `xterm`, `dbus-bin`,
//! `dbus-daemon`.
//!
//! Hyprland and niri are not in Debian: a fixture server speaks each one's protocol as
//! documented (docs/compositors.md), as does a fake i3-IPC server for sway's protocol. Each
//! names a process of the compositor's user, then garbage, then pid 1, then goes away: the
//! right focus, a logged error and no action for the bad input, the thread ends when the
//! socket is removed. These run as any user; as root the fixture listens as uid 65534.

#[path = "common/any_user.rs"]
mod any_user;
#[path = "common/compositor.rs"]
mod compositor;

use compositor::*;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;
use uxsched_daemon::sources::wayland::{hyprland, kwin, niri, sway};
use uxsched_daemon::types::SourceName;

// ---- sway's protocol, spoken by the fixture ------------------------------------------------

fn i3_send(s: &mut UnixStream, kind: u32, payload: &[u8]) {
    let mut m = b"i3-ipc".to_vec();
    m.extend_from_slice(&(payload.len() as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(payload);
    s.write_all(&m).unwrap();
}

fn i3_recv(s: &mut UnixStream) -> (u32, Vec<u8>) {
    let mut head = [0u8; 14];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head[..6], b"i3-ipc");
    let len = u32::from_ne_bytes(head[6..10].try_into().unwrap()) as usize;
    let kind = u32::from_ne_bytes(head[10..14].try_into().unwrap());
    let mut p = vec![0u8; len];
    s.read_exact(&mut p).unwrap();
    (kind, p)
}

/// Accept the source's event and request connections and answer its subscription and first
/// GET_TREE with a tree whose focused node is `pid`.
fn i3_session(l: &std::os::unix::net::UnixListener, pid: i32) -> (UnixStream, UnixStream) {
    let (mut ev, mut rq) = (accept(l), accept(l));
    let (kind, sub) = i3_recv(&mut ev);
    assert_eq!(kind, 2, "SUBSCRIBE");
    let sub: Vec<String> = serde_json::from_slice(&sub).unwrap();
    assert!(sub.contains(&"window".to_string()), "{sub:?}");
    i3_send(&mut ev, 2, br#"{"success":true}"#);
    let (kind, _) = i3_recv(&mut rq);
    assert_eq!(kind, 4, "GET_TREE");
    let tree = json!({"type": "root", "nodes": [{"type": "output", "nodes": [
        {"type": "workspace", "nodes": [{"type": "con", "app_id": "foot", "pid": pid, "focused": true}]}]}]});
    i3_send(&mut rq, 4, tree.to_string().as_bytes());
    (ev, rq)
}

fn i3_focus(ev: &mut UnixStream, pid: i32) {
    let e = json!({"change": "focus", "container": {"pid": pid, "focused": true}});
    i3_send(ev, 0x8000_0003, e.to_string().as_bytes());
}

#[test]
fn sway_protocol_fixture_good_pid_garbage_pid_1_and_gone() {
    capture_log();
    let dir = runtime_dir();
    let socket = dir.path().join("sway-ipc.sock");
    let l = listen(&socket);
    let good = app();
    let (tx, rx) = mpsc::channel();
    let thread = sway::spawn(socket.clone(), false, tx).unwrap();
    let (mut ev, _rq) = i3_session(&l, good.pid());
    assert_eq!(
        next_focus(&rx, SourceName::Sway, "GET_TREE"),
        Some(good.pid())
    );
    // pid 1 (root's): refused, logged; nothing in front.
    i3_focus(&mut ev, 1);
    assert_eq!(next_focus(&rx, SourceName::Sway, "focus on pid 1"), None);
    logged(&["Sway", "not acted on", "pid 1 belongs to uid 0"]);
    // A framed message that is not JSON: logged, nothing changed, the connection kept.
    i3_send(&mut ev, 0x8000_0003, b"\xff not json");
    logged(&["Sway", "not JSON"]);
    i3_focus(&mut ev, good.pid());
    assert_eq!(
        next_focus(&rx, SourceName::Sway, "focus back"),
        Some(good.pid())
    );
    // Broken framing: the connection is dropped (focus cleared), then re-made.
    ev.write_all(b"garbage garbage garbage").unwrap();
    assert_eq!(next_focus(&rx, SourceName::Sway, "garbage framing"), None);
    logged(&["Sway", "garbage instead of an i3-ipc message"]);
    let (ev2, _rq2) = i3_session(&l, good.pid());
    assert_eq!(
        next_focus(&rx, SourceName::Sway, "reconnected"),
        Some(good.pid())
    );
    // The compositor goes away for good.
    drop((ev, ev2, l));
    std::fs::remove_file(&socket).unwrap();
    assert_eq!(next_focus(&rx, SourceName::Sway, "socket gone"), None);
    ended(&thread, "sway socket removed");
}

// ---- Hyprland's protocol ---------------------------------------------------------------

/// The request socket's side: answers each connection's `j/activewindow` with `answer`, then
/// closes it (as Hyprland does); returns how many requests it has served.
struct HyprRequests {
    answer: std::sync::Arc<std::sync::Mutex<String>>,
    served: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl HyprRequests {
    fn serve(dir: &Path) -> HyprRequests {
        let l = listen(&dir.join(hyprland::REQUESTS));
        let answer = std::sync::Arc::new(std::sync::Mutex::new(String::from("{}")));
        let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (a, n) = (answer.clone(), served.clone());
        std::thread::spawn(move || loop {
            let Ok((mut s, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            let mut req = [0u8; 64];
            let got = s.read(&mut req).unwrap();
            assert_eq!(&req[..got], b"j/activewindow");
            let answer = a.lock().unwrap().clone();
            s.write_all(answer.as_bytes()).unwrap();
            n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        HyprRequests { answer, served }
    }

    fn answer(&self, a: String) {
        *self.answer.lock().unwrap() = a;
    }

    fn served(&self) -> usize {
        self.served.load(std::sync::atomic::Ordering::SeqCst)
    }
}

fn hypr_window(pid: i32) -> String {
    json!({"address": "0x55d1c4b0e2a0", "mapped": true, "class": "foot", "title": "~",
           "pid": pid, "xwayland": false})
    .to_string()
}

#[test]
fn hyprland_fixture_good_pid_garbage_pid_1_and_gone() {
    capture_log();
    let dir = runtime_dir();
    let events = listen(&dir.path().join(hyprland::EVENTS));
    let requests = HyprRequests::serve(dir.path());
    let good = app();
    requests.answer(hypr_window(good.pid()));
    let (tx, rx) = mpsc::channel();
    let thread = hyprland::spawn(dir.path().to_owned(), false, tx).unwrap();
    let mut ev = accept(&events);
    assert_eq!(
        next_focus(&rx, SourceName::Hyprland, "start"),
        Some(good.pid())
    );
    assert_eq!(requests.served(), 1);
    // One change of window: both events in one write, one request.
    requests.answer(hypr_window(1));
    ev.write_all(b"activewindow>>foot,~\nactivewindowv2>>55d1c4b0e2a0\n")
        .unwrap();
    assert_eq!(next_focus(&rx, SourceName::Hyprland, "pid 1"), None);
    logged(&["Hyprland", "not acted on", "pid 1 belongs to uid 0"]);
    assert_eq!(requests.served(), 2);
    // Garbage lines and a garbage answer: logged, nothing changed.
    ev.write_all(b"\xff\xfe garbage\nworkspace>>2\n").unwrap();
    logged(&["Hyprland", "not EVENT>>DATA"]);
    requests.answer("unknown request".into());
    ev.write_all(b"activewindowv2>>55d1c4b0e2a0\n").unwrap();
    logged(&["Hyprland", "not a JSON object"]);
    assert_eq!(requests.served(), 3);
    no_focus(&rx, Duration::from_millis(200), "garbage");
    requests.answer(hypr_window(good.pid()));
    ev.write_all(b"closewindow>>55d1c4b0e2a0\n").unwrap();
    assert_eq!(
        next_focus(&rx, SourceName::Hyprland, "close"),
        Some(good.pid())
    );
    // Hyprland exits: its sockets go.
    drop((ev, events));
    std::fs::remove_file(dir.path().join(hyprland::EVENTS)).unwrap();
    std::fs::remove_file(dir.path().join(hyprland::REQUESTS)).unwrap();
    assert_eq!(next_focus(&rx, SourceName::Hyprland, "gone"), None);
    ended(&thread, "hyprland sockets removed");
}

// ---- niri's protocol ---------------------------------------------------------------------

fn niri_window(id: u64, pid: i32, focused: bool) -> serde_json::Value {
    json!({"id": id, "title": "~", "app_id": "foot", "pid": pid, "workspace_id": 1,
           "is_focused": focused, "is_floating": false})
}

/// Accept the source's connection and answer its `"EventStream"` request.
fn niri_session(l: &std::os::unix::net::UnixListener) -> UnixStream {
    let s = accept(l);
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    assert_eq!(line, "\"EventStream\"\n");
    (&s).write_all(b"{\"Ok\":\"Handled\"}\n").unwrap();
    s
}

fn niri_send(s: &mut UnixStream, v: serde_json::Value) {
    s.write_all(format!("{v}\n").as_bytes()).unwrap();
}

#[test]
fn niri_fixture_good_pid_garbage_pid_1_and_gone() {
    capture_log();
    let dir = runtime_dir();
    let socket = dir.path().join("niri.sock");
    let l = listen(&socket);
    let good = app();
    let (tx, rx) = mpsc::channel();
    let thread = niri::spawn(socket.clone(), false, tx).unwrap();
    let mut s = niri_session(&l);
    niri_send(&mut s, json!({"WorkspacesChanged": {"workspaces": []}}));
    let all = [niri_window(1, good.pid(), true), niri_window(2, 1, false)];
    niri_send(&mut s, json!({"WindowsChanged": {"windows": all}}));
    assert_eq!(
        next_focus(&rx, SourceName::Niri, "windows"),
        Some(good.pid())
    );
    niri_send(&mut s, json!({"WindowFocusChanged": {"id": 2}}));
    assert_eq!(next_focus(&rx, SourceName::Niri, "pid 1"), None);
    logged(&["Niri", "not acted on", "pid 1 belongs to uid 0"]);
    s.write_all(b"{{{ garbage\n[\"WindowFocusChanged\"]\n")
        .unwrap();
    logged(&["Niri", "not JSON"]);
    niri_send(&mut s, json!({"WindowFocusChanged": {"id": 1}}));
    assert_eq!(next_focus(&rx, SourceName::Niri, "back"), Some(good.pid()));
    niri_send(&mut s, json!({"WindowClosed": {"id": 1}}));
    assert_eq!(next_focus(&rx, SourceName::Niri, "closed"), None);
    niri_send(
        &mut s,
        json!({"WindowOpenedOrChanged": {"window": niri_window(3, good.pid(), true)}}),
    );
    assert_eq!(
        next_focus(&rx, SourceName::Niri, "opened"),
        Some(good.pid())
    );
    drop((s, l));
    std::fs::remove_file(&socket).unwrap();
    assert_eq!(next_focus(&rx, SourceName::Niri, "gone"), None);
    ended(&thread, "niri socket removed");
}

#[test]
#[ignore = "needs root: the fixture compositor runs as root, its app as uid 65534"]
fn a_compositor_running_as_root_names_nobody_unless_any_owner() {
    assert!(is_root(), "needs root: make test runs it");
    capture_log();
    let dir = runtime_dir();
    let good = app();
    for any in [false, true] {
        let socket = dir.path().join(format!("niri-{any}.sock"));
        let l = listen_as(&socket, None);
        let (tx, rx) = mpsc::channel();
        let thread = niri::spawn(socket.clone(), any, tx).unwrap();
        let mut s = niri_session(&l);
        niri_send(
            &mut s,
            json!({"WindowsChanged": {"windows": [niri_window(1, good.pid(), true)]}}),
        );
        niri_send(&mut s, json!({"WindowFocusChanged": {"id": null}}));
        niri_send(&mut s, json!({"WindowFocusChanged": {"id": 1}}));
        if any {
            assert_eq!(
                next_focus(&rx, SourceName::Niri, "any owner"),
                Some(good.pid())
            );
            assert_eq!(next_focus(&rx, SourceName::Niri, "none"), None);
            assert_eq!(next_focus(&rx, SourceName::Niri, "again"), Some(good.pid()));
        } else {
            no_focus(&rx, Duration::from_millis(500), "a root compositor");
            logged(&["Niri", "the compositor runs as root"]);
        }
        drop((s, l));
        std::fs::remove_file(&socket).unwrap();
        ended(&thread, "root's niri socket removed");
    }
}

// ---- sway for real -------------------------------------------------------------------------

/// A Wayland client: `foot` running `sleep`, as `uid` (None: the test's own, root).
fn foot(display: &Path, runtime: &Path, home: &Path, uid: Option<u32>) -> Kill {
    let mut c = std::process::Command::new("foot");
    // Its own working directory: cargo runs tests in the crate's directory, which a clone
    // under /root leaves unreachable to the user the terminal runs as (it then exits at once).
    c.args(["sleep", "600"])
        .current_dir("/")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", runtime)
        .env("WAYLAND_DISPLAY", display)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if let Some(uid) = uid {
        use std::os::unix::process::CommandExt;
        c.uid(uid).gid(uid);
    }
    Kill(
        c.spawn()
            .expect("foot (Debian package foot; `make setup` installs it)"),
    )
}

fn swaymsg(socket: &Path, cmd: &str) {
    let out = std::process::Command::new("swaymsg")
        .arg("-s")
        .arg(socket)
        .arg(cmd)
        .output()
        .expect("swaymsg (Debian package sway)");
    assert!(out.status.success(), "swaymsg {cmd}: {out:?}");
}

#[test]
#[ignore = "needs root: runs sway headless as uid 65534 and a client of it as root"]
fn sway_headless_follows_foot_refuses_roots_client_and_ends_with_sway() {
    assert!(is_root(), "needs root: make test runs it");
    capture_log();
    let dir = runtime_dir();
    let (runtime, home) = (dir.path().join("runtime"), dir.path().join("home"));
    for d in [&runtime, &home] {
        std::fs::create_dir(d).unwrap();
        std::os::unix::fs::chown(d, Some(user()), Some(user())).unwrap();
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let config = dir.path().join("config");
    std::fs::write(&config, "# nothing: sway's defaults\n").unwrap();
    let log = std::fs::File::create(dir.path().join("sway.log")).unwrap();
    let mut sway = {
        use std::os::unix::process::CommandExt;
        let mut c = std::process::Command::new("sway");
        c.arg("-c")
            .arg(&config)
            .current_dir("/") // not the crate's directory, unreachable from a clone in /root
            .env_clear()
            .env("PATH", "/usr/bin:/bin");
        c.env("HOME", &home).env("XDG_RUNTIME_DIR", &runtime);
        c.env("WLR_BACKENDS", "headless")
            .env("WLR_LIBINPUT_NO_DEVICES", "1");
        c.env("WLR_RENDERER", "pixman");
        c.stdout(log.try_clone().unwrap())
            .stderr(log)
            .uid(user())
            .gid(user());
        Kill(
            c.spawn()
                .expect("sway (Debian package sway; `make setup` installs it)"),
        )
    };
    let ipc = appears(&runtime, "sway's IPC socket", |n| {
        n.starts_with("sway-ipc.")
    });
    let display = appears(&runtime, "sway's Wayland socket", |n| {
        n.starts_with("wayland-") && !n.ends_with(".lock")
    });
    let (tx, rx) = mpsc::channel();
    let thread = sway::spawn(ipc.clone(), false, tx).unwrap();
    let t1 = foot(&display, &runtime, &home, Some(user()));
    assert_eq!(
        next_focus(&rx, SourceName::Sway, "first foot"),
        Some(t1.pid())
    );
    let t2 = foot(&display, &runtime, &home, Some(user()));
    assert_eq!(
        next_focus(&rx, SourceName::Sway, "second foot"),
        Some(t2.pid())
    );
    swaymsg(&ipc, &format!("[pid={}] focus", t1.pid()));
    assert_eq!(
        next_focus(&rx, SourceName::Sway, "swaymsg focus"),
        Some(t1.pid())
    );
    // A client root runs on the user's compositor: sway names a process that is not the user's.
    let root_rt = tempfile::tempdir().unwrap();
    let root_term = foot(&display, root_rt.path(), root_rt.path(), None);
    assert_eq!(next_focus(&rx, SourceName::Sway, "root's foot"), None);
    logged(&[
        "Sway",
        "not acted on",
        &format!("pid {} belongs to uid 0", root_term.pid()),
    ]);
    swaymsg(&ipc, &format!("[pid={}] focus", t2.pid()));
    assert_eq!(
        next_focus(&rx, SourceName::Sway, "back to the user's"),
        Some(t2.pid())
    );
    // sway exits: the focus is cleared, the thread ends.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(sway.pid(), libc::SIGTERM) };
    let _ = sway.0.wait();
    assert_eq!(next_focus(&rx, SourceName::Sway, "sway exited"), None);
    ended(&thread, "sway exited");
}

// ---- KWin for real ----------------------------------------------------------------------

/// An X client of the [`user`] (`xterm` running `sleep`) on `display`.
fn xterm(display: &str, runtime: &Path, home: &Path) -> Kill {
    let mut c = as_user(Path::new("xterm"), runtime, home);
    c.args(["-e", "sleep", "600"]).env("DISPLAY", display);
    c.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    Kill(c.spawn().expect("xterm (Debian package xterm)"))
}

/// Act as the user switching windows: a KWin script, loaded as the user, activates the window
/// of process `pid` (Plasma 5's API, then Plasma 6's).
fn kwin_activate(dir: &Path, runtime: &Path, home: &Path, pid: i32) {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("activate-{n}.js"));
    let js = format!(
        "var all = workspace.clientList ? workspace.clientList() : workspace.windowList();\n\
         for (var i = 0; i < all.length; i++) if (all[i].pid == {pid}) {{\n\
           if (workspace.clientList) workspace.activeClient = all[i];\n\
           else workspace.activeWindow = all[i];\n}}\n"
    );
    std::fs::write(&path, js).unwrap();
    for args in [
        vec![
            "org.kde.kwin.Scripting.loadScript".to_string(),
            format!("string:{}", path.display()),
            format!("string:uxsched-test-{n}"),
        ],
        vec!["org.kde.kwin.Scripting.start".to_string()],
    ] {
        let out = as_user(Path::new("dbus-send"), runtime, home)
            .args([
                "--session",
                "--print-reply",
                "--dest=org.kde.KWin",
                "/Scripting",
            ])
            .args(&args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
}

#[test]
#[ignore = "needs root: runs KWin headless as uid 65534, and a root process"]
fn kwin_headless_follows_xterm_refuses_a_claimed_root_process_and_ends_with_the_bus() {
    assert!(is_root(), "needs root: make test runs it");
    capture_log();
    let dir = runtime_dir();
    let (runtime, home) = (dir.path().join("runtime"), dir.path().join("home"));
    for d in [&runtime, &home] {
        std::fs::create_dir(d).unwrap();
        std::os::unix::fs::chown(d, Some(user()), Some(user())).unwrap();
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let bus = runtime.join("bus");
    let mut dbus = as_user(Path::new("dbus-daemon"), &runtime, &home);
    dbus.args(["--session", "--nofork", "--nopidfile"])
        .arg(format!("--address=unix:path={}", bus.display()));
    let dbus = Kill(
        dbus.spawn()
            .expect("dbus-daemon (Debian package dbus-daemon)"),
    );
    appears(&runtime, "the session bus", |n| n == "bus");
    // kwin_wayland carries a file capability (cap_sys_resource); where the bounding set lacks it
    // (a container), exec fails with EPERM. A copy without it is the same KWin.
    let kwin_bin = dir.path().join("kwin_wayland");
    std::fs::copy("/usr/bin/kwin_wayland", &kwin_bin)
        .expect("kwin_wayland (Debian package kwin-wayland)");
    let log = std::fs::File::create(dir.path().join("kwin.log")).unwrap();
    let mut kwin = as_user(&kwin_bin, &runtime, &home);
    kwin.args([
        "--virtual",
        "--no-lockscreen",
        "--xwayland",
        "--socket",
        "wayland-uxsched",
    ]);
    let mut kwin = Kill(
        kwin.stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let display = xwayland_display(kwin.pid());
    let (tx, rx) = mpsc::channel();
    let thread = kwin::spawn(bus.clone(), false, tx).unwrap();
    logged(&["kwin source connected", "kwin=Some"]);
    let x1 = xterm(&display, &runtime, &home);
    assert_eq!(
        next_focus(&rx, SourceName::Kwin, "first xterm"),
        Some(x1.pid())
    );
    let x2 = xterm(&display, &runtime, &home);
    assert_eq!(
        next_focus(&rx, SourceName::Kwin, "second xterm"),
        Some(x2.pid())
    );
    drop(x2);
    assert_eq!(
        next_focus(&rx, SourceName::Kwin, "second closed"),
        Some(x1.pid())
    );
    // A hostile client of the user claims a root process in `_NET_WM_PID` (KWin names an X
    // window's process by that claim; only the user's clients may reach this Xwayland).
    let roots = Kill(
        std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .unwrap(),
    );
    let mut claim = as_user(&any_user::exe_for_any_user(), &runtime, &home);
    claim
        .arg("window")
        .env("DISPLAY", &display)
        .env("UXSCHED_TEST_WM_PID", roots.pid().to_string());
    let _hostile = Kill(claim.stdout(std::process::Stdio::null()).spawn().unwrap());
    std::thread::sleep(Duration::from_secs(1));
    kwin_activate(dir.path(), &runtime, &home, roots.pid());
    assert_eq!(
        next_focus(&rx, SourceName::Kwin, "root's process claimed"),
        None
    );
    logged(&[
        "Kwin",
        "not acted on",
        &format!("pid {} belongs to uid 0", roots.pid()),
    ]);
    kwin_activate(dir.path(), &runtime, &home, x1.pid());
    assert_eq!(
        next_focus(&rx, SourceName::Kwin, "activated"),
        Some(x1.pid())
    );
    // KWin exits: the focus is cleared. Then the session bus goes: the thread ends.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(kwin.pid(), libc::SIGKILL) };
    let _ = kwin.0.wait();
    assert_eq!(next_focus(&rx, SourceName::Kwin, "KWin gone"), None);
    drop(dbus);
    let _ = std::fs::remove_file(&bus);
    ended(&thread, "session bus gone");
}
