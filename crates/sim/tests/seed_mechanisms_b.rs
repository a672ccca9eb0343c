//! Seed 004's governors and FA-CFS, and seed 003's ShuffleDog, each against its definition on
//! short runs (the papers' headline sizes are reported by `uxsched sim reproduce`, not asserted).

mod common;
use common::*;
use uxsched_model::{Nanos, MS, SEC};
use uxsched_sim::engine::{Control, Mechanism, Sim};
use uxsched_sim::log::{Record, VecSink};
use uxsched_sim::mechanism;
use uxsched_sim::platform::{DomainSpec, PlatformSpec};
use uxsched_sim::policy::Params;
use uxsched_sim::workload::{Event, Workload};

const OPPS: [u32; 4] = [500_000, 1_000_000, 1_500_000, 2_000_000];

fn one_domain(cpus: usize, initial_khz: u32) -> PlatformSpec {
    PlatformSpec {
        domains: vec![DomainSpec {
            name: "cpu".into(),
            cpus,
            capacity: 1024,
            opps_khz: OPPS.to_vec(),
            initial_khz,
        }],
    }
}

fn run_with(
    w: &Workload,
    sched: &str,
    platform: PlatformSpec,
    dur: Nanos,
    mechs: Vec<Box<dyn Mechanism>>,
) -> VecSink {
    let mut cfg = config(sched, platform.cpu_count(), dur);
    cfg.platform = platform;
    let mut sim = Sim::new(w, cfg).expect("workload builds");
    for m in mechs {
        sim.add_mechanism(m);
    }
    let mut log = VecSink::default();
    sim.run(&mut log, &mut |_| {}).expect("run completes");
    log
}

fn governor(name: &str, params: &[&str]) -> Box<dyn Mechanism> {
    let mut p = Params::parse(params.iter().copied()).unwrap();
    let m = mechanism::by_name(name, &mut p).expect("known mechanism");
    assert!(p.is_empty());
    m
}

/// (time, kHz) of every frequency change of domain 0 (after the initial record at t = 0).
fn freqs(log: &VecSink) -> Vec<(Nanos, u32)> {
    log.records
        .iter()
        .filter_map(|r| match *r {
            Record::Freq { t, domain: 0, khz } => Some((t, khz)),
            _ => None,
        })
        .skip(1)
        .collect()
}

#[test]
fn performance_and_powersave_pin_the_frequency() {
    let w = workload(vec![task(
        "bursty",
        nice(0),
        vec![Event::Run(5 * MS), Event::Sleep(30 * MS)],
    )]);
    for (name, pinned) in [("performance", 2_000_000), ("powersave", 500_000)] {
        let log = run_with(
            &w,
            "cfs",
            one_domain(1, 1_000_000),
            SEC,
            vec![governor(name, &[])],
        );
        assert_eq!(freqs(&log), vec![(0, pinned)], "{name}");
    }
}

#[test]
fn ondemand_jumps_to_max_above_up_threshold_and_scales_down_below() {
    // A hog from the lowest frequency: the first sample sees 100 % > 80 % and goes straight to
    // the top, skipping the operating points between.
    let w = workload(vec![hog("hog", nice(0))]);
    let log = run_with(
        &w,
        "cfs",
        one_domain(1, 500_000),
        200 * MS,
        vec![governor("ondemand", &["ondemand.sampling_rate=20ms"])],
    );
    assert_eq!(freqs(&log), vec![(20 * MS, 2_000_000)]);
    // 2 ms of work every 20 ms at the top frequency is a 10 % load: min + 10 % × (max − min)
    // = 650 MHz, so the lowest operating point ≥ it, 1 GHz.
    let light = workload(vec![task(
        "light",
        nice(0),
        vec![
            Event::Run(2 * MS),
            Event::Timer {
                name: "t".into(),
                period: 20 * MS,
                absolute: true,
            },
        ],
    )]);
    let log = run_with(
        &light,
        "cfs",
        one_domain(1, 2_000_000),
        200 * MS,
        vec![governor("ondemand", &[])],
    );
    let f = freqs(&log);
    assert_eq!(f.first(), Some(&(20 * MS, 1_000_000)), "{f:?}");
}

