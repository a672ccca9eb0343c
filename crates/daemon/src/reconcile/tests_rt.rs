//! A real-time class (`Target::rt`: an app's grant, `rtapi/`) against the fake kernel: applied
//! only to fair threads with `SCHED_FLAG_RESET_ON_FORK`, restored to the exact fair original
//! (nice and custom slice) on release, exit, crash recovery and a recycled tid.

use super::fake::{default_attr, reconciler};
use crate::config::Config;
use crate::types::{Rt, RtPolicy, Target};
use uxsched_os::sched::{SCHED_FIFO, SCHED_FLAG_RESET_ON_FORK, SCHED_OTHER, SCHED_RR};

use super::fake::one_thread as app;

fn rt(policy: RtPolicy, priority: u32) -> Target {
    Target {
        rt: Some(Rt { policy, priority }),
        ..Target::default()
    }
}

use super::fake::{nothing, want_one as want};

#[test]
fn a_real_time_class_is_applied_with_reset_on_fork_and_the_fair_original_restored() {
    let (w, dir, app) = app();
    // The thread had its own nice and custom slice: both must come back exactly.
    let original = {
        let mut a = default_attr(3);
        a.runtime = 700_000;
        a
    };
    w.borrow_mut().tasks.get_mut(&100).unwrap().sched = original;
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(app, rt(RtPolicy::Fifo, 10))).unwrap();
    let now = w.borrow().task(100).sched;
    assert_eq!((now.policy, now.priority), (SCHED_FIFO, 10));
    assert_ne!(now.flags & SCHED_FLAG_RESET_ON_FORK, 0);
    // Unchanged wish: nothing rewritten (the kernel reports RT tasks without nice and slice).
    let writes = w.borrow().writes;
    rec.reconcile(&want(app, rt(RtPolicy::Fifo, 10))).unwrap();
    assert_eq!(
        w.borrow().writes,
        writes,
        "a held RT grant is not rewritten"
    );
    // Changed on the fly: RR 5.
    rec.reconcile(&want(app, rt(RtPolicy::Rr, 5))).unwrap();
    let now = w.borrow().task(100).sched;
    assert_eq!((now.policy, now.priority), (SCHED_RR, 5));
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().task(100).sched, original);
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn a_thread_someone_else_made_real_time_is_left_alone() {
    let (w, dir, app) = app();
    let theirs = {
        let mut a = default_attr(0);
        a.policy = SCHED_RR;
        a.priority = 50;
        a.runtime = 0;
        a
    };
    w.borrow_mut().tasks.get_mut(&100).unwrap().sched = theirs;
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(app, rt(RtPolicy::Fifo, 10))).unwrap();
    assert_eq!(w.borrow().task(100).sched, theirs);
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn a_grant_that_someone_demoted_is_not_restored_over_theirs() {
    let (w, dir, app) = app();
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(app, rt(RtPolicy::Fifo, 10))).unwrap();
    // The user (or the canary's watchdog) set it back to fair nice 4 meanwhile.
    w.borrow_mut().tasks.get_mut(&100).unwrap().sched = default_attr(4);
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().task(100).sched, default_attr(4));
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn a_killed_daemons_real_time_grant_is_restored_by_the_next_one() {
    let (w, dir, app) = app();
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(app, rt(RtPolicy::Fifo, 20))).unwrap();
    drop(rec); // SIGKILL: no restore
    assert_eq!(w.borrow().task(100).sched.policy, SCHED_FIFO);
    let mut next = reconciler(&w, &dir.path().join("j"));
    next.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().task(100).sched, default_attr(0));
    assert!(next.journal.entries().unwrap().is_empty());
}

