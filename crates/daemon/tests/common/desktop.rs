//! What the desktop tests share (`auto_sessions.rs`, `idle.rs`): one test at a time, the child
//! guard, polling, and the daemon as a desktop gets it — the fixture's `daemon-defaults` role
//! (the built-in defaults, `sources = ["auto"]`, nothing of the test's environment), stopped
//! with SIGTERM so that it restores what it changed. Included with `#[path]`, beside
//! `any_user.rs`, which it uses.

use super::any_user;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use uxsched_client::control::{self, Request, Status};

/// One desktop test at a time: each daemon follows every display of the machine.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A child ended with SIGTERM, so that an X server or a compositor removes its socket and lock
/// file (a SIGKILLed Xvfb leaves them, and they used up the tests' display numbers), SIGKILL
/// after 2 s.
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        // SAFETY: kill has no memory preconditions; the pid is our child's, not yet reaped.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(2);
        while self.0.try_wait().ok().flatten().is_none() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The daemon with the built-in defaults, its socket, journal and cgroups in its own directory.
pub struct Daemon {
    child: Kill,
    dir: tempfile::TempDir,
    pub socket: PathBuf,
}

/// Stopped with SIGTERM, as a service is, so that it restores what it changed and removes its
/// cgroups: a SIGKILLed daemon left its fg group holding half of the root's real-time runtime,
/// and two such left the later tests' groups none (SIGKILL after 10 s, by `Kill`).
impl Drop for Daemon {
    fn drop(&mut self) {
        let child = &mut self.child.0;
        // SAFETY: kill has no memory preconditions; the pid is our child's, not yet reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(10);
        while child.try_wait().ok().flatten().is_none() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Daemon {
    /// Started with nothing of the test's environment but `PATH`, plus `env`; waits until it
    /// answers.
    pub fn start(env: &[(&str, &str)]) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(dir.path().join("daemon.log")).unwrap();
        let child = Command::new(any_user::FIXTURE)
            .arg("daemon-defaults")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("UXSCHED_TEST_DIR", dir.path())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let d = Daemon {
            child: Kill(child),
            socket: dir.path().join("uxsched.sock"),
            dir,
        };
        wait_until("the daemon answers", Duration::from_secs(30), || {
            control::call(&d.socket, &Request::Status).is_ok()
        });
        d
    }

    pub fn status(&mut self) -> Status {
        if let Ok(Some(code)) = self.child.0.try_wait() {
            panic!("the daemon exited ({code}):\n{}", self.log());
        }
        control::call(&self.socket, &Request::Status)
            .unwrap_or_else(|e| panic!("status: {e}\n{}", self.log()))
            .status
            .unwrap()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    /// The status once `cond` holds (`within` at most), looked at every 20 ms.
    pub fn wait_for(
        &mut self,
        what: &str,
        within: Duration,
        cond: impl Fn(&Status) -> bool,
    ) -> Status {
        let end = Instant::now() + within;
        loop {
            let s = self.status();
            if cond(&s) {
                return s;
            }
            if Instant::now() > end {
                panic!(
                    "timed out waiting for: {what}\nstatus: {s:#?}\nlog:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
