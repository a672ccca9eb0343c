//! Modes: what is done to the foreground app and the background load during a run. Baselines
//! (`idle`, `stock`, `android`, `s76`, `fifo`) are applied by the harness itself, one file each;
//! the uxsched modes start the daemon (`daemon.rs`). Every change goes through [`Changes`],
//! which remembers the original value and puts it back on restore — only if the value is still
//! the one we set (GameMode's rule), so we never undo someone else's later change.

mod android;
mod daemon;
mod fifo;
mod owner;
mod rtapi;
mod s76;
mod schedqos;
mod scx;

use crate::cgroup::CpuGroup;
use crate::sys;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::PathBuf;
use uxsched_os::sched::{self, SchedAttr};

pub use daemon::{daemon_available, daemon_config};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModeName {
    Idle,
    Stock,
    Android,
    S76,
    Schedqos,
    Fifo,
    Eimos,
    /// `eimos` without its read-ahead (seed 001 §3.3): the prefetch's share of its result.
    #[serde(rename = "eimos-no-prefetch")]
    EimosNoPrefetch,
    Vtcfs,
    Mcfs,
    Facfs,
    Shuffledog,
    Uxsched,
    /// `uxsched` with the tracker off: name-based roles only, to measure the tracker's share.
    #[serde(rename = "uxsched-roles")]
    UxschedRoles,
    /// `uxsched` with the fair lever (nice and a short slice) on its critical set instead of
    /// the default bounded real-time lever.
    #[serde(rename = "uxsched-fair")]
    UxschedFair,
    /// `uxsched` without its storage levers (no I/O class, no launches): the CPU levers'
    /// share of a storage scenario's result.
    #[serde(rename = "uxsched-cpu")]
    UxschedCpu,
    /// `uxsched` without the front's I/O class only: a launch is still in front, with the fair
    /// boost — every CPU lever on a launch (seed 003 Table 8's "CPU" column), none at the disk.
    #[serde(rename = "uxsched-no-ioprio")]
    UxschedNoIoprio,
    /// `uxsched` with `cpu_levers = false`: the storage levers alone (seed 003 Table 8's "I/O
    /// manager" column), the tracker still finding the critical set they act on.
    #[serde(rename = "uxsched-io")]
    UxschedIo,
    /// `uxsched` with `[storage] switch_to_bfq`: the disks on BFQ while the daemon runs.
    #[serde(rename = "uxsched-bfq")]
    UxschedBfq,
    /// `uxsched` with the tracker's bounded real-time lever on its critical set.
    /// Seed 002's "CFS with the real-time support framework": the app's time-critical thread
    /// asks the daemon for real time through `uxsched-client` (`alarm`, `player`).
    Rtapi,
    /// The kernel's example sched_ext scheduler `scx_simple` (full mode): needs sched_ext.
    #[serde(rename = "scx-simple")]
    ScxSimple,
    /// `uxsched scx run --policy vtcfs`: app and background on SCHED_EXT, the app interactive.
    #[serde(rename = "scx-vtcfs")]
    ScxVtcfs,
    /// `uxsched scx run --policy mcfs` (as `scx-vtcfs`).
    #[serde(rename = "scx-mcfs")]
    ScxMcfs,
    /// `uxsched scx run --policy facfs` (as `scx-vtcfs`).
    #[serde(rename = "scx-facfs")]
    ScxFacfs,
}

