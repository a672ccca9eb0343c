//! Plots and JSON from a synthetic report (no run needed): every plot exists as SVG and PNG,
//! and the report serializes with its raw records.

use std::collections::BTreeMap;
use std::time::Duration;
use uxsched_bench::loads::{LoadKind, LoadSpec, Throughput};
use uxsched_bench::models::ModelKind;
use uxsched_bench::modes::ModeName;
use uxsched_bench::report::Report;
use uxsched_bench::runner::{Plan, RunRecord};

fn record(mode: ModeName, scale: f64, bg: Option<f64>) -> RunRecord {
    RunRecord {
        mode,
        rep: 0,
        samples_ms: (0..300)
            .map(|i| scale * (4.0 + (i % 17) as f64 * 0.3))
            .collect(),
        extras: BTreeMap::new(),
        context_switches: 100,
        wall_s: 2.0,
        background: bg.map(|value| Throughput {
            value,
            unit: "bogo-ops/s".into(),
            cpu_pct: None,
        }),
        critical_sets: None,
    }
}

fn report() -> Report {
    let modes = vec![ModeName::Idle, ModeName::Stock, ModeName::Fifo];
    let plan = Plan {
        scenario: ModelKind::Painting,
        modes: modes.clone(),
        reps: 1,
        duration: Duration::from_secs(2),
        load: LoadSpec {
            kind: LoadKind::Cpu,
            workers: 6,
            scratch: "/nonexistent".into(),
        },
        second_load: None,
        layout: uxsched_bench::layout::Layout::OtherSession,
        seed: 3,
        compute_ms: None,
        launches: None,
    };
    let records = vec![
        record(ModeName::Idle, 1.0, None),
        record(ModeName::Stock, 2.0, Some(1000.0)),
        record(ModeName::Fifo, 1.0, Some(900.0)),
    ];
    Report::build(&plan, records)
}

#[test]
fn report_ratios_and_background_cost() {
    let r = report();
    let stock = &r.modes[1];
    assert!((stock.p95_ratio.unwrap().value - 2.0).abs() < 1e-9);
    assert!((r.modes[2].background_vs_stock.unwrap() - 0.9).abs() < 1e-9);
    assert!(r.table().contains("p95/idle"));
    let json: serde_json::Value = serde_json::to_value(&r).unwrap();
    assert_eq!(json["modes"][1]["mode"], "stock");
    assert_eq!(json["records"].as_array().unwrap().len(), 3);
}

#[test]
fn writes_every_plot_as_svg_and_png() {
    let dir = std::env::temp_dir().join(format!("uxsched-bench-plots-{}", std::process::id()));
    let files = uxsched_bench::plots::write_all(&report(), &dir).unwrap();
    assert_eq!(files.len(), 6);
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        match f.extension().and_then(|e| e.to_str()) {
            Some("png") => assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", f.display()),
            Some("svg") => assert!(
                String::from_utf8_lossy(&bytes).contains("<svg"),
                "{}",
                f.display()
            ),
            other => panic!("unexpected file {other:?}"),
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_background_ceiling_is_what_the_app_takes_out_of_the_load() {
    let mut r = report();
    assert_eq!(r.background_ceiling(), None, "no CPU figures, no ceiling");
    let cpu = |r: &mut Report, i: usize, k: &str, v: f64| {
        r.modes[i].extras.insert(k.into(), v);
    };
    // The app takes 16 % of a CPU served, 4 % starved: 12 of the load's 195 % must go.
    cpu(&mut r, 0, "app_cpu_pct", 16.0);
    cpu(&mut r, 1, "app_cpu_pct", 4.0);
    cpu(&mut r, 1, "load_cpu_pct", 195.0);
    cpu(&mut r, 2, "load_cpu_pct", 185.0);
    let line = r.background_ceiling().unwrap();
    assert!(line.contains("at most 0.938×"), "{line}");
    assert!(line.contains("fifo 0.949"), "{line}");
    assert!(r.table().contains("background ceiling"));
}
