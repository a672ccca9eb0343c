//! Hand-built event logs for the sink tests: three tasks A, B, C and a known story.
#![allow(dead_code)]

use uxsched_sim::log::{DomainMeta, LeaveReason, Record, RunMeta, Sink, TaskId, TaskMeta};
use uxsched_sim::metrics::{MetricsCollector, Report};

pub use LeaveReason::{Blocked, Preempted, Yielded};

pub fn task(name: &str, process: &str, group: u32) -> TaskMeta {
    TaskMeta {
        name: name.into(),
        process: process.into(),
        group,
        policy: "SCHED_OTHER nice 0".into(),
        labels: vec![],
        oom_adj: None,
    }
}

pub fn meta(tasks: Vec<TaskMeta>) -> RunMeta {
    RunMeta {
        workload: "synthetic".into(),
        sched: "cfs".into(),
        seed: 1,
        hz: 250,
        cpus: 2,
        cpu_domain: vec![0, 0],
        domains: vec![DomainMeta {
            name: "little".into(),
            initial_khz: 1_000_000,
            max_khz: 1_800_000,
        }],
        tasks,
        groups: vec!["".into(), "/bg".into(), "/bg/low".into()],
        interactions: vec!["tap".into(), "frame".into()],
    }
}

pub fn sw(
    t: u64,
    cpu: u16,
    prev: Option<TaskId>,
    reason: LeaveReason,
    next: Option<TaskId>,
) -> Record {
    Record::Switch {
        t,
        cpu,
        prev,
        reason,
        next,
    }
}

pub fn wake(t: u64, task: TaskId, cpu: u16) -> Record {
    Record::Wakeup {
        t,
        task,
        cpu,
        waker: None,
    }
}

pub fn feed(sink: &mut dyn Sink, meta: &RunMeta, records: &[Record], end: u64) {
    sink.begin(meta);
    for r in records {
        sink.record(r);
    }
    sink.end(end);
}

pub fn report(meta: &RunMeta, records: &[Record], end: u64) -> Report {
    let mut m = MetricsCollector::new();
    feed(&mut m, meta, records, end);
    m.report(false)
}

/// Tasks A=0, B=1, C=2. A is woken at 0 and dispatched at 100 (wake-up latency 100), preempted
/// by B at 1100, back at 2100 (wait 1000), preempted by C at 3000, back at 3500 (wait 500) and
/// blocks at 4000: one activation with preemption latency 1500. A is woken again at 5000 on
/// CPU 0, migrated to CPU 1, runs at 5200 (latency 200), yields at 6000 (activation with 0),
/// runs again at 6300 (new activation, no wake-up) and blocks at 7000 (another 0).
pub fn two_preemptions() -> Vec<Record> {
    vec![
        wake(0, 0, 0),
        sw(100, 0, None, Blocked, Some(0)),
        wake(1000, 1, 0),
        sw(1100, 0, Some(0), Preempted, Some(1)),
        sw(2100, 0, Some(1), Blocked, Some(0)),
        wake(2900, 2, 0),
        sw(3000, 0, Some(0), Preempted, Some(2)),
        sw(3500, 0, Some(2), Blocked, Some(0)),
        sw(4000, 0, Some(0), Blocked, None),
        wake(5000, 0, 0),
        Record::Migrate {
            t: 5000,
            task: 0,
            from: 0,
            to: 1,
        },
        sw(5200, 1, None, Blocked, Some(0)),
        sw(6000, 1, Some(0), Yielded, None),
        sw(6300, 1, None, Blocked, Some(0)),
        sw(7000, 1, Some(0), Blocked, None),
    ]
}

pub fn abc_meta() -> RunMeta {
    meta(vec![
        task("A", "app", 0),
        task("B", "app", 1),
        task("C", "daemon", 2),
    ])
}

pub fn stats(s: &uxsched_sim::metrics::Summary) -> uxsched_sim::metrics::Stats {
    s.stats.expect("distribution has samples")
}

/// Interaction `id` (kind 0, "tap") begun on `from` at `begin` and ended on `to` at `end`.
pub fn tap(id: u64, begin: u64, from: TaskId, end: u64, to: TaskId) -> [Record; 2] {
    [
        Record::InteractionBegin {
            t: begin,
            id,
            name: 0,
            task: from,
        },
        Record::InteractionEnd {
            t: end,
            id,
            task: to,
        },
    ]
}
