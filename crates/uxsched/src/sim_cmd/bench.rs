//! `uxsched sim bench`: the engine's speed on the built-in `phone` workload (8 CPUs in two
//! frequency domains, 200 threads), per fair policy — events per second and simulated seconds
//! per wall-clock second. Runs are interleaved across policies and repeated, and the median and
//! the best are reported: on a shared machine a single run says more about the neighbours.

use super::{simulate, BenchArgs};
use crate::exit::bad_input;
use std::process::ExitCode;
use std::time::Instant;
use uxsched_model::SEC;
use uxsched_sim::engine::SimConfig;
use uxsched_sim::log::Sink;
use uxsched_sim::platform::PlatformSpec;
use uxsched_sim::workload;

/// CPU time this process has used, in seconds (immune to other work on the machine).
fn process_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_PROCESS_CPUTIME_ID always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// A sink that only counts records (the benchmark measures the engine alone).
#[derive(Default)]
struct CountingSink(u64);

impl Sink for CountingSink {
    fn record(&mut self, _rec: &uxsched_sim::log::Record) {
        self.0 += 1;
    }
}

/// One run: (events, wall seconds, CPU seconds).
type Run = (u64, f64, f64);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn bench(a: BenchArgs) -> anyhow::Result<ExitCode> {
    let w = workload::builtin("phone").map_err(|e| bad_input(e.to_string()))?;
    let platform = w.platform.clone().unwrap_or_else(PlatformSpec::phone);
    let policies = uxsched_sim::policy::POLICY_NAMES;
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); policies.len()];
    let progress = !a.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    for rep in 0..a.reps {
        for (i, sched) in policies.iter().enumerate() {
            if progress {
                eprint!("\rrun {}/{} {sched:<6}", rep + 1, a.reps);
            }
            let mut cfg = SimConfig::new(sched, platform.clone());
            cfg.duration = a.duration;
            let mut counter = CountingSink::default();
            let start = Instant::now();
            let cpu_start = process_cpu_seconds();
            let events = simulate(&w, cfg, &[], &mut counter, false)?;
            runs[i].push((
                events,
                start.elapsed().as_secs_f64(),
                process_cpu_seconds() - cpu_start,
            ));
        }
    }
    if progress {
        eprint!("\r{:30}\r", "");
    }
    let sim_s = a.duration as f64 / SEC as f64;
    let rows: Vec<serde_json::Value> = policies
        .iter()
        .zip(&runs)
        .map(|(sched, r)| {
            let rate = |pick: fn(&Run) -> f64| -> Vec<f64> { r.iter().map(pick).collect() };
            let per_wall = rate(|&(e, w, _)| e as f64 / w);
            let per_cpu = rate(|&(e, _, c)| e as f64 / c);
            let speed = rate(|&(_, w, _)| w);
            serde_json::json!({
                "sched": sched,
                "threads": w.tasks.len(),
                "cpus": platform.cpu_count(),
                "simulated_s": sim_s,
                "reps": r.len(),
                "events": r[0].0,
                "events_per_s_median": median(per_wall.clone()),
                "events_per_s_best": per_wall.iter().copied().fold(0.0, f64::max),
                "events_per_cpu_s_median": median(per_cpu),
                "speedup_vs_real_time_median": sim_s / median(speed.clone()),
                "speedup_vs_real_time_best": sim_s / speed.iter().copied().fold(f64::MAX, f64::min),
            })
        })
        .collect();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "phone workload: {} threads, {} CPUs, {sim_s:.0} s simulated per run, {} runs per policy",
        w.tasks.len(),
        platform.cpu_count(),
        a.reps
    );
    println!(
        "{:<6} {:>9} {:>15} {:>13} {:>15} {:>13} {:>11}",
        "sched",
        "events",
        "events/s median",
        "events/s best",
        "× real median",
        "× real best",
        "events/cpu s"
    );
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
        println!(
            "{:<6} {:>9} {:>15.0} {:>13.0} {:>15.0} {:>13.0} {:>11.0}",
            r["sched"].as_str().unwrap_or(""),
            r["events"].as_u64().unwrap_or(0),
            f("events_per_s_median"),
            f("events_per_s_best"),
            f("speedup_vs_real_time_median"),
            f("speedup_vs_real_time_best"),
            f("events_per_cpu_s_median"),
        );
    }
    Ok(ExitCode::SUCCESS)
}
