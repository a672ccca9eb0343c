//! `uxsched sim validate`: the simulator's fidelity on this machine. Each rt-app workload runs
//! once with rt-app on the running kernel and once in the simulator with the machine's CPU
//! count, HZ, fair policy (EEVDF from 6.6), timer slack and the wake-up cost measured by a
//! calibration probe ([`calibrate`]); per task, rt-app's wake-up latency (`wu_lat`) and slack
//! are compared with the simulated ones, and the relative error printed.
//!
//! What it cannot match: rt-app runs in this process's autogroup or cgroup, beside every other
//! process on the machine, while the simulator sees the workload alone on the machine's CPUs
//! (no autogroup, no other load, no interrupts or kernel threads). Run it on an idle machine,
//! with the workload's threads in one rt-app process (the default), and read the load average
//! it prints.

mod rtapp;

use crate::exit::bad_input;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use uxsched_model::stats::nearest_rank;
use uxsched_model::time::fmt_ns;
use uxsched_model::Nanos;
use uxsched_sim::engine::{Sim, SimConfig};
use uxsched_sim::log::{Record, RunMeta, Sink};
use uxsched_sim::metrics::dist::Summary;
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
    /// Seed of the simulation (tick phases).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
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
    /// Measured wake-up cost the simulator adds to every timer wake-up (see [`calibrate`]).
    wakeup_cost_ns: Nanos,
    /// How it was measured.
    wakeup_cost_from: String,
    autogroup: bool,
    date: String,
    loadavg_before: String,
    loadavg_after: String,
}

/// One metric of one task: kernel, simulated and the relative error (sim − kernel) / kernel.
#[derive(Debug, Serialize)]
struct Row {
    metric: &'static str,
    kernel: i64,
    sim: i64,
    rel_error: Option<f64>,
}

#[derive(Debug, Serialize)]
struct TaskResult {
    task: String,
    /// Why the task is not compared (no timer, no rt-app log), if it is not.
    skipped: Option<String>,
    rows: Vec<Row>,
}

#[derive(Debug, Serialize)]
struct FileResult {
    file: String,
    duration_s: f64,
    tasks: Vec<TaskResult>,
}

#[derive(Debug, Serialize)]
struct Validation {
    machine: Machine,
    cannot_match: &'static str,
    workloads: Vec<FileResult>,
}

