//! The run-time budget's rules, step by step (`rt_budget.rs`).
use super::*;
use std::cell::Cell;

const T: TaskId = TaskId {
    tid: 7,
    pid: 7,
    start: 1,
};

fn limits() -> Limits {
    Limits {
        continuous: Duration::from_millis(3),
        episode: Duration::from_millis(12),
        cooldown: Duration::from_millis(100),
    }
}

fn ms(x: u64) -> u64 {
    x * 1_000_000
}

/// Feed (run ms, sleeps) increments one check at a time; the check that demoted, if any.
fn run(steps: &[(u64, u64)]) -> Option<usize> {
    run_from(Some(0), steps)
}

/// [`run`] from a first sample whose sleep count is `sleeps` (`None`: not read).
fn run_from(sleeps: Option<u64>, steps: &[(u64, u64)]) -> Option<usize> {
    run_every(sleeps, Duration::ZERO, steps)
}

/// [`run_from`] with the checks `every` apart.
fn run_every(sleeps: Option<u64>, every: Duration, steps: &[(u64, u64)]) -> Option<usize> {
    let now = Cell::new(Sample { run_ns: 0, sleeps });
    let mut b = RtBudget::new(limits());
    let origin = Instant::now();
    b.follow_with([T], |_| Ok(now.get()));
    let start = Instant::now();
    for (i, &(run, ins)) in steps.iter().enumerate() {
        let start = if every.is_zero() {
            start
        } else {
            origin + every * (i as u32 + 1)
        };
        let s = now.get();
        now.set(Sample {
            run_ns: s.run_ns + ms(run),
            sleeps: Some(s.sleeps.unwrap_or(0) + ins),
        });
        if !b.check_with(start, |_| Ok(now.get())).is_empty() {
            assert!(b.demoted(start).contains(&T));
            assert!(!b.active(), "no longer watched");
            return Some(i);
        }
    }
    None
}

#[test]
fn a_busy_loop_is_demoted_at_the_continuous_limit() {
    // Woke during the first interval (that stretch's start is unknown: counted from the
    // check), then ran through two more: 2 + 2 ms without a sleep.
    assert_eq!(run(&[(2, 1), (2, 0), (2, 0)]), Some(2));
    assert_eq!(run(&[(5, 0)]), Some(0));
}

#[test]
fn a_first_interval_without_a_sleep_count_counts_as_one_stretch() {
    // Woke in the first interval and ran on: with a baseline the stretch starts at the
    // first check (demoted at the third); without one the whole interval counts (second).
    assert_eq!(run_from(Some(0), &[(2, 1), (2, 0), (2, 0)]), Some(2));
    assert_eq!(run_from(None, &[(2, 1), (2, 0), (2, 0)]), Some(1));
    // Later intervals have their baseline: sleeps reset the stretch as before.
    assert_eq!(run_from(None, &[(1, 1), (2, 1), (2, 1), (0, 0)]), None);
}

#[test]
fn short_runs_with_sleeps_in_between_are_never_demoted() {
    // 1 ms of work per wake-up, a rest of a whole check interval between them.
    let steps: Vec<_> = (0..100)
        .map(|i| if i % 2 == 0 { (1, 1) } else { (0, 0) })
        .collect();
    assert_eq!(run(&steps), None);
}

#[test]
fn many_short_runs_without_a_rest_use_up_the_episode() {
    // 2 ms per check in 2 stretches each (1 ms each): never 3 ms at once, 12 ms in total.
    assert_eq!(run(&[(2, 2); 10]), Some(5));
    // One long stretch among sleeps: 7 ms in at most 2 stretches proves one ≥ 3.5 ms.
    assert_eq!(run(&[(7, 1)]), Some(0));
}

