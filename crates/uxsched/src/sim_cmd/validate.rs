//! `uxsched sim validate`: the simulator's fidelity on this machine. Each rt-app workload runs
//! `--repeat` times with rt-app on the running kernel and `--seeds` times in the simulator with
//! the machine's CPU count, HZ, fair policy (EEVDF from 6.6), timer slack and the wake-up costs
//! measured by two calibration probes ([`calibrate`]); per task, rt-app's wake-up latency
//! (`wu_lat`) and slack are compared with the simulated ones: each side's median over its runs,
//! its range, the relative error and whether they agree ([`compare`]). The header names the
//! kernel's version and its scheduler feature flags ([`sched_info`]): EEVDF changed materially
//! between 6.12, 6.18 and 7.0, and a result without them cannot be compared.
//!
//! What it cannot match: rt-app runs in this process's autogroup or cgroup, beside every other
//! process on the machine, while the simulator sees the workload alone on the machine's CPUs
//! (no autogroup, no other load, no interrupts or kernel threads). Run it on an idle machine,
//! with the workload's threads in one rt-app process (the default), and read the load average
//! it prints.

mod calibrate;
mod cgroups;
mod compare;
mod rtapp;
mod sched_info;
mod slices;

use crate::exit::bad_input;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use uxsched_model::time::fmt_ns;
use uxsched_model::Nanos;
use uxsched_sim::engine::{Sim, SimConfig};
use uxsched_sim::log::{Record, RunMeta, Sink};
use uxsched_sim::platform::PlatformSpec;
use uxsched_sim::workload::{self, Workload};

#[derive(clap::Args)]
pub struct ValidateArgs {
    /// rt-app workloads (strict JSON with `global.duration` > 0).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
    /// The rt-app binary (default: `$UXSCHED_RTAPP`, else `rt-app` on `$PATH`).
    #[arg(long)]
    pub rt_app: Option<PathBuf>,
    /// The kernel's HZ, when neither /boot/config-<release> nor /proc/config.gz says it.
    #[arg(long)]
    pub hz: Option<u32>,
    /// First seed of the simulation (tick phases).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulate each workload with this many seeds (tick phases), from --seed on: the
    /// simulator's figure is their median, printed with their range.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub seeds: u64,
    /// Run each workload this many times on the kernel: the kernel's figure is the median of
    /// the runs and its run-to-run range is printed beside it (issue 34: a p90 needs one).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub repeat: u32,
}

/// The running kernel as the simulator is configured to match it.
#[derive(Debug, Serialize)]
struct Machine {
    kernel: String,
    sched: &'static str,
    cpus: usize,
    hz: u32,
    hz_from: String,
    timer_slack_ns: Nanos,
    /// The scheduler's feature flags, base slice and preemption model.
    sched_info: sched_info::SchedInfo,
    /// Measured wake-up costs the simulator adds to timer wake-ups ([`calibrate`]).
    wakeup_costs: calibrate::WakeupCosts,
    /// rt-app runs per workload.
    repeat: u32,
    /// Simulated seeds per workload.
    seeds: u64,
    autogroup: bool,
    date: String,
    loadavg_before: String,
    loadavg_after: String,
}

#[derive(Debug, Serialize)]
struct FileResult {
    file: String,
    duration_s: f64,
    /// Custom slices validate set on rt-app's threads, per kernel run ([`slices`]).
    custom_slices: Vec<Vec<slices::Applied>>,
    tasks: Vec<compare::TaskResult>,
}

#[derive(Debug, Serialize)]
struct Validation {
    machine: Machine,
    cannot_match: &'static str,
    workloads: Vec<FileResult>,
}

const CANNOT_MATCH: &str = "rt-app runs beside every other process on the machine, in this \
process's autogroup or cgroup; the simulator sees the workload alone (no autogroup, no cgroups \
but those the workload names, no other load, no interrupts or kernel threads). Use an idle \
machine and one rt-app process.";