#[test]
fn conservative_steps_one_operating_point_at_a_time() {
    let w = workload(vec![hog("hog", nice(0))]);
    let log = run_with(
        &w,
        "cfs",
        one_domain(1, 500_000),
        SEC,
        vec![governor("conservative", &[])],
    );
    let f = freqs(&log);
    let mut prev = 500_000;
    for &(_, khz) in &f {
        let (i, j) = (
            OPPS.iter().position(|&o| o == prev).unwrap(),
            OPPS.iter().position(|&o| o == khz).unwrap(),
        );
        assert_eq!(j, i + 1, "step from {prev} to {khz} in {f:?}");
        prev = khz;
    }
    // 5 % of 2 GHz per 20 ms sample: 500 MHz → 2 GHz needs 15 samples (300 ms).
    assert_eq!(f.last(), Some(&(300 * MS, 2_000_000)), "{f:?}");
}

#[test]
fn interactive_goes_to_hispeed_first_then_higher_after_the_delay() {
    let w = workload(vec![hog("hog", nice(0))]);
    let log = run_with(
        &w,
        "cfs",
        one_domain(1, 500_000),
        SEC,
        vec![governor(
            "interactive",
            &[
                "interactive.hispeed_freq=1500000",
                "interactive.above_hispeed_delay=60ms",
            ],
        )],
    );
    let f = freqs(&log);
    assert_eq!(f[0], (20 * MS, 1_500_000), "{f:?}");
    assert!(f[1].0 - f[0].0 >= 60 * MS && f[1].1 == 2_000_000, "{f:?}");
}

#[test]
fn schedutil_asks_for_a_quarter_more_than_the_utilisation() {
    let w = workload(vec![hog("hog", nice(0))]);
    let log = run_with(
        &w,
        "cfs",
        one_domain(1, 1_000_000),
        100 * MS,
        vec![governor("schedutil", &[])],
    );
    // Fully busy at 1 GHz: 1.25 GHz → 1.5 GHz; then 1.875 GHz → 2 GHz.
    assert_eq!(
        freqs(&log),
        vec![(10 * MS, 1_500_000), (20 * MS, 2_000_000)]
    );
}

#[test]
fn governor_tunables_are_checked() {
    let mut p = Params::parse(["ondemand.up_threshold=0"]).unwrap();
    assert!(mechanism::by_name("ondemand", &mut p).is_err());
    let mut p = Params::parse(["conservative.down_threshold=90"]).unwrap();
    assert!(mechanism::by_name("conservative", &mut p).is_err());
    let mut p = Params::parse(["interactive.bogus=1"]).unwrap();
    let e = mechanism::by_name("interactive", &mut p).err().unwrap();
    assert!(e.contains("interactive.bogus"), "{e}");
}

/// Sets domain 0's frequency at given times.
struct FreqAt(Vec<(Nanos, u32)>);

impl Mechanism for FreqAt {
    fn name(&self) -> &'static str {
        "freq-at"
    }
    fn start(&mut self, ctl: &mut Control) {
        for (i, &(t, _)) in self.0.iter().enumerate() {
            ctl.timer_at(t, i as u64);
        }
    }
    fn timer(&mut self, token: u64, ctl: &mut Control) {
        ctl.set_domain_khz(0, self.0[token as usize].1).unwrap();
    }
}

/// CPU time of each task inside [from, to).
fn cpu_time_in(log: &VecSink, from: Nanos, to: Nanos) -> Vec<Nanos> {
    let mut time = vec![0; log.meta.tasks.len()];
    let mut running = vec![None; log.meta.cpus];
    let close = |time: &mut Vec<Nanos>, run: Option<(u32, Nanos)>, end: Nanos| {
        if let Some((task, start)) = run {
            let (a, b) = (start.max(from), end.min(to));
            if b > a {
                time[task as usize] += b - a;
            }
        }
    };
    for r in &log.records {
        if let Record::Switch { t, cpu, next, .. } = *r {
            close(&mut time, running[cpu as usize], t);
            running[cpu as usize] = next.map(|n| (n, t));
        }
    }
    for run in running {
        close(&mut time, run, log.end);
    }
    time
}

