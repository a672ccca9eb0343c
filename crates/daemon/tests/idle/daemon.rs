//! The idle tests' daemon: the built-in defaults (`sources = ["auto"]`, nothing of the test's
//! environment) with `[idle] after_s` short, stopped with SIGTERM so that it restores what it
//! changed.

use super::*;

/// The daemon with the built-in defaults and `[idle] after_s` = `limit`.
pub(super) struct Daemon {
    child: Kill,
    dir: tempfile::TempDir,
    socket: PathBuf,
}

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
    pub(super) fn start(limit: Duration) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(dir.path().join("daemon.log")).unwrap();
        let child = Command::new(any_user::FIXTURE)
            .arg("daemon-defaults")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("UXSCHED_TEST_DIR", dir.path())
            .env("UXSCHED_TEST_IDLE_AFTER_S", limit.as_secs_f64().to_string())
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

    pub(super) fn status(&mut self) -> Status {
        if let Ok(Some(code)) = self.child.0.try_wait() {
            panic!("the daemon exited ({code}):\n{}", self.log());
        }
        control::call(&self.socket, &Request::Status)
            .unwrap_or_else(|e| panic!("status: {e}\n{}", self.log()))
            .status
            .unwrap()
    }

    pub(super) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    /// The status once `cond` holds (`within` at most), looked at every 20 ms.
    pub(super) fn wait_for(
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

/// Whether the journal holds a change for a thread of `pid` (the daemon boosts it).
pub(super) fn boosted(s: &Status, pid: u32) -> bool {
    s.boosted.iter().any(|b| b.pid == pid as i32)
}