pub fn validate(a: ValidateArgs) -> anyhow::Result<ExitCode> {
    // Read every workload before running anything: a file the simulator cannot read stops the
    // command before rt-app has run at all.
    let mut loaded = Vec::new();
    for f in &a.files {
        let w = workload::load(f).map_err(|e| bad_input(e.to_string()))?;
        let d = w.duration.filter(|&d| d > 0).ok_or_else(|| {
            bad_input(format!(
                "{}: set `global.duration` (seconds, > 0): validate runs rt-app for that long",
                f.display()
            ))
        })?;
        loaded.push((f.clone(), w, d));
    }
    let mut machine = probe(a.hz)?;
    machine.repeat = a.repeat;
    machine.seeds = a.seeds;
    let rtapp = rtapp::binary(a.rt_app.as_deref());
    let dir = tempfile::tempdir()?;
    let mut kernel = Vec::new();
    for (i, (file, w, duration)) in loaded.iter().enumerate() {
        let weights = cgroups::weights(w);
        let mut runs = Vec::new();
        for r in 0..a.repeat {
            let d = dir.path().join(format!("{i}-{r}"));
            std::fs::create_dir(&d)?;
            let limit = Duration::from_nanos(*duration) + Duration::from_secs(30);
            eprintln!("rt-app {} (run {} of {})", file.display(), r + 1, a.repeat);
            runs.push(rtapp::run(&rtapp, file, &d, limit, None, &weights)?);
        }
        kernel.push(runs);
    }
    machine.wakeup_costs =
        calibrate::calibrate(&rtapp, &dir.path().join("calibration"), machine.cpus)?;
    let mut results = Vec::new();
    for ((file, w, duration), logs) in loaded.iter().zip(&kernel) {
        let seeds = a.seed..a.seed + a.seeds;
        results.push(one(&machine, logs, file, w, *duration, seeds)?);
    }
    machine.loadavg_after = loadavg();
    let v = Validation {
        machine,
        cannot_match: CANNOT_MATCH,
        workloads: results,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", render(&v));
    }
    Ok(ExitCode::SUCCESS)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|e| format!("unknown ({e})"))
}

/// `CONFIG_HZ` from the kernel's configuration, and where it was found.
fn kernel_hz(release: &str) -> Option<(u32, String)> {
    let boot = format!("/boot/config-{release}");
    let text = std::fs::read_to_string(&boot)
        .map(|t| (t, boot))
        .or_else(|_| {
            let out = std::process::Command::new("zcat")
                .arg("/proc/config.gz")
                .output()?;
            Ok::<_, std::io::Error>((
                String::from_utf8_lossy(&out.stdout).into_owned(),
                "/proc/config.gz".to_string(),
            ))
        })
        .ok()?;
    let hz = text
        .0
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))?
        .trim()
        .parse()
        .ok()?;
    Some((hz, text.1))
}