impl ModeName {
    pub const ALL: [ModeName; 24] = [
        ModeName::Idle,
        ModeName::Stock,
        ModeName::Android,
        ModeName::S76,
        ModeName::Schedqos,
        ModeName::Fifo,
        ModeName::Eimos,
        ModeName::EimosNoPrefetch,
        ModeName::Vtcfs,
        ModeName::Mcfs,
        ModeName::Facfs,
        ModeName::Shuffledog,
        ModeName::Uxsched,
        ModeName::UxschedRoles,
        ModeName::UxschedFair,
        ModeName::UxschedCpu,
        ModeName::UxschedNoIoprio,
        ModeName::UxschedIo,
        ModeName::UxschedBfq,
        ModeName::Rtapi,
        ModeName::ScxSimple,
        ModeName::ScxVtcfs,
        ModeName::ScxMcfs,
        ModeName::ScxFacfs,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ModeName::Idle => "idle",
            ModeName::Stock => "stock",
            ModeName::Android => "android",
            ModeName::S76 => "s76",
            ModeName::Schedqos => "schedqos",
            ModeName::Fifo => "fifo",
            ModeName::Eimos => "eimos",
            ModeName::EimosNoPrefetch => "eimos-no-prefetch",
            ModeName::Vtcfs => "vtcfs",
            ModeName::Mcfs => "mcfs",
            ModeName::Facfs => "facfs",
            ModeName::Shuffledog => "shuffledog",
            ModeName::Uxsched => "uxsched",
            ModeName::UxschedRoles => "uxsched-roles",
            ModeName::UxschedFair => "uxsched-fair",
            ModeName::UxschedCpu => "uxsched-cpu",
            ModeName::UxschedNoIoprio => "uxsched-no-ioprio",
            ModeName::UxschedIo => "uxsched-io",
            ModeName::UxschedBfq => "uxsched-bfq",
            ModeName::Rtapi => "rtapi",
            ModeName::ScxSimple => "scx-simple",
            ModeName::ScxVtcfs => "scx-vtcfs",
            ModeName::ScxMcfs => "scx-mcfs",
            ModeName::ScxFacfs => "scx-facfs",
        }
    }

    /// Modes driven through `uxsched daemon --mode <name>`.
    pub fn needs_daemon(self) -> bool {
        !matches!(
            self,
            ModeName::Idle
                | ModeName::Stock
                | ModeName::Android
                | ModeName::S76
                | ModeName::Schedqos
                | ModeName::Fifo
                | ModeName::ScxSimple
                | ModeName::ScxVtcfs
                | ModeName::ScxMcfs
                | ModeName::ScxFacfs
        )
    }

    /// Modes that load a sched_ext BPF scheduler (Linux >= 6.12 with sched_ext only).
    pub fn needs_sched_ext(self) -> bool {
        matches!(
            self,
            ModeName::ScxSimple | ModeName::ScxVtcfs | ModeName::ScxMcfs | ModeName::ScxFacfs
        )
    }

    /// Whether a run without `--modes` includes it: every mode but the variants of `uxsched`
    /// that exist to take one of its parts apart, and `rtapi`, which only the models that ask
    /// for real time can use (ask for them by name), and the sched_ext modes, which need a
    /// kernel with sched_ext.
    pub fn in_default_set(self) -> bool {
        !matches!(
            self,
            ModeName::UxschedRoles
                | ModeName::EimosNoPrefetch
                | ModeName::UxschedFair
                | ModeName::UxschedCpu
                | ModeName::UxschedNoIoprio
                | ModeName::UxschedIo
                | ModeName::UxschedBfq
                | ModeName::Rtapi
        ) && !self.needs_sched_ext()
    }

    pub fn description(self) -> &'static str {
        match self {
            ModeName::Idle => "the foreground alone, no load: the limit every ratio is taken against",
            ModeName::Stock => "under load, nothing done",
            ModeName::Android => "Android top app: ui/render threads nice -10; background nice 10 in a cpu.shares=52 group (told which processes are the load, in every layout)",
            ModeName::S76 => "system76-scheduler defaults: autogroup off; foreground nice 0 io BE0; background nice 6 io idle (told which processes are the load)",
            ModeName::Schedqos => "Sched QoS v0.1 published defaults: foreground USER_INTERACTIVE (nice -4, 8 ms slice); background BACKGROUND (SCHED_BATCH nice 4, 20 ms slice) (told which processes are the load)",
            ModeName::Fifo => "every thread of the app's process tree, and of the X server for real apps, SCHED_FIFO 1 (soft RLIMIT_RTTIME 200 ms each): the latency reference",
            ModeName::Eimos => "uxsched daemon --mode eimos (seed 001)",
            ModeName::EimosNoPrefetch => "uxsched daemon --mode eimos with [eimos] prefetch = false: its CPU half alone, to measure the read-ahead's gain (not in the default set)",
            ModeName::Vtcfs => "uxsched daemon --mode vtcfs (seed 000)",
            ModeName::Mcfs => "uxsched daemon --mode mcfs (seed 002)",
            ModeName::Facfs => "uxsched daemon --mode facfs (seed 004)",
            ModeName::Shuffledog => "uxsched daemon --mode shuffledog (seed 003)",
            ModeName::Uxsched => "uxsched daemon --mode uxsched (the recommended combination: the tracker's critical set at SCHED_FIFO 2 under a run-time budget)",
            ModeName::UxschedRoles => "uxsched daemon --mode uxsched with [tracker] enabled = false: name-based roles only, no chain (not in the default set)",
            ModeName::UxschedFair => "uxsched daemon --mode uxsched with [tracker] lever = \"fair\": the critical set at nice -19 and a short slice instead of SCHED_FIFO 2 (not in the default set)",
            ModeName::UxschedCpu => "uxsched daemon --mode uxsched with its storage levers off ([storage] front_class = \"off\", launch_budget_ms = 0): the CPU levers alone (not in the default set)",
            ModeName::UxschedNoIoprio => "uxsched daemon --mode uxsched with [storage] front_class = \"off\": no I/O class, launches still in front with the fair boost — every CPU lever, none at the disk (not in the default set)",
            ModeName::UxschedIo => "uxsched daemon --mode uxsched with cpu_levers = false: the storage levers alone (the critical set's and launches' I/O class as [storage] says), no nice, slice, real-time class, autogroup or cgroup change (not in the default set)",
            ModeName::UxschedBfq => "uxsched daemon --mode uxsched with [storage] switch_to_bfq = true: the disks on BFQ while the daemon runs, their elevator restored after (not in the default set)",
            ModeName::ScxSimple => "the kernel's example sched_ext scheduler scx_simple (full mode; $UXSCHED_SCX_SIMPLE or PATH, scripts/build-scx-simple.sh; needs sched_ext, not in the default set)",
            ModeName::ScxVtcfs => "uxsched scx run --policy vtcfs (partial): app and background on SCHED_EXT, the app's threads interactive (needs sched_ext, not in the default set)",
            ModeName::ScxMcfs => "uxsched scx run --policy mcfs (partial), as scx-vtcfs (needs sched_ext, not in the default set)",
            ModeName::ScxFacfs => "uxsched scx run --policy facfs (partial), as scx-vtcfs (needs sched_ext, not in the default set)",
            ModeName::Rtapi => "the app's time-critical thread asks the daemon (never told the foreground) for SCHED_FIFO 10 through uxsched-client: seed 002's real-time support framework (alarm, player; not in the default set)",
        }
    }
}

