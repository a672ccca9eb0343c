//! A private uxsched daemon for an example: the example's own binary re-executed in the
//! `daemon` role, with its own socket, journal and cgroup name in a temporary directory, and
//! stopped with SIGTERM (it restores everything) when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use uxsched_client::control::{self, Request};

const ROLE: &str = "UXSCHED_BENCH_ROLE";
const CONFIG: &str = "UXSCHED_BENCH_CONFIG";

pub struct Daemon {
    child: Child,
    pub socket: PathBuf,
    dir: PathBuf,
}

/// In a process started by [`Daemon::start`]: run the daemon until SIGTERM and return true.
pub fn run_if_daemon() -> bool {
    if std::env::var(ROLE).as_deref() != Ok("daemon") {
        return false;
    }
    let cfg = uxsched_daemon::Config::load(Some(Path::new(&std::env::var(CONFIG).unwrap())));
    uxsched_daemon::daemon::run(cfg.unwrap()).unwrap();
    true
}

impl Daemon {
    /// Start one in `/tmp/uxsched-<name>-<pid>` with `config` (TOML; socket, journal and
    /// cgroup name are added) and wait until it answers `status`.
    pub fn start(name: &str, config: &str) -> Daemon {
        let id = std::process::id();
        let dir = std::env::temp_dir().join(format!("uxsched-{name}-{id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("s.sock");
        let cfg = dir.join("c.toml");
        let head = format!(
            "socket = \"{}\"\njournal = \"{}\"\ncgroup_name = \"uxsched-{name}-{id}\"\n",
            socket.display(),
            dir.join("j.sqlite").display(),
        );
        std::fs::write(&cfg, head + config).unwrap();
        let child = Command::new(std::env::current_exe().unwrap())
            .env(ROLE, "daemon")
            .env(CONFIG, &cfg)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(20);
        while control::call(&socket, &Request::Status).is_err() {
            assert!(Instant::now() < end, "the daemon did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Daemon { child, socket, dir }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: SIGTERM to our own child: it restores everything before exiting.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
