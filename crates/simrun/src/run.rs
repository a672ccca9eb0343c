//! A run's settings (`sim run`'s options, minus its output files) and the one path from them to
//! metrics and a digest.

use crate::bad_input;
use serde::{Deserialize, Serialize};
use uxsched_model::{Nanos, SEC};
use uxsched_sim::digest::Digest;
use uxsched_sim::engine::{Sim, SimConfig};
use uxsched_sim::log::{Sink, Tee};
use uxsched_sim::metrics::MetricsCollector;
use uxsched_sim::platform::PlatformSpec;
use uxsched_sim::policy::cfs::CfsTunables;
use uxsched_sim::policy::Params;
use uxsched_sim::workload::Workload;

/// What decides a run besides the workload; serialisable, since a sweep point travels to Ray
/// workers as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub sched: String,
    /// `cfs` only: `kernel` or `paper`.
    pub cfs_model: String,
    pub io_sched: String,
    /// `key=value` tunables, as `--param` takes them.
    pub params: Vec<String>,
    pub mechs: Vec<String>,
    /// Identical CPUs; `None`: the workload's platform, else 8.
    pub cpus: Option<usize>,
    pub hz: u32,
    pub seed: u64,
    /// `None`: the workload's, else 10 s.
    pub duration: Option<Nanos>,
}

/// The engine's configuration for `w` under `s`.
pub fn config_for(w: &Workload, s: &RunSettings) -> anyhow::Result<SimConfig> {
    let platform = match (s.cpus, &w.platform) {
        (Some(0), _) => return Err(bad_input("--cpus must be at least 1")),
        (Some(n), _) => PlatformSpec::uniform(n),
        (None, Some(p)) => p.clone(),
        (None, None) => PlatformSpec::uniform(8),
    };
    let mut cfg = SimConfig::new(&s.sched, platform);
    cfg.params = Params::parse(s.params.iter().map(String::as_str)).map_err(bad_input)?;
    cfg.hz = s.hz;
    cfg.seed = s.seed;
    cfg.io_sched = s.io_sched.clone();
    cfg.duration = s.duration.or(w.duration).unwrap_or(10 * SEC);
    if s.sched == "cfs" && s.cfs_model == "paper" {
        cfg.cfs_tunables = Some(CfsTunables::paper());
    }
    Ok(cfg)
}

/// The engine for one run, its mechanisms attached; `sim sweep` also calls it alone to refuse a
/// bad point before anything runs.
pub fn build_sim(w: &Workload, mut cfg: SimConfig, mechs: &[String]) -> anyhow::Result<Sim> {
    // Each mechanism takes its own `NAME.` tunables; the policy gets the rest.
    let mut built = Vec::new();
    for m in mechs {
        built.push(uxsched_sim::mechanism::by_name(m, &mut cfg.params).map_err(bad_input)?);
    }
    let mut sim = Sim::new(w, cfg).map_err(|e| bad_input(format!("{}: {e}", w.name)))?;
    for m in built {
        sim.add_mechanism(m);
    }
    Ok(sim)
}

/// Builds and runs the engine into `sink`, telling `progress` the simulated time; the number of
/// events.
pub fn simulate(
    w: &Workload,
    cfg: SimConfig,
    mechs: &[String],
    sink: &mut dyn Sink,
    progress: &mut dyn FnMut(Nanos),
) -> anyhow::Result<u64> {
    let mut sim = build_sim(w, cfg, mechs)?;
    Ok(sim.run(sink, progress)?.events)
}

/// Runs once into the metrics, the digest and `extra` sinks (the run's files): the one path of
/// `sim run` and of every sweep point, local or on Ray.
pub fn measure(
    w: &Workload,
    cfg: SimConfig,
    mechs: &[String],
    mut extra: Vec<&mut dyn Sink>,
    progress: &mut dyn FnMut(Nanos),
) -> anyhow::Result<(MetricsCollector, Digest)> {
    let mut metrics = MetricsCollector::new();
    let mut digest = Digest::new();
    {
        let mut tee = Tee::default();
        tee.sinks.push(&mut metrics);
        tee.sinks.push(&mut digest);
        for s in extra.iter_mut() {
            tee.sinks.push(&mut **s);
        }
        simulate(w, cfg, mechs, &mut tee, progress)?;
    }
    Ok((metrics, digest))
}
