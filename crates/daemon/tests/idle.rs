//! Idle demotion (issue 32, `src/sources/idle/`, `src/daemon/idle.rs`): the daemon as a desktop
//! gets it (the built-in defaults, `sources = ["auto"]`, no `DISPLAY` or `XAUTHORITY`), with
//! `[idle] after_s` short; an unprivileged user's Xvfb with a cookie, a real xterm in front
//! (the test plays the window manager: it sets `_NET_ACTIVE_WINDOW`), real input through XTEST
//! (xdotool, as the user). With no input the xterm's boost is withdrawn at the limit — its
//! settings back to the originals in the kernel — and the next input brings it back within the
//! idle reader's bound; a server without the screensaver extension keeps the boost (the reader
//! fails soft, and says so).
//!
//! Needs root (the X server, xterm and xdotool run as uid 65534) and the Debian packages `xvfb`,
//! `xterm` and `xdotool`.

// Some of these helpers are other tests'.
#[allow(dead_code)]
#[path = "common/any_user.rs"]
mod any_user;
#[path = "idle/daemon.rs"]
mod daemon;
#[path = "common/desktop.rs"]
mod desktop;
#[allow(dead_code)]
#[path = "auto_sessions/xserver.rs"]
mod xserver;

use daemon::*;
use desktop::*;
use xserver::*;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use uxsched_client::control::Status;
use uxsched_daemon::sources::auto::{procs, xdisplay};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt, PropMode};
use x11rb::wrapper::ConnectionExt as _;

/// The desktop user.
const USER: u32 = 65534;
/// `[idle] after_s` of these tests.
const LIMIT: Duration = Duration::from_secs(3);
/// How late a withdrawal or a return may be seen: the reader's period (250 ms), the pass, the
/// test's own 20 ms status polling and xdotool's start, with room for a loaded 2-CPU machine.
const SLACK: Duration = Duration::from_millis(700);

/// The daemon's log line for a withdrawal.
const WITHDRAWN: &str = "boost withdrawn until the next input";

/// The nice value of thread `tid` now, from the kernel.
fn nice(tid: u32) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    after_comm.split(' ').nth(16).unwrap().parse().unwrap()
}

/// A user's X client on `:n`, with the display's cookie file `auth`.
fn as_user(cmd: &mut Command, n: u32, auth: &Path) {
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DISPLAY", format!(":{n}"))
        .env("XAUTHORITY", auth)
        .current_dir("/")
        .uid(USER)
        .gid(USER);
}

