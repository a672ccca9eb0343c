//! Seed 003 (ShuffleDog, Android resource management for delay-critical threads): the CPU
//! manager on a MuPDF-like app against CPUGenerator (Table 7a, [`cpu`]), the GPU inflight sweep
//! (Fig. 6) and the GPU scheduler against GPUGenerator / GPUFilter (Table 7c, [`gpu`]), the I/O
//! scheduler against IOGenerator (Table 7b) and CPU and I/O contention together (Table 8, [`io`]).
//!
//! Platform: the paper's Nexus 6 has four Krait cores at 2.7 GHz; ours is four identical cores
//! at a fixed frequency, under CFS (kernel model), with the engine's block device (CFQ) for I/O.
//! GPU: the self-contained device of [`crate::gpu`].

mod cpu;
mod gpu;
mod io;

pub use cpu::{game_cpu, mupdf};

use super::{Ctx, Outcome};
use crate::engine::{Sim, SimConfig};
use crate::log::{Record, VecSink};
use crate::mechanism::tracker::Tracker;
use crate::mechanism::{shuffledog_cpu, shuffledog_io};
use crate::platform::PlatformSpec;
use crate::workload::{Event, Phase, SchedPolicy, TaskSpec, Workload};
use uxsched_model::{Nanos, SEC};

const VSYNC: Nanos = 16_666_667;

/// Which of ShuffleDog's resource managers are on; the others leave Android's defaults.
#[derive(Debug, Clone, Copy)]
struct Managers {
    cpu: bool,
    io: bool,
}

const ANDROID: Managers = Managers {
    cpu: false,
    io: false,
};
const CPU_ONLY: Managers = Managers {
    cpu: true,
    io: false,
};
const IO_ONLY: Managers = Managers {
    cpu: false,
    io: true,
};
const BOTH: Managers = Managers {
    cpu: true,
    io: true,
};

impl Managers {
    /// Android's settings, then the enabled managers' (from the workload's static labels).
    fn apply(self, w: &mut Workload) {
        if self.cpu {
            shuffledog_cpu::shuffledog(w);
        } else {
            shuffledog_cpu::android_default(w);
        }
        if self.io {
            shuffledog_io::shuffledog(w);
        } else {
            shuffledog_io::android_default(w);
        }
    }
}

/// A one-phase, one-pass thread of process `name` up to its first `.`.
fn task(name: &str, nice: i32, labels: &[&str], events: Vec<Event>) -> TaskSpec {
    TaskSpec {
        name: name.into(),
        process: name.split('.').next().unwrap_or(name).into(),
        policy: SchedPolicy::Normal { nice },
        phases: vec![Phase {
            name: "main".into(),
            loops: 1,
            events,
            affinity: None,
        }],
        loops: Some(1),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        ..Default::default()
    }
}

/// Latency of the workload's first interaction, or `None` if it did not finish within `limit`.
/// `tracker`: attached to apply ShuffleDog's CPU setting to the threads it finds at run time.
fn latency(
    mut w: Workload,
    managers: Managers,
    tracker: Option<Tracker>,
    seed: u64,
    limit: Nanos,
) -> Result<Option<Nanos>, String> {
    managers.apply(&mut w);
    let mut cfg = SimConfig::new("cfs", PlatformSpec::uniform(4));
    cfg.duration = limit;
    cfg.seed = seed;
    let mut sim = Sim::new(&w, cfg).map_err(|e| e.to_string())?;
    if let Some(t) = tracker {
        sim.add_mechanism(Box::new(t));
    }
    let mut log = VecSink::default();
    sim.run(&mut log, &mut |_| {}).map_err(|e| e.to_string())?;
    let mut begin = None;
    for r in &log.records {
        match *r {
            Record::InteractionBegin { t, .. } => begin = Some(t),
            Record::InteractionEnd { t, .. } => return Ok(begin.map(|b| t - b)),
            _ => {}
        }
    }
    Ok(None)
}

fn fmt_latency(l: Option<Nanos>, limit: Nanos) -> String {
    match l {
        Some(l) => format!("{:.0} ms", l as f64 / 1e6),
        None => format!("> {:.0} s", limit as f64 / 1e9),
    }
}

pub fn run(ctx: &Ctx) -> Result<Outcome, String> {
    let mut out = Outcome::default();
    cpu::table7a(ctx, &mut out)?;
    let dur = if ctx.quick { 5 * SEC } else { 30 * SEC };
    gpu::fig6(dur, &mut out);
    gpu::table7c(dur, &mut out);
    io::table7b(ctx, &mut out)?;
    io::table8(ctx, &mut out)?;
    out.notes = vec![
        "CPU (Table 7a): four identical cores, CFS (kernel model). MuPDF zoom = UI thread 16 ms → \
         AsyncTask (nice 10) 650 ms → UI thread 30 ms (696 ms on an idle system, as the paper's \
         baseline); CPUGenerator = 5 nice-0 threads that never sleep, in the root group. Default \
         Android puts nice ≥ 10 threads in a cpu.shares-52 group; ShuffleDog gives the \
         delay-critical AsyncTask nice 3 outside it, from static labels or, in the tracker \
         variant, from the Thread Tracker (mechanism/tracker.rs), which finds the AsyncTask on \
         the UI → AsyncTask → UI wake-up cycle; a relaunch reuses the first launch's decisions."
            .into(),
        format!(
            "GPU (Fig. 6, Table 7c): one sequential non-preemptive engine, a 15-batch ring, a 1 ms \
             driver reaction per dispatch; the game submits one 3 ms batch per frame at vsync; \
             GPUGenerator = one context of 7 ms batches (Fig. 6: 7 and 4 ms); GPUFilter = five \
             contexts of 2 ms batches; generators keep KGSL's 50-batch context queue full. \
             Runs of {} s. \"back\" = run time / best-effort batches completed.",
            dur / SEC
        ),
        "Fig. 6 trade-off point: the smallest inflight whose background time per batch is within \
         2 % of the best of the sweep."
            .into(),
        io::NOTE.into(),
    ];
    Ok(out)
}