/// What a mode acts on during a run. Filled in as the run proceeds.
#[derive(Debug, Default, Clone, Copy)]
pub struct Targets {
    /// The foreground app process (its threads are the foreground).
    pub app: Option<i32>,
    /// The leader of the background load: its session (other layouts) or process group
    /// (`same-session`) id, see [`crate::sys::load_members`].
    pub background: Option<i32>,
    /// Real-application scenarios: the X server the app draws through.
    pub x_server: Option<i32>,
    /// Real-application scenarios: the app's child on the input path (xterm's `cat`).
    pub app_child: Option<i32>,
    /// The app's focus is a Wayland compositor's (`foot`): the daemon modes must find it
    /// through their sources and are not told with `uxsched focus`.
    pub compositor_focus: bool,
}

impl Targets {
    /// The app and every live descendant (a browser's zygotes, renderers, GPU and utility
    /// processes; xterm's `cat`): the whole app. Read from `/proc` at each call, not stored,
    /// because a browser starts and ends helpers during a run while the runner fills the
    /// targets once; modes call it at every sweep and so follow the tree as it changes.
    pub fn app_family(&self) -> Vec<i32> {
        self.app.map(process_tree).unwrap_or_default()
    }
}

/// `root` and every live (not zombie: it has no threads left to act on) descendant, root first.
pub fn process_tree(root: i32) -> Vec<i32> {
    let mut tree: Vec<i32> = uxsched_os::process_tree::with_descendants(root)
        .into_iter()
        .filter(|&pid| {
            pid == root
                || uxsched_os::task::Fields::read(format!("/proc/{pid}/stat"))
                    .is_ok_and(|f| f.state() != 'Z')
        })
        .collect();
    tree.sort_by_key(|&pid| pid != root);
    tree
}

