//! Helpers for the compositor sources' tests (tests/wayland_sources.rs): the user a compositor
//! runs as, real processes of that user, a Unix socket listened on as that user (so SO_PEERCRED
//! names it, as it names a real compositor), the sources' log captured, and their events read.
//! Included with `#[path]`.

#![allow(dead_code)]

use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use uxsched_daemon::types::{Event, SourceName};

pub const TIMEOUT: Duration = Duration::from_secs(15);

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Who runs the compositor and its legitimate clients: uid 65534 when the test runs as root,
/// else the test's own user.
pub fn user() -> u32 {
    // SAFETY: getuid has no preconditions.
    match unsafe { libc::getuid() } {
        0 => 65534,
        me => me,
    }
}

/// A child process, killed on drop.
pub struct Kill(pub Child);

impl Kill {
    pub fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A real process of [`user`] (a `sleep`): what a compositor's window names.
pub fn app() -> Kill {
    let mut c = Command::new("sleep");
    c.arg("600").stdin(Stdio::null());
    if is_root() {
        c.uid(user()).gid(user());
    }
    Kill(c.spawn().expect("sleep"))
}

/// A directory the [`user`] may create sockets in (the compositor's runtime directory).
pub fn runtime_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    if is_root() {
        std::os::unix::fs::chown(dir.path(), Some(user()), Some(user())).unwrap();
    }
    dir
}

/// Listen on `path` as `uid` (`None`: as the test's own user). As root, a thread of its own
/// takes the effective uid `uid` for the bind and listen (a raw setresuid changes that thread
/// only), so the socket's peer credentials name `uid` as a real compositor's name its user.
pub fn listen_as(path: &Path, uid: Option<u32>) -> UnixListener {
    let path = path.to_owned();
    std::thread::spawn(move || {
        if let Some(uid) = uid {
            assert!(is_root(), "listening as uid {uid} needs root");
            let keep = -1 as libc::c_long;
            // SAFETY: a raw syscall with integer arguments; it changes this thread's creds only.
            let r = unsafe { libc::syscall(libc::SYS_setresuid, keep, uid as libc::c_long, keep) };
            assert_eq!(r, 0, "setresuid: {}", std::io::Error::last_os_error());
        }
        let l = UnixListener::bind(&path).unwrap();
        l.set_nonblocking(true).unwrap();
        l
    })
    .join()
    .unwrap()
}

/// Listen as the compositor's [`user`].
pub fn listen(path: &Path) -> UnixListener {
    listen_as(path, is_root().then(user))
}

/// Accept one connection (blocking, without timeouts on it), failing after [`TIMEOUT`].
pub fn accept(l: &UnixListener) -> UnixStream {
    let end = Instant::now() + TIMEOUT;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(TIMEOUT)).unwrap();
                return s;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < end, "the source did not connect");
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// The log of every source in this test process (captured once, for all tests).
fn log() -> &'static Mutex<Vec<u8>> {
    static LOG: OnceLock<&'static Mutex<Vec<u8>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buf: &'static Mutex<Vec<u8>> = Box::leak(Box::new(Mutex::new(Vec::new())));
        let sub = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(move || Writer(buf))
            .finish();
        tracing::subscriber::set_global_default(sub).expect("one log subscriber");
        buf
    })
}

struct Writer(&'static Mutex<Vec<u8>>);

impl Write for Writer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        std::io::stderr().write_all(b)?;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Start capturing the sources' log (call before spawning a source).
pub fn capture_log() {
    log();
}

/// Wait until the log has a line with every one of `words`.
pub fn logged(words: &[&str]) {
    let end = Instant::now() + TIMEOUT;
    loop {
        let text = String::from_utf8_lossy(&log().lock().unwrap()).into_owned();
        if text.lines().any(|l| words.iter().all(|w| l.contains(w))) {
            return;
        }
        assert!(
            Instant::now() < end,
            "no log line with {words:?}; log:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The next focus the source reports (health events skipped): the pid, or `None`.
pub fn next_focus(rx: &Receiver<Event>, source: SourceName, step: &str) -> Option<i32> {
    let end = Instant::now() + TIMEOUT;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Event::Focus { source: s, app }) => {
                assert_eq!(s, source, "{step}");
                return app.map(|a| a.pid);
            }
            Ok(Event::Health { .. }) => {}
            Ok(_) => panic!("{step}: an event that is not the source's"),
            Err(e) => panic!("no focus event after {step}: {e}"),
        }
    }
}

/// No focus event within `quiet` (health events skipped).
pub fn no_focus(rx: &Receiver<Event>, quiet: Duration, step: &str) {
    let end = Instant::now() + quiet;
    while let Ok(ev) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
        if let Event::Focus { app, .. } = ev {
            panic!("{step}: focus {:?} reported", app.map(|a| a.pid));
        }
    }
}

/// Wait until the source's thread has ended.
pub fn ended(thread: &std::thread::JoinHandle<()>, step: &str) {
    let end = Instant::now() + TIMEOUT;
    while !thread.is_finished() {
        assert!(
            Instant::now() < end,
            "{step}: the source's thread did not end"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The one file in `dir` whose name satisfies `pred`, once it exists.
pub fn appears(dir: &Path, what: &str, pred: impl Fn(&str) -> bool) -> PathBuf {
    let end = std::time::Instant::now() + TIMEOUT;
    loop {
        let found = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .find(|e| pred(&e.file_name().to_string_lossy()));
        if let Some(e) = found {
            return e.path();
        }
        assert!(
            std::time::Instant::now() < end,
            "{what} did not appear in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `program` as the compositor's [`user`] in the session at `runtime` (bus `runtime/bus`).
pub fn as_user(program: &Path, runtime: &Path, home: &Path) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let mut c = std::process::Command::new(program);
    c.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", runtime)
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}", runtime.join("bus").display()),
        )
        .stdin(std::process::Stdio::null())
        .uid(user())
        .gid(user());
    c
}

/// The X display of the Xwayland that process `parent` started, once it runs.
pub fn xwayland_display(parent: i32) -> String {
    let end = std::time::Instant::now() + TIMEOUT;
    loop {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let Some((comm, rest)) = stat.split_once(") ") else {
                continue;
            };
            let ppid = rest.split(' ').nth(1).and_then(|p| p.parse::<i32>().ok());
            if comm.ends_with("(Xwayland") && ppid == Some(parent) {
                let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                if let Some(d) = cmd
                    .split(|&b| b == 0)
                    .map(String::from_utf8_lossy)
                    .find(|a| a.starts_with(':'))
                {
                    return d.into_owned();
                }
            }
        }
        assert!(std::time::Instant::now() < end, "KWin started no Xwayland");
        std::thread::sleep(Duration::from_millis(100));
    }
}
