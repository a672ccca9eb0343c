//! What the tracker tells its consumer: the delay-critical threads, each with its identity,
//! its kind, how sure the tracker is and why, and the current (or last) episode.

use crate::store::Pair;
use crate::wire::Task;
use serde::Serialize;

/// A thread named so it cannot be confused with a later one that reuses its tid: tid, process
/// and start time in clock ticks (`/proc/<tid>/stat` field 22) — the daemon's `TaskId` triple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ThreadId {
    pub tid: i32,
    pub tgid: i32,
    pub start: u64,
}

impl From<&Task> for ThreadId {
    fn from(t: &Task) -> Self {
        ThreadId {
            tid: t.tid as i32,
            tgid: t.tgid as i32,
            start: t.start_ticks(),
        }
    }
}

/// Whose thread it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A thread of the foreground app.
    App,
    /// A thread of another process on the path (a service, a shell, the X server).
    Partner,
    /// A kernel thread on the path (kworker, ksoftirqd): shared, see docs/mechanisms.md.
    KernelWorker,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::App => "app",
            Kind::Partner => "partner",
            Kind::KernelWorker => "kernel-worker",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        [Kind::App, Kind::Partner, Kind::KernelWorker]
            .into_iter()
            .find(|k| k.name() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Woken on the episode's path; kept only if the path leads back (seed 003's "too late"
    /// problem: boost now, decide when the episode resolves).
    Provisional,
    Confirmed,
}

/// Why a thread is in the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// On a cycle through the UI thread, or a path from it to the display, in an episode.
    Observed,
    /// A ⟨context, decision⟩ pair learned earlier said so.
    Learned,
    /// A render/GL thread by its name.
    Name,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Member {
    pub id: ThreadId,
    pub comm: String,
    pub kind: Kind,
    pub status: Status,
    pub source: Source,
    /// When the tracker decided (CLOCK_MONOTONIC ns, the kernel's event time).
    pub since_ns: u64,
    /// On-CPU time in the kernel's current episode (sched_switch), when it was reached in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub episode_cpu_ns: Option<u64>,
}

/// How an episode ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EndReason {
    /// The work woke a display thread and nothing handed to another process of the app's
    /// family was still under way (the pipeline rule, episode.rs).
    Display,
    /// Nothing reached the display within the timeout.
    Timeout,
    /// A new input started another episode first.
    Superseded,
    /// The foreground changed.
    Unfocused,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EpisodeInfo {
    pub epoch: u64,
    /// The user-interactive task (seed 000): the app thread the input woke.
    pub ui: ThreadId,
    pub ui_comm: String,
    /// The input thread, `None` when a device interrupt woke the app.
    pub input: Option<ThreadId>,
    pub start_ns: u64,
    /// `None` while open.
    pub end_ns: Option<u64>,
    pub end: Option<EndReason>,
    /// Distinct waker→wakee edges seen.
    pub edges: usize,
}

/// One `poll()`'s answer.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    /// The open episode, else the last one resolved.
    pub episode: Option<EpisodeInfo>,
    pub critical: Vec<Member>,
    /// The learned pairs of the foreground app (in memory).
    pub learned: Vec<Pair>,
    /// Episodes resolved since the foreground was set.
    pub episodes: u64,
    /// Events lost (kernel ring buffer full, or userspace backlog over its bound).
    pub dropped_events: u64,
}
