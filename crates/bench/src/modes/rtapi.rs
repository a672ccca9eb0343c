//! `rtapi`: seed 002's "CFS with the real-time support framework" (§III.B, Fig. 5, 7, 8). The
//! harness starts the daemon as for the uxsched modes but never tells it the foreground, so its
//! policy changes nothing; the app itself asks for real time through `uxsched-client` — the
//! models that have a time-critical thread (`alarm`, `player`) get `--rt-socket` and ask for
//! that thread at start ([`crate::models::ask_realtime`]). The grant is approved, applied,
//! journalled and restored by the daemon like any app's; it ends when the model exits.

use super::daemon::Daemon;
use super::{Mode, ModeEnv, ModeName, Targets};
use anyhow::Result;
use std::path::PathBuf;

pub struct Rtapi {
    daemon: Daemon,
}

impl Rtapi {
    pub fn new(env: &ModeEnv) -> Result<Rtapi> {
        Ok(Rtapi {
            daemon: Daemon::new(ModeName::Rtapi, env)?,
        })
    }
}

impl Mode for Rtapi {
    fn prepare(&mut self) -> Result<()> {
        self.daemon.prepare()
    }

    /// Nothing: the app asks for itself, and the daemon is not told the foreground.
    fn apply(&mut self, _targets: &Targets) -> Result<()> {
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        self.daemon.restore()
    }

    fn app_rt_socket(&self) -> Option<PathBuf> {
        Some(self.daemon.socket())
    }
}
