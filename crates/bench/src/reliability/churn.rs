//! Sustained focus churn: 100 focus changes per second across the 8 apps for a while, the
//! daemon's memory sampled at start, every second and at the end (it must not grow).

use super::apps::{App, ROUND};
use super::daemon::Daemon;
use super::settings::rss_kib;
use anyhow::Result;
use rand::Rng;
use std::path::Path;
use std::time::{Duration, Instant};

const PER_SECOND: u32 = 100;

#[derive(Debug, Clone, serde::Serialize)]
pub struct ChurnResult {
    pub mode: String,
    pub seconds: u64,
    pub focus_requests: u64,
    pub rss_kib_start: u64,
    pub rss_kib_peak: u64,
    pub rss_kib_end: u64,
    pub daemon_crashes: u32,
    /// Settings left changed after the stop (see `kills`).
    pub leftovers: usize,
}

pub fn run(
    exe: &Path,
    scratch: &Path,
    mode: &str,
    seconds: u64,
    rng: &mut impl Rng,
) -> Result<ChurnResult> {
    let mut apps = ROUND
        .iter()
        .map(|&k| App::spawn(exe, k))
        .collect::<Result<Vec<_>>>()?;
    for a in &mut apps {
        a.record_baseline()?;
    }
    let mut daemon = Daemon::new(exe, &scratch.join(format!("churn-{mode}")))?;
    daemon.start(mode)?;
    let pid = daemon.pid().unwrap();
    // A first round of focus changes so the start figure includes the working set.
    for a in &apps {
        let _ = daemon.focus(Some(a.pid));
    }
    let rss_kib_start = rss_kib(pid).unwrap_or(0);
    let mut rss_kib_peak = rss_kib_start;
    let start = Instant::now();
    let period = Duration::from_secs(1) / PER_SECOND;
    let mut focus_requests = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) && daemon.alive() {
        let app = &apps[rng.gen_range(0..apps.len())];
        let _ = daemon.focus(Some(app.pid));
        focus_requests += 1;
        if focus_requests % u64::from(PER_SECOND) == 0 {
            rss_kib_peak = rss_kib_peak.max(rss_kib(pid).unwrap_or(0));
        }
        // Paced on the clock: request n goes out at n × 10 ms.
        let next = start + period * focus_requests as u32;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let rss_kib_end = rss_kib(pid).unwrap_or(0);
    daemon.stop()?;
    Ok(ChurnResult {
        mode: mode.to_owned(),
        seconds,
        focus_requests,
        rss_kib_start,
        rss_kib_peak: rss_kib_peak.max(rss_kib_end),
        rss_kib_end,
        daemon_crashes: daemon.crashes,
        leftovers: apps.iter().map(|a| a.leftovers().len()).sum(),
    })
}
