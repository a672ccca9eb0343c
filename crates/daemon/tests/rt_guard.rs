//! The rt lever's guard on the real kernel (issue 10): a thread made SCHED_FIFO that busy-loops
//! is demoted by the guard thread alone — the "daemon loop" here never runs again after making
//! it real-time, as when the loop is blocked on a write behind a starved kernel thread.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use uxsched_daemon::rt_budget::Limits;
use uxsched_daemon::rt_guard::RtGuard;
use uxsched_daemon::types::Event;
use uxsched_os::identity;
use uxsched_os::sched::{self, SchedAttr, SCHED_FIFO, SCHED_OTHER};

fn fair(nice: i32) -> SchedAttr {
    SchedAttr {
        policy: SCHED_OTHER,
        flags: 0,
        nice,
        priority: 0,
        runtime: 0,
        deadline: 0,
        period: 0,
        uclamp: None,
    }
}

/// SCHED_FIFO 2 with reset-on-fork: what the rt lever writes.
fn lever_fifo() -> SchedAttr {
    SchedAttr {
        policy: SCHED_FIFO,
        flags: sched::SCHED_FLAG_RESET_ON_FORK,
        priority: uxsched_daemon::policy::RT_PRIORITY,
        ..fair(0)
    }
}

/// A guard with the lever's limits (a cool-down longer than the test), as root.
fn guard() -> (RtGuard, mpsc::Receiver<Event>) {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "run as root");
    let (tx, rx) = mpsc::channel();
    let limits = Limits {
        continuous: Duration::from_millis(3),
        episode: Duration::from_millis(12),
        cooldown: Duration::from_secs(60),
    };
    let guard = RtGuard::spawn(limits, tx).expect("the guard runs at SCHED_FIFO 99 as root");
    (guard, rx)
}

/// A thread that waits for `go` (never, when `go` is `None`: it spins at once) and then spins
/// until `stop`; its tid.
fn spinner(
    go: Option<mpsc::Receiver<()>>,
    stop: Arc<AtomicBool>,
) -> (std::thread::JoinHandle<()>, i32) {
    let tid = Arc::new(AtomicI32::new(0));
    let t = tid.clone();
    let handle = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        t.store(unsafe { libc::gettid() }, Ordering::SeqCst);
        if let Some(go) = go {
            let _ = go.recv(); // asleep until told
        }
        while !stop.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    while tid.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    (handle, tid.load(Ordering::SeqCst))
}

#[test]
#[ignore = "needs root (SCHED_FIFO): make test runs it as root"]
fn the_guard_demotes_a_busy_loop_to_its_original_while_the_loop_is_away() {
    let (guard, rx) = guard();
    // A thread that spins until told to stop, at nice 5 (its "original").
    let stop = Arc::new(AtomicBool::new(false));
    let (spinner, tid) = spinner(None, stop.clone());
    sched::set(tid, &fair(5)).unwrap();
    let task = identity::task_id(tid).unwrap();

    // What the daemon's loop does before writing the lever's boost: follow, publish.
    assert!(guard.follow([task]).is_empty(), "schedstat readable");
    guard.publish([(task, fair(5))]);
    let t0 = Instant::now();
    sched::set(tid, &lever_fifo()).unwrap();

    // The loop is "away": only the guard can act.
    let event = rx.recv_timeout(Duration::from_secs(2));
    let took = t0.elapsed();
    let now = sched::get(tid).unwrap();
    if now.is_rt() {
        sched::set(tid, &fair(5)).unwrap(); // never leave a spinning RT thread behind
    }
    stop.store(true, Ordering::Relaxed);
    spinner.join().unwrap();

    assert!(matches!(event, Ok(Event::RtOver)), "the loop is told");
    assert_eq!(
        (now.policy, now.nice),
        (SCHED_OTHER, 5),
        "back to its original"
    );
    // The limit (3 ms) + one tick (4 ms at HZ 250, 10 ms at HZ 100) + one check (5 ms), with
    // slack for a loaded 2-CPU machine.
    assert!(took < Duration::from_millis(100), "demoted after {took:?}");
    eprintln!("demoted after {took:?}");
    assert!(
        guard.cooling(Instant::now()).contains(&task),
        "cooling down"
    );
    assert!(!guard.active(), "no longer watched");
    let by_guard = guard.demoted_by_guard();
    assert!(
        by_guard.lock().unwrap().contains_key(&task),
        "the reconciler's exception"
    );
    guard.settled(guard.demotions());
    assert!(by_guard.lock().unwrap().is_empty(), "settled after a pass");
}

/// After 100 ms without any run time the guard checks every 50 ms instead of every 5 ms (the
/// user stopped typing): a FIFO thread that sleeps for 325 ms and then spins is still demoted,
/// within the quiet interval plus the limit and a tick.
#[test]
#[ignore = "needs root (SCHED_FIFO): make test runs it as root"]
fn a_runaway_out_of_a_quiet_spell_is_demoted_within_the_quiet_interval() {
    let (guard, rx) = guard();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let stop = Arc::new(AtomicBool::new(false));
    let (spinner, tid) = spinner(Some(go_rx), stop.clone());
    let task = identity::task_id(tid).unwrap();
    assert!(guard.follow([task]).is_empty(), "schedstat readable");
    guard.publish([(task, fair(0))]);
    sched::set(tid, &lever_fifo()).unwrap();
    // Quiet: the guard slows down. 325 ms puts the start mid-way between two of its checks.
    std::thread::sleep(Duration::from_millis(325));
    let t0 = Instant::now();
    go_tx.send(()).unwrap();
    let event = rx.recv_timeout(Duration::from_secs(2));
    let took = t0.elapsed();
    let now = sched::get(tid).unwrap();
    if now.is_rt() {
        sched::set(tid, &fair(0)).unwrap(); // never leave a spinning RT thread behind
    }
    stop.store(true, Ordering::Relaxed);
    spinner.join().unwrap();
    assert!(matches!(event, Ok(Event::RtOver)), "the loop is told");
    assert_eq!(now.policy, SCHED_OTHER, "demoted");
    // 50 ms quiet interval + 3 ms + a tick, with slack for a loaded 2-CPU machine.
    assert!(took < Duration::from_millis(200), "demoted after {took:?}");
    eprintln!("demoted {took:?} after it started spinning out of a quiet spell");
}
