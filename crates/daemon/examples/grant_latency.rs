//! Grant latency of the real-time API (docs/api.md), from the client's side: how long from
//! sending a request to the reply, when the kernel already holds the change. One real daemon
//! (this binary re-executed, private socket and journal, mode `eimos` never told a foreground,
//! so the grant is all it does); the client asks `N` times for SCHED_FIFO 10 for its own
//! thread and back (`reset`), timing each call with CLOCK_MONOTONIC around it, and after each
//! reply reads `/proc/thread-self/stat` (policy, rt_priority) to check that the kernel holds
//! what the reply says — a call whose change is not yet applied counts as a failure.
//!
//! Run as root: `cargo run --release -p uxsched-daemon --example grant_latency -- [N]`
//! (default 500 pairs). Prints p50/p99/max of request → applied for the grant and the reset,
//! in µs (`uxsched_model::stats::nearest_rank`).

#[path = "common/private_daemon.rs"]
mod private_daemon;

use private_daemon::Daemon;
use std::time::Instant;
use uxsched_client::{Ask, Client, Policy};

const PRIORITY: u32 = 10;

fn main() {
    if private_daemon::run_if_daemon() {
        return;
    }
    let n: usize = std::env::args().nth(1).map_or(500, |a| {
        a.parse().expect("N: a number of grant+reset pairs")
    });
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "run as root: the daemon changes scheduling"
    );
    uxsched_client::limit_rttime(200_000).expect("setting RLIMIT_RTTIME");
    // The rate limit is what the loop measures past, not what it measures.
    let daemon = Daemon::start(
        "grant-latency",
        "mode = \"eimos\"\n[rtapi]\nrate_max = 100000\nrate_window_ms = 100\n",
    );
    let mut client = Client::connect(&daemon.socket).expect("connecting to the daemon");
    let rt = Ask::Realtime {
        policy: Policy::Fifo,
        priority: PRIORITY,
    };
    let (mut grant, mut reset) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        grant.push(timed(&mut client, rt, (libc::SCHED_FIFO as u32, PRIORITY)));
        reset.push(timed(
            &mut client,
            Ask::Reset,
            (libc::SCHED_OTHER as u32, 0),
        ));
    }
    drop(client);
    println!("grant latency over {n} pairs (request → reply, the kernel holding it), µs:");
    for (what, samples) in [("realtime FIFO 10", grant), ("reset", reset)] {
        let mut s = samples;
        s.sort_by(f64::total_cmp);
        let p = |permille| uxsched_model::stats::nearest_rank(&s, permille);
        println!(
            "  {what:<17} p50 {:>7.1}  p99 {:>7.1}  max {:>7.1}",
            p(500),
            p(990),
            p(1000)
        );
    }
}

/// One call, timed; panics unless the kernel holds `(policy, rt_priority)` when it returns.
fn timed(client: &mut Client, ask: Ask, want: (u32, u32)) -> f64 {
    let start = Instant::now();
    let got = client.for_this_thread(ask);
    let us = start.elapsed().as_secs_f64() * 1e6;
    let got = got.unwrap_or_else(|e| panic!("{ask:?} refused: {e}"));
    let held = policy_now();
    assert_eq!(
        held, want,
        "{ask:?}: the reply said {got:?}, the kernel holds {held:?}"
    );
    us
}

/// (policy, rt_priority) of the calling thread from `/proc/thread-self/stat` (fields 41, 40).
fn policy_now() -> (u32, u32) {
    let f = uxsched_os::task::Fields::read("/proc/thread-self/stat").unwrap();
    (f.num(41).unwrap(), f.num(40).unwrap())
}
