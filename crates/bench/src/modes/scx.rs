//! `scx-simple`, `scx-vtcfs`, `scx-mcfs`, `scx-facfs`: a sched_ext BPF scheduler loaded for the
//! run (Linux ≥ 6.12 with `CONFIG_SCHED_CLASS_EXT`; the dev machines lack it, the 6.12 test
//! guest has it: `scripts/scx-bench.sh`).
//!
//! - `scx-simple`: the kernel's example `tools/sched_ext/scx_simple` (`scripts/build-scx-simple.sh`
//!   builds it; `$UXSCHED_SCX_SIMPLE` or `scx_simple` in `PATH`). It runs in full mode: every
//!   fair thread is its, nothing to switch.
//! - `scx-<policy>`: `uxsched scx run --policy <policy>`, in its default partial mode. In 6.12 the
//!   ext class ranks below the fair class (bpf/scx_uxsched.bpf.c, "Mode"), so an app switched
//!   alone would only run when no fair thread is runnable: the app *and* the background load are
//!   switched to SCHED_EXT (nice and custom slice kept), as the daemon's scx backend switches the
//!   competitors together; the app's threads get the interactive class (seed 000 eq. 6) through
//!   the boost map the scheduler pins. The background keeps no class (not demoted).
//!
//! `$UXSCHED_SCX_ARGS` adds arguments to `uxsched scx run` (e.g. `--full`, `--cut-rate 1`).
//!
//! Restore: the threads go back to what they were, then the scheduler is stopped with SIGINT;
//! if the kernel had stopped it (error, watchdog), the run fails with its exit record.

use super::{app_threads, background_threads, ignore_gone, Changes, Mode, ModeEnv, Targets};
use anyhow::{bail, Context, Result};
use std::collections::HashSet;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use uxsched_os::sched;
use uxsched_scx::{Boosts, Class, PinnedBoosts};

const STATE: &str = "/sys/kernel/sched_ext/state";
/// Every how many sweeps (100 ms) the load's processes are looked for again.
const LOAD_RESCAN_SWEEPS: u32 = 10;
/// How long a scheduler may take to be enabled (the TCG guest is slow).
const ENABLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Which BPF scheduler.
#[derive(Debug, Clone, Copy)]
pub enum Which {
    Simple,
    /// `uxsched scx run --policy` this.
    Uxsched(&'static str),
}

pub struct Scx {
    which: Which,
    exe: Option<PathBuf>,
    /// bpffs directory the boost map is pinned in (uxsched's policies only).
    pin: PathBuf,
    child: Option<Child>,
    changes: Changes,
    /// `apply` calls so far (the load is rescanned every [`LOAD_RESCAN_SWEEPS`]).
    sweeps: u32,
    /// The pinned boost map, opened at the first boost.
    boosts: Option<PinnedBoosts>,
    boosted: HashSet<i32>,
}

impl Scx {
    pub fn new(which: Which, env: &ModeEnv) -> Scx {
        Scx {
            which,
            exe: env.uxsched_exe.clone(),
            pin: PathBuf::from(format!("/sys/fs/bpf/uxsched-bench-{}", std::process::id())),
            child: None,
            changes: Changes::default(),
            sweeps: 0,
            boosts: None,
            boosted: HashSet::new(),
        }
    }

    fn command(&self) -> Result<Command> {
        Ok(match self.which {
            Which::Simple => {
                let prog = std::env::var_os("UXSCHED_SCX_SIMPLE")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("scx_simple"));
                Command::new(prog)
            }
            Which::Uxsched(policy) => {
                let exe = self.exe.clone().context(
                    "the scx modes need the uxsched binary (run them through `uxsched bench`)",
                )?;
                let mut c = Command::new(exe);
                c.args(["scx", "run", "--policy", policy, "--pin"])
                    .arg(&self.pin);
                // Tunables to explore (`--full`, `--cut-rate 1`, …), said in the report's
                // stderr by the runner's command line.
                if let Some(extra) = std::env::var_os("UXSCHED_SCX_ARGS") {
                    c.args(extra.to_string_lossy().split_whitespace());
                }
                c
            }
        })
    }

    /// Thread `tid` to SCHED_EXT with its own nice and custom slice (none if it has the
    /// kernel's default).
    fn switch(&mut self, pid: i32, tid: i32, default_slice: u64) -> Result<()> {
        let Ok(old) = sched::get(tid) else {
            return Ok(());
        };
        let runtime = sched::restorable(&old, default_slice).runtime;
        ignore_gone(
            self.changes
                .sched_attr(pid, tid, sched::SCHED_EXT, old.nice, runtime),
        )
    }

    /// Give the app's new threads the interactive class through the pinned boost map, each on
    /// its own: a thread that exited meanwhile is skipped (and not remembered as boosted), any
    /// other failure fails the run.
    fn boost(&mut self, tids: &[i32]) -> Result<()> {
        let fresh: Vec<i32> = tids
            .iter()
            .copied()
            .filter(|t| !self.boosted.contains(t))
            .collect();
        if fresh.is_empty() {
            return Ok(());
        }
        let boosts = match &mut self.boosts {
            Some(b) => b,
            slot @ None => slot.insert(Boosts::open_pinned(&self.pin.join("boosts"))?),
        };
        for tid in fresh {
            match boosts.set(tid, Class::Interactive) {
                Ok(()) => {
                    self.boosted.insert(tid);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).context("giving the app the interactive class"),
            }
        }
        Ok(())
    }

