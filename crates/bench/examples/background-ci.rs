//! The background's throughput × stock's, with its 95 % bootstrap interval over the runs, for
//! reports saved before the table carried it (`uxsched bench … --save FILE.json`):
//!     cargo run --release -p uxsched-bench --example background-ci -- FILE.json…
//! Per file and mode: the ratio [interval], the load's CPU share × stock's where recorded, and
//! the range over the runs of the work the load did per CPU-%-second.
//! The interval is `stats::mean_ratio_ci`, the report's own (a fixed seed: the figures repeat).

use anyhow::{Context, Result};
use uxsched_bench::modes::ModeName;
use uxsched_bench::runner::RunRecord;
use uxsched_bench::stats;

#[derive(serde::Deserialize)]
struct Saved {
    records: Vec<RunRecord>,
}

fn main() -> Result<()> {
    let files: Vec<String> = std::env::args().skip(1).collect();
    anyhow::ensure!(
        !files.is_empty(),
        "name one or more reports saved with --save"
    );
    for file in files {
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading {file}"))?;
        let saved: Saved = serde_json::from_str(&text)
            .with_context(|| format!("{file}: not a report saved with --save"))?;
        let of = |m: ModeName, f: &dyn Fn(&RunRecord) -> Option<f64>| -> Vec<f64> {
            saved
                .records
                .iter()
                .filter(|r| r.mode == m)
                .filter_map(f)
                .collect()
        };
        let value = |r: &RunRecord| r.background.as_ref().map(|b| b.value);
        let cpu = |r: &RunRecord| r.background.as_ref().and_then(|b| b.cpu_pct);
        let (stock, stock_cpu) = (of(ModeName::Stock, &value), of(ModeName::Stock, &cpu));
        let mut modes: Vec<ModeName> = saved.records.iter().map(|r| r.mode).collect();
        modes.sort_by_key(|m| m.name());
        modes.dedup();
        // The work each run's load did per CPU-%-second: what moves the throughput at one
        // CPU share (stress-ng's `--cpu-method all`).
        let per_cpu = |r: &RunRecord| {
            let b = r.background.as_ref()?;
            b.cpu_pct.filter(|&c| c > 0.0).map(|c| b.value / c)
        };
        for m in modes {
            let work = of(m, &per_cpu);
            let range = |f: fn(f64, f64) -> f64| work.iter().copied().reduce(f);
            let work = range(f64::min)
                .zip(range(f64::max))
                .map_or(String::new(), |(lo, hi)| {
                    format!("  work per CPU-%-s {lo:.1}–{hi:.1}")
                });
            if m == ModeName::Stock {
                println!("{file}: {:<14} bg × stock 1{work}", m.name());
                continue;
            }
            let Some(bg) = stats::mean_ratio_ci(&of(m, &value), &stock, 1, 10_000) else {
                continue;
            };
            let cpu = stats::mean_ratio_ci(&of(m, &cpu), &stock_cpu, 1, 10_000)
                .map_or(String::new(), |c| format!("  load CPU {:.3}", c.value));
            println!(
                "{file}: {:<14} bg × stock {:.3} [{:.3}–{:.3}]{cpu}{work}",
                m.name(),
                bg.value,
                bg.lo,
                bg.hi
            );
        }
    }
    Ok(())
}
