//! The sinks on real engine logs: every shipped scenario under both fair policies must give a
//! log the metrics collector finds consistent (no anomalies), a trace that parses, and a digest
//! that repeats. This is where the engine and the metrics check each other.

use std::path::Path;

use uxsched_model::{MS, SEC};
use uxsched_sim::digest::Digest;
use uxsched_sim::engine::{Sim, SimConfig};
use uxsched_sim::export::{GanttChart, PerfettoTrace};
use uxsched_sim::log::{Sink, Tee};
use uxsched_sim::metrics::{MetricsCollector, Report};
use uxsched_sim::platform::PlatformSpec;
use uxsched_sim::workload;

struct Outputs {
    report: Report,
    digest: String,
    trace: Vec<u8>,
    gantt_slices: usize,
}

fn run(path: &Path, sched: &str) -> Outputs {
    let w = workload::load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let platform = w
        .platform
        .clone()
        .unwrap_or_else(|| PlatformSpec::uniform(4));
    let mut cfg = SimConfig::new(sched, platform);
    cfg.duration = SEC;
    let mut sim = Sim::new(&w, cfg).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut metrics = MetricsCollector::new();
    let mut digest = Digest::new();
    let mut trace = PerfettoTrace::new(Vec::new());
    let mut gantt = GanttChart::new(100 * MS, 150 * MS).unwrap();
    {
        let mut tee = Tee {
            sinks: vec![&mut metrics, &mut digest, &mut trace, &mut gantt],
        };
        sim.run(&mut tee as &mut dyn Sink, &mut |_| {})
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    Outputs {
        report: metrics.report(false),
        digest: digest.hex(),
        trace: trace.finish().unwrap(),
        gantt_slices: gantt.slices().len(),
    }
}

fn scenarios() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scenarios in {}", dir.display());
    files
}

#[test]
fn every_scenario_gives_a_consistent_log_under_both_policies() {
    for path in scenarios() {
        for sched in ["cfs", "eevdf"] {
            let out = run(&path, sched);
            let r = &out.report;
            let what = format!("{} under {sched}", path.display());
            assert!(r.anomalies.is_empty(), "{what}: {:?}", r.anomalies);
            let busy: f64 = r.tasks.iter().map(|t| t.metrics.cpu_share).sum();
            assert!(
                busy <= r.cpus as f64 + 1e-9,
                "{what}: {busy} CPUs busy of {}",
                r.cpus
            );
            assert!(busy > 0.0, "{what}: nothing ran");
            let root = r
                .groups
                .iter()
                .find(|g| g.name.is_empty())
                .expect("root group");
            assert_eq!(root.tasks, r.tasks.len(), "{what}");
            let json: serde_json::Value =
                serde_json::from_slice(&out.trace).unwrap_or_else(|e| panic!("{what}: {e}"));
            let slices = json["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["ph"] == "X")
                .count();
            assert!(slices > 0 && out.gantt_slices > 0, "{what}");
            serde_json::to_string(r).unwrap();
        }
    }
}

#[test]
fn the_showcase_measures_its_touch_interaction_and_repeats_exactly() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/showcase.toml");
    let a = run(&path, "cfs");
    let touch = a
        .report
        .interactions
        .iter()
        .find(|i| i.name == "touch")
        .expect("touch kind");
    // A touch every 50 ms for 1 s: about 20 begun, nearly all completed.
    assert!(touch.begun >= 19, "{touch:?}");
    assert!(
        touch.response_time.count + touch.unfinished == touch.begun,
        "{touch:?}"
    );
    let b = run(&path, "cfs");
    assert_eq!(a.digest, b.digest);
    assert_eq!(a.trace, b.trace);
    let eevdf = run(&path, "eevdf");
    assert_ne!(a.digest, eevdf.digest, "different policies, different logs");
}