/// Where a mode can find the uxsched binary and a private scratch directory.
#[derive(Debug, Clone)]
pub struct ModeEnv {
    pub uxsched_exe: Option<PathBuf>,
    pub scratch: PathBuf,
    /// Extra daemon configuration (TOML) for the uxsched modes, e.g. `[uxsched]\nslice_us = 1500`,
    /// so configurations can be compared; the harness sets `socket` and `journal` itself.
    pub daemon_config: String,
}

/// A mode's life in one run: prepare → apply (at start and every sweep, idempotent) → restore.
pub trait Mode {
    /// Before the load starts (system-wide settings, daemon start).
    fn prepare(&mut self) -> Result<()> {
        Ok(())
    }
    /// Bring the targets to the mode's settings; called again every sweep to catch new
    /// threads and processes, so it must only act on what it has not handled yet.
    fn apply(&mut self, _targets: &Targets) -> Result<()> {
        Ok(())
    }
    /// Undo everything; called on every exit path. Returns the problems met, if any.
    fn restore(&mut self) -> Result<()> {
        Ok(())
    }
    /// What the mode itself measured in the run (reported with the model's extras), read
    /// before [`Mode::restore`].
    fn extras(&mut self) -> std::collections::BTreeMap<String, f64> {
        Default::default()
    }
    /// What the tracker's critical set held per keystroke (a daemon mode that runs the
    /// tracker), read by [`Mode::extras`].
    fn critical_sets(&mut self) -> Option<uxsched_client::control::CriticalSets> {
        None
    }
    /// The daemon socket the app asks for real time on (`--rt-socket`), in modes where the
    /// app asks itself (`rtapi`).
    fn app_rt_socket(&self) -> Option<PathBuf> {
        None
    }
}

/// `idle` and `stock` change nothing.
struct Nothing;
impl Mode for Nothing {}

pub fn build(name: ModeName, env: &ModeEnv) -> Result<Box<dyn Mode>> {
    Ok(match name {
        ModeName::Idle | ModeName::Stock => Box::new(Nothing),
        ModeName::Android => Box::new(android::Android::default()),
        ModeName::S76 => Box::new(s76::S76::default()),
        ModeName::Schedqos => Box::new(schedqos::SchedQos::default()),
        ModeName::Fifo => Box::new(fifo::Fifo::default()),
        ModeName::Rtapi => Box::new(rtapi::Rtapi::new(env)?),
        ModeName::ScxSimple => Box::new(scx::Scx::new(scx::Which::Simple, env)),
        ModeName::ScxVtcfs => Box::new(scx::Scx::new(scx::Which::Uxsched("vtcfs"), env)),
        ModeName::ScxMcfs => Box::new(scx::Scx::new(scx::Which::Uxsched("mcfs"), env)),
        ModeName::ScxFacfs => Box::new(scx::Scx::new(scx::Which::Uxsched("facfs"), env)),
        daemon_mode => Box::new(daemon::Daemon::new(daemon_mode, env)?),
    })
}