#[test]
fn cool_downs_expire_and_unreadable_threads_are_never_left_real_time() {
    let mut b = RtBudget::new(limits());
    let n = Cell::new(0u64);
    b.follow_with([T], |_| {
        Ok(Sample {
            run_ns: n.get(),
            sleeps: Some(0),
        })
    });
    n.set(ms(4));
    let t0 = Instant::now();
    let over = b.check_with(t0, |_| {
        Ok(Sample {
            run_ns: n.get(),
            sleeps: Some(0),
        })
    });
    assert_eq!(over, [T]);
    assert!(b.demoted(t0 + Duration::from_millis(99)).contains(&T));
    assert!(b.demoted(t0 + Duration::from_millis(101)).is_empty());
    let gone = b.follow_with([T], |_| Err(io::ErrorKind::NotFound.into()));
    assert_eq!(gone, [T], "unreadable: not real-time");
    assert!(!b.active());
    // Watched, then unreadable while it exists: demoted, not left unbounded.
    let t1 = t0 + Duration::from_secs(1);
    b.follow_with([T], |_| Ok(Sample::default()));
    let denied = || Err(io::Error::from_raw_os_error(libc::EACCES));
    assert_eq!(b.check_with(t1, |_| denied()), [T]);
    assert!(b.demoted(t1).contains(&T));
    // An exited thread is simply no longer watched.
    b.follow_with([T], |_| Ok(Sample::default()));
    assert!(b
        .check_with(t1, |_| Err(io::ErrorKind::NotFound.into()))
        .is_empty());
    assert!(!b.active());
}

#[test]
fn schedstat_is_parsed_and_this_thread_has_run() {
    assert_eq!(parse("123 456 7\n").unwrap(), (123, 7));
    assert!(parse("1 2\n").is_err());
    assert_eq!(
        voluntary("Name:\tx\nvoluntary_ctxt_switches:\t42\n").unwrap(),
        42
    );
    assert!(voluntary("Name:\tx\n").is_err());
    let me = crate::identity::task_id(std::process::id() as i32).unwrap();
    assert!(read(&me).unwrap().run_ns > 0);
}

/// Checked 50 ms apart (the guard's quiet waits), a thread that runs 1 ms at each of two
/// keystrokes per interval and sleeps in between never accumulates a busy period: the gaps
/// between its runs are whole check intervals, as the 5 ms checks would have seen.
#[test]
fn long_intervals_still_end_busy_periods_at_the_gaps_they_hold() {
    let keystrokes = [(2, 2); 40]; // 2 ms and 2 sleeps per 50 ms, for 2 s
    assert_eq!(
        run_every(Some(0), Duration::from_millis(50), &keystrokes),
        None
    );
    // Without the gap (checked as if back to back) the same run time adds up to 12 ms.
    assert_eq!(run_every(Some(0), Duration::ZERO, &keystrokes), Some(5));
    // A thread that runs a little every half millisecond has no 5 ms gap however long the
    // interval: 100 sleeps in 50 ms leave gaps of under 0.5 ms, and its run time adds up.
    let busy = [(2, 100); 40];
    assert_eq!(
        run_every(Some(0), Duration::from_millis(50), &busy),
        Some(5)
    );
}

/// The kept-open reader sees the same run time and sleeps as opening the files afresh,
/// and a thread's sleep shows up once it was switched in again.
#[test]
fn the_reader_follows_a_sleeping_thread_through_one_descriptor() {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let me = crate::identity::task_id(tid).unwrap();
    let mut r = Reader::default();
    let run_and_sleep = || {
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let a = r.read(&me).unwrap();
    assert_eq!(a.sleeps, None, "the first read leaves status for later");
    run_and_sleep();
    let b = r.read(&me).unwrap();
    run_and_sleep();
    let c = r.read(&me).unwrap();
    let fresh = read(&me).unwrap();
    assert!(
        b.run_ns > a.run_ns && c.run_ns > b.run_ns,
        "ran: {a:?} {b:?} {c:?}"
    );
    assert!(
        c.sleeps > b.sleeps && b.sleeps.is_some(),
        "slept: {b:?} {c:?}"
    );
    assert!(fresh.run_ns >= c.run_ns && fresh.sleeps >= c.sleeps);
    assert_eq!(r.open.len(), 1, "one descriptor per thread");
    r.retain(|_| false);
    assert!(r.open.is_empty());
}
