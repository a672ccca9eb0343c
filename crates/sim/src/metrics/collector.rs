//! [`MetricsCollector`]: the sink that turns the event log into a [`Report`].
//!
//! Each task is followed through a small state machine (sleeping → runnable → running …) and
//! through its *activation*: the span from a wake-up (a request arrives) to the block, yield or
//! exit that completes it. The definitions are VISION.md's "Measurement definitions"; the
//! precise rules are in `docs/metrics.md`.

use std::collections::BTreeMap;

use uxsched_model::Nanos;

use super::aggregate::{KindOutcome, RunOutcome};
use super::report::{Anomalies, Report, Tally};
use crate::log::{CpuId, LeaveReason, Record, RunMeta, Sink, TaskId};

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Not runnable (before its first wake-up, or blocked).
    Sleeping,
    /// On a run-queue since `since`; `woken` when that began with a wake-up not yet served.
    Runnable {
        since: Nanos,
        woken: bool,
    },
    Running {
        since: Nanos,
        cpu: CpuId,
    },
    Exited,
}

/// The request in progress: how long it has waited runnable since its first dispatch.
#[derive(Debug, Clone, Copy)]
struct Activation {
    dispatched: bool,
    preempted_ns: Nanos,
}

#[derive(Debug, Clone)]
struct TaskTrack {
    state: State,
    activation: Option<Activation>,
    tally: Tally,
}

/// Collects every metric of a run; call [`MetricsCollector::report`] after the run ended.
#[derive(Debug, Default)]
pub struct MetricsCollector {
    meta: RunMeta,
    tasks: Vec<TaskTrack>,
    kinds: Vec<KindOutcome>,
    /// Open interactions by id: (kind, begin time).
    open: BTreeMap<u64, (u32, Nanos)>,
    end: Nanos,
    /// Time of the last record, to catch a log that goes back in time.
    last_t: Nanos,
    anomalies: Anomalies,
}

impl MetricsCollector {
    pub fn new() -> Self {
        Self::default()
    }

    fn task(&mut self, id: TaskId) -> &mut TaskTrack {
        let i = id as usize;
        if i >= self.tasks.len() {
            self.tasks.resize(
                i + 1,
                TaskTrack {
                    state: State::Sleeping,
                    activation: None,
                    tally: Tally::default(),
                },
            );
        }
        &mut self.tasks[i]
    }

    fn kind(&mut self, name: u32) -> &mut KindOutcome {
        let i = name as usize;
        if i >= self.kinds.len() {
            self.kinds.resize(i + 1, KindOutcome::default());
        }
        &mut self.kinds[i]
    }

    fn wakeup(&mut self, t: Nanos, task: TaskId) {
        let tr = self.task(task);
        match tr.state {
            State::Sleeping => {
                tr.state = State::Runnable {
                    since: t,
                    woken: true,
                };
                tr.activation = Some(Activation {
                    dispatched: false,
                    preempted_ns: 0,
                });
            }
            other => self
                .anomalies
                .note(format!("t={t}: wake-up of task {task} that is {other:?}")),
        }
    }

    fn switch_out(&mut self, t: Nanos, cpu: CpuId, task: TaskId, reason: LeaveReason) {
        let tr = self.task(task);
        let State::Running { since, cpu: on } = tr.state else {
            let state = tr.state;
            self.anomalies.note(format!(
                "t={t}: cpu {cpu} switches out task {task} that is {state:?}"
            ));
            return;
        };
        tr.tally.cpu_ns += t.saturating_sub(since);
        match reason {
            LeaveReason::Preempted => {
                tr.tally.csw_involuntary += 1;
                tr.state = State::Runnable {
                    since: t,
                    woken: false,
                };
            }
            LeaveReason::Yielded => {
                tr.tally.csw_voluntary += 1;
                close_activation(tr);
                tr.state = State::Runnable {
                    since: t,
                    woken: false,
                };
            }
            LeaveReason::Blocked => {
                tr.tally.csw_voluntary += 1;
                close_activation(tr);
                tr.state = State::Sleeping;
            }
            LeaveReason::Exited => {
                close_activation(tr);
                tr.state = State::Exited;
            }
        }
        if on != cpu {
            self.anomalies.note(format!(
                "t={t}: cpu {cpu} switches out task {task} running on cpu {on}"
            ));
        }
    }

    fn switch_in(&mut self, t: Nanos, cpu: CpuId, task: TaskId) {
        let tr = self.task(task);
        let State::Runnable { since, woken } = tr.state else {
            let state = tr.state;
            // Follow the engine anyway so later records still make sense.
            tr.state = State::Running { since: t, cpu };
            self.anomalies.note(format!(
                "t={t}: cpu {cpu} runs task {task} that is {state:?}"
            ));
            return;
        };
        let waited = t.saturating_sub(since);
        match tr.activation.as_mut() {
            Some(a) if woken && !a.dispatched => {
                tr.tally.wakeup_latency.push(waited as i64);
                a.dispatched = true;
            }
            Some(a) => {
                a.preempted_ns += waited;
                tr.tally.preemption_waits.push(waited as i64);
            }
            // Runnable without a request: after a yield the next dispatch opens a new one.
            None => {
                tr.activation = Some(Activation {
                    dispatched: true,
                    preempted_ns: 0,
                })
            }
        }
        tr.state = State::Running { since: t, cpu };
    }