#[test]
fn a_real_time_class_that_lands_on_a_recycled_tid_is_undone_at_once() {
    let (w, dir, app) = app();
    let mut rec = reconciler(&w, &dir.path().join("j"));
    w.borrow_mut().recycle_on_write = Some((100, 999));
    rec.reconcile(&want(app, rt(RtPolicy::Fifo, 10))).unwrap();
    let t = w.borrow().task(100).clone();
    assert_eq!(t.id.start, 999);
    assert_eq!(t.sched.policy, SCHED_OTHER, "undone on the new task");
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn an_exited_grant_holder_is_forgotten_without_writes() {
    let (w, dir, app) = app();
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(app, rt(RtPolicy::Fifo, 10))).unwrap();
    w.borrow_mut().exit(100);
    let writes = w.borrow().writes;
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().writes, writes);
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn bounds_keep_real_time_priorities_in_the_kernels_range() {
    let cfg = Config::default();
    let (_w, _dir, app) = app();
    let d = want(app, rt(RtPolicy::Fifo, 500)).bounded(&cfg);
    assert_eq!(d.threads[&app].rt.unwrap().priority, 99);
    let d = want(app, rt(RtPolicy::Rr, 0)).bounded(&cfg);
    assert_eq!(d.threads[&app].rt.unwrap().priority, 1);
}

/// The fast path (`add.rs`): a new thread's boost is written at once and journalled like any
/// first change; a thread with a row (here an RT grant held at FIFO 10) is neither touched nor
/// lowered by it, and the full pass afterwards restores both exactly.
#[test]
fn the_fast_path_starts_new_boosts_and_never_lowers_a_grant() {
    let (w, dir, app) = app();
    let fresh = w.borrow_mut().spawn(101, 100, 8, None);
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(app, rt(RtPolicy::Fifo, 10))).unwrap();
    let mut d = want(app, rt(RtPolicy::Fifo, 1));
    d.threads.insert(fresh, rt(RtPolicy::Fifo, 1));
    let candidates = rec.fast_plan(&d).unwrap();
    assert_eq!(candidates.threads(), [fresh]);
    assert_eq!(rec.add(&d).unwrap(), [fresh]);
    let now = |tid| w.borrow().task(tid).sched;
    assert_eq!((now(100).policy, now(100).priority), (SCHED_FIFO, 10));
    assert_eq!((now(101).policy, now(101).priority), (SCHED_FIFO, 1));
    assert_eq!(rec.journal.entries().unwrap().len(), 2, "journalled first");
    let writes = rec.journal.writes();
    assert_eq!(rec.add(&d).unwrap(), [fresh], "holds it already");
    assert_eq!(rec.journal.writes(), writes, "written once");
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(now(100).policy, SCHED_OTHER);
    assert_eq!(now(101), default_attr(0));
    assert!(rec.journal.entries().unwrap().is_empty());
}

/// The fast path raises a boost uxsched wrote (an app thread's mild bonus) to the critical
/// one at once, journalled as an update, and the pass restores the original; it never raises
/// a setting someone else changed since, and leaves a weaker wish to the pass.
#[test]
fn the_fast_path_raises_its_own_mild_boost_but_not_someone_elses() {
    let (w, dir, app) = app();
    let other = w.borrow_mut().spawn(101, 100, 8, None);
    let mild = Target {
        nice: Some(-2),
        ..Target::default()
    };
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&super::fake::want(&[
        (app, mild.clone()),
        (other, mild.clone()),
    ]))
    .unwrap();
    // Someone else renices the second thread after uxsched did.
    w.borrow_mut().tasks.get_mut(&101).unwrap().sched.nice = -7;
    let critical =
        super::fake::want(&[(app, rt(RtPolicy::Fifo, 2)), (other, rt(RtPolicy::Fifo, 2))]);
    assert_eq!(rec.add(&critical).unwrap(), [app]);
    let now = |tid| w.borrow().task(tid).sched;
    assert_eq!((now(100).policy, now(100).priority), (SCHED_FIFO, 2));
    assert_eq!(
        (now(101).policy, now(101).nice),
        (SCHED_OTHER, -7),
        "theirs stands"
    );
    // A weaker wish than what is held: the pass's, not the fast path's.
    let weaker = want(app, mild);
    assert!(rec.fast_plan(&weaker).unwrap().is_empty());
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(now(100), default_attr(0));
    assert_eq!(now(101).nice, -7);
}

