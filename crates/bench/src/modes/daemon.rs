//! The uxsched modes: the harness starts `uxsched daemon --config FILE --mode MODE` as a child
//! with a private socket and journal, waits until `uxsched status --json` answers, tells it the
//! foreground with `uxsched focus <pid>`, and on restore stops it with SIGTERM (the daemon
//! restores what it changed from its journal) and waits for it.

use super::{Mode, ModeEnv, ModeName, Targets};
use crate::sys;
use anyhow::{bail, Context, Result};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const READY_TIMEOUT: Duration = Duration::from_secs(10);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether this uxsched binary has the daemon (`uxsched daemon --help` succeeds).
pub fn daemon_available(exe: Option<&Path>) -> bool {
    exe.is_some_and(|exe| {
        Command::new(exe)
            .args(["daemon", "--help"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

pub struct Daemon {
    mode: ModeName,
    exe: PathBuf,
    dir: PathBuf,
    child: Option<Child>,
    focused: bool,
    /// Appended to the generated config ([`super::ModeEnv::daemon_config`]).
    extra_config: String,
}

impl Daemon {
    pub fn new(mode: ModeName, env: &ModeEnv) -> Result<Daemon> {
        let exe = env
            .uxsched_exe
            .clone()
            .filter(|e| daemon_available(Some(e)));
        let Some(exe) = exe else {
            bail!(
                "mode '{}' needs the uxsched daemon, which this build does not have (`uxsched daemon --help` fails); choose among idle, stock, android, s76, schedqos, fifo",
                mode.name()
            );
        };
        let dir = env.scratch.join(format!("daemon-{}", mode.name()));
        Ok(Daemon {
            mode,
            exe,
            dir,
            child: None,
            focused: false,
            extra_config: env.daemon_config.clone(),
        })
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("uxsched.sock")
    }

    fn client(&self, args: &[&str]) -> Result<std::process::Output> {
        let socket = self.socket();
        Command::new(&self.exe)
            .args(args)
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running `uxsched {}`", args.join(" ")))
    }

    fn wait_ready(&mut self) -> Result<()> {
        let start = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    bail!(
                        "uxsched daemon --mode {} exited before answering ({status}); its log is {}",
                        self.mode.name(),
                        self.dir.join("daemon.log").display()
                    );
                }
            }
            if self.client(&["status", "--json"])?.status.success() {
                return Ok(());
            }
            if start.elapsed() > READY_TIMEOUT {
                bail!(
                    "uxsched daemon --mode {} did not answer `status` on {} within {} s; its log is {}",
                    self.mode.name(),
                    self.socket().display(),
                    READY_TIMEOUT.as_secs(),
                    self.dir.join("daemon.log").display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Mode for Daemon {
    fn prepare(&mut self) -> Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let config = self.dir.join("config.toml");
        let _ = std::fs::remove_file(self.socket());
        std::fs::write(
            &config,
            format!(
                "socket = {:?}\njournal = {:?}\n{}\n",
                self.socket().display().to_string(),
                self.dir.join("journal.sqlite").display().to_string(),
                self.extra_config
            ),
        )?;
        let log = std::fs::File::create(self.dir.join("daemon.log"))?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg("daemon")
            .arg("--config")
            .arg(&config)
            .args(["--mode", self.mode.name()])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // A system service: a session (autogroup) of its own, not the harness's — which in
        // `same-session` is also the app's, where the daemon's own threads would share the
        // app's group and its boost.
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().context("starting uxsched daemon")?;
        self.child = Some(child);
        self.wait_ready()
    }

    fn apply(&mut self, t: &Targets) -> Result<()> {
        let Some(app) = t.app else { return Ok(()) };
        if self.focused {
            return Ok(());
        }
        let out = self.client(&["focus", &app.to_string()])?;
        if !out.status.success() {
            bail!(
                "`uxsched focus {app}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        self.focused = true;
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        self.focused = false;
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        sys::signal(child.id() as i32, libc::SIGTERM);
        let start = Instant::now();
        while child.try_wait()?.is_none() {
            if start.elapsed() > STOP_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "uxsched daemon --mode {} did not exit within {} s of SIGTERM; killed (its journal {} lets a restart restore)",
                    self.mode.name(),
                    STOP_TIMEOUT.as_secs(),
                    self.dir.join("journal.sqlite").display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}
