//! I/O priorities and schedulers of the block device (seed 003 §5.2).
//!
//! The device, driven by the engine (`engine/blockdev.rs`), serves one request at a time (an SD
//! card / eMMC without command queueing), each for its service time. Requests are tagged with
//! the issuing task's ioprio (class RT / BE 0–7 / idle; a stream is one task). The scheduler
//! picks the next request when the device is free: [`Noop`] (one FIFO queue) or [`Cfq`]
//! (classes, per-stream queues, time slices, idling).

mod cfq;

pub use cfq::Cfq;

use std::collections::VecDeque;
use uxsched_model::Nanos;

/// `ioprio` class and level (`ioprio_set`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum IoPrio {
    RealTime(u8),
    BestEffort(u8),
    Idle,
}

impl IoPrio {
    /// A thread that never called `ioprio_set`: the class follows its CPU policy and the level
    /// its nice, as the kernel derives them (`task_nice_ioclass`, `task_nice_ioprio`, used by
    /// CFQ's `cfq_init_prio_data`): SCHED_IDLE → idle, FIFO/RR → real-time, others best-effort;
    /// level = (nice + 20) / 5, so nice 0 (also an RT task's nice) is level 4.
    pub fn of_policy(policy: crate::workload::SchedPolicy) -> IoPrio {
        use crate::workload::SchedPolicy::*;
        match policy {
            Normal { nice } | Batch { nice } => IoPrio::BestEffort(((nice + 20) / 5) as u8),
            Idle => IoPrio::Idle,
            Fifo { .. } | Rr { .. } => IoPrio::RealTime(4),
        }
    }

    /// `rt0`…`rt7`, `be0`…`be7` or `idle` (the notation of `ionice -c1 -n0`).
    pub fn parse(text: &str) -> Result<IoPrio, String> {
        let level = |digits: &str| match digits.parse::<u8>() {
            Ok(l) if l <= 7 => Ok(l),
            _ => Err(format!("I/O priority `{text}`: the level must be 0..=7")),
        };
        if text == "idle" {
            Ok(IoPrio::Idle)
        } else if let Some(l) = text.strip_prefix("rt") {
            Ok(IoPrio::RealTime(level(l)?))
        } else if let Some(l) = text.strip_prefix("be") {
            Ok(IoPrio::BestEffort(level(l)?))
        } else {
            Err(format!(
                "I/O priority `{text}`: expected rt0..rt7, be0..be7 or idle"
            ))
        }
    }

    /// 0 = real-time, 1 = best-effort, 2 = idle (CFQ serves lower first).
    pub fn class_rank(self) -> u8 {
        match self {
            IoPrio::RealTime(_) => 0,
            IoPrio::BestEffort(_) => 1,
            IoPrio::Idle => 2,
        }
    }

    /// Level 0–7 (idle: 7).
    pub fn level(self) -> u8 {
        match self {
            IoPrio::RealTime(l) | IoPrio::BestEffort(l) => l.min(7),
            IoPrio::Idle => 7,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    /// Unique per device, in submission order.
    pub id: u64,
    /// The issuing task: CFQ keeps one queue per stream.
    pub stream: usize,
    pub prio: IoPrio,
    pub service: Nanos,
    pub submitted: Nanos,
}

/// What the scheduler wants the device to do next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    Serve(Request),
    /// Keep the device idle until this time (CFQ's idle window), then ask again.
    IdleUntil(Nanos),
    Nothing,
}

pub trait IoScheduler {
    fn add(&mut self, r: Request, now: Nanos);
    /// The device is free: what next?
    fn next(&mut self, now: Nanos) -> Decision;
    /// A request of `stream` completed.
    fn completed(&mut self, _r: &Request, _now: Nanos) {}
}

/// Names accepted by [`scheduler_by_name`].
pub const IO_SCHEDULER_NAMES: &[&str] = &["cfq", "noop"];

/// An I/O scheduler for a device shared by `streams` request sources (one per task), taking
/// its own `NAME.` tunables from `params` (`cfq.slice_sync`, `cfq.slice_idle`).
pub fn scheduler_by_name(
    name: &str,
    streams: usize,
    mut params: crate::policy::Params,
) -> Result<Box<dyn IoScheduler>, String> {
    let sched: Box<dyn IoScheduler> = match name {
        "cfq" => {
            let mut c = Cfq::new(streams);
            if let Some(v) = params.take_duration("cfq.slice_sync")? {
                c.slice_sync = v;
            }
            if let Some(v) = params.take_duration("cfq.slice_idle")? {
                c.slice_idle = v;
            }
            Box::new(c)
        }
        "noop" => Box::new(Noop::default()),
        _ => {
            return Err(format!(
                "unknown I/O scheduler `{name}` (valid: {})",
                IO_SCHEDULER_NAMES.join(", ")
            ))
        }
    };
    params.finish(name)?;
    Ok(sched)
}

/// One FIFO queue for everyone (`noop`).
#[derive(Default)]
pub struct Noop(VecDeque<Request>);

impl IoScheduler for Noop {
    fn add(&mut self, r: Request, _now: Nanos) {
        self.0.push_back(r);
    }
    fn next(&mut self, _now: Nanos) -> Decision {
        self.0
            .pop_front()
            .map_or(Decision::Nothing, Decision::Serve)
    }
}
