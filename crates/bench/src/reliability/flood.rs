//! Hostile and careless clients on the control socket: malformed lines, lines past the 1 MiB
//! limit, many requests on one connection, connections that send nothing — from 4 threads at
//! once. The daemon must neither crash nor grow; afterwards it must still do its job.

use super::daemon::Daemon;
use anyhow::{ensure, Result};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const THREADS: u64 = 4;
/// Requests written in one go on one connection (the daemon reads one request per connection).
const FLOOD_LINES: usize = 50;
/// One message in this many is a 2 MiB line.
const OVERSIZED_EVERY: u64 = 10_000;

#[derive(Debug, Clone, serde::Serialize)]
pub struct FloodResult {
    pub messages: u64,
    pub connections: u64,
    /// Connections the daemon answered with `{"ok":false,…}`.
    pub refused: u64,
    /// Replies that said `ok` to a malformed message (must be 0).
    pub accepted: u64,
    pub daemon_crashes: u32,
    pub rss_kib_before: u64,
    pub rss_kib_after: u64,
    /// After the flood: `status` answered and a real focus applied.
    pub still_works: bool,
}

/// The malformed requests, one per line.
const MALFORMED: [&[u8]; 7] = [
    b"garbage\n",
    b"{\"cmd\":\"focus\",\"pid\":\"x\"}\n",
    b"{\"cmd\":\"nope\"}\n",
    b"\xff\xfe\xfd\n",
    b"{\"cmd\":\"focus\",\"pid\":99999999999}\n",
    b"{\"cmd\":\"mode\",\"mode\":\"turbo\"}\n",
    b"{\"cmd\":\"status\",\"extra\":1}\n",
];

pub fn run(exe: &Path, scratch: &Path, messages: u64) -> Result<FloodResult> {
    let mut daemon = Daemon::new(exe, &scratch.join("flood"))?;
    daemon.start("eimos")?;
    let pid = daemon.pid().unwrap();
    let rss_kib_before = super::settings::rss_kib(pid).unwrap_or(0);
    let sent = AtomicU64::new(0);
    // connections, refused, accepted
    let counts: [AtomicU64; 3] = Default::default();
    let socket = daemon.socket();
    let nesting = format!("{}\n", "[".repeat(100_000));
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (sent, counts, socket, nesting) = (&sent, &counts, &socket, &nesting);
            s.spawn(move || {
                let mut i = t;
                while sent.load(Ordering::Relaxed) < messages {
                    let (n, ok) = one_connection(socket, i, nesting);
                    sent.fetch_add(n, Ordering::Relaxed);
                    counts[0].fetch_add(1, Ordering::Relaxed);
                    match ok {
                        Some(false) => counts[1].fetch_add(1, Ordering::Relaxed),
                        Some(true) => counts[2].fetch_add(1, Ordering::Relaxed),
                        None => 0,
                    };
                    i += THREADS;
                }
            });
        }
    });
    let alive = daemon.alive();
    let rss_kib_after = super::settings::rss_kib(pid).unwrap_or(0);
    let still_works = alive && works(&daemon)?;
    daemon.stop()?;
    Ok(FloodResult {
        messages: sent.into_inner(),
        connections: counts[0].load(Ordering::Relaxed),
        refused: counts[1].load(Ordering::Relaxed),
        accepted: counts[2].load(Ordering::Relaxed),
        daemon_crashes: daemon.crashes,
        rss_kib_before,
        rss_kib_after,
        still_works,
    })
}

/// One connection of kind `i`: returns the messages sent and whether the reply said ok
/// (`None`: no reply, e.g. a connection that sent nothing).
fn one_connection(socket: &Path, i: u64, nesting: &str) -> (u64, Option<bool>) {
    let Ok(mut s) = UnixStream::connect(socket) else {
        return (0, None);
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    let (bytes, n): (Vec<u8>, u64) = if i % OVERSIZED_EVERY == OVERSIZED_EVERY - 1 {
        (vec![b'{'; 2 << 20], 1)
    } else {
        match (i % 10) as usize {
            k @ 0..=6 => (MALFORMED[k].to_vec(), 1),
            7 => (nesting.as_bytes().to_vec(), 1),
            8 => {
                let k = (i / 10 % 7) as usize;
                let lines = MALFORMED[k].repeat(FLOOD_LINES);
                (lines, FLOOD_LINES as u64)
            }
            _ => return (0, None), // connect, send nothing, hang up
        }
    };
    if s.write_all(&bytes).is_err() {
        return (n, None); // the daemon hung up first (a line past its limit)
    }
    let mut reply = Vec::new();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = (&mut s).take(1 << 16).read_to_end(&mut reply);
    let text = String::from_utf8_lossy(&reply);
    let ok = (!text.is_empty()).then(|| text.contains("\"ok\":true"));
    (n, ok)
}

/// The daemon still answers `status` and applies a focus.
fn works(daemon: &Daemon) -> Result<bool> {
    let mut app = std::process::Command::new("sleep").arg("30").spawn()?;
    let pid = app.id() as i32;
    let applied = daemon.focus(Some(pid)).is_ok() && {
        let end = std::time::Instant::now() + Duration::from_secs(5);
        let mut boosted = false;
        while !boosted && std::time::Instant::now() < end {
            boosted = uxsched_os::sched::get(pid).is_ok_and(|a| a.nice < 0);
            std::thread::sleep(Duration::from_millis(20));
        }
        boosted
    };
    let _ = daemon.focus(None);
    let _ = app.kill();
    let _ = app.wait();
    ensure!(daemon.socket().exists(), "the daemon's socket vanished");
    Ok(applied)
}
