//! The Wayland idle reader (`src/sources/idle/wayland.rs`) against a real sway, headless, run by
//! an unprivileged user in its runtime directory: the reader (as root, as the daemon) asks sway's
//! `ext-idle-notify-v1` for a notification after the limit; sway says `idled` at the limit and
//! `resumed` at the next input (a pointer motion through sway's own `seat … cursor move`); and
//! the daemon as a desktop gets it (built-in defaults, `sources = ["auto"]`) withdraws a focused
//! foot's boost at the limit and gives it back at that input.
//!
//! Needs root (sway and foot run as uid 65534) and the Debian packages `sway` and `foot`.

#[allow(dead_code)]
#[path = "common/any_user.rs"]
mod any_user;
#[path = "idle/daemon.rs"]
mod daemon;
#[allow(dead_code)]
#[path = "common/desktop.rs"]
mod desktop;
// The auto tests' runtime directory, foot, swaymsg and logs.
#[path = "auto_sessions/wayland.rs"]
mod wayland;

use daemon::*;
use desktop::*;
use wayland::*;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uxsched_client::control::Status;
use uxsched_daemon::sources::auto::{self, procs};
use uxsched_daemon::sources::idle::{self as idle_readers, Change};

const USER: u32 = 65534;
const LIMIT: Duration = Duration::from_secs(1);

/// sway headless as the user: (guard, its IPC socket, its Wayland socket).
fn sway(runtime: &RuntimeDir, home: &Path) -> (Kill, PathBuf, PathBuf) {
    let config = home.join("sway.conf");
    std::fs::write(&config, "# sway's defaults\n").unwrap();
    let log = std::fs::File::create(home.join("sway.log")).unwrap();
    let child = Command::new("sway")
        .arg("-c")
        .arg(&config)
        .current_dir("/")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", &runtime.path)
        .env("WLR_BACKENDS", "headless")
        .env("WLR_LIBINPUT_NO_DEVICES", "1")
        .env("WLR_RENDERER", "pixman")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .uid(USER)
        .gid(USER)
        .spawn()
        .expect("sway (Debian package sway)");
    let guard = Kill(child);
    // This sway's: listened on (another test's may be left in the directory), and the IPC
    // socket named with its pid.
    let pid = guard.0.id();
    let find = |pred: &dyn Fn(&str) -> bool| {
        let l = procs::listening();
        std::fs::read_dir(&runtime.path)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| procs::is_listened(&l, p))
            .find(|p| pred(&p.file_name().unwrap().to_string_lossy()))
    };
    let (mut ipc, mut display) = (None, None);
    wait_until("sway's sockets", Duration::from_secs(15), || {
        ipc = find(&|n| n == format!("sway-ipc.{USER}.{pid}.sock"));
        display = find(&|n| auto::runtime::is_wayland_socket(n));
        ipc.is_some() && display.is_some()
    });
    (guard, ipc.unwrap(), display.unwrap())
}

