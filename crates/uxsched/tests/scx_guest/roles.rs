//! The guest's workload processes (`scx_guest.rs`): the fixture's roles `hog`, `probe` and
//! `share` (`uxsched-guest-fixture ROLE`, `fixture.rs`), configured by `SCX_*` variables, each
//! printing `fact` lines.
//!
//! Common settings: `SCX_CPU` (pin to that CPU), `SCX_POLICY` (`ext`: SCHED_EXT, else
//! SCHED_NORMAL), `SCX_NICE`, `SCX_SLICE_US` (custom slice, sched_attr.sched_runtime),
//! `SCX_CLASS` + `SCX_PIN` (boost class through the map `uxsched scx run --pin` pinned).

use std::time::{Duration, Instant};
use uxsched_scx::{thread, Boosts, Class};

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

fn num(key: &str, default: u64) -> u64 {
    env(key).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{key}={v} is not a number"))
    })
}

/// Affinity, policy, nice, custom slice and class of this (single-threaded) process.
fn setup() {
    if let Some(cpu) = env("SCX_CPU") {
        let cpu: usize = cpu.parse().expect("SCX_CPU");
        // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            let r = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            assert_eq!(
                r,
                0,
                "sched_setaffinity: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    let policy = match env("SCX_POLICY").as_deref() {
        Some("ext") => thread::SCHED_EXT,
        _ => thread::SCHED_NORMAL,
    };
    let nice = env("SCX_NICE").map_or(0, |v| v.parse().expect("SCX_NICE"));
    thread::set(0, policy, nice, num("SCX_SLICE_US", 0) * 1000).unwrap();
    if let Some(class) = env("SCX_CLASS") {
        let pin = env("SCX_PIN").expect("SCX_CLASS needs SCX_PIN");
        let map = Boosts::open_pinned(format!("{pin}/boosts").as_ref()).unwrap();
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        map.set(tid, class.parse::<Class>().unwrap()).unwrap();
    }
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn sleep_until(t_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: plain syscall with a valid timespec; EINTR just ends the sleep early.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Burn `ns` of this thread's CPU time.
fn burn(ns: u64) {
    let end = thread_cpu_ns() + ns;
    while thread_cpu_ns() < end {
        std::hint::black_box(0u64);
    }
}

/// Runs `role` (`hog`, `probe` or `share`) and exits.
pub fn run(role: &str) -> ! {
    setup();
    let label = env("SCX_LABEL").unwrap_or_else(|| role.to_owned());
    match role {
        "hog" => loop {
            std::hint::black_box(now_ns());
        },
        "probe" => probe(&label),
        "share" => share(&label),
        other => panic!("unknown role {other}"),
    }
    std::process::exit(0);
}

/// Wake up every `SCX_PERIOD_US` on an absolute timer, record how late it ran (the wake-up
/// latency: the timer's expiry to running again), work `SCX_WORK_US`; for `SCX_SECONDS` after
/// a 0.3 s warm-up. Prints `fact probe_LABEL=n mean p50 p95 max` in µs.
fn probe(label: &str) {
    // SAFETY: prctl with an integer argument; 1 ns slack so the timer is not deferred.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let period = num("SCX_PERIOD_US", 10_000) * 1000;
    let work = num("SCX_WORK_US", 300) * 1000;
    let warm = Instant::now() + Duration::from_millis(300);
    let end = warm + Duration::from_secs(num("SCX_SECONDS", 3));
    let mut late = Vec::new();
    let mut target = now_ns() + period;
    while Instant::now() < end {
        sleep_until(target);
        let l = now_ns().saturating_sub(target);
        if Instant::now() > warm {
            late.push(l / 1000);
        }
        burn(work);
        target = (target + period).max(now_ns() + period / 2);
    }
    late.sort_unstable();
    assert!(!late.is_empty(), "the probe never woke up");
    let mean = late.iter().sum::<u64>() / late.len() as u64;
    let p = |pm| uxsched_model::stats::nearest_rank(&late, pm);
    println!(
        "fact probe_{label}={} {mean} {} {} {}",
        late.len(),
        p(500),
        p(950),
        late[late.len() - 1]
    );
}

/// Bursts of `SCX_BURST_US` of CPU time separated by `SCX_SLEEP_US` sleeps for `SCX_SECONDS`:
/// prints `fact share_LABEL=P`, its CPU time per wall time in per mille.
fn share(label: &str) {
    let burst = num("SCX_BURST_US", 20_000) * 1000;
    let nap = num("SCX_SLEEP_US", 5_000) * 1000;
    let (t0, c0) = (now_ns(), thread_cpu_ns());
    let end = t0 + num("SCX_SECONDS", 3) * 1_000_000_000;
    let (mut bursts, mut burst_wall) = (0u64, 0u64);
    while now_ns() < end {
        let b0 = now_ns();
        burn(burst);
        burst_wall += now_ns() - b0;
        bursts += 1;
        sleep_until(now_ns() + nap);
    }
    let permille = (thread_cpu_ns() - c0) * 1000 / (now_ns() - t0);
    println!("fact share_{label}={permille}");
    println!(
        "fact burst_wall_{label}={}",
        burst_wall / bursts.max(1) / 1000
    );
}