/// One setting changed by a baseline, with the value to put back.
#[derive(Debug)]
enum Change {
    Nice {
        pid: i32,
        tid: i32,
        old: i32,
        new: i32,
    },
    Policy {
        pid: i32,
        tid: i32,
        old: sys::ThreadSched,
        new_policy: i32,
    },
    IoPrio {
        tid: i32,
        old: u16,
        new: u16,
    },
    RtLimit {
        pid: i32,
        old: (u64, u64),
    },
    /// Policy, nice and slice together (`sched_setattr`).
    Attr {
        pid: i32,
        tid: i32,
        old: SchedAttr,
        new: SchedAttr,
    },
    Autogroup {
        old: bool,
    },
    Group(CpuGroup),
}

/// The undo log of a baseline mode.
#[derive(Debug, Default)]
pub struct Changes {
    log: Vec<Change>,
    /// (kind, tid) pairs already handled, so sweeps act once per thread.
    seen: HashSet<(&'static str, i32)>,
}

impl Changes {
    /// Whether (kind, tid) is new; marks it handled.
    fn first_time(&mut self, kind: &'static str, tid: i32) -> bool {
        self.seen.insert((kind, tid))
    }

    pub fn nice(&mut self, pid: i32, tid: i32, new: i32) -> Result<()> {
        if !self.first_time("nice", tid) {
            return Ok(());
        }
        let Ok(old) = sys::thread_sched(pid, tid) else {
            return Ok(());
        };
        if old.nice == new {
            return Ok(());
        }
        sys::set_nice(tid, new)?;
        self.log.push(Change::Nice {
            pid,
            tid,
            old: old.nice,
            new,
        });
        Ok(())
    }

    pub fn policy(&mut self, pid: i32, tid: i32, policy: i32, rt_priority: i32) -> Result<()> {
        if !self.first_time("policy", tid) {
            return Ok(());
        }
        let Ok(old) = sys::thread_sched(pid, tid) else {
            return Ok(());
        };
        sys::set_policy(tid, policy | sys::SCHED_RESET_ON_FORK, rt_priority)?;
        self.log.push(Change::Policy {
            pid,
            tid,
            old,
            new_policy: policy,
        });
        Ok(())
    }

    /// Set a fair thread's policy, nice and custom slice in one `sched_setattr` (EEVDF ≥ 6.12
    /// takes `sched_runtime` as the slice). Threads that are not fair-class are left alone.
    pub fn sched_attr(
        &mut self,
        pid: i32,
        tid: i32,
        policy: u32,
        nice: i32,
        slice_ns: u64,
    ) -> Result<()> {
        if !self.first_time("attr", tid) || sys::thread_sched(pid, tid).is_err() {
            return Ok(());
        }
        let Ok(old) = sched::get(tid) else {
            return Ok(());
        };
        if !old.is_fair() {
            return Ok(());
        }
        let new = SchedAttr {
            policy,
            flags: 0,
            nice,
            runtime: slice_ns,
            ..old
        };
        sched::set(tid, &new).with_context(|| {
            format!("sched_setattr(tid {tid}, policy {policy}, nice {nice}, slice {slice_ns} ns)")
        })?;
        self.log.push(Change::Attr { pid, tid, old, new });
        Ok(())
    }

    pub fn ioprio(&mut self, tid: i32, new: u16) -> Result<()> {
        if !self.first_time("ioprio", tid) {
            return Ok(());
        }
        let Ok(old) = sys::ioprio_get(tid) else {
            return Ok(());
        };
        sys::ioprio_set(tid, new)?;
        self.log.push(Change::IoPrio { tid, old, new });
        Ok(())
    }

    /// Lower the soft RLIMIT_RTTIME: past it the kernel sends SIGXCPU, whose default action
    /// ends the process. The hard limit stays, because raising it back on restore needs
    /// CAP_SYS_RESOURCE, which containers often drop.
    pub fn rttime_limit(&mut self, pid: i32, limit_us: u64) -> Result<()> {
        if !self.first_time("rtlimit", pid) {
            return Ok(());
        }
        let old = owner::rttime_limit(pid)?;
        owner::set_rttime_limit(pid, limit_us.min(old.1), old.1)?;
        self.log.push(Change::RtLimit { pid, old });
        Ok(())
    }