#[test]
#[ignore = "needs root and sway: make test runs it as root"]
fn sway_says_idle_at_the_limit_and_active_at_the_next_input() {
    assert!(root(), "runs sway as uid {USER}: needs root");
    let _serial = serial();
    let runtime = RuntimeDir::of(USER);
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(home.path(), Some(USER), Some(USER)).unwrap();
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let (_sway, ipc, display) = sway(&runtime, home.path());
    let log = || std::fs::read_to_string(home.path().join("sway.log")).unwrap_or_default();

    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let asked = Instant::now();
    idle_readers::wayland::spawn(display, None, LIMIT, stop.clone(), move |c| {
        tx.send((c, Instant::now())).is_ok()
    })
    .unwrap();
    let (got, at) = rx
        .recv_timeout(LIMIT * 5)
        .unwrap_or_else(|e| panic!("no idled ({e}); sway's log:\n{}", log()));
    assert!(matches!(got, Change::Idle { .. }), "{got:?}");
    let idled = at - asked;
    assert!(
        idled >= LIMIT && idled < LIMIT + Duration::from_millis(600),
        "{idled:?}"
    );

    let moved = Instant::now();
    swaymsg(&ipc, "seat - cursor move 5 5");
    let (got, at) = rx
        .recv_timeout(Duration::from_secs(2))
        .unwrap_or_else(|e| panic!("no resumed ({e}); sway's log:\n{}", log()));
    assert_eq!(got, Change::Active);
    let back = at - moved;
    eprintln!("idled {idled:?} after the reader asked (limit {LIMIT:?}); resumed {back:?} after the motion (swaymsg's run included)");
    assert!(back < Duration::from_millis(500), "{back:?}");

    // Idle again a limit later; stopped, the reader lifts its withdrawal and ends.
    assert!(matches!(
        rx.recv_timeout(LIMIT * 3),
        Ok((Change::Idle { .. }, _))
    ));
    stop.store(true, Ordering::Relaxed);
    assert!(matches!(
        rx.recv_timeout(Duration::from_secs(2)),
        Ok((Change::Active, _))
    ));
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(2)).map(|_| ()),
        Err(RecvTimeoutError::Disconnected)
    );
}

#[test]
#[ignore = "needs root, sway and foot: make test runs it as root"]
fn the_daemon_withdraws_a_focused_foots_boost_at_the_limit_and_gives_it_back_at_the_next_input() {
    assert!(root(), "runs sway and foot as uid {USER}: needs root");
    let _serial = serial();
    const LIMIT: Duration = Duration::from_secs(2);
    const SLACK: Duration = Duration::from_millis(700);
    let runtime = RuntimeDir::of(USER);
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(home.path(), Some(USER), Some(USER)).unwrap();
    LOGS.lock().unwrap().push(home.path().join("sway.log"));
    let _logs = ShowLogsIfFailed; // dropped before `home`, which holds sway's log
    let (_sway, ipc, display) = sway(&runtime, home.path());
    let mut d = idle_daemon(LIMIT);
    let foot = foot(&display, &runtime.path, Some(USER));
    let pid = foot.0.id();
    // Input, and foot in front: boosted.
    let input = Instant::now();
    swaymsg(&ipc, "seat - cursor move 1 1");
    d.wait_for("foot in front and boosted", Duration::from_secs(20), |s| {
        s.focus == Some(pid as i32) && boosted(s, pid)
    });
    // No input: withdrawn at the limit (the compositor says so), said in status.
    let s = d.wait_for("the boost withdrawn", LIMIT + SLACK, |s| !boosted(s, pid));
    let withdrawn = input.elapsed();
    assert!(withdrawn >= LIMIT, "withdrawn after {withdrawn:?}");
    let line = s.idle.clone().unwrap_or_default();
    assert!(
        line.contains("(sway)") && line.contains(&format!("pid {pid}")),
        "{s:?}"
    );
    // A motion: back at once.
    let moved = Instant::now();
    swaymsg(&ipc, "seat - cursor move 1 1");
    let s = d.wait_for("the boost back", SLACK, |s| {
        s.focus == Some(pid as i32) && boosted(s, pid)
    });
    let back = moved.elapsed();
    assert!(s.idle.is_none(), "{s:?}");
    eprintln!("daemon, sway: withdrawn {withdrawn:?} after the last input (limit {LIMIT:?}), back {back:?} after a motion (swaymsg's run and the test's 20 ms polling included)");
}

/// Any user can listen on a socket named like a compositor's: one that accepts and never
/// answers costs the reader its handshake's bound (3 s), not a thread forever.
#[test]
fn a_socket_that_never_answers_ends_the_reader_within_its_handshake_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wayland-9");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let held = std::thread::spawn(move || listener.accept().map(|(s, _)| s));
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    idle_readers::wayland::spawn(path, None, LIMIT, stop, move |c| tx.send(c).is_ok()).unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(6)),
        Err(RecvTimeoutError::Disconnected),
        "the reader said something or did not end"
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(5),
        "{took:?}"
    );
    drop(held.join().unwrap());
}
