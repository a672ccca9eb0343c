//! Every shipped workload runs in the engine: the scenarios make progress (each task runs,
//! interactions complete) and Debian's rt-app examples run end to end without getting stuck.

use std::path::PathBuf;

use uxsched_model::{MS, SEC};
use uxsched_sim::engine::{Sim, SimConfig};
use uxsched_sim::log::{Record, VecSink};
use uxsched_sim::platform::PlatformSpec;
use uxsched_sim::policy::cfs::CfsTunables;
use uxsched_sim::workload::{self, rtapp, Workload};

fn run(w: &Workload, sched: &str, duration: u64) -> VecSink {
    let platform = w
        .platform
        .clone()
        .unwrap_or_else(|| PlatformSpec::uniform(8));
    let mut cfg = SimConfig::new(sched, platform);
    cfg.duration = duration;
    let mut sim = Sim::new(w, cfg).unwrap_or_else(|e| panic!("{}: {e}", w.name));
    let mut sink = VecSink::default();
    sim.run(&mut sink, &mut |_| {})
        .unwrap_or_else(|e| panic!("{}: {e}", w.name));
    sink
}

/// Names of the tasks that never got a CPU.
fn never_ran(w: &Workload, log: &VecSink) -> Vec<String> {
    let mut ran = vec![false; w.tasks.len()];
    for r in &log.records {
        if let Record::Switch { next: Some(t), .. } = r {
            ran[*t as usize] = true;
        }
    }
    w.tasks
        .iter()
        .zip(ran)
        .filter(|(_, ran)| !ran)
        .map(|(t, _)| t.name.clone())
        .collect()
}

fn interactions_ended(log: &VecSink) -> usize {
    log.records
        .iter()
        .filter(|r| matches!(r, Record::InteractionEnd { .. }))
        .count()
}

#[test]
fn scenarios_make_progress() {
    for (name, _) in workload::BUILTINS {
        let w = workload::builtin(name).unwrap();
        for sched in ["cfs", "eevdf"] {
            let log = run(&w, sched, SEC);
            assert_eq!(
                never_ran(&w, &log),
                Vec::<String>::new(),
                "{name} under {sched}"
            );
        }
    }
}

#[test]
fn interaction_chains_complete() {
    // (scenario, interactions expected within 1 s at least). Progress bounds, not performance:
    // the phone is overloaded on purpose (40 hogs and 140 services beside 10 UI/render pairs
    // at 60 Hz on 8 CPUs, 4 of them little), so only about half its frames begun in the first
    // second end within it.
    for (name, at_least) in [
        ("showcase", 15),
        ("phone", 200),
        ("example1", 3),
        ("pipeline", 20),
    ] {
        let w = workload::builtin(name).unwrap();
        let log = run(&w, "cfs", SEC);
        let ended = interactions_ended(&log);
        assert!(
            ended >= at_least,
            "{name}: {ended} interactions ended, expected ≥ {at_least}"
        );
    }
}

#[test]
fn debian_examples_run_end_to_end() {
    let dir = PathBuf::from("/usr/share/doc/rt-app/examples");
    assert!(
        dir.is_dir(),
        "{} is absent: install rt-app (scripts/setup.sh does; make test runs it)",
        dir.display()
    );
    for file in [
        "tutorial/example1.json",
        "tutorial/example3.json",
        "tutorial/example5.json",
        "tutorial/example7.json",
        "tutorial/example8.json",
        "mp3-short.json",
        "video-short.json",
        "browser-short.json",
        "spreading-tasks.json",
    ] {
        let w = rtapp::load(&dir.join(file)).unwrap();
        let log = run(&w, "eevdf", 500 * MS);
        assert!(
            log.records
                .iter()
                .any(|r| matches!(r, Record::Switch { next: Some(_), .. })),
            "{file}: nothing ran"
        );
    }
    let merge = dir.join("merge");
    let parts: Vec<PathBuf> = [
        "global",
        "resources",
        "thread0",
        "thread1",
        "thread2",
        "thread3",
    ]
    .iter()
    .map(|n| merge.join(format!("{n}.json")))
    .collect();
    let w = rtapp::load_many(&parts).unwrap();
    run(&w, "cfs", 500 * MS);
}

/// Response times (begin → end) in ms.
fn responses_ms(log: &VecSink) -> Vec<f64> {
    let mut begun = std::collections::HashMap::new();
    let mut out = Vec::new();
    for r in &log.records {
        match r {
            Record::InteractionBegin { t, id, .. } => {
                begun.insert(*id, *t);
            }
            Record::InteractionEnd { t, id, .. } => {
                if let Some(b) = begun.get(id) {
                    out.push((t - b) as f64 / MS as f64);
                }
            }
            _ => {}
        }
    }
    out
}

/// The example scenarios reproduce seed 000 §III under the paper's model of CFS.
#[test]
fn example_scenarios_reproduce_seed_000() {
    let paper = |w: &Workload| {
        let mut cfg = SimConfig::new("cfs", w.platform.clone().unwrap());
        cfg.cfs_tunables = Some(CfsTunables::paper());
        cfg.hz = 1000;
        cfg.duration = 4 * SEC;
        let mut sink = VecSink::default();
        Sim::new(w, cfg)
            .unwrap()
            .run(&mut sink, &mut |_| {})
            .unwrap();
        responses_ms(&sink)
    };
    // Example 1: a 3 ms request behind ten hogs with 1 ms slices waits ≈ 20 ms.
    let resp = paper(&workload::builtin("example1").unwrap());
    assert!(resp.len() >= 15, "{resp:?}");
    assert!(resp.iter().all(|r| (18.0..=28.0).contains(r)), "{resp:?}");
    // Example 2: some request waits out the nice −12 task's ≈ 6.18 ms slice.
    let resp = paper(&workload::builtin("example2").unwrap());
    let worst = resp.iter().cloned().fold(0.0, f64::max);
    assert!(worst > 3.0 + 6.0, "worst response {worst} ms");
}
