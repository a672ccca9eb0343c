//! The serialisable result of a run: per task, per process, per cgroup, per interaction kind.

use serde::Serialize;
use uxsched_model::{Nanos, SEC};

use super::dist::Summary;

/// Everything measured in one run (see `docs/metrics.md` for each definition).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub workload: String,
    pub sched: String,
    pub seed: u64,
    pub cpus: usize,
    /// Simulated time covered by the log (the `end` the engine reported).
    pub duration_ns: Nanos,
    pub tasks: Vec<TaskReport>,
    /// Aggregates over the tasks of each process, in order of first appearance.
    pub processes: Vec<GroupReport>,
    /// Aggregates over tasks named alike (`hog-1`, `hog-2`, … → `hog-#`), families of two or more.
    pub families: Vec<GroupReport>,
    /// Aggregates over the tasks carrying each workload label (a task counts in each of its
    /// labels), in order of first appearance.
    pub labels: Vec<GroupReport>,
    /// Aggregates over the tasks of each cgroup *and its descendants* (the root holds all tasks).
    pub groups: Vec<GroupReport>,
    pub interactions: Vec<InteractionReport>,
    /// Records that contradicted the collector's view of a task (e.g. a wake-up of a running
    /// task): an engine bug, reported instead of silently ignored.
    #[serde(skip_serializing_if = "Anomalies::is_empty")]
    pub anomalies: Anomalies,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskReport {
    pub id: u32,
    pub name: String,
    pub process: String,
    pub group: String,
    pub policy: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    #[serde(flatten)]
    pub metrics: TallyReport,
}

#[derive(Debug, Clone, Serialize)]
pub struct GroupReport {
    pub name: String,
    pub tasks: usize,
    #[serde(flatten)]
    pub metrics: TallyReport,
}

/// The metrics shared by a task and any aggregate of tasks.
#[derive(Debug, Clone, Serialize)]
pub struct TallyReport {
    pub cpu_ns: Nanos,
    /// CPU time ÷ simulated duration (1.0 = one whole CPU; an aggregate can exceed 1).
    pub cpu_share: f64,
    pub wakeup_latency: Summary,
    /// One sample per completed activation: runnable-not-running time after its first dispatch.
    pub preemption_latency: Summary,
    /// Each individual wait from a preemption to the next dispatch.
    pub preemption_waits: Summary,
    /// Activations still open at the end (not in `preemption_latency`).
    pub unfinished_activations: u64,
    pub csw_voluntary: u64,
    pub csw_involuntary: u64,
    pub migrations: u64,
    pub loops: u64,
    /// Loops completed per simulated second (batch throughput).
    pub loops_per_s: f64,
    pub slack: Summary,
    pub deadline_misses: u64,
    /// Each block-device read's wait in the I/O scheduler before its service began.
    pub io_wait: Summary,
}

#[derive(Debug, Clone, Serialize)]
pub struct InteractionReport {
    pub name: String,
    pub begun: u64,
    /// Begun but not ended when the run stopped (not in `response_time`).
    pub unfinished: u64,
    pub response_time: Summary,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Anomalies {
    pub count: u64,
    /// The first few, described with their time and task.
    pub examples: Vec<String>,
}

impl Anomalies {
    const KEPT: usize = 5;

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub(crate) fn note(&mut self, what: String) {
        self.count += 1;
        if self.examples.len() < Self::KEPT {
            self.examples.push(what);
        }
    }
}

/// Raw per-task accumulators; merging two is exactly pooling their samples and counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tally {
    pub cpu_ns: Nanos,
    pub wakeup_latency: Vec<i64>,
    pub preemption_latency: Vec<i64>,
    pub preemption_waits: Vec<i64>,
    pub unfinished_activations: u64,
    pub csw_voluntary: u64,
    pub csw_involuntary: u64,
    pub migrations: u64,
    pub loops: u64,
    pub slack: Vec<i64>,
    pub deadline_misses: u64,
    pub io_wait: Vec<i64>,
}

impl Tally {
    pub fn merge(&mut self, other: &Tally) {
        self.cpu_ns += other.cpu_ns;
        self.wakeup_latency.extend_from_slice(&other.wakeup_latency);
        self.preemption_latency
            .extend_from_slice(&other.preemption_latency);
        self.preemption_waits
            .extend_from_slice(&other.preemption_waits);
        self.unfinished_activations += other.unfinished_activations;
        self.csw_voluntary += other.csw_voluntary;
        self.csw_involuntary += other.csw_involuntary;
        self.migrations += other.migrations;
        self.loops += other.loops;
        self.slack.extend_from_slice(&other.slack);
        self.deadline_misses += other.deadline_misses;
        self.io_wait.extend_from_slice(&other.io_wait);
    }

    pub fn summarise(&self, duration: Nanos, keep_samples: bool) -> TallyReport {
        let per_s = |n: u64| {
            if duration == 0 {
                0.0
            } else {
                n as f64 * SEC as f64 / duration as f64
            }
        };
        TallyReport {
            cpu_ns: self.cpu_ns,
            cpu_share: if duration == 0 {
                0.0
            } else {
                self.cpu_ns as f64 / duration as f64
            },
            wakeup_latency: Summary::of(&self.wakeup_latency, keep_samples),
            preemption_latency: Summary::of(&self.preemption_latency, keep_samples),
            preemption_waits: Summary::of(&self.preemption_waits, keep_samples),
            unfinished_activations: self.unfinished_activations,
            csw_voluntary: self.csw_voluntary,
            csw_involuntary: self.csw_involuntary,
            migrations: self.migrations,
            loops: self.loops,
            loops_per_s: per_s(self.loops),
            slack: Summary::of(&self.slack, keep_samples),
            deadline_misses: self.deadline_misses,
            io_wait: Summary::of(&self.io_wait, keep_samples),
        }
    }
}
