//! Real-kernel smoke runs of the harness: short, real processes, real loads. They assert that
//! the harness measures real effects (load hurts, FIFO helps, the background pays for the
//! foreground's CPU), never that uxsched wins; and each checks the machine is left as found.

mod common;

use common::{plan, require_root, row, run_checked, serial, Scratch};
use uxsched_bench::loads::LoadKind;
use uxsched_bench::models::ModelKind;
use uxsched_bench::modes::ModeName;
use uxsched_bench::scenario;

/// 15 ms of UI work per event: about half a CPU, so sharing the CPU with the hogs shows.
const HEAVY_UI_MS: f64 = 15.0;

#[test]
#[ignore = "needs root: make test runs it as root"]
fn load_hurts_painting_and_fifo_restores_it() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("fifo");
    // Everything this run starts inherits one CPU. With two, the load balancer packs the hogs
    // on the other CPU and autogroup isolates the app, so on an otherwise quiet machine the
    // load need not hurt at all; on one CPU the app must share it.
    let _one_cpu = OneCpu::pin();
    // Interleaved short repetitions, so the other users of a shared machine weigh on every
    // mode alike.
    let mut p = plan(
        ModelKind::Painting,
        &[ModeName::Idle, ModeName::Stock, ModeName::Fifo],
        1000,
        LoadKind::Cpu,
        &scratch,
    );
    p.compute_ms = Some(HEAVY_UI_MS);
    p.reps = 3;
    let report = run_checked(&p, &scratch).unwrap();
    let (idle, stock, fifo) = (
        row(&report, ModeName::Idle),
        row(&report, ModeName::Stock),
        row(&report, ModeName::Fifo),
    );
    eprintln!("{}", report.table());
    assert!(
        idle.summary.p50 >= HEAVY_UI_MS,
        "a response includes the UI work itself"
    );
    assert!(
        stock.summary.p95 > idle.summary.p95,
        "stock p95 {} vs idle {}",
        stock.summary.p95,
        idle.summary.p95
    );
    assert!(
        fifo.summary.p95 < stock.summary.p95,
        "fifo p95 {} vs stock {}",
        fifo.summary.p95,
        stock.summary.p95
    );
    assert!(stock.background.unwrap() > 0.0);
    assert!(idle.background.is_none(), "idle runs no load");
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn background_pays_for_a_cpu_hungry_foreground() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("bgcost");
    // On one CPU shared by the foreground and the load, the heavy foreground's ~60 % of it
    // comes out of the background's share; across two CPUs it was ~30 % of the total, within
    // the drift other users cause on a shared machine (the test failed at load 11–16: light
    // 1395 vs heavy 1374 bogo-ops/s, and 683 vs 846).
    let _one_cpu = OneCpu::pin();
    // Light and heavy foreground alternate (L H L H) so other users' load hits both alike.
    let mut throughput = [0.0, 0.0];
    for _rep in 0..2 {
        // 20 ms per ~32 ms event: heavy, yet with slack so the FIFO UI thread blocks between
        // events and stays under its 200 ms RLIMIT_RTTIME.
        for (i, ui_ms) in [0.0, 20.0].into_iter().enumerate() {
            let mut p = plan(
                ModelKind::Painting,
                &[ModeName::Fifo],
                1500,
                LoadKind::Cpu,
                &scratch,
            );
            p.compute_ms = Some(ui_ms);
            let report = run_checked(&p, &scratch).unwrap();
            throughput[i] += row(&report, ModeName::Fifo).background.unwrap();
        }
    }
    eprintln!(
        "background bogo-ops/s: light foreground {:.0}, heavy {:.0}",
        throughput[0], throughput[1]
    );
    assert!(throughput[0] > 0.0 && throughput[1] > 0.0);
    assert!(
        throughput[1] < 0.9 * throughput[0],
        "bogo-ops/s with a light foreground {} vs a heavy one {}",
        throughput[0],
        throughput[1]
    );
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn android_and_s76_apply_and_restore() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("policies");
    let modes = [
        ModeName::Idle,
        ModeName::Stock,
        ModeName::Android,
        ModeName::S76,
    ];
    let report = run_checked(
        &plan(ModelKind::Frames, &modes, 2000, LoadKind::Cpu, &scratch),
        &scratch,
    )
    .unwrap();
    for r in &report.modes {
        assert!(
            r.summary.n > 50,
            "{} measured {} frames",
            r.mode.name(),
            r.summary.n
        );
        assert!(r.extras.contains_key("jank_pct"));
        // The first sample of each run, averaged: within the run's own range.
        let first = r.extras["first_ms"];
        assert!(
            first > 0.0 && first <= r.summary.max,
            "{} first_ms {first} outside (0, {}]",
            r.mode.name(),
            r.summary.max
        );
    }
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn every_scenario_measures_under_its_default_load() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("scenarios");
    for model in scenario::ALL {
        let load = scenario::scenario(model).default_load;
        let report = run_checked(
            &plan(
                model,
                &[ModeName::Idle, ModeName::Stock],
                1200,
                load,
                &scratch,
            ),
            &scratch,
        )
        .unwrap_or_else(|e| panic!("{}: {e:#}", model.name()));
        for r in &report.modes {
            assert!(
                r.summary.n > 0,
                "{} under {} measured nothing",
                model.name(),
                r.mode.name()
            );
            assert!(r.summary.p50 > 0.0 && r.summary.p50.is_finite());
        }
        assert!(
            row(&report, ModeName::Stock).background.unwrap() > 0.0,
            "{}: no background throughput",
            model.name()
        );
    }
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn hackbench_and_memory_loads_report_throughput() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("loads");
    for load in [LoadKind::Hackbench, LoadKind::Memory] {
        let report = run_checked(
            &plan(ModelKind::Alarm, &[ModeName::Stock], 1500, load, &scratch),
            &scratch,
        )
        .unwrap();
        let r = row(&report, ModeName::Stock);
        assert!(
            r.background.unwrap() > 0.0,
            "{}: no throughput",
            load.name()
        );
        assert!(r.summary.n > 5);
    }
}

/// Restricts the calling thread (and so every process it starts) to CPU 0 until dropped.
struct OneCpu(libc::cpu_set_t);

impl OneCpu {
    fn pin() -> OneCpu {
        // SAFETY: cpu_set_t is plain data; sched_{get,set}affinity(0, …) act on this thread.
        unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of_val(&old), &mut old),
                0
            );
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut one);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of_val(&one), &one),
                0
            );
            OneCpu(old)
        }
    }
}

impl Drop for OneCpu {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `pin`.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&self.0), &self.0) };
    }
}
