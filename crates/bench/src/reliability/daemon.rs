//! The real daemon (`uxsched daemon`, this very binary) with its own config, socket, journal
//! and cgroup names in a scratch directory: started, SIGKILLed, restarted on the same journal
//! (which restores what the killed one left), and stopped with SIGTERM.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use uxsched_client::control::{self, Request};

const READY_TIMEOUT: Duration = Duration::from_secs(20);
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

pub struct Daemon {
    exe: PathBuf,
    pub dir: PathBuf,
    /// Prefix of the daemon's cgroups (`<name>-fg`, `<name>-bg`).
    pub cgroup_name: String,
    child: Option<Child>,
    /// How many times a daemon exited on its own (crashed) instead of being stopped.
    pub crashes: u32,
}

impl Daemon {
    pub fn new(exe: &Path, dir: &Path) -> Result<Daemon> {
        std::fs::create_dir_all(dir)?;
        let cgroup_name = format!("uxsched-reliability-{}", std::process::id());
        std::fs::write(
            dir.join("config.toml"),
            format!(
                "socket = {:?}\njournal = {:?}\ncgroup_name = {cgroup_name:?}\nlog_level = \"warn\"\n",
                dir.join("uxsched.sock").display().to_string(),
                dir.join("journal.sqlite").display().to_string(),
            ),
        )?;
        Ok(Daemon {
            exe: exe.to_owned(),
            dir: dir.to_owned(),
            cgroup_name,
            child: None,
            crashes: 0,
        })
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("uxsched.sock")
    }

    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// Start a daemon in `mode` (on the journal a killed one left) and wait until it answers.
    pub fn start(&mut self, mode: &str) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("daemon.log"))?;
        let child = Command::new(&self.exe)
            .arg("daemon")
            .arg("--config")
            .arg(self.dir.join("config.toml"))
            .args(["--mode", mode])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting uxsched daemon")?;
        self.child = Some(child);
        let start = Instant::now();
        while control::call(&self.socket(), &Request::Status).is_err() {
            if !self.alive() {
                bail!(
                    "the daemon exited before answering; its log: {}",
                    self.log()
                );
            }
            if start.elapsed() > READY_TIMEOUT {
                bail!(
                    "the daemon did not answer within 20 s; its log: {}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    fn log(&self) -> String {
        self.dir.join("daemon.log").display().to_string()
    }

    /// Whether the daemon still runs; one that exited by itself counts as a crash.
    pub fn alive(&mut self) -> bool {
        let Some(child) = self.child.as_mut() else {
            return false;
        };
        match child.try_wait() {
            Ok(None) => true,
            _ => {
                self.child = None;
                self.crashes += 1;
                false
            }
        }
    }

    /// SIGKILL, as a crash or an OOM kill would: nothing gets restored until the next start.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait: the daemon restores everything and removes its groups.
    pub fn stop(&mut self) -> Result<()> {
        let Some(mut c) = self.child.take() else {
            return Ok(());
        };
        crate::sys::signal(c.id() as i32, libc::SIGTERM);
        let start = Instant::now();
        loop {
            if let Some(status) = c.try_wait()? {
                if !status.success() {
                    bail!(
                        "the daemon exited with {status} on SIGTERM; its log: {}",
                        self.log()
                    );
                }
                return Ok(());
            }
            if start.elapsed() > STOP_TIMEOUT {
                let _ = c.kill();
                let _ = c.wait();
                bail!(
                    "the daemon did not stop within 20 s of SIGTERM; its log: {}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Ask the daemon to focus `pid` (`None`: clear). A refusal (the process exited) is normal
    /// in churn and not an error here.
    pub fn focus(&self, pid: Option<i32>) -> Result<(), control::ClientError> {
        control::call(&self.socket(), &Request::Focus { pid }).map(|_| ())
    }

    /// Rows left in the journal (after a stop: boosts nobody restored), counted over every
    /// table so that the count does not depend on the journal's schema version.
    pub fn journal_rows(&self) -> Result<usize> {
        let db = rusqlite::Connection::open(self.dir.join("journal.sqlite"))?;
        let tables: Vec<String> = db
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let mut rows = 0;
        for t in tables {
            let n: i64 =
                db.query_row(&format!("SELECT count(*) FROM \"{t}\""), [], |r| r.get(0))?;
            rows += n as usize;
        }
        Ok(rows)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