/// A thread the guard cannot read goes to the fair boost instead: `replan` works its step out
/// again from the new target, and carrying out the plan writes that.
#[test]
fn a_replanned_thread_gets_its_new_target() {
    let (w, dir, app) = app();
    let mut rec = reconciler(&w, &dir.path().join("j"));
    let mut plan = rec.fast_plan(&want(app, rt(RtPolicy::Fifo, 2))).unwrap();
    assert_eq!(plan.rt_threads(), [app]);
    let fair = Target {
        nice: Some(-19),
        ..Target::default()
    };
    rec.replan(&mut plan, app, fair).unwrap();
    assert!(plan.rt_threads().is_empty());
    assert_eq!(rec.add_planned(plan).unwrap().len(), 1);
    let now = w.borrow().task(100).sched;
    assert_eq!((now.policy, now.nice), (SCHED_OTHER, -19));
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().task(100).sched, default_attr(0));
}

/// Chromium resets its pool threads' nice as they start, over the fair boost of the app in
/// front: theirs stands while uxsched wants the same. The tracker then finds one on the
/// interaction's path (a renderer's raster worker): a stronger wish, asked once more; the app
/// changing it again yields it for good (until the focus changes).
#[test]
fn a_yielded_thread_found_critical_is_raised_once_more() {
    let (w, dir, app) = app();
    let mut rec = reconciler(&w, &dir.path().join("j"));
    let others = Target {
        nice: Some(-2),
        ..Target::default()
    };
    rec.reconcile(&want(app, others.clone())).unwrap();
    assert_eq!(w.borrow().task(100).sched.nice, -2);
    w.borrow_mut().tasks.get_mut(&100).unwrap().sched = default_attr(0); // the app's own
    rec.reconcile(&want(app, others.clone())).unwrap();
    assert_eq!(w.borrow().task(100).sched, default_attr(0), "theirs stands");
    rec.reconcile(&want(app, others)).unwrap();
    assert_eq!(w.borrow().task(100).sched, default_attr(0), "and stays");
    let critical = Target {
        nice: Some(-8),
        ..rt(RtPolicy::Fifo, 2)
    };
    rec.reconcile(&want(app, critical.clone())).unwrap();
    let now = w.borrow().task(100).sched;
    assert_eq!(
        (now.policy, now.priority),
        (SCHED_FIFO, 2),
        "on the path now"
    );
    w.borrow_mut().tasks.get_mut(&100).unwrap().sched = default_attr(0); // theirs again
    rec.reconcile(&want(app, critical.clone())).unwrap();
    rec.reconcile(&want(app, critical)).unwrap();
    assert_eq!(w.borrow().task(100).sched, default_attr(0), "no tug-of-war");
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().task(100).sched, default_attr(0));
    assert!(rec.journal.entries().unwrap().is_empty());
}

/// The race behind issue 30's slow no-autogroup runs: the app resets the pool thread's nice
/// in the same pass as the tracker finds it critical. What was overridden is the fair boost,
/// so the real-time wish is asked at the next pass (it used to be yielded as the wish itself,
/// and the raster worker stayed in the fair class for the whole run).
#[test]
fn a_thread_found_critical_in_the_pass_that_sees_it_reset_is_raised_next_pass() {
    let (w, dir, app) = app();
    let mut rec = reconciler(&w, &dir.path().join("j"));
    let others = Target {
        nice: Some(-5),
        ..Target::default()
    };
    rec.reconcile(&want(app, others)).unwrap();
    assert_eq!(w.borrow().task(100).sched.nice, -5);
    w.borrow_mut().tasks.get_mut(&100).unwrap().sched = default_attr(0); // the app's own
    let critical = Target {
        nice: Some(-8),
        ..rt(RtPolicy::Fifo, 2)
    };
    rec.reconcile(&want(app, critical.clone())).unwrap();
    assert_eq!(
        w.borrow().task(100).sched,
        default_attr(0),
        "the pass that sees their change yields it"
    );
    rec.reconcile(&want(app, critical)).unwrap();
    let now = w.borrow().task(100).sched;
    assert_eq!(
        (now.policy, now.priority),
        (SCHED_FIFO, 2),
        "the stronger wish is asked once more"
    );
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().task(100).sched, default_attr(0));
}
