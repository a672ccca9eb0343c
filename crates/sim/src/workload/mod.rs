//! The workload model every reader produces and the engine consumes.
//!
//! A workload is a platform (optional), a tree of CPU cgroups and a set of tasks. Each task runs
//! its phases in order, `loops` times; each phase repeats its events `loops` times — the shape of
//! rt-app's JSON, which the native TOML format shares (see `docs/workloads.md`).
//! Readers: [`native`] (TOML) and [`rtapp`] (rt-app JSON); [`load`] picks one by extension and
//! [`builtin`] returns the scenarios shipped in `scenarios/`.

use std::path::Path;

use serde::Serialize;
use uxsched_model::Nanos;

pub mod native;
pub mod rtapp;
mod validate;

pub use validate::{Invalid, Subject};

pub use crate::platform::PlatformSpec;

/// A whole simulated system: what runs, where, and for how long.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Workload {
    pub name: String,
    /// Simulated duration; `None` means "until every task has finished" (bounded by the CLI).
    pub duration: Option<Nanos>,
    /// CPUs and frequency domains; `None` lets the CLI pick (`--cpus`).
    pub platform: Option<PlatformSpec>,
    /// CPU cgroups, parents before children.
    pub groups: Vec<GroupSpec>,
    /// Tasks (threads) after instance expansion; names are unique.
    pub tasks: Vec<TaskSpec>,
    /// Files on the block device that `read` events go through the page cache for.
    pub files: Vec<FileSpec>,
}

/// A file on the simulated block device, read through the page cache.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FileSpec {
    pub name: String,
    pub size: u64,
}

/// A CPU cgroup. `path` is slash-separated (`"bg"`, `"apps/fg"`); the parent is the prefix and
/// must be declared earlier. The root group is implicit and has the path `""`.
#[derive(Debug, Clone, Serialize)]
pub struct GroupSpec {
    pub path: String,
    /// Load weight of the group entity in its parent, in `cpu.shares` units (1024 = nice 0;
    /// Android's background group uses 52).
    pub shares: u64,
    /// CFS bandwidth: at most `quota` of CPU time per `period`, summed over all CPUs.
    pub bandwidth: Option<Bandwidth>,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Bandwidth {
    pub quota: Nanos,
    pub period: Nanos,
}

/// Scheduling class and its parameter, as `sched_setattr` would set them.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub enum SchedPolicy {
    /// SCHED_OTHER (SCHED_NORMAL) with a nice value −20..=19.
    Normal { nice: i32 },
    /// SCHED_BATCH: fair class, never preempts on wake-up.
    Batch { nice: i32 },
    /// SCHED_IDLE: fair class with the minimum weight (3).
    Idle,
    /// SCHED_FIFO, priority 1..=99.
    Fifo { prio: u8 },
    /// SCHED_RR, priority 1..=99, 100 ms quantum by default.
    Rr { prio: u8 },
}

impl Default for SchedPolicy {
    fn default() -> Self {
        SchedPolicy::Normal { nice: 0 }
    }
}

/// One thread.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TaskSpec {
    pub name: String,
    /// The process (thread group) it belongs to; defaults to the task's own name.
    pub process: String,
    pub policy: SchedPolicy,
    /// EEVDF custom slice (`sched_attr.sched_runtime`), clamped by the engine to 0.1–100 ms.
    pub slice: Option<Nanos>,
    /// Allowed CPUs; `None` = all.
    pub affinity: Option<Vec<usize>>,
    /// cgroup path; `None` = root.
    pub group: Option<String>,
    /// Start offset from time 0.
    pub delay: Nanos,
    /// How many passes over `phases`; `None` = forever.
    pub loops: Option<u64>,
    pub phases: Vec<Phase>,
    /// Free-form roles used by mechanisms and reports: `ui`, `render`, `input`, `hog`,
    /// `delay-critical`, `foreground`, …
    pub labels: Vec<String>,
    /// Android low-memory-killer class (`oom_adj`, seed 001 Table 1); 0 = FOREGROUND_APP.
    pub oom_adj: Option<i32>,
    /// I/O priority (`ioprio_set`); `None` = derived from the CPU policy and nice, as the kernel
    /// does ([`crate::io::IoPrio::of_policy`]).
    pub ioprio: Option<crate::io::IoPrio>,
}

/// A sequence of events repeated `loops` times.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Phase {
    pub name: String,
    pub loops: u64,
    pub events: Vec<Event>,
    /// CPU affinity while this phase runs (rt-app's phase-level `cpus`); `None` = the task's.
    pub affinity: Option<Vec<usize>>,
}

