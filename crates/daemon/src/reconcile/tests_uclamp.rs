//! `uclamp.min` (`Target::uclamp_min`: a hint session's boost, `rtapi/hint.rs`) against the fake
//! kernel: raised with nice and slice and restored exactly (on release, a lowered wish, crash
//! recovery), never lowered below or raised above the thread's own clamps, never over someone
//! else's change; on a kernel without uclamp nothing but nice and slice is written; and a
//! journal from before clamps were journalled still loads and restores without touching them.

use super::fake::{default_attr, reconciler, Shared};
use crate::types::Key;
use crate::types::Target;
use uxsched_os::identity::TaskId;
use uxsched_os::sched::{SchedAttr, Uclamp};

const DEFAULT_CLAMPS: Uclamp = Uclamp { min: 0, max: 1024 };

/// One thread (tid 100) on a kernel with uclamp, holding `clamps`.
fn app(clamps: Option<Uclamp>) -> (Shared, tempfile::TempDir, TaskId, SchedAttr) {
    let (w, dir, app) = one_thread();
    let original = SchedAttr {
        uclamp: clamps,
        ..default_attr(0)
    };
    w.borrow_mut().tasks.get_mut(&100).unwrap().sched = original;
    (w, dir, app, original)
}

fn hint(nice: Option<i32>, uclamp_min: Option<u32>) -> Target {
    Target {
        nice,
        slice_ns: nice.map(|_| 1_000_000),
        uclamp_min,
        ..Target::default()
    }
}

use super::fake::{nothing, one_thread, want_one as want};

fn sched(w: &Shared) -> SchedAttr {
    w.borrow().task(100).sched
}

#[test]
fn uclamp_min_is_raised_with_the_boost_and_put_back_exactly() {
    let (w, dir, app, original) = app(Some(DEFAULT_CLAMPS));
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(app, hint(Some(-3), Some(200))))
        .unwrap();
    let now = sched(&w);
    assert_eq!((now.nice, now.runtime), (-3, 1_000_000));
    assert_eq!(
        now.uclamp,
        Some(Uclamp {
            min: 200,
            max: 1024
        })
    );
    // A lower wish at the same nice: lowered, not left at the old height.
    rec.reconcile(&want(app, hint(Some(-3), Some(100))))
        .unwrap();
    assert_eq!(sched(&w).uclamp.unwrap().min, 100);
    // Nice only (the session's uclamp capped to 0 meanwhile): the original clamp is back.
    rec.reconcile(&want(app, hint(Some(-3), None))).unwrap();
    assert_eq!(
        (sched(&w).nice, sched(&w).uclamp),
        (-3, Some(DEFAULT_CLAMPS))
    );
    rec.reconcile(&want(app, hint(Some(-3), Some(300))))
        .unwrap();
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(sched(&w), original);
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn the_threads_own_clamps_bound_the_boost() {
    // Its own min 300 and max 350: a wish of 500 gets 350 (the kernel refuses min > max) …
    let own = Uclamp { min: 300, max: 350 };
    let (w, dir, app, original) = app(Some(own));
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(app, hint(Some(-2), Some(500))))
        .unwrap();
    assert_eq!(sched(&w).uclamp, Some(Uclamp { min: 350, max: 350 }));
    // … and one of 100 leaves its 300 (a boost never lowers it).
    rec.reconcile(&want(app, hint(Some(-2), Some(100))))
        .unwrap();
    assert_eq!(sched(&w).uclamp, Some(own));
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(sched(&w), original);
}

#[test]
fn someone_elses_uclamp_min_is_not_restored_over() {
    let (w, dir, app, _) = app(Some(DEFAULT_CLAMPS));
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(app, hint(Some(-3), Some(200))))
        .unwrap();
    w.borrow_mut().tasks.get_mut(&100).unwrap().sched.uclamp = Some(Uclamp { min: 50, max: 1024 });
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(sched(&w).uclamp.unwrap().min, 50, "theirs stands");
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn a_killed_daemons_uclamp_min_is_restored_by_the_next_one() {
    let (w, dir, app, original) = app(Some(DEFAULT_CLAMPS));
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(app, hint(Some(-4), Some(250))))
        .unwrap();
    drop(rec); // SIGKILL: no restore
    assert_eq!(sched(&w).uclamp.unwrap().min, 250);
    let mut next = reconciler(&w, &dir.path().join("j"));
    next.reconcile(&nothing()).unwrap();
    assert_eq!(sched(&w), original);
    assert!(next.journal.entries().unwrap().is_empty());
}

#[test]
fn without_uclamp_only_nice_and_slice_are_written() {
    let (w, dir, app, original) = app(None);
    let mut rec = reconciler(&w, &dir.path().join("j"));
    // uclamp alone changes nothing here: nothing journalled, nothing written.
    rec.reconcile(&want(app, hint(None, Some(200)))).unwrap();
    assert!(rec.journal.entries().unwrap().is_empty());
    assert_eq!(w.borrow().writes, 0);
    // With a nice: applied (the fake refuses a clamp with EOPNOTSUPP, as such a kernel does).
    rec.reconcile(&want(app, hint(Some(-3), Some(200))))
        .unwrap();
    assert_eq!((sched(&w).nice, sched(&w).uclamp), (-3, None));
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(sched(&w), original);
}

#[test]
fn a_journal_from_before_clamps_loads_and_restores_without_touching_them() {
    let (w, dir, app, _) = app(Some(Uclamp { min: 77, max: 1024 }));
    let path = dir.path().join("j");
    // A row the previous version wrote: nice −5 over nice 0, no `uclamp` in either value.
    drop(crate::journal::Journal::open(&path, |_| None).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let old = |nice| {
        format!(
            r#"{{"sched":{{"policy":0,"flags":{f},"nice":{nice},"priority":0,"runtime":{r},"deadline":0,"period":0}}}}"#,
            f = if nice < 0 { 1 } else { 0 },
            r = super::fake::DEFAULT_SLICE
        )
    };
    conn.execute(
        "INSERT INTO settings (kind, key, via_tid, via_pid, via_start, original, applied)
         VALUES ('sched', ?1, 100, 100, ?2, ?3, ?4)",
        rusqlite::params![
            serde_json::to_string(&Key::Thread(app)).unwrap(),
            app.start as i64,
            old(0),
            old(-5)
        ],
    )
    .unwrap();
    drop(conn);
    {
        let mut t = w.borrow_mut();
        let s = &mut t.tasks.get_mut(&100).unwrap().sched;
        s.nice = -5;
        s.flags = 1;
    }
    let mut rec = reconciler(&w, &path);
    let entries = rec.journal.entries().unwrap();
    assert_eq!(entries.len(), 1, "the old row loads");
    rec.reconcile(&nothing()).unwrap();
    let now = sched(&w);
    assert_eq!((now.nice, now.flags), (0, 0), "restored");
    assert_eq!(
        now.uclamp.unwrap().min,
        77,
        "a clamp it never set is left alone"
    );
    assert!(rec.journal.entries().unwrap().is_empty());
}
