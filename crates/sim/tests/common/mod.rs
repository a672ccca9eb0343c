//! Small builders for engine tests: workloads written in Rust, and facts read off the log.
#![allow(dead_code, unused_imports)]

use uxsched_model::Nanos;
use uxsched_sim::engine::{Sim, SimConfig};
use uxsched_sim::log::{Record, VecSink};
use uxsched_sim::platform::PlatformSpec;
use uxsched_sim::workload::{TaskSpec, Workload};

// Workload builders and log queries shared with the reproductions.
pub use uxsched_sim::reproduce::kit::{hog, ms, nice, task, wakeup_latencies};

pub fn workload(tasks: Vec<TaskSpec>) -> Workload {
    uxsched_sim::reproduce::kit::workload("test", tasks)
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
    uxsched_sim::reproduce::kit::task_id(log, name).expect("task exists")
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
    uxsched_model::stats::nearest_rank(&s, uxsched_model::stats::permille(p))
}

/// The task of `w` named `name` (panics naming both if absent).
pub fn find_task<'a>(w: &'a Workload, name: &str) -> &'a TaskSpec {
    w.tasks
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no task {name} in {}", w.name))
}

/// A fair run-queue of `ents` for policy-level tests: entity 0 current, the others queued, the
/// load their weights' sum, the custom-slice count theirs.
pub fn rq_of(ents: &[uxsched_sim::policy::Entity]) -> uxsched_sim::policy::FairRq {
    let mut rq = uxsched_sim::policy::FairRq::for_group(0);
    rq.min_vruntime = ents.iter().map(|e| e.vruntime).min().unwrap();
    rq.curr = Some(0);
    for i in 1..ents.len() {
        rq.push_queued(i, ents);
    }
    rq.nr_running = ents.len();
    rq.load = ents.iter().map(|e| e.weight).sum();
    rq.nr_custom_slice = ents.iter().filter(|e| e.custom_slice).count();
    rq
}
