//! The rt lever's guard on the real kernel (issue 10): a thread made SCHED_FIFO that busy-loops
//! is demoted by the guard thread alone — the "daemon loop" here never runs again after making
//! it real-time, as when the loop is blocked on a write behind a starved kernel thread.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use uxsched_daemon::actuators::sched::{self, SchedAttr, SCHED_FIFO, SCHED_OTHER};
use uxsched_daemon::identity;
use uxsched_daemon::rt_budget::Limits;
use uxsched_daemon::rt_guard::RtGuard;
use uxsched_daemon::sources::Event;

fn fair(nice: i32) -> SchedAttr {
    SchedAttr {
        policy: SCHED_OTHER,
        flags: 0,
        nice,
        priority: 0,
        runtime: 0,
        deadline: 0,
        period: 0,
    }
}

#[test]
#[ignore = "needs root (SCHED_FIFO): make test runs it as root"]
fn the_guard_demotes_a_busy_loop_to_its_original_while_the_loop_is_away() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "run as root");
    let (tx, rx) = mpsc::channel();
    let limits = Limits {
        continuous: Duration::from_millis(3),
        episode: Duration::from_millis(12),
        cooldown: Duration::from_secs(60),
    };
    let guard = RtGuard::spawn(limits, tx).expect("the guard runs at SCHED_FIFO 99 as root");

    // A thread that spins until told to stop, at nice 5 (its "original").
    let stop = Arc::new(AtomicBool::new(false));
    let tid = Arc::new(AtomicI32::new(0));
    let (s, t) = (stop.clone(), tid.clone());
    let spinner = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        t.store(unsafe { libc::gettid() }, Ordering::SeqCst);
        while !s.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    while tid.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    let tid = tid.load(Ordering::SeqCst);
    sched::set(tid, &fair(5)).unwrap();
    let task = identity::task_id(tid).unwrap();

    // What the daemon's loop does before writing the lever's boost: follow, publish.
    assert!(guard.follow([task]).is_empty(), "schedstat readable");
    guard.publish([(task, fair(5))]);
    let fifo1 = SchedAttr {
        policy: SCHED_FIFO,
        flags: sched::SCHED_FLAG_RESET_ON_FORK,
        priority: 1,
        ..fair(0)
    };
    let t0 = Instant::now();
    sched::set(tid, &fifo1).unwrap();

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
