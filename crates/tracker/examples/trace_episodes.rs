//! Print every event the tracker's BPF programs report for a process, to see an app's
//! interaction graph on the live system (how docs/tracker.md's Chromium findings were made):
//!
//! `RUST_LOG=uxsched_tracker=trace trace_episodes PID SECONDS [TIMEOUT_MS] [--no-display]`
//!
//! `--no-display` clears the display names, so an episode is not closed by its first wake-up of
//! the display server and records every hop until its timeout (default 100 ms). Needs root.

use std::time::{Duration, Instant};
use uxsched_tracker::{Tracker, TrackerConfig};

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: trace_episodes PID SECONDS [TIMEOUT_MS] [--no-display]";
    let pid: u32 = args.get(1).and_then(|a| a.parse().ok()).expect(usage);
    let secs: u64 = args.get(2).and_then(|a| a.parse().ok()).expect(usage);
    let mut cfg = TrackerConfig {
        store: None,
        ..TrackerConfig::default()
    };
    if let Some(ms) = args.get(3).and_then(|a| a.parse().ok()) {
        cfg.episode_timeout_ms = ms;
    }
    if args.iter().any(|a| a == "--no-display") {
        cfg.display_names.clear();
    }
    let mut t = Tracker::start(cfg).unwrap_or_else(|e| panic!("tracker unavailable: {e}"));
    t.set_foreground(Some(pid))
        .unwrap_or_else(|e| panic!("cannot follow {pid}: {e}"));
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        t.poll(Duration::from_millis(20));
    }
}