/// This kernel's `(major, minor)`.
fn version(release: &str) -> (u32, u32) {
    let mut it = release
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

fn probe(hz_flag: Option<u32>) -> anyhow::Result<Machine> {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")?
        .trim()
        .to_string();
    let (hz, hz_from) = match hz_flag {
        Some(0) => return Err(bad_input("--hz must be at least 1")),
        Some(h) => (h, "--hz".to_string()),
        None => kernel_hz(&kernel).ok_or_else(|| {
            bad_input(format!(
                "cannot tell kernel {kernel}'s HZ (no CONFIG_HZ in /boot/config-{kernel} or \
                 /proc/config.gz): pass --hz"
            ))
        })?,
    };
    // SAFETY: PR_GET_TIMERSLACK takes no pointer and returns this thread's slack (rt-app, our
    // child, inherits it).
    let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    Ok(Machine {
        sched: if version(&kernel) >= (6, 6) {
            "eevdf"
        } else {
            "cfs"
        },
        kernel,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        hz,
        hz_from,
        timer_slack_ns: slack.max(0) as Nanos,
        sched_info: sched_info::probe(),
        wakeup_costs: Default::default(),
        repeat: 1,
        seeds: 1,
        autogroup: std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled")
            .is_ok_and(|s| s.trim() == "1"),
        date: uxsched_bench::report::utc_now(),
        loadavg_before: loadavg(),
        loadavg_after: String::new(),
    })
}

/// Per task: the latency from each timer's expiry to the task running again (0 when the timer
/// had already expired), and the slack at each timer — what rt-app logs as `wu_lat` and `slack`.
#[derive(Default)]
struct TimerSink {
    names: Vec<String>,
    pending: Vec<Option<Nanos>>,
    wu_lat: Vec<Vec<i64>>,
    slack: Vec<Vec<i64>>,
}

impl Sink for TimerSink {
    fn begin(&mut self, meta: &RunMeta) {
        let n = meta.tasks.len();
        self.names = meta.tasks.iter().map(|t| t.name.clone()).collect();
        self.pending = vec![None; n];
        self.wu_lat = vec![Vec::new(); n];
        self.slack = vec![Vec::new(); n];
    }

    fn record(&mut self, rec: &Record) {
        match *rec {
            Record::Period { t, task, slack } => {
                let i = task as usize;
                self.slack[i].push(slack);
                if slack > 0 {
                    self.pending[i] = Some(t + slack as Nanos);
                } else {
                    self.wu_lat[i].push(0);
                }
            }
            Record::Switch {
                t, next: Some(n), ..
            } => {
                if let Some(expiry) = self.pending[n as usize].take() {
                    self.wu_lat[n as usize].push(t.saturating_sub(expiry) as i64);
                }
            }
            _ => {}
        }
    }
}

/// The simulator's run of one workload, compared with the kernel's `logs`.
fn one(
    m: &Machine,
    runs: &[rtapp::KernelRun],
    file: &Path,
    w: &Workload,
    duration: Nanos,
    seeds: std::ops::Range<u64>,
) -> anyhow::Result<FileResult> {
    let mut sinks = Vec::new();
    for seed in seeds {
        let mut cfg = SimConfig::new(m.sched, PlatformSpec::uniform(m.cpus));
        cfg.hz = m.hz;
        cfg.seed = seed;
        cfg.duration = duration;
        cfg.timer_slack = m.timer_slack_ns;
        cfg.wakeup_cost = m.wakeup_costs.rt_ns;
        cfg.fair_wakeup_costs = m.wakeup_costs.fair_ns.clone();
        cfg.idle_wakeup_costs = m.wakeup_costs.idle_ns.clone();
        cfg.long_idle_wakeup_costs = m.wakeup_costs.long_idle_ns.clone();
        cfg.long_idle = calibrate::LONG_IDLE_FROM;
        if let (Some(ns), "eevdf") = (m.sched_info.base_slice_ns, m.sched) {
            let p = format!("eevdf.base_slice={ns}ns");
            cfg.params = uxsched_sim::policy::Params::parse([p.as_str()]).map_err(bad_input)?;
        }
        let mut sim =
            Sim::new(w, cfg).map_err(|e| bad_input(format!("{}: {e}", file.display())))?;
        let mut sink = TimerSink::default();
        sim.run(&mut sink, &mut |_| {})?;
        sinks.push(sink);
    }
    let names = sinks.first().map(|s| s.names.clone()).unwrap_or_default();
    let tasks = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let logs: Vec<_> = runs.iter().map(|r| kernel_log(&r.logs, name)).collect();
            let sim: Vec<(&[i64], &[i64])> = sinks
                .iter()
                .map(|s| (s.wu_lat[i].as_slice(), s.slack[i].as_slice()))
                .collect();
            compare::compare(name, &logs, &sim)
        })
        .collect();
    Ok(FileResult {
        file: file.display().to_string(),
        duration_s: duration as f64 / 1e9,
        custom_slices: runs.iter().map(|r| r.slices.clone()).collect(),
        tasks,
    })
}

/// rt-app names instances of `t` by `t` and a global thread index; the simulator `t-0`, `t-1`…
fn kernel_log<'a>(
    logs: &'a std::collections::BTreeMap<String, Vec<rtapp::ThreadLog>>,
    name: &str,
) -> Option<&'a rtapp::ThreadLog> {
    if let Some([one]) = logs.get(name).map(Vec::as_slice) {
        return Some(one);
    }
    let (base, i) = name.rsplit_once('-')?;
    logs.get(base)?.get(i.parse::<usize>().ok()?)
}

