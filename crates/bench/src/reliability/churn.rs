//! Sustained focus churn: 100 focus changes per second across the 8 apps for a while, the
//! daemon's memory sampled at start, every second and at the end (it must not grow).

use super::apps::App;
use super::daemon::Daemon;
use super::settings::rss_kib;
use anyhow::Result;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use uxsched_client::control::{self, Request};

const PER_SECOND: u32 = 100;
const CLIENTS: usize = 8;

#[derive(Debug, Clone, serde::Serialize)]
pub struct ChurnResult {
    pub mode: String,
    pub seconds: u64,
    /// How long the requests took to send (≈ `seconds` when the rate held).
    pub elapsed_s: f64,
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
    let apps = App::spawn_round(exe)?;
    let mut daemon = Daemon::new(exe, &scratch.join(format!("churn-{mode}")))?;
    daemon.start(mode)?;
    let pid = daemon.pid().unwrap();
    // A first round of focus changes so the start figure includes the working set.
    for a in &apps {
        let _ = daemon.focus(Some(a.pid));
    }
    let rss_kib_start = rss_kib(pid).unwrap_or(0);
    let mut rss_kib_peak = rss_kib_start;
    // Requests are paced on the clock (request n at n × 10 ms) by CLIENTS threads, so a slow
    // reply (the daemon answers once the focus is applied) does not lower the rate.
    let pids: Vec<i32> = apps.iter().map(|a| a.pid).collect();
    let socket = daemon.socket();
    let total = seconds * u64::from(PER_SECOND);
    let seeds: Vec<u64> = (0..CLIENTS).map(|_| rng.gen()).collect();
    let sent = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for (c, seed) in seeds.into_iter().enumerate() {
            let (pids, socket, sent) = (&pids, &socket, &sent);
            s.spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                for n in (c as u64..total).step_by(CLIENTS) {
                    let at = start + Duration::from_secs(1) * n as u32 / PER_SECOND;
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                    let pid = pids[rng.gen_range(0..pids.len())];
                    let _ = control::call(socket, &Request::Focus { pid: Some(pid) });
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        while sent.load(Ordering::Relaxed) < total && daemon.alive() {
            std::thread::sleep(Duration::from_secs(1));
            rss_kib_peak = rss_kib_peak.max(rss_kib(pid).unwrap_or(0));
        }
    });
    let focus_requests = sent.into_inner();
    let elapsed_s = start.elapsed().as_secs_f64();
    let rss_kib_end = rss_kib(pid).unwrap_or(0);
    daemon.stop()?;
    Ok(ChurnResult {
        mode: mode.to_owned(),
        seconds,
        elapsed_s,
        focus_requests,
        rss_kib_start,
        rss_kib_peak: rss_kib_peak.max(rss_kib_end),
        rss_kib_end,
        daemon_crashes: daemon.crashes,
        leftovers: apps.iter().map(|a| a.leftovers().len()).sum(),
    })
}