    pub fn autogroup(&mut self, on: bool) -> Result<()> {
        let Some(old) = sys::autogroup() else {
            return Ok(());
        };
        if old != on {
            crate::leftovers::autogroup_changing(old)?;
            sys::set_autogroup(on)?;
            self.log.push(Change::Autogroup { old });
        }
        Ok(())
    }

    pub fn group(&mut self, group: CpuGroup) {
        self.log.push(Change::Group(group));
    }

    pub fn groups(&self) -> impl Iterator<Item = &CpuGroup> {
        self.log.iter().filter_map(|c| match c {
            Change::Group(g) => Some(g),
            _ => None,
        })
    }

    /// Undo in reverse order. Threads that exited are skipped (nothing to restore); a value
    /// someone else changed since is left alone. All failures are reported together.
    pub fn restore(&mut self) -> Result<()> {
        let mut failures = Vec::new();
        while let Some(change) = self.log.pop() {
            if let Err(e) = undo(&change) {
                failures.push(format!("{e:#}"));
            }
        }
        self.seen.clear();
        if failures.is_empty() {
            Ok(())
        } else {
            anyhow::bail!("restoring settings failed: {}", failures.join("; "))
        }
    }
}

fn undo(change: &Change) -> Result<()> {
    match *change {
        Change::Nice { pid, tid, old, new } => match sys::thread_sched(pid, tid) {
            Ok(now) if now.nice == new => sys::set_nice(tid, old),
            _ => Ok(()),
        },
        Change::Policy {
            pid,
            tid,
            old,
            new_policy,
        } => match sys::thread_sched(pid, tid) {
            Ok(now) if now.policy == new_policy => {
                sys::set_policy(tid, old.policy, old.rt_priority)?;
                sys::set_nice(tid, old.nice)
            }
            _ => Ok(()),
        },
        Change::IoPrio { tid, old, new } => match sys::ioprio_get(tid) {
            Ok(now) if now == new => sys::ioprio_set(tid, old),
            _ => Ok(()),
        },
        Change::RtLimit { pid, old } => {
            if sys::session_of(pid).is_some() {
                owner::set_rttime_limit(pid, old.0, old.1)?;
            }
            Ok(())
        }
        Change::Attr { pid, tid, old, new } => {
            let now = match (sys::thread_sched(pid, tid), sched::get(tid)) {
                (Ok(_), Ok(now)) => now,
                _ => return Ok(()),
            };
            if sched::holds(&now, &new) {
                // Our own thread runs at the kernel's default slice (the daemon's rule).
                let default_slice = sched::get(0).map_or(0, |a| a.runtime);
                sched::set(tid, &sched::restorable(&old, default_slice))
                    .with_context(|| format!("restoring sched_attr of tid {tid}"))?;
            }
            Ok(())
        }
        Change::Autogroup { old } => {
            sys::set_autogroup(old)?;
            crate::leftovers::autogroup_restored()
        }
        Change::Group(ref g) => g.remove(),
    }
}

/// Every (pid, tid) of the background load.
pub(crate) fn background_threads(leader: i32) -> Vec<(i32, i32)> {
    sys::load_members(leader)
        .into_iter()
        .flat_map(|pid| sys::threads(pid).into_iter().map(move |tid| (pid, tid)))
        .collect()
}

/// Every (pid, tid) of the foreground app.
pub(crate) fn app_threads(pid: i32) -> Vec<(i32, i32)> {
    sys::threads(pid)
        .into_iter()
        .map(|tid| (pid, tid))
        .collect()
}

/// Errors on a thread that exited meanwhile are expected during sweeps.
pub(crate) fn ignore_gone(r: Result<()>) -> Result<()> {
    match r {
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .and_then(|io| io.raw_os_error())
                == Some(libc::ESRCH) =>
        {
            Ok(())
        }
        other => other,
    }
}
