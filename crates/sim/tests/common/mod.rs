//! Small builders for engine tests: workloads written in Rust, and facts read off the log.
#![allow(dead_code)]

use uxsched_model::{Nanos, MS, SEC};
use uxsched_sim::engine::{Sim, SimConfig};
use uxsched_sim::log::{Record, VecSink};
use uxsched_sim::platform::PlatformSpec;
use uxsched_sim::workload::{Event, Phase, SchedPolicy, TaskSpec, Workload};

pub fn task(name: &str, policy: SchedPolicy, events: Vec<Event>) -> TaskSpec {
    TaskSpec {
        name: name.into(),
        process: name.into(),
        policy,
        phases: vec![Phase {
            name: "p".into(),
            loops: 1,
            events,
            ..Default::default()
        }],
        ..Default::default()
    }
}

pub fn nice(n: i32) -> SchedPolicy {
    SchedPolicy::Normal { nice: n }
}

/// A CPU hog: runs forever.
pub fn hog(name: &str, policy: SchedPolicy) -> TaskSpec {
    task(name, policy, vec![Event::Run(SEC)])
}

pub fn workload(tasks: Vec<TaskSpec>) -> Workload {
    Workload {
        name: "test".into(),
        tasks,
        ..Default::default()
    }
}

pub fn config(sched: &str, cpus: usize, duration: Nanos) -> SimConfig {
    let mut c = SimConfig::new(sched, PlatformSpec::uniform(cpus));
    c.duration = duration;
    c
}

pub fn run(w: &Workload, cfg: SimConfig) -> VecSink {
    let mut sim = Sim::new(w, cfg).expect("workload builds");
    let mut sink = VecSink::default();
    sim.run(&mut sink, &mut |_| {}).expect("run completes");
    sink
}

pub fn task_id(log: &VecSink, name: &str) -> u32 {
    log.meta
        .tasks
        .iter()
        .position(|t| t.name == name)
        .expect("task exists") as u32
}

/// CPU time each task received, from the switch records.
pub fn cpu_time(log: &VecSink) -> Vec<Nanos> {
    let mut time = vec![0; log.meta.tasks.len()];
    let mut since = vec![None; log.meta.cpus];
    for r in &log.records {
        if let Record::Switch {
            t, cpu, prev, next, ..
        } = *r
        {
            if let (Some(p), Some(s)) = (prev, since[cpu as usize]) {
                time[p as usize] += t - s;
            }
            since[cpu as usize] = next.map(|_| t);
            let _ = next;
        }
    }
    // Close running intervals at the end.
    let mut running = vec![None; log.meta.cpus];
    for r in &log.records {
        if let Record::Switch { t, cpu, next, .. } = *r {
            running[cpu as usize] = next.map(|n| (n, t));
        }
    }
    for (n, t) in running.into_iter().flatten() {
        time[n as usize] += log.end - t;
    }
    time
}

/// Wake-up latencies of one task: each Wakeup to the Switch that runs it.
pub fn wakeup_latencies(log: &VecSink, task: u32) -> Vec<Nanos> {
    let mut out = Vec::new();
    let mut woke = None;
    for r in &log.records {
        match *r {
            Record::Wakeup { t, task: x, .. } if x == task => woke = Some(t),
            Record::Switch {
                t, next: Some(n), ..
            } if n == task => {
                if let Some(w) = woke.take() {
                    out.push(t - w);
                }
            }
            _ => {}
        }
    }
    out
}

/// Response times of completed interactions.
pub fn responses(log: &VecSink) -> Vec<Nanos> {
    let mut begin = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for r in &log.records {
        match *r {
            Record::InteractionBegin { t, id, .. } => {
                begin.insert(id, t);
            }
            Record::InteractionEnd { t, id, .. } => out.push(t - begin[&id]),
            _ => {}
        }
    }
    out
}

pub fn percentile(v: &[Nanos], p: f64) -> Nanos {
    let mut s = v.to_vec();
    s.sort_unstable();
    let rank = ((p / 100.0) * s.len() as f64).ceil().max(1.0) as usize;
    s[rank - 1]
}

pub fn ms(x: Nanos) -> f64 {
    x as f64 / MS as f64
}