/// What a task does, one step at a time. Names of timers, locks, conditions, barriers,
/// suspend points and channels are global to the workload, as in rt-app.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub enum Event {
    /// CPU work measured in reference-CPU nanoseconds (capacity 1024 at the platform's reference
    /// frequency): it takes longer on a slower CPU or at a lower frequency (rt-app `run`).
    Run(Nanos),
    /// Busy for a wall-clock duration whatever the CPU speed (rt-app `runtime`).
    Runtime(Nanos),
    /// Block for a duration (rt-app `sleep`).
    Sleep(Nanos),
    /// A synchronous block-device read needing this much device time: the task blocks until the
    /// simulated device ([`crate::io`]) has served it, queued by the I/O scheduler under the
    /// task's I/O priority.
    Io(Nanos),
    /// A buffered `read()` of `bytes` from the task's position in `file`, through the page cache
    /// with the kernel's on-demand read-ahead; it blocks only for pages not yet in memory. A read
    /// at the end of the file starts over from the beginning (the file is opened again).
    Read {
        file: String,
        bytes: u64,
    },
    /// Block until the next period of the named timer (rt-app `timer`); the timer is drift-free.
    /// Each arrival closes an rt-app period: slack = period end − end of the work before it.
    Timer {
        name: String,
        period: Nanos,
        absolute: bool,
    },
    Lock(String),
    Unlock(String),
    /// Release `mutex`, wait for `cond`, re-acquire `mutex` (rt-app `wait`).
    Wait {
        cond: String,
        mutex: String,
    },
    /// Wake one waiter of `cond` (rt-app `signal`).
    Signal(String),
    /// Wake all waiters of `cond` (rt-app `broad`).
    Broadcast(String),
    /// Signal `cond` and wait on it atomically (rt-app `sync`).
    SignalWait {
        cond: String,
        mutex: String,
    },
    /// Wait until every task that uses the barrier has arrived (rt-app `barrier`).
    Barrier(String),
    /// Block until the named point is resumed (rt-app `suspend`).
    Suspend(String),
    /// Wake every task suspended on the named point (rt-app `resume`).
    Resume(String),
    /// Post a message on a channel (a pipe); carries the sender's current interaction.
    Send(String),
    /// Take a message from a channel, blocking while it is empty; adopts the message's interaction.
    Recv(String),
    /// Give up the CPU (`sched_yield`).
    Yield,
    /// A stimulus: starts a new interaction of this name, carried by this task from now on.
    Begin(String),
    /// The end of the response to the interaction this task carries (its name must match).
    End(String),
}

impl Event {
    /// The timer, lock, condition, barrier, suspend point, channel or interaction the event
    /// names (for a `wait`/`sync`, the condition); `None` for run/runtime/sleep/yield.
    pub fn name_mut(&mut self) -> Option<&mut String> {
        match self {
            Event::Timer { name, .. }
            | Event::Lock(name)
            | Event::Unlock(name)
            | Event::Signal(name)
            | Event::Broadcast(name)
            | Event::Barrier(name)
            | Event::Suspend(name)
            | Event::Resume(name)
            | Event::Send(name)
            | Event::Recv(name)
            | Event::Begin(name)
            | Event::End(name) => Some(name),
            Event::Read { file, .. } => Some(file),
            Event::Wait { cond, .. } | Event::SignalWait { cond, .. } => Some(cond),
            Event::Run(_) | Event::Runtime(_) | Event::Sleep(_) | Event::Io(_) | Event::Yield => {
                None
            }
        }
    }

    /// rt-app-style name of the event kind, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Run(_) => "run",
            Event::Runtime(_) => "runtime",
            Event::Sleep(_) => "sleep",
            Event::Io(_) => "io",
            Event::Read { .. } => "read",
            Event::Timer { .. } => "timer",
            Event::Lock(_) => "lock",
            Event::Unlock(_) => "unlock",
            Event::Wait { .. } => "wait",
            Event::Signal(_) => "signal",
            Event::Broadcast(_) => "broad",
            Event::SignalWait { .. } => "sync",
            Event::Barrier(_) => "barrier",
            Event::Suspend(_) => "suspend",
            Event::Resume(_) => "resume",
            Event::Send(_) => "send",
            Event::Recv(_) => "recv",
            Event::Yield => "yield",
            Event::Begin(_) => "begin",
            Event::End(_) => "end",
        }
    }
}

/// A workload that could not be read, with where and what.
#[derive(Debug, thiserror::Error)]
#[error("{location}: {message}")]
pub struct WorkloadError {
    /// `file[:line[:col]]` and, where known, `task NAME, phase NAME, event KIND`.
    pub location: String,
    pub message: String,
}

impl WorkloadError {
    pub fn new(location: impl Into<String>, message: impl Into<String>) -> Self {
        WorkloadError {
            location: location.into(),
            message: message.into(),
        }
    }
}

/// Read a workload file, choosing the reader by extension: `.toml` is the native format,
/// `.json` is rt-app's.
pub fn load(path: &Path) -> Result<Workload, WorkloadError> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("toml") => native::load(path),
        Some("json") => rtapp::load(path),
        _ => Err(WorkloadError::new(
            path.display().to_string(),
            "unknown workload format: use a .toml (native) or .json (rt-app) file",
        )),
    }
}

/// `(name, text)` of `scenarios/NAME.toml`, compiled in.
macro_rules! scenario {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!("../../../../scenarios/", $name, ".toml")),
        )
    };
}

/// The scenarios compiled into the binary, by name (the file stem in `scenarios/`).
pub const BUILTINS: &[(&str, &str)] = &[
    scenario!("showcase"),
    scenario!("phone"),
    scenario!("server64"),
    scenario!("example1"),
    scenario!("example2"),
    scenario!("pipeline"),
    scenario!("mutex"),
    scenario!("barrier"),
    scenario!("reader"),
];

/// A built-in scenario by name (see [`BUILTINS`]).
pub fn builtin(name: &str) -> Result<Workload, WorkloadError> {
    let (_, text) = BUILTINS.iter().find(|(n, _)| *n == name).ok_or_else(|| {
        let names: Vec<&str> = BUILTINS.iter().map(|(n, _)| *n).collect();
        WorkloadError::new(
            format!("builtin:{name}"),
            format!("no built-in workload `{name}`; known: {}", names.join(", ")),
        )
    })?;
    native::parse(text, &format!("scenarios/{name}.toml"))
}