fn render(v: &Validation) -> String {
    use std::fmt::Write;
    let m = &v.machine;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kernel {} ({}, HZ {} from {}, {} CPUs, timer slack {}, autogroup {}) vs uxsched sim",
        m.kernel,
        m.sched,
        m.hz,
        m.hz_from,
        m.cpus,
        fmt_ns(m.timer_slack_ns as f64),
        if m.autogroup { "on" } else { "off" }
    );
    let _ = writeln!(out, "{}", m.sched_info.line());
    let w = &m.wakeup_costs;
    let _ = writeln!(
        out,
        "wake-up cost, fair tasks: one of the fair probe's samples per timer wake-up (p50 {}), \
         measured: {}",
        fmt_ns(w.fair_p50_ns as f64),
        w.fair_from
    );
    let _ = writeln!(
        out,
        "wake-up cost, fair tasks onto an idle CPU: one of the idle probe's samples (p50 {}), \
         measured: {}",
        fmt_ns(w.idle_p50_ns as f64),
        w.idle_from
    );
    let _ = writeln!(
        out,
        "wake-up cost, fair tasks onto a CPU idle for {} or more: one of the long-idle probe's \
         samples (p50 {}), measured: {}",
        fmt_ns(calibrate::LONG_IDLE_FROM as f64),
        fmt_ns(w.long_idle_p50_ns as f64),
        w.long_idle_from
    );
    let _ = writeln!(
        out,
        "wake-up cost, RT tasks: {}, measured: median {}",
        fmt_ns(w.rt_ns as f64),
        w.rt_from
    );
    let _ = writeln!(
        out,
        "{}; load average {} before, {} after",
        m.date, m.loadavg_before, m.loadavg_after
    );
    let _ = writeln!(
        out,
        "{} rt-app run(s) and {} simulated seed(s) per workload: each side's (lower) median of \
         its runs [smallest, largest]; ok = sim within {:.0} % of kernel or inside its range",
        m.repeat,
        m.seeds,
        compare::TOLERANCE * 100.0
    );
    let _ = writeln!(out, "cannot match: {}", v.cannot_match);
    for f in &v.workloads {
        let _ = writeln!(out, "\n{} ({} s)", f.file, f.duration_s);
        for a in f.custom_slices.first().into_iter().flatten() {
            let _ = writeln!(out, "{}", slices::describe(a));
        }
        let _ = writeln!(
            out,
            "{:<16} {:<10} {:>10} {:>23} {:>10} {:>23} {:>8}",
            "task", "metric", "kernel", "kernel range", "sim", "sim range", "error"
        );
        for t in &f.tasks {
            if let Some(why) = &t.skipped {
                let _ = writeln!(out, "{:<16} ({why})", t.task);
                continue;
            }
            for (j, r) in t.rows.iter().enumerate() {
                let _ = writeln!(out, "{}", render_row(t, j, r));
            }
        }
    }
    out
}

fn render_row(t: &compare::TaskResult, j: usize, r: &compare::Row) -> String {
    let fmt = |x: i64| match r.metric {
        "misses" => x.to_string(),
        _ if x < 0 => format!("-{}", fmt_ns(-x as f64)),
        _ => fmt_ns(x as f64),
    };
    let err = r
        .rel_error
        .map_or("—".to_string(), |e| format!("{:+.0}%", e * 100.0));
    let name = if j == 0 { t.task.as_str() } else { "" };
    format!(
        "{:<16} {:<10} {:>10} {:>23} {:>10} {:>23} {:>8} {}",
        name,
        r.metric,
        fmt(r.kernel),
        format!("[{}, {}]", fmt(r.kernel_lo), fmt(r.kernel_hi)),
        fmt(r.sim),
        format!("[{}, {}]", fmt(r.sim_lo), fmt(r.sim_hi)),
        err,
        if r.agrees { "ok" } else { "OFF" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions_choose_the_policy() {
        assert_eq!(version("6.18.44-fc-v657"), (6, 18));
        assert!(version("6.5.0") < (6, 6));
        assert!(version("6.6.1-amd64") >= (6, 6));
    }
}