    /// The scheduler's stderr, for error messages.
    fn child_stderr(child: &mut Child) -> String {
        let mut s = String::new();
        if let Some(e) = child.stderr.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s.trim().to_owned()
    }
}

fn state() -> Result<String> {
    std::fs::read_to_string(STATE)
        .map(|s| s.trim().to_owned())
        .with_context(|| {
            format!(
                "the scx modes need a kernel with sched_ext (Linux >= 6.12, CONFIG_SCHED_CLASS_EXT): \
                 no {STATE} here; run them in the 6.12 test guest with scripts/scx-bench.sh"
            )
        })
}

/// Wait until the kernel's sched_ext state is `want` (the previous run's scheduler may still be
/// disabling); returns the last state seen.
fn settle(want: &str, timeout: Duration) -> Result<String> {
    let start = Instant::now();
    loop {
        let s = state()?;
        if s == want || start.elapsed() > timeout {
            return Ok(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Mode for Scx {
    fn prepare(&mut self) -> Result<()> {
        let before = settle("disabled", Duration::from_secs(5))?;
        if before != "disabled" {
            bail!("a sched_ext scheduler is already loaded ({STATE}: {before}): stop it first");
        }
        let mut cmd = self.command()?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = crate::leftovers::spawn(&mut cmd)
            .with_context(|| format!("starting the {:?} sched_ext scheduler", self.which))?;
        let start = Instant::now();
        while state()? != "enabled" {
            if let Some(st) = child.try_wait()? {
                bail!(
                    "the {:?} scheduler exited ({st}) before it was enabled: {}",
                    self.which,
                    Self::child_stderr(&mut child)
                );
            }
            if start.elapsed() > ENABLE_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "the {:?} scheduler was not enabled within {ENABLE_TIMEOUT:?}",
                    self.which
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.child = Some(child);
        Ok(())
    }

    fn apply(&mut self, t: &Targets) -> Result<()> {
        if matches!(self.which, Which::Simple) {
            return Ok(());
        }
        let default_slice = sched::get(0).map_or(0, |a| a.runtime);
        let mut threads = t.app.map(app_threads).unwrap_or_default();
        let app: Vec<i32> = threads.iter().map(|&(_, tid)| tid).collect();
        // The load is found by a scan of every process: once a second, not every sweep. In
        // partial mode this harness is a fair process and outranks every SCHED_EXT thread,
        // and under TCG a scan costs tens of milliseconds of the guest's time.
        if self.sweeps % LOAD_RESCAN_SWEEPS == 0 {
            threads.extend(t.background.map(background_threads).unwrap_or_default());
        }
        self.sweeps += 1;
        for (pid, tid) in threads {
            self.switch(pid, tid, default_slice)?;
        }
        self.boost(&app)
    }

    fn restore(&mut self) -> Result<()> {
        let threads = self.changes.restore();
        self.boosted.clear();
        self.boosts = None;
        self.sweeps = 0;
        let Some(mut child) = self.child.take() else {
            return threads;
        };
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let st = child
            .wait()
            .context("waiting for the sched_ext scheduler")?;
        // uxsched's scheduler prints its counters when it stops: kept in the run's stderr.
        let said = Self::child_stderr(&mut child);
        if let Some(counters) = said.lines().find(|l| l.starts_with("uxsched scx: ran")) {
            eprintln!("{:?}: {counters}", self.which);
        }
        let _ = std::fs::remove_dir_all(&self.pin);
        let after = settle("disabled", Duration::from_secs(5))?;
        threads?;
        if after != "disabled" {
            bail!(
                "sched_ext is still {after} after the {:?} scheduler exited",
                self.which
            );
        }
        if !st.success() {
            bail!("the {:?} scheduler ended badly ({st}): {said}", self.which);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::ModeName;

    fn env() -> ModeEnv {
        ModeEnv {
            uxsched_exe: Some(PathBuf::from("/opt/uxsched")),
            scratch: PathBuf::from("/tmp"),
            daemon_config: String::new(),
        }
    }

    #[test]
    fn a_policy_mode_runs_uxsched_scx_with_its_policy_and_a_private_pin() {
        let m = Scx::new(Which::Uxsched("mcfs"), &env());
        let c = m.command().unwrap();
        assert_eq!(c.get_program(), "/opt/uxsched");
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let pin = format!("/sys/fs/bpf/uxsched-bench-{}", std::process::id());
        assert_eq!(
            args,
            ["scx", "run", "--policy", "mcfs", "--pin", pin.as_str()]
        );
        let no_exe = ModeEnv {
            uxsched_exe: None,
            ..env()
        };
        let e = Scx::new(Which::Uxsched("vtcfs"), &no_exe)
            .command()
            .unwrap_err();
        assert!(e.to_string().contains("uxsched binary"), "{e}");
    }

    #[test]
    fn the_sched_ext_modes_are_named_built_without_the_daemon_and_not_in_the_default_set() {
        let scx = [
            (ModeName::ScxSimple, "scx-simple"),
            (ModeName::ScxVtcfs, "scx-vtcfs"),
            (ModeName::ScxMcfs, "scx-mcfs"),
            (ModeName::ScxFacfs, "scx-facfs"),
        ];
        for (m, name) in scx {
            assert_eq!(m.name(), name);
            assert!(
                m.needs_sched_ext() && !m.needs_daemon() && !m.in_default_set(),
                "{name}"
            );
            assert!(ModeName::ALL.contains(&m), "{name}");
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{name}\""));
        }
        assert!(!ModeName::Stock.needs_sched_ext());
    }
}
