//! Building blocks the seed experiments share: task builders, one run, and facts read off the log.

use crate::engine::{Mechanism, Sim, SimConfig};
use crate::log::{LeaveReason, Record, VecSink};
use crate::platform::PlatformSpec;
use crate::policy::cfs::CfsTunables;
use crate::policy::Params;
use crate::workload::{Event, Phase, SchedPolicy, TaskSpec, Workload};
use uxsched_model::{Nanos, MS};

pub fn nice(n: i32) -> SchedPolicy {
    SchedPolicy::Normal { nice: n }
}

/// A task running `events` once per loop, forever unless `loops` is set.
pub fn task(name: &str, policy: SchedPolicy, events: Vec<Event>) -> TaskSpec {
    TaskSpec {
        name: name.into(),
        process: name.into(),
        policy,
        phases: vec![Phase {
            name: "main".into(),
            loops: 1,
            events,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A CPU hog (an infinite loop).
pub fn hog(name: &str, policy: SchedPolicy) -> TaskSpec {
    task(name, policy, vec![Event::Run(1000 * MS)])
}

/// One hackbench group (`hackbench.c`'s default: 20 senders and 20 receivers, 40 tasks): every
/// sender writes a message to each receiver in turn; each receiver reads its pipe. `msg_cost` is
/// the CPU of one write or one read. The pipes are unbounded here (the kernel's block a writer
/// once 64 KiB are queued), so senders never block. `loops` = messages per sender to each
/// receiver (`None`: repeat forever, as seed 002 keeps hackbench running).
pub fn hackbench_group(
    g: usize,
    policy: SchedPolicy,
    msg_cost: Nanos,
    loops: Option<u64>,
) -> Vec<TaskSpec> {
    const SIDE: usize = 20;
    let chan = |r: usize| format!("hb{g}.pipe{r}");
    let mut out = Vec::with_capacity(2 * SIDE);
    for s in 0..SIDE {
        let mut events = Vec::with_capacity(2 * SIDE);
        for r in 0..SIDE {
            events.push(Event::Run(msg_cost));
            events.push(Event::Send(chan(r)));
        }
        let mut t = task(&format!("hb{g}.snd{s}"), policy, events);
        t.process = format!("hackbench{g}");
        t.loops = loops;
        t.labels = vec!["hackbench".into()];
        out.push(t);
    }
    for r in 0..SIDE {
        let mut t = task(
            &format!("hb{g}.rcv{r}"),
            policy,
            vec![Event::Recv(chan(r)), Event::Run(msg_cost)],
        );
        t.process = format!("hackbench{g}");
        // A receiver reads one message from each sender per sender loop.
        t.loops = loops.map(|l| l * SIDE as u64);
        t.labels = vec!["hackbench".into(), "receiver".into()];
        out.push(t);
    }
    out
}

/// Everything about one run besides the workload.
#[derive(Clone)]
pub struct RunSpec {
    pub sched: &'static str,
    pub cpus: usize,
    pub hz: u32,
    pub duration: Nanos,
    pub params: Vec<String>,
    /// Mechanisms by name (`boost`, `eimos`), taking their `NAME.` keys from `params`.
    pub mechs: Vec<&'static str>,
    /// `cfs` only: the paper's model instead of the kernel's defaults.
    pub cfs_tunables: Option<CfsTunables>,
    pub seed: u64,
}

impl RunSpec {
    pub fn new(sched: &'static str, cpus: usize, hz: u32, duration: Nanos) -> Self {
        RunSpec {
            sched,
            cpus,
            hz,
            duration,
            params: Vec::new(),
            mechs: Vec::new(),
            cfs_tunables: None,
            seed: 1,
        }
    }

    pub fn param(mut self, kv: impl Into<String>) -> Self {
        self.params.push(kv.into());
        self
    }

    pub fn mech(mut self, name: &'static str) -> Self {
        self.mechs.push(name);
        self
    }
}

/// Run `w` and keep the whole log.
pub fn simulate(w: &Workload, spec: &RunSpec) -> Result<VecSink, String> {
    let mut cfg = SimConfig::new(spec.sched, PlatformSpec::uniform(spec.cpus));
    cfg.hz = spec.hz;
    cfg.seed = spec.seed;
    cfg.duration = spec.duration;
    cfg.cfs_tunables = spec.cfs_tunables;
    cfg.params = Params::parse(spec.params.iter().map(String::as_str))?;
    let mut mechs: Vec<Box<dyn Mechanism>> = Vec::new();
    for m in &spec.mechs {
        mechs.push(crate::mechanism::by_name(m, &mut cfg.params)?);
    }
    let mut sim = Sim::new(w, cfg).map_err(|e| format!("{}: {e}", w.name))?;
    for m in mechs {
        sim.add_mechanism(m);
    }
    let mut sink = VecSink::default();
    sim.run(&mut sink, &mut |_| {})
        .map_err(|e| format!("{}: {e}", w.name))?;
    Ok(sink)
}

pub fn workload(name: &str, tasks: Vec<TaskSpec>) -> Workload {
    Workload {
        name: name.into(),
        tasks,
        ..Default::default()
    }
}

pub fn task_id(log: &VecSink, name: &str) -> Result<u32, String> {
    log.meta
        .tasks
        .iter()
        .position(|t| t.name == name)
        .map(|i| i as u32)
        .ok_or_else(|| format!("no task `{name}` in {}", log.meta.workload))
}

/// Each wake-up of `task` to the switch that runs it: scheduling latency (seed 000's L_S).
pub fn wakeup_latencies(log: &VecSink, task: u32) -> Vec<Nanos> {
    runnable_waits(log, task, false)
}

/// Each interval `task` spent runnable but not running: after a wake-up, and with
/// `after_preemption`, also after being preempted.
pub fn runnable_waits(log: &VecSink, task: u32, after_preemption: bool) -> Vec<Nanos> {
    let mut out = Vec::new();
    let mut since = None;
    for r in &log.records {
        match *r {
            Record::Wakeup { t, task: x, .. } if x == task => since = Some(t),
            Record::Switch {
                t,
                prev: Some(p),
                reason: LeaveReason::Preempted | LeaveReason::Yielded,
                next,
                ..
            } if p == task && after_preemption && next != Some(task) => since = Some(t),
            Record::Switch {
                t, next: Some(n), ..
            } if n == task => {
                if let Some(s) = since.take() {
                    out.push(t - s);
                }
            }
            _ => {}
        }
    }
    out
}

/// Completed interactions: (begin, end).
pub fn interactions(log: &VecSink) -> Vec<(Nanos, Nanos)> {
    let mut begin = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for r in &log.records {
        match *r {
            Record::InteractionBegin { t, id, .. } => {
                begin.insert(id, t);
            }
            Record::InteractionEnd { t, id, .. } => {
                if let Some(b) = begin.remove(&id) {
                    out.push((b, t));
                }
            }
            _ => {}
        }
    }
    out
}

/// When the last of `tasks` exited, if all did.
pub fn last_exit(log: &VecSink, tasks: &[u32]) -> Option<Nanos> {
    let mut left: std::collections::BTreeSet<u32> = tasks.iter().copied().collect();
    for r in &log.records {
        if let Record::Exit { t, task } = *r {
            if left.remove(&task) && left.is_empty() {
                return Some(t);
            }
        }
    }
    None
}

/// Context switches between two different tasks (idle excluded).
pub fn switches(log: &VecSink) -> usize {
    log.records
        .iter()
        .filter(|r| matches!(r, Record::Switch { prev: Some(p), next: Some(n), .. } if p != n))
        .count()
}

/// Loop completions of the tasks carrying `label`.
pub fn loops_done(log: &VecSink, label: &str) -> usize {
    let has: Vec<bool> = log
        .meta
        .tasks
        .iter()
        .map(|t| t.labels.iter().any(|l| l == label))
        .collect();
    log.records
        .iter()
        .filter(|r| matches!(r, Record::LoopDone { task, .. } if has[*task as usize]))
        .count()
}

pub fn ms(x: Nanos) -> f64 {
    x as f64 / MS as f64
}

pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

pub fn max_ms(v: &[Nanos]) -> f64 {
    v.iter().copied().max().map(ms).unwrap_or(0.0)
}

pub fn mean_ms(v: &[Nanos]) -> f64 {
    mean(&v.iter().map(|&x| ms(x)).collect::<Vec<_>>())
}

/// A claim row.
pub fn claim(
    seed: &'static str,
    source: &str,
    what: &str,
    paper: String,
    ours: String,
    verdict: super::Verdict,
    reason: String,
) -> super::Claim {
    super::Claim {
        seed,
        source: source.into(),
        claim: what.into(),
        paper,
        ours,
        verdict,
        reason,
    }
}

/// The rule every "effect size" claim uses: same sign and within a factor of two of the paper's
/// number is reproduced, same sign only is partly, else not.
pub fn verdict_for_effect(paper: f64, ours: f64) -> super::Verdict {
    use super::Verdict::*;
    if paper == 0.0 || ours == 0.0 || paper.signum() != ours.signum() {
        return Not;
    }
    let r = ours / paper;
    if (0.5..=2.0).contains(&r) {
        Reproduced
    } else {
        Partly
    }
}

/// Percent change from `base` to `x` (negative = reduction).
pub fn pct(base: f64, x: f64) -> f64 {
    if base == 0.0 {
        0.0
    } else {
        (x - base) / base * 100.0
    }
}
