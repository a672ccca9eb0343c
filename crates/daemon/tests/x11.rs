//! The X11 source against a real Xvfb server with real client windows (separate processes that
//! set `_NET_WM_PID`). The test plays the window manager's part: it sets the root window's
//! `_NET_ACTIVE_WINDOW`, as an EWMH window manager does when focus changes. Then the server goes
//! away and comes back: the source clears the focus and reconnects.
//!
//! The X server and the legitimate windows run as one user (uid 65534 when the test runs as
//! root, else the test's own user); a hostile client names pid 1 and, as root, another user's
//! process in `_NET_WM_PID`: the source must not hand them to the daemon.
//!
//! Needs the Debian package `xvfb` (scripts/setup.sh installs it).

#[path = "common/any_user.rs"]
mod any_user;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use uxsched_daemon::sources::x11;
use uxsched_daemon::types::Event;
use uxsched_daemon::types::SourceName;
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt, PropMode};
use x11rb::wrapper::ConnectionExt as _;

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_display() -> u32 {
    (90..200)
        .find(|n| {
            !std::path::Path::new(&format!("/tmp/.X11-unix/X{n}")).exists()
                && !std::path::Path::new(&format!("/tmp/.X{n}-lock")).exists()
        })
        .expect("no free X display number")
}

/// Who runs the X server and its legitimate clients.
fn user() -> u32 {
    // SAFETY: getuid has no preconditions.
    match unsafe { libc::getuid() } {
        0 => 65534,
        me => me,
    }
}

fn xvfb(display: &str) -> Kill {
    if user() == 65534 {
        // The socket directory the X server would create as root (it cannot as nobody).
        let dir = std::path::Path::new("/tmp/.X11-unix");
        if std::fs::create_dir(dir).is_ok() {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        }
    }
    let child = Command::new("Xvfb")
        // -noreset: without it the server resets (dropping windows and root properties) each
        // time its last client disconnects, e.g. the probe connection below.
        .args([
            display,
            "-noreset",
            "-nolisten",
            "tcp",
            "-screen",
            "0",
            "320x240x24",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .uid(user())
        .gid(user())
        .spawn()
        .expect("Xvfb (Debian package xvfb; `make setup` installs it)");
    let guard = Kill(child);
    let end = Instant::now() + Duration::from_secs(10);
    while x11rb::connect(Some(display)).is_err() {
        assert!(Instant::now() < end, "Xvfb {display} did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    guard
}

/// A client-window process of [`user`] on `display`: (guard, pid, window id).
fn client(display: &str) -> (Kill, u32, u32) {
    client_claiming(display, None)
}

/// A client-window process on `display`; `claim`: a hostile client (run by the test's own
/// user) whose window names that pid instead of its own.
fn client_claiming(display: &str, claim: Option<u32>) -> (Kill, u32, u32) {
    // A real X client, the fixture's `window` role: one mapped window with `_NET_WM_PID` = its
    // own pid or `UXSCHED_TEST_WM_PID`; it prints the window id. It may run as another user:
    // a copy of the fixture that user can reach.
    let mut cmd = Command::new(any_user::exe_for_any_user());
    cmd.arg("window")
        .env("DISPLAY", display)
        .stdout(Stdio::piped());
    match claim {
        Some(pid) => cmd.env("UXSCHED_TEST_WM_PID", pid.to_string()),
        None => cmd.uid(user()).gid(user()),
    };
    let mut child = cmd.spawn().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let pid = child.id();
    let guard = Kill(child);
    // The window id is the first line.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        if let Some(id) = (out.lines().next())
            .and_then(Result::ok)
            .and_then(|l| l.trim().parse::<u32>().ok())
        {
            let _ = tx.send(id);
        }
    });
    let id = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the client window did not start");
    (guard, pid, id)
}

/// Act as the window manager: make `win` the active window.
fn activate(display: &str, win: u32) {
    let (conn, screen) = x11rb::connect(Some(display)).unwrap();
    let root = conn.setup().roots[screen].root;
    let active = conn
        .intern_atom(false, b"_NET_ACTIVE_WINDOW")
        .unwrap()
        .reply()
        .unwrap()
        .atom;
    conn.change_property32(PropMode::REPLACE, root, active, AtomEnum::WINDOW, &[win])
        .unwrap();
    // A round trip, so the change is processed before this connection closes.
    conn.get_input_focus().unwrap().reply().unwrap();
}

/// The next focus event (health reports in between — the display gone, back — are skipped).
fn next_focus(rx: &mpsc::Receiver<Event>, step: &str) -> Option<i32> {
    loop {
        let ev = rx.recv_timeout(Duration::from_secs(15));
        match ev.unwrap_or_else(|e| panic!("no focus event after {step}: {e}")) {
            Event::Focus { source, app } => {
                assert_eq!(source, SourceName::X11);
                return app.map(|a| a.pid);
            }
            Event::Health { source, .. } => assert_eq!(source, SourceName::X11),
            _ => panic!("unexpected event"),
        }
    }
}

#[test]
fn follows_the_active_window_and_survives_the_display_going_away() {
    let display = format!(":{}", free_display());
    let server = xvfb(&display);
    let (_a, pid_a, win_a) = client(&display);
    let (_b, pid_b, win_b) = client(&display);
    let (tx, rx) = mpsc::channel();
    x11::spawn(Some(display.clone()), false, None, tx).unwrap();
    std::thread::sleep(Duration::from_millis(300)); // connected, no active window yet

    activate(&display, win_a);
    assert_eq!(next_focus(&rx, "activating A"), Some(pid_a as i32));
    activate(&display, win_b);
    assert_eq!(next_focus(&rx, "activating B"), Some(pid_b as i32));
    activate(&display, 0); // the desktop: nothing focused
    assert_eq!(next_focus(&rx, "activating the desktop"), None);
    activate(&display, win_a);
    assert_eq!(next_focus(&rx, "activating A again"), Some(pid_a as i32));

    // Hostile windows: one names pid 1 (root's), one (as root) another user's process.
    let other = (user() == 65534).then(|| {
        let c = Command::new("sleep").arg("60").uid(65533).spawn().unwrap();
        Kill(c)
    });
    let mut claims = vec![1];
    claims.extend(other.as_ref().map(|o| o.0.id()));
    for claim in claims {
        let (_h, _, win_h) = client_claiming(&display, Some(claim));
        activate(&display, win_h);
        assert_eq!(next_focus(&rx, &format!("a window naming {claim}")), None);
        activate(&display, win_a);
        assert_eq!(next_focus(&rx, "activating A after it"), Some(pid_a as i32));
    }

    // The X server dies: focus cleared; it comes back: the source reconnects by itself.
    drop(server);
    assert_eq!(next_focus(&rx, "killing the server"), None);
    let _server = xvfb(&display);
    let (_c, pid_c, win_c) = client(&display);
    activate(&display, win_c);
    assert_eq!(
        next_focus(&rx, "activating C on the new server"),
        Some(pid_c as i32)
    );
}
