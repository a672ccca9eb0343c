//! The engine's one event log, and the sinks that consume it.
//!
//! The engine never computes a metric or draws anything: it emits [`Record`]s in time order to
//! a [`Sink`]. Metrics, the Perfetto trace, the Gantt chart and the determinism digest are all
//! sinks, so they can never disagree about what happened.

use serde::Serialize;
use uxsched_model::Nanos;

pub type TaskId = u32;
pub type CpuId = u16;

/// Why the previous task left the CPU at a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LeaveReason {
    /// Still runnable: preempted (involuntary context switch).
    Preempted,
    /// Gave up the CPU while runnable (`sched_yield`); counted as voluntary.
    Yielded,
    /// Blocked: sleep, timer, lock, condition, channel, barrier, suspend (voluntary).
    Blocked,
    /// Moved away by the load balancer while running is impossible; kept for completeness.
    Exited,
}

/// One thing that happened, at time `t` (ns since the start).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Record {
    /// CPU `cpu` stops running `prev` (if any) and starts `next` (if any; `None` = idle).
    Switch {
        t: Nanos,
        cpu: CpuId,
        prev: Option<TaskId>,
        reason: LeaveReason,
        next: Option<TaskId>,
    },
    /// `task` becomes runnable on `cpu`'s run-queue. `waker` is the task whose action woke it
    /// (`None`: a timer, its first start, or the end of a throttled period).
    Wakeup {
        t: Nanos,
        task: TaskId,
        cpu: CpuId,
        waker: Option<TaskId>,
    },
    /// A runnable (not running) task moves between run-queues.
    Migrate {
        t: Nanos,
        task: TaskId,
        from: CpuId,
        to: CpuId,
    },
    /// A frequency domain changes frequency.
    Freq { t: Nanos, domain: u16, khz: u32 },
    /// Interaction `id` (of kind `name`, an index into [`RunMeta::interactions`]) starts on `task`.
    InteractionBegin {
        t: Nanos,
        id: u64,
        name: u32,
        task: TaskId,
    },
    /// Interaction `id` ends on `task`.
    InteractionEnd { t: Nanos, id: u64, task: TaskId },
    /// A periodic task's period ends (rt-app timer): `slack` = period end − end of the work,
    /// negative when the work overran (a deadline miss).
    Period { t: Nanos, task: TaskId, slack: i64 },
    /// A task finished one pass over its phases (batch throughput counts these).
    LoopDone { t: Nanos, task: TaskId },
    /// A task finished its last loop and exited.
    Exit { t: Nanos, task: TaskId },
    /// A block-device read of `task` completed: it waited `wait` in the I/O scheduler's queue
    /// (and behind other requests) before its `service` time on the device.
    Io {
        t: Nanos,
        task: TaskId,
        wait: Nanos,
        service: Nanos,
    },
    /// A cgroup (index into [`RunMeta::groups`]) or, with `group == u32::MAX`, the RT class is
    /// throttled (`on = true`) or unthrottled on `cpu`.
    Throttle {
        t: Nanos,
        group: u32,
        cpu: CpuId,
        on: bool,
    },
}

impl Record {
    pub fn time(&self) -> Nanos {
        match *self {
            Record::Switch { t, .. }
            | Record::Wakeup { t, .. }
            | Record::Migrate { t, .. }
            | Record::Freq { t, .. }
            | Record::InteractionBegin { t, .. }
            | Record::InteractionEnd { t, .. }
            | Record::Period { t, .. }
            | Record::LoopDone { t, .. }
            | Record::Exit { t, .. }
            | Record::Io { t, .. }
            | Record::Throttle { t, .. } => t,
        }
    }
}

/// Static facts about a run that sinks need to name things.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunMeta {
    pub workload: String,
    /// Fair policy name (`cfs`, `eevdf`, …).
    pub sched: String,
    pub seed: u64,
    pub hz: u32,
    pub cpus: usize,
    /// Domain of each CPU.
    pub cpu_domain: Vec<u16>,
    pub domains: Vec<DomainMeta>,
    pub tasks: Vec<TaskMeta>,
    /// cgroup paths; index 0 is the root (`""`).
    pub groups: Vec<String>,
    /// Interaction kinds, indexed by `Record::InteractionBegin::name`.
    pub interactions: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct DomainMeta {
    pub name: String,
    pub initial_khz: u32,
    pub max_khz: u32,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TaskMeta {
    pub name: String,
    pub process: String,
    /// cgroup index into [`RunMeta::groups`].
    pub group: u32,
    /// `SCHED_OTHER nice 0`, `SCHED_FIFO 50`, … for tables.
    pub policy: String,
    pub labels: Vec<String>,
    /// Android low-memory-killer class (seed 001 Table 1), if the workload gives one.
    pub oom_adj: Option<i32>,
}

/// A consumer of the event log.
pub trait Sink {
    /// Called once before the first record.
    fn begin(&mut self, _meta: &RunMeta) {}
    /// Called for every record, in non-decreasing time order.
    fn record(&mut self, rec: &Record);
    /// Called once after the last record; `end` is the simulated end time.
    fn end(&mut self, _end: Nanos) {}
}

/// Fans one log out to several sinks.
#[derive(Default)]
pub struct Tee<'a> {
    pub sinks: Vec<&'a mut dyn Sink>,
}

impl Sink for Tee<'_> {
    fn begin(&mut self, meta: &RunMeta) {
        for s in &mut self.sinks {
            s.begin(meta);
        }
    }
    fn record(&mut self, rec: &Record) {
        for s in &mut self.sinks {
            s.record(rec);
        }
    }
    fn end(&mut self, end: Nanos) {
        for s in &mut self.sinks {
            s.end(end);
        }
    }
}

/// Keeps every record in memory (tests, small runs).
#[derive(Default, Debug)]
pub struct VecSink {
    pub meta: RunMeta,
    pub records: Vec<Record>,
    pub end: Nanos,
}

impl Sink for VecSink {
    fn begin(&mut self, meta: &RunMeta) {
        self.meta = meta.clone();
    }
    fn record(&mut self, rec: &Record) {
        self.records.push(rec.clone());
    }
    fn end(&mut self, end: Nanos) {
        self.end = end;
    }
}