/// xterm as the user; (guard, pid, window).
fn xterm(n: u32, auth: &Path) -> (Kill, u32, u32) {
    let mut cmd = Command::new("xterm");
    as_user(&mut cmd, n, auth);
    cmd.args(["-geometry", "40x10+0+0", "-e", "sleep", "600"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn().expect("xterm (Debian package xterm)");
    let pid = child.id();
    let guard = Kill(child);
    let out = xdotool(n, auth, &["search", "--sync", "--pid", &pid.to_string()]);
    let win = out
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no window of xterm {pid}: {out:?}"));
    (guard, pid, win)
}

/// Run xdotool as the user; its stdout.
fn xdotool(n: u32, auth: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new("xdotool");
    as_user(&mut cmd, n, auth);
    let out = cmd
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("xdotool (Debian package xdotool)");
    assert!(out.status.success(), "xdotool {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A directory every user can enter, for the cookie file.
fn open_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

#[test]
#[ignore = "needs root, Xvfb, xterm and xdotool: make test runs it as root"]
fn without_input_the_focused_xterm_loses_its_boost_at_the_limit_and_the_next_key_brings_it_back() {
    assert!(
        root(),
        "runs Xvfb, xterm and xdotool as uid {USER}: needs root"
    );
    let _serial = serial();
    let dir = open_dir();
    let n = free_display();
    let (auth, cookie) = cookie_file(dir.path(), n, USER);
    let _server = xvfb(n, USER, Some(&auth));
    let mut d = idle_daemon(LIMIT);
    let (_xterm, pid, win) = xterm(n, &auth);
    let original = nice(pid);

    // Input, then the xterm in front: boosted.
    xdotool(n, &auth, &["mousemove", "5", "5"]);
    let input = Instant::now();
    activate(n, &cookie, win);
    let s = d.wait_for("the xterm in front and boosted", LIMIT / 2, |s| {
        s.focus == Some(pid as i32) && boosted(s, pid)
    });
    assert!(s.idle.is_none(), "{s:?}");
    assert_ne!(nice(pid), original, "the boost is in the kernel");
    // (The display was idle from its start: had the reader not read since the mousemove, the
    // focus was withheld for that long, and said so.)
    let said_before = d.log().matches(WITHDRAWN).count();

    // No input: withdrawn at the limit, not before, every setting back in the kernel.
    let s = d.wait_for("the boost withdrawn", LIMIT + SLACK, |s| !boosted(s, pid));
    let withdrawn = input.elapsed();
    assert!(
        withdrawn >= LIMIT,
        "withdrawn after {withdrawn:?}, before {LIMIT:?}"
    );
    assert_eq!(s.focus, None, "{s:?}");
    let line = s.idle.clone().unwrap_or_default();
    assert!(
        line.starts_with("idle since ") && line.contains(&format!("withdrawn from pid {pid}")),
        "{s:?}"
    );
    assert_eq!(nice(pid), original);
    eprintln!("limit {LIMIT:?}: withdrawn {withdrawn:?} after the last input");

    // Still idle: it stays withdrawn (and is said once).
    std::thread::sleep(Duration::from_secs(1));
    let s = d.status();
    assert!(s.idle.is_some() && !boosted(&s, pid), "{s:?}");

    // A key through XTEST: the boost back within the reader's bound.
    let key = Instant::now();
    xdotool(n, &auth, &["key", "shift"]);
    let s = d.wait_for("the boost back after a key", SLACK, |s| {
        s.focus == Some(pid as i32) && boosted(s, pid)
    });
    let back = key.elapsed();
    assert!(s.idle.is_none(), "{s:?}");
    assert_ne!(nice(pid), original);
    eprintln!("key → boost back in {back:?} (xdotool's own run included)");

    // And withdrawn again a limit after that key.
    d.wait_for("withdrawn again", LIMIT + SLACK, |s| !boosted(s, pid));
    assert!(key.elapsed() >= LIMIT);
    let log = d.log();
    let said = log.matches(WITHDRAWN).count() - said_before;
    assert_eq!(said, 2, "said once per idle period:\n{log}");
}

#[test]
#[ignore = "needs root, Xvfb, xterm and xdotool: make test runs it as root"]
fn a_server_without_the_screensaver_extension_keeps_the_boost_and_says_why() {
    assert!(
        root(),
        "runs Xvfb, xterm and xdotool as uid {USER}: needs root"
    );
    let _serial = serial();
    let dir = open_dir();
    let n = free_display();
    let (auth, cookie) = cookie_file(dir.path(), n, USER);
    let _server = xvfb_without_screensaver(n, &auth);
    let mut d = idle_daemon(LIMIT);
    let (_xterm, pid, win) = xterm(n, &auth);
    activate(n, &cookie, win);
    d.wait_for("the xterm in front and boosted", LIMIT, |s| {
        s.focus == Some(pid as i32) && boosted(s, pid)
    });
    std::thread::sleep(LIMIT + SLACK);
    let s = d.status();
    assert!(
        s.focus == Some(pid as i32) && boosted(&s, pid) && s.idle.is_none(),
        "{s:?}"
    );
    let log = d.log();
    assert!(
        log.contains("idle demotion is off for this display")
            && log.contains("no MIT-SCREEN-SAVER extension"),
        "{log}"
    );
}

/// Xvfb on `:n` as the user, with its screensaver extension disabled.
fn xvfb_without_screensaver(n: u32, auth: &Path) -> Kill {
    x11_dir();
    let child = Command::new("Xvfb")
        .args([&format!(":{n}"), "-noreset", "-nolisten", "tcp"])
        .args([
            "-extension",
            "MIT-SCREEN-SAVER",
            "-screen",
            "0",
            "320x240x24",
        ])
        .arg("-auth")
        .arg(auth)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .uid(USER)
        .gid(USER)
        .spawn()
        .expect("Xvfb (Debian package xvfb)");
    let guard = Kill(child);
    let socket = xdisplay::socket_of(Path::new(xdisplay::X11_DIR), n);
    wait_until(&format!("Xvfb :{n}"), Duration::from_secs(10), || {
        procs::is_listened(&procs::listening(), &socket)
    });
    guard
}
