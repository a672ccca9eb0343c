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

/// One task doing `work` every 20 ms (drift-free timer): a light load for the governors.
fn light_periodic(work: u64) -> uxsched_sim::workload::Workload {
    workload(vec![task(
        "light",
        nice(0),
        vec![
            Event::Run(work),
            Event::Timer {
                name: "t".into(),
                period: 20 * MS,
                absolute: true,
            },
        ],
    )])
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
    let light = light_periodic(2 * MS);
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
fn interactive_holds_each_frequency_min_sample_time_before_going_down() {
    // 1 ms of work every 20 ms from the top frequency: the load says "go down" at every sample,
    // but the first decrease waits min_sample_time (80 ms) from the start, and each later one
    // 80 ms from the previous.
    let light = light_periodic(MS);
    let log = run_with(
        &light,
        "cfs",
        one_domain(1, 2_000_000),
        SEC,
        vec![governor("interactive", &[])],
    );
    let f = freqs(&log);
    assert!(!f.is_empty() && f[0].0 >= 80 * MS, "{f:?}");
    for w in f.windows(2) {
        assert!(w[1].1 >= w[0].1 || w[1].0 - w[0].0 >= 80 * MS, "{f:?}");
    }
    assert_eq!(f.last().map(|x| x.1), Some(500_000), "{f:?}");
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

/// Run one seed's experiments (quick unless `UXSCHED_FULL` is set) and print its claims.
fn reproduce(run: uxsched_sim::reproduce::Experiment) -> uxsched_sim::reproduce::Outcome {
    let ctx = uxsched_sim::reproduce::Ctx {
        quick: std::env::var_os("UXSCHED_FULL").is_none(),
        seed: 1,
        out_dir: std::env::temp_dir(),
    };
    let out = run(&ctx).expect("runs");
    for c in &out.claims {
        eprintln!(
            "{} | {} | {} | {:?} | {}",
            c.source, c.claim, c.ours, c.verdict, c.reason
        );
    }
    out
}

#[test]
fn seed004_reports_every_governor_and_the_late_frame_count() {
    let out = reproduce(uxsched_sim::reproduce::seed004::run);
    assert_eq!(out.claims.len(), 5);
    assert_eq!(out.figures.len(), 5);
    // Every frame of the interactive runs is counted in the histogram.
    let hist = out.figures.last().unwrap();
    let frames: f64 = hist.series[0].points.iter().map(|p| p.1).sum();
    assert!(frames > 300.0, "{frames} frames in a 6 s session at 60 fps");
}

#[test]
fn seed001_reports_cpu_and_read_ahead_claims() {
    let out = reproduce(uxsched_sim::reproduce::seed001::run);
    assert_eq!(out.claims.len(), 5);
    assert_eq!(out.figures.len(), 2);
    // Read-ahead only matters while the file is not cached: trials after the first are equal.
    let trials = &out.figures[1].series;
    let later: Vec<f64> = trials.iter().map(|s| s.points[1].1).collect();
    assert!(
        later.iter().all(|&t| (t - later[0]).abs() < 1e-9),
        "{later:?}"
    );
    assert!(trials.iter().all(|s| s.points[0].1 > s.points[1].1));
}

#[test]
fn seed003_reports_its_claims() {
    let out = reproduce(uxsched_sim::reproduce::seed003::run);
    assert_eq!(out.claims.len(), 8);
    assert_eq!(out.figures.len(), 3);
}

mod shuffledog {
    use super::*;
    use uxsched_model::formulas::adaptive_inflight;
    use uxsched_sim::gpu::{self, Context, Fifo, GpuClass, GpuConfig, ShuffleDog, Source};
    use uxsched_sim::mechanism::shuffledog_cpu::{self, BG_GROUP, BG_SHARES};
    use uxsched_sim::workload::SchedPolicy;

    fn cfg() -> GpuConfig {
        GpuConfig {
            ring_capacity: 15,
            dispatch_delay: MS,
            duration: 3 * SEC,
        }
    }

    fn generator(exec: Nanos) -> Context {
        Context {
            class: GpuClass::BestEffort,
            source: Source::Generator { exec, depth: 50 },
        }
    }

    fn game() -> Context {
        Context {
            class: GpuClass::RealTime,
            source: Source::Frames {
                exec: 3 * MS,
                vsync: 16_666_667,
            },
        }
    }

    #[test]
    fn adaptive_inflight_never_admits_more_best_effort_batches_than_eq1() {
        // Constant 7 ms batches: eq. 1 gives ⌊16.7 / 7⌋ = 2, and the ring never holds more.
        let run = gpu::run(
            &cfg(),
            &[game(), generator(7 * MS)],
            &mut ShuffleDog::default(),
        );
        let max_be = run.dispatches.iter().map(|d| d.be_after).max().unwrap();
        assert_eq!(max_be, adaptive_inflight(7 * MS) as usize);
        // Mixed 3 ms and 11 ms batches: the limit moves with the median of the last five, and a
        // dispatch never adds a best-effort batch beyond it.
        let run = gpu::run(
            &cfg(),
            &[game(), generator(3 * MS), generator(11 * MS)],
            &mut ShuffleDog::default(),
        );
        let limits: std::collections::BTreeSet<usize> =
            run.dispatches.iter().map(|d| d.limit).collect();
        assert!(limits.len() > 1, "limit never moved: {limits:?}");
        for d in &run.dispatches {
            assert!(d.be_after <= d.be_before.max(d.limit), "{d:?}");
        }
        // The stock dispatcher fills the whole ring.
        let run = gpu::run(&cfg(), &[game(), generator(7 * MS)], &mut Fifo::new(15));
        assert_eq!(run.dispatches.iter().map(|d| d.be_after).max(), Some(15));
    }

    #[test]
    fn real_time_batches_wait_only_for_the_ring_eq1_allows() {
        let run = gpu::run(
            &cfg(),
            &[game(), generator(7 * MS)],
            &mut ShuffleDog::default(),
        );
        // A frame batch waits at most: the driver reaction, then the best-effort batches already
        // in the ring (≤ 2 × 7 ms), then starts.
        for d in run.done.iter().filter(|d| d.batch.ctx == 0) {
            let wait = d.started - d.batch.submitted;
            assert!(
                wait <= MS + 2 * 7 * MS,
                "frame batch waited {} ms",
                ms(wait)
            );
        }
    }

    fn app() -> Workload {
        let mut ui = task("app.ui", nice(0), vec![Event::Run(SEC)]);
        ui.labels = vec!["ui".into(), "delay-critical".into()];
        let mut worker = task("app.asynctask", nice(10), vec![Event::Run(SEC)]);
        worker.labels = vec!["delay-critical".into()];
        let other = task("app.prefetch", nice(10), vec![Event::Run(SEC)]);
        let mut w = workload(vec![ui, worker, other]);
        for i in 0..3 {
            w.tasks.push(hog(&format!("gen{i}"), nice(0)));
        }
        w
    }

    #[test]
    fn cpu_manager_sets_android_and_shuffledog_priorities() {
        let mut w = app();
        shuffledog_cpu::android_default(&mut w);
        let bg = w.groups.iter().find(|g| g.path == BG_GROUP).unwrap();
        assert_eq!(bg.shares, BG_SHARES);
        assert_eq!(w.tasks[1].group.as_deref(), Some(BG_GROUP));
        assert_eq!(w.tasks[2].group.as_deref(), Some(BG_GROUP));
        assert_eq!(w.tasks[0].group, None);

        let mut s = app();
        shuffledog_cpu::shuffledog(&mut s);
        assert_eq!(s.tasks[0].policy, SchedPolicy::Normal { nice: 0 });
        assert_eq!(s.tasks[1].policy, SchedPolicy::Normal { nice: 3 });
        assert_eq!(s.tasks[1].group, None);
        // Not delay-critical: stays a background thread.
        assert_eq!(s.tasks[2].policy, SchedPolicy::Normal { nice: 10 });
        assert_eq!(s.tasks[2].group.as_deref(), Some(BG_GROUP));

        // On one CPU against a nice-0 hog, the AsyncTask goes from the 5 % group's share to a
        // nice-3 share (423 / (1024 + 423 + …)).
        let share = |w: &Workload| {
            let mut one = w.clone();
            one.tasks
                .retain(|t| t.name != "app.ui" && t.name != "gen1" && t.name != "gen2");
            let log = run(&one, config("cfs", 1, SEC));
            let t = cpu_time(&log);
            t[0] as f64 / t.iter().sum::<Nanos>() as f64
        };
        let (d, sd) = (share(&w), share(&s));
        assert!(d < 0.06, "default share {d}");
        assert!(sd > 0.25, "ShuffleDog share {sd}");
    }
}
