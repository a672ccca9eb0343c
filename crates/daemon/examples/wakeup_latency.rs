//! Wake-up latency of a periodic foreground task under `stress-ng --cpu 6` running in another
//! session, on the idle machine, under stock scheduling and under each daemon mode.
//!
//! Run as root: `cargo run --release -p uxsched-daemon --example wakeup_latency -- [ROUNDS] [SECS]
//! [CONFIG,…]` (default 2 rounds of 3 s per configuration, all configurations, interleaved
//! A B C … A B C …).
//!
//! The task sleeps to absolute 10 ms deadlines (`clock_nanosleep(TIMER_ABSTIME)`) and records
//! how late it runs after each expiry — wake-up latency as cyclictest measures it. Each mode
//! runs a real daemon (this binary re-executed) that is told to focus the task's process.

#[path = "common/private_daemon.rs"]
mod private_daemon;

use private_daemon::Daemon;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use uxsched_client::control::{self, Request};

const PERIOD_NS: i64 = 10_000_000;
const WARMUP_SAMPLES: usize = 50;
const CONFIGS: [&str; 8] = [
    "idle",
    "stock",
    "eimos",
    "vtcfs",
    "mcfs",
    "facfs",
    "shuffledog",
    "uxsched",
];

fn main() {
    match std::env::var("UXSCHED_BENCH_ROLE").as_deref() {
        Ok("periodic") => periodic(std::env::args().nth(1).unwrap().parse().unwrap()),
        _ if private_daemon::run_if_daemon() => {}
        _ => bench(),
    }
}

/// The foreground task: print one lateness sample (µs) per period, for `n` periods.
fn periodic(n: usize) {
    let mut next = now();
    for _ in 0..n {
        next.tv_nsec += PERIOD_NS;
        if next.tv_nsec >= 1_000_000_000 {
            next.tv_nsec -= 1_000_000_000;
            next.tv_sec += 1;
        }
        // SAFETY: valid timespec; absolute sleep on CLOCK_MONOTONIC.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &next,
                std::ptr::null_mut(),
            )
        };
        let t = now();
        let late = (t.tv_sec - next.tv_sec) * 1_000_000_000 + (t.tv_nsec - next.tv_nsec);
        println!("{}", late as f64 / 1000.0);
        // A little work per period, as a frame would do (~0.2 ms).
        let end = Instant::now() + Duration::from_micros(200);
        while Instant::now() < end {
            std::hint::spin_loop();
        }
    }
}

fn now() -> libc::timespec {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t
}

/// Kills a child's whole process group on drop.
struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: signalling the process group this guard created.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// `stress-ng --cpu 6` in its own session (so its own autogroup).
fn stress() -> Group {
    let mut c = Command::new("stress-ng");
    c.args(["--cpu", "6", "--timeout", "600s", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    Group(
        c.spawn()
            .expect("stress-ng (Debian package stress-ng) is needed"),
    )
}

/// One measurement: returns the lateness samples (µs) after warm-up.
fn measure(config: &str, secs: u64) -> Vec<f64> {
    let _stress = (config != "idle").then(stress);
    let daemon = (config != "idle" && config != "stock").then(|| {
        // Top-level keys to try variants, e.g. UXSCHED_BENCH_EXTRA='fg_shares = 1024'.
        let extra = std::env::var("UXSCHED_BENCH_EXTRA").unwrap_or_default();
        let cfg = format!("mode = \"{config}\"\n{extra}\n[vtcfs]\nbudget_ms = 600000\n");
        Daemon::start(&format!("bench-{config}"), &cfg)
    });
    std::thread::sleep(Duration::from_millis(200)); // let the load spread
    let n = WARMUP_SAMPLES + (secs * 1_000_000_000 / PERIOD_NS as u64) as usize;
    let mut task = Command::new(std::env::current_exe().unwrap());
    task.arg(n.to_string())
        .env("UXSCHED_BENCH_ROLE", "periodic")
        .stdout(Stdio::piped());
    // Its own session, as a launched app has (and what uxsched does to its autogroup stays there).
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        task.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut task = task.spawn().unwrap();
    if let Some(d) = &daemon {
        control::call(
            &d.socket,
            &Request::Focus {
                pid: Some(task.id() as i32),
            },
        )
        .unwrap();
    }
    let out = BufReader::new(task.stdout.take().unwrap());
    let samples: Vec<f64> = out
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| l.parse().ok())
        .skip(WARMUP_SAMPLES)
        .collect();
    let _ = task.wait();
    samples
}

fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    uxsched_model::stats::nearest_rank(sorted, uxsched_model::stats::permille(fraction * 100.0))
}

fn bench() {
    let rounds: usize = std::env::args().nth(1).map_or(2, |s| s.parse().unwrap());
    let secs: u64 = std::env::args().nth(2).map_or(3, |s| s.parse().unwrap());
    let configs: Vec<String> = std::env::args().nth(3).map_or_else(
        || CONFIGS.map(String::from).to_vec(),
        |s| s.split(',').map(String::from).collect(),
    );
    for c in &configs {
        assert!(
            CONFIGS.contains(&c.as_str()),
            "unknown configuration {c}; one of {CONFIGS:?}"
        );
    }
    let load_before = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut all: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    for round in 0..rounds {
        for (i, c) in configs.iter().enumerate() {
            eprintln!("round {}/{rounds}: {c}", round + 1);
            all[i].extend(measure(c, secs));
        }
    }
    println!("wake-up latency of a 10 ms periodic task (µs), stress-ng --cpu 6 in another session");
    println!("{rounds} round(s) × {secs} s per configuration, interleaved");
    // Other work on the machine shows in every row (idle included): report it with the figures.
    let load_after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "loadavg before: {}, after: {}\n",
        load_before.trim(),
        load_after.trim()
    );
    println!(
        "| {:<10} | {:>7} | {:>9} | {:>9} | {:>9} | {:>9} |",
        "config", "samples", "p50", "p90", "p99", "max"
    );
    println!(
        "|{:-<12}|{:->9}|{:->11}|{:->11}|{:->11}|{:->11}|",
        "", "", "", "", "", ""
    );
    for (i, c) in configs.iter().enumerate() {
        let mut s = all[i].clone();
        s.sort_by(f64::total_cmp);
        if s.is_empty() {
            continue;
        }
        println!(
            "| {:<10} | {:>7} | {:>9.1} | {:>9.1} | {:>9.1} | {:>9.1} |",
            c,
            s.len(),
            percentile(&s, 0.5),
            percentile(&s, 0.9),
            percentile(&s, 0.99),
            s[s.len() - 1]
        );
    }
}
