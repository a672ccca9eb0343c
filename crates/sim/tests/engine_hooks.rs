//! Mechanisms act through `Control`: weights and frequencies change the run as they should.

mod common;
use common::*;
use uxsched_model::{MS, SEC};
use uxsched_sim::engine::{Control, Mechanism, Sim};
use uxsched_sim::log::{Record, VecSink};
use uxsched_sim::platform::{DomainSpec, PlatformSpec};
use uxsched_sim::workload::Event;

/// Triples task 0's weight at start and halves the frequency at 1 s.
struct Tweak;

impl Mechanism for Tweak {
    fn name(&self) -> &'static str {
        "tweak"
    }
    fn start(&mut self, ctl: &mut Control) {
        assert!(ctl.set_task_weight(0, 3 * 1024));
        ctl.timer_at(SEC, 7);
    }
    fn timer(&mut self, token: u64, ctl: &mut Control) {
        assert_eq!(token, 7);
        ctl.set_domain_khz(0, 500_000).unwrap();
    }
}

#[test]
fn weight_and_frequency_changes_take_effect() {
    let w = workload(vec![
        hog("a", nice(0)),
        task("b", nice(0), vec![Event::Run(10 * MS)]),
    ]);
    let mut cfg = config("eevdf", 1, 2 * SEC);
    cfg.platform = PlatformSpec {
        domains: vec![DomainSpec {
            name: "cpu".into(),
            cpus: 1,
            capacity: 1024,
            opps_khz: vec![500_000, 1_000_000],
            initial_khz: 1_000_000,
        }],
    };
    let mut sim = Sim::new(&w, cfg).unwrap();
    sim.add_mechanism(Box::new(Tweak));
    let mut log = VecSink::default();
    sim.run(&mut log, &mut |_| {}).unwrap();
    let t = cpu_time(&log);
    let share = t[0] as f64 / (t[0] + t[1]) as f64;
    assert!((share - 0.75).abs() < 0.02, "share {share}");
    assert!(log.records.contains(&Record::Freq {
        t: SEC,
        domain: 0,
        khz: 500_000
    }));
    // b's loops of 10 ms work take twice as long after the frequency halves.
    let loops = |from, to| {
        log.records
            .iter()
            .filter(|r| matches!(r, Record::LoopDone { t, task: 1 } if *t >= from && *t < to))
            .count() as f64
    };
    let ratio = loops(0, SEC) / loops(SEC, 2 * SEC);
    assert!((ratio - 2.0).abs() < 0.25, "loops before/after {ratio}");
}