const CANNOT_MATCH: &str = "rt-app runs beside every other process on the machine, in this \
process's autogroup or cgroup; the simulator sees the workload alone (no autogroup or cgroups, \
no other load, no interrupts or kernel threads). Use an idle machine and one rt-app process.";

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
    let rtapp = rtapp::binary(a.rt_app.as_deref());
    let dir = tempfile::tempdir()?;
    let mut kernel = Vec::new();
    for (i, (file, _, duration)) in loaded.iter().enumerate() {
        let d = dir.path().join(i.to_string());
        std::fs::create_dir(&d)?;
        let limit = Duration::from_nanos(*duration) + Duration::from_secs(30);
        kernel.push(rtapp::run(&rtapp, file, &d, limit)?);
    }
    (machine.wakeup_cost_ns, machine.wakeup_cost_from) =
        calibrate(&rtapp, &dir.path().join("calibration"), machine.cpus)?;
    let mut results = Vec::new();
    for ((file, w, duration), logs) in loaded.iter().zip(&kernel) {
        results.push(one(&machine, logs, file, w, *duration, a.seed)?);
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
        wakeup_cost_ns: 0,
        wakeup_cost_from: String::new(),
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

/// Seconds the calibration probe runs (200 wake-ups at its 10 ms period).
const CALIBRATION_S: u64 = 2;

/// Measure this machine's wake-up cost: the time from a timer's expiry to the woken thread
/// running, when nothing else may delay it. A SCHED_FIFO probe (no timer slack, preempts at once)
/// wakes every 10 ms on CPUs kept busy by one nice-0 hog each — like the suite's tasks, whose
/// CPUs are never idle — so its rt-app `wu_lat` is the timer interrupt, `try_to_wake_up` and
/// the context switch alone. The median over [`CALIBRATION_S`] s is the cost the simulator adds
/// to each timer wake-up ([`SimConfig::wakeup_cost`]); it is never set from anything else.
fn calibrate(rtapp: &Path, dir: &Path, cpus: usize) -> anyhow::Result<(Nanos, String)> {
    std::fs::create_dir(dir)?;
    let json = serde_json::json!({
        "global": {"duration": CALIBRATION_S, "default_policy": "SCHED_OTHER", "calibration": 100},
        "tasks": {
            "probe": {"policy": "SCHED_FIFO", "priority": 10, "runtime": 50,
                      "timer": {"ref": "probe", "period": 10000}, "loop": -1},
            "hog": {"instance": cpus, "priority": 0, "runtime": 1000000}
        }
    });
    let file = dir.join("calibration.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&json)?)?;
    let limit = Duration::from_secs(CALIBRATION_S + 30);
    let logs = rtapp::run(rtapp, &file, dir, limit).map_err(|e| {
        bad_input(format!(
            "wake-up cost calibration (a SCHED_FIFO rt-app probe; needs root or CAP_SYS_NICE): {e}"
        ))
    })?;
    let mut lat: Vec<i64> = logs
        .get("probe")
        .and_then(|v| v.first())
        .map(|l| l.wu_lat.clone())
        .unwrap_or_default();
    if lat.len() < 20 {
        return Err(bad_input(format!(
            "wake-up cost calibration: rt-app logged {} probe wake-ups in {CALIBRATION_S} s              (expected ~{}); is the machine overloaded?",
            lat.len(),
            CALIBRATION_S * 100
        )));
    }
    lat.sort_unstable();
    let cost = nearest_rank(&lat, 50).max(0) as Nanos;
    let from = format!(
        "median wu_lat of a SCHED_FIFO probe every 10 ms over {} busy CPUs ({} wake-ups; p10 {}, p90 {})",
        cpus,
        lat.len(),
        fmt_ns(nearest_rank(&lat, 10) as f64),
        fmt_ns(nearest_rank(&lat, 90) as f64)
    );
    Ok((cost, from))
}

/// The simulator's run of one workload, compared with the kernel's `logs`.
fn one(
    m: &Machine,
    logs: &std::collections::BTreeMap<String, Vec<rtapp::ThreadLog>>,
    file: &Path,
    w: &Workload,
    duration: Nanos,
    seed: u64,
) -> anyhow::Result<FileResult> {
    let mut cfg = SimConfig::new(m.sched, PlatformSpec::uniform(m.cpus));
    cfg.hz = m.hz;
    cfg.seed = seed;
    cfg.duration = duration;
    cfg.timer_slack = m.timer_slack_ns;
    cfg.wakeup_cost = m.wakeup_cost_ns;
    let mut sim = Sim::new(w, cfg).map_err(|e| bad_input(format!("{}: {e}", file.display())))?;
    let mut sink = TimerSink::default();
    sim.run(&mut sink, &mut |_| {})?;
    let tasks = sink
        .names
        .iter()
        .enumerate()
        .map(|(i, name)| compare(name, kernel_log(logs, name), &sink, i))
        .collect();
    Ok(FileResult {
        file: file.display().to_string(),
        duration_s: duration as f64 / 1e9,
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

fn compare(name: &str, kernel: Option<&rtapp::ThreadLog>, sim: &TimerSink, i: usize) -> TaskResult {
    let skip = |why: &str| TaskResult {
        task: name.to_string(),
        skipped: Some(why.to_string()),
        rows: Vec::new(),
    };
    let Some(k) = kernel else {
        return skip("no rt-app log for this thread");
    };
    if sim.slack[i].is_empty() || sim.wu_lat[i].is_empty() || k.wu_lat.is_empty() {
        return skip("no timer: rt-app measures wake-up latency and slack at timers only");
    }
    let wu = |s: &[i64]| Summary::of(s, false).stats.expect("non-empty");
    let (kw, sw) = (wu(&k.wu_lat), wu(&sim.wu_lat[i]));
    let p10 = |s: &[i64]| {
        let mut v = s.to_vec();
        v.sort_unstable();
        nearest_rank(&v, 100)
    };
    let misses = |s: &[i64]| s.iter().filter(|&&x| x < 0).count() as i64;
    let row = |metric, kernel: i64, sim: i64| Row {
        metric,
        kernel,
        sim,
        rel_error: (kernel != 0).then(|| (sim - kernel) as f64 / kernel.abs() as f64),
    };
    TaskResult {
        task: name.to_string(),
        skipped: None,
        rows: vec![
            row("wake p50", kw.p50, sw.p50),
            row("wake p90", kw.p90, sw.p90),
            row("wake p99", kw.p99, sw.p99),
            row("slack p10", p10(&k.slack), p10(&sim.slack[i])),
            row("slack p50", wu(&k.slack).p50, wu(&sim.slack[i]).p50),
            row("misses", misses(&k.slack), misses(&sim.slack[i])),
        ],
    }
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
    let _ = writeln!(
        out,
        "wake-up cost {} (simulated on every timer wake-up), measured: {}",
        fmt_ns(m.wakeup_cost_ns as f64),
        m.wakeup_cost_from
    );
    let _ = writeln!(
        out,
        "{}; load average {} before, {} after",
        m.date, m.loadavg_before, m.loadavg_after
    );
    let _ = writeln!(out, "cannot match: {}", v.cannot_match);
    for f in &v.workloads {
        let _ = writeln!(out, "\n{} ({} s)", f.file, f.duration_s);
        let _ = writeln!(
            out,
            "{:<16} {:<10} {:>10} {:>10} {:>8}",
            "task", "metric", "kernel", "sim", "error"
        );
        for t in &f.tasks {
            if let Some(why) = &t.skipped {
                let _ = writeln!(out, "{:<16} ({why})", t.task);
                continue;
            }
            for (j, r) in t.rows.iter().enumerate() {
                let fmt = |x: i64| match r.metric {
                    "misses" => x.to_string(),
                    _ if x < 0 => format!("-{}", fmt_ns(-x as f64)),
                    _ => fmt_ns(x as f64),
                };
                let err = r
                    .rel_error
                    .map_or("—".to_string(), |e| format!("{:+.0}%", e * 100.0));
                let name = if j == 0 { t.task.as_str() } else { "" };
                let _ = writeln!(
                    out,
                    "{:<16} {:<10} {:>10} {:>10} {:>8}",
                    name,
                    r.metric,
                    fmt(r.kernel),
                    fmt(r.sim),
                    err
                );
            }
        }
    }
    out
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