#[test]
fn facfs_gives_back_the_share_a_frequency_drop_took() {
    // `victim` runs alone when the clock halves at 0.5 s, so FA-CFS compensates it (eq. 18:
    // weight × 2 GHz / 1 GHz); `rival` arrives at 0.6 s; the clock is restored at 1.5 s.
    let mut rival = hog("rival", nice(0));
    rival.delay = 600 * MS;
    let w = workload(vec![hog("victim", nice(0)), rival]);
    for sched in ["cfs", "eevdf"] {
        let share = |facfs: bool, from, to| {
            let mut mechs: Vec<Box<dyn Mechanism>> = vec![Box::new(FreqAt(vec![
                (500 * MS, 1_000_000),
                (1500 * MS, 2_000_000),
            ]))];
            if facfs {
                mechs.push(governor("facfs", &[]));
            }
            let log = run_with(&w, sched, one_domain(1, 2_000_000), 2500 * MS, mechs);
            let t = cpu_time_in(&log, from, to);
            t[0] as f64 / (t[0] + t[1]) as f64
        };
        let (plain, fa) = (
            share(false, 700 * MS, 1500 * MS),
            share(true, 700 * MS, 1500 * MS),
        );
        assert!((plain - 0.5).abs() < 0.03, "{sched}: plain share {plain}");
        // Weight 2048 against 1024: two thirds of the CPU, so the victim's work rate at half the
        // clock is 2/3 × 1/2 of the top speed rather than 1/2 × 1/2.
        assert!((fa - 2.0 / 3.0).abs() < 0.03, "{sched}: facfs share {fa}");
        // The clock comes back: compensation is undone.
        let after = share(true, 1600 * MS, 2500 * MS);
        assert!(
            (after - 0.5).abs() < 0.03,
            "{sched}: share after restore {after}"
        );
    }
}

#[test]
fn facfs_compensates_a_move_to_a_slower_cpu() {
    // CPU 0 is a big core, CPU 1 a little one at half the speed. The mover runs on the big core,
    // then (its phase's affinity) on the little one, where a hog also runs.
    let platform = PlatformSpec {
        domains: vec![
            DomainSpec {
                name: "big".into(),
                cpus: 1,
                capacity: 1024,
                opps_khz: vec![2_000_000],
                initial_khz: 2_000_000,
            },
            DomainSpec {
                name: "little".into(),
                cpus: 1,
                capacity: 512,
                opps_khz: vec![2_000_000],
                initial_khz: 2_000_000,
            },
        ],
    };
    let mut mover = task("mover", nice(0), vec![]);
    mover.phases = vec![
        uxsched_sim::workload::Phase {
            name: "big".into(),
            loops: 1,
            events: vec![Event::Run(100 * MS), Event::Sleep(MS)],
            affinity: Some(vec![0]),
        },
        uxsched_sim::workload::Phase {
            name: "little".into(),
            loops: 1,
            events: vec![Event::Run(10 * SEC)],
            affinity: Some(vec![1]),
        },
    ];
    let mut little_hog = hog("little-hog", nice(0));
    little_hog.affinity = Some(vec![1]);
    let w = workload(vec![mover, little_hog]);
    let share = |mechs: Vec<Box<dyn Mechanism>>| {
        let log = run_with(&w, "cfs", platform.clone(), 1500 * MS, mechs);
        let t = cpu_time_in(&log, 500 * MS, 1500 * MS);
        t[0] as f64 / (t[0] + t[1]) as f64
    };
    let plain = share(vec![]);
    let fa = share(vec![governor("facfs", &[])]);
    assert!((plain - 0.5).abs() < 0.03, "plain {plain}");
    assert!((fa - 2.0 / 3.0).abs() < 0.03, "facfs {fa}");
}

#[test]
fn seed004_reports_every_governor_and_the_late_frame_count() {
    let ctx = uxsched_sim::reproduce::Ctx {
        quick: std::env::var_os("UXSCHED_FULL").is_none(),
        seed: 1,
        out_dir: std::env::temp_dir(),
    };
    let out = uxsched_sim::reproduce::seed004::run(&ctx).expect("runs");
    for c in &out.claims {
        eprintln!(
            "{} | {} | {} | {:?} | {}",
            c.source, c.claim, c.ours, c.verdict, c.reason
        );
    }
    assert_eq!(out.claims.len(), 5);
    assert_eq!(out.figures.len(), 5);
    // Every frame of the interactive runs is counted in the histogram.
    let hist = out.figures.last().unwrap();
    let frames: f64 = hist.series[0].points.iter().map(|p| p.1).sum();
    assert!(frames > 300.0, "{frames} frames in a 6 s session at 60 fps");
}

#[test]
fn seed003_reports_its_claims() {
    let ctx = uxsched_sim::reproduce::Ctx {
        quick: std::env::var_os("UXSCHED_FULL").is_none(),
        seed: 1,
        out_dir: std::env::temp_dir(),
    };
    let out = uxsched_sim::reproduce::seed003::run(&ctx).expect("runs");
    for c in &out.claims {
        eprintln!(
            "{} | {} | {} | {:?} | {}",
            c.source, c.claim, c.ours, c.verdict, c.reason
        );
    }
    assert_eq!(out.claims.len(), 5);
    assert_eq!(out.figures.len(), 3);
}
