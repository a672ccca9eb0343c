//! `uxsched sim bench`: the engine's speed on the standard workloads, per fair policy — events per
//! second and simulated seconds per wall-clock second. `phone` (scenarios/phone.toml: 8 CPUs in
//! two frequency domains, 200 threads) and `server64` (scenarios/server64.toml: 64 CPUs in two
//! sockets, 2,000 threads). Runs are interleaved across policies and repeated, and the median
//! and the best are reported: on a shared machine a single run says more about the neighbours,
//! so the load average before and after is printed with them.

use super::{simulate, BenchArgs};
use crate::exit::bad_input;
use std::process::ExitCode;
use std::time::Instant;
use uxsched_model::SEC;
use uxsched_sim::engine::SimConfig;
use uxsched_sim::log::Sink;
use uxsched_sim::platform::PlatformSpec;
use uxsched_sim::workload::{self, Workload};

/// The standard workloads, in the order they are reported.
const STANDARD: &[&str] = &["phone", "server64"];

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

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|e| format!("unknown ({e})"))
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

/// One standard workload and its platform.
fn standard(name: &str) -> anyhow::Result<(Workload, PlatformSpec)> {
    let w = workload::builtin(name).map_err(|e| bad_input(e.to_string()))?;
    let platform = w.platform.clone().unwrap_or_else(PlatformSpec::phone);
    Ok((w, platform))
}

/// Interleaved runs of every (workload, policy) pair, `reps` times.
fn measure(
    a: &BenchArgs,
    loads: &[(String, Workload, PlatformSpec)],
    policies: &[String],
) -> anyhow::Result<Vec<Vec<Run>>> {
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); loads.len() * policies.len()];
    let progress = !a.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    for rep in 0..a.reps {
        for (l, (name, w, platform)) in loads.iter().enumerate() {
            for (i, sched) in policies.iter().enumerate() {
                if progress {
                    eprint!("\rrun {}/{} {name:<8} {sched:<6}", rep + 1, a.reps);
                }
                let mut cfg = SimConfig::new(sched, platform.clone());
                cfg.duration = a.duration;
                let mut counter = CountingSink::default();
                let start = Instant::now();
                let cpu_start = process_cpu_seconds();
                let events = simulate(w, cfg, &[], &mut counter, &mut |_| {})?;
                runs[l * policies.len() + i].push((
                    events,
                    start.elapsed().as_secs_f64(),
                    process_cpu_seconds() - cpu_start,
                ));
            }
        }
    }
    if progress {
        eprint!("\r{:40}\r", "");
    }
    Ok(runs)
}

pub fn bench(a: BenchArgs) -> anyhow::Result<ExitCode> {
    let names: Vec<String> = if a.workloads.is_empty() {
        STANDARD.iter().map(|s| s.to_string()).collect()
    } else {
        a.workloads.clone()
    };
    let policies: Vec<String> = if a.scheds.is_empty() {
        uxsched_sim::policy::POLICY_NAMES
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        a.scheds.clone()
    };
    let mut loads = Vec::new();
    for n in &names {
        let (w, p) = standard(n)?;
        loads.push((n.clone(), w, p));
    }
    let load_before = loadavg();
    let runs = measure(&a, &loads, &policies)?;
    let load_after = loadavg();
    let sim_s = a.duration as f64 / SEC as f64;
    let mut rows = Vec::new();
    for (l, (name, w, platform)) in loads.iter().enumerate() {
        for (i, sched) in policies.iter().enumerate() {
            let r = &runs[l * policies.len() + i];
            let rate = |pick: fn(&Run) -> f64| -> Vec<f64> { r.iter().map(pick).collect() };
            let per_wall = rate(|&(e, w, _)| e as f64 / w);
            let per_cpu = rate(|&(e, _, c)| e as f64 / c);
            let speed = rate(|&(_, w, _)| w);
            rows.push(serde_json::json!({
                "workload": name,
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
                "loadavg_before": load_before,
                "loadavg_after": load_after,
            }));
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&rows, sim_s, a.reps, &load_before, &load_after);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(rows: &[serde_json::Value], sim_s: f64, reps: u32, before: &str, after: &str) {
    println!(
        "{sim_s:.0} s simulated per run, {reps} interleaved runs per policy; load average {before} \
         before, {after} after"
    );
    println!(
        "{:<9} {:>5} {:>7} {:<6} {:>9} {:>15} {:>13} {:>13} {:>11} {:>12}",
        "workload",
        "cpus",
        "threads",
        "sched",
        "events",
        "events/s median",
        "events/s best",
        "× real median",
        "× real best",
        "events/cpu s"
    );
    for r in rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
        println!(
            "{:<9} {:>5} {:>7} {:<6} {:>9} {:>15.0} {:>13.0} {:>13.0} {:>11.0} {:>12.0}",
            r["workload"].as_str().unwrap_or(""),
            r["cpus"].as_u64().unwrap_or(0),
            r["threads"].as_u64().unwrap_or(0),
            r["sched"].as_str().unwrap_or(""),
            r["events"].as_u64().unwrap_or(0),
            f("events_per_s_median"),
            f("events_per_s_best"),
            f("speedup_vs_real_time_median"),
            f("speedup_vs_real_time_best"),
            f("events_per_cpu_s_median"),
        );
    }
}