    /// The task leaves and is picked again at once: like Linux, not a context switch. A yield
    /// still completes the request, and the task carries on with a new one.
    fn reselect(&mut self, t: Nanos, cpu: CpuId, task: TaskId, reason: LeaveReason) {
        match reason {
            LeaveReason::Preempted => {}
            LeaveReason::Yielded => {
                let tr = self.task(task);
                close_activation(tr);
                tr.activation = Some(Activation {
                    dispatched: true,
                    preempted_ns: 0,
                });
            }
            LeaveReason::Blocked | LeaveReason::Exited => self.anomalies.note(format!(
                "t={t}: cpu {cpu} switches from task {task} ({reason:?}) to the same task"
            )),
        }
    }

    /// The task's last request is complete. The engine logs `Exit` while the task still holds
    /// its CPU; the `Switch` that follows takes it off (and charges its time).
    fn exit(&mut self, task: TaskId) {
        let tr = self.task(task);
        close_activation(tr);
        if !matches!(tr.state, State::Running { .. }) {
            tr.state = State::Exited;
        }
    }

    /// The report; `keep_samples` includes every raw sample (for plots; large).
    pub fn report(&self, keep_samples: bool) -> Report {
        let tallies: Vec<Tally> = self.tasks.iter().map(|t| t.tally.clone()).collect();
        let run = RunOutcome {
            meta: &self.meta,
            end: self.end,
            tallies: &tallies,
            kinds: &self.kinds,
            anomalies: &self.anomalies,
        };
        run.report(keep_samples)
    }
}

/// Ends the task's current request, recording its preemption latency.
fn close_activation(tr: &mut TaskTrack) {
    if let Some(a) = tr.activation.take() {
        if a.dispatched {
            tr.tally.preemption_latency.push(a.preempted_ns as i64);
        }
    }
}

impl Sink for MetricsCollector {
    fn begin(&mut self, meta: &RunMeta) {
        *self = MetricsCollector {
            meta: meta.clone(),
            ..MetricsCollector::default()
        };
        if let Some(last) = meta.tasks.len().checked_sub(1) {
            self.task(last as TaskId);
        }
        self.kinds = vec![KindOutcome::default(); meta.interactions.len()];
    }

    fn record(&mut self, rec: &Record) {
        let t = rec.time();
        if t < self.last_t {
            let last = self.last_t;
            self.anomalies.note(format!(
                "t={t}: record after one at t={last} (time went back)"
            ));
        }
        self.last_t = self.last_t.max(t);
        match *rec {
            Record::Switch {
                t,
                cpu,
                prev: Some(p),
                reason,
                next: Some(n),
            } if p == n => self.reselect(t, cpu, p, reason),
            Record::Switch {
                t,
                cpu,
                prev,
                reason,
                next,
            } => {
                if let Some(p) = prev {
                    self.switch_out(t, cpu, p, reason);
                }
                if let Some(n) = next {
                    self.switch_in(t, cpu, n);
                }
            }
            Record::Wakeup { t, task, .. } => self.wakeup(t, task),
            Record::Migrate { task, .. } => self.task(task).tally.migrations += 1,
            Record::InteractionBegin { t, id, name, .. } => {
                self.kind(name).begun += 1;
                if self.open.insert(id, (name, t)).is_some() {
                    self.anomalies
                        .note(format!("t={t}: interaction {id} begun twice"));
                }
            }
            Record::InteractionEnd { t, id, .. } => match self.open.remove(&id) {
                Some((kind, begin)) => self
                    .kind(kind)
                    .response
                    .push(t.saturating_sub(begin) as i64),
                None => self
                    .anomalies
                    .note(format!("t={t}: interaction {id} ended but never begun")),
            },
            Record::Period { task, slack, .. } => {
                let tally = &mut self.task(task).tally;
                tally.slack.push(slack);
                tally.deadline_misses += u64::from(slack < 0);
            }
            Record::LoopDone { task, .. } => self.task(task).tally.loops += 1,
            Record::Io { task, wait, .. } => self.task(task).tally.io_wait.push(wait as i64),
            Record::Exit { task, .. } => self.exit(task),
            Record::Freq { .. } | Record::Throttle { .. } => {}
        }
    }

    fn end(&mut self, end: Nanos) {
        self.end = end;
        for tr in &mut self.tasks {
            if let State::Running { since, .. } = tr.state {
                tr.tally.cpu_ns += end.saturating_sub(since);
                tr.state = State::Runnable {
                    since: end,
                    woken: false,
                };
            }
            if tr.activation.take().is_some() {
                tr.tally.unfinished_activations += 1;
            }
        }
        for (kind, _) in std::mem::take(&mut self.open).into_values() {
            self.kind(kind).unfinished += 1;
        }
    }
}
