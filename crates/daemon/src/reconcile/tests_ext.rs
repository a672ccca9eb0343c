//! The `scx` backend's switches (`Target::ext`) against the fake kernel: journalled and
//! restored like every change, updated in place when the daemon falls back to the stock
//! levers, and a thread that inherited `SCHED_EXT` restored to `SCHED_OTHER`.

use super::fake::{default_attr, reconciler, World, DEFAULT_SLICE};
use crate::config::Config;
use crate::types::{Desired, Target};
use std::cell::RefCell;
use std::rc::Rc;
use uxsched_os::sched::{SCHED_EXT, SCHED_FLAG_RESET_ON_FORK, SCHED_OTHER};

use super::fake::want;

fn ext() -> Target {
    Target {
        ext: true,
        ..Target::default()
    }
}

#[test]
fn a_switch_keeps_nice_and_slice_and_is_restored_exactly() {
    let w = Rc::new(RefCell::new(World::default()));
    let dir = tempfile::tempdir().unwrap();
    let app = w.borrow_mut().spawn(100, 100, 1, None);
    w.borrow_mut().tasks.get_mut(&100).unwrap().sched = default_attr(3);
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(&[(app, ext())])).unwrap();
    let t = w.borrow().task(100).sched;
    assert_eq!((t.policy, t.nice, t.runtime), (SCHED_EXT, 3, DEFAULT_SLICE));
    assert_ne!(t.flags & SCHED_FLAG_RESET_ON_FORK, 0);
    assert_eq!(rec.journal.entries().unwrap().len(), 1);
    // The scheduler was ejected: the stock lever's wish replaces the switch in place.
    let stock = Target {
        nice: Some(-10),
        ..Target::default()
    };
    rec.reconcile(&want(&[(app, stock)])).unwrap();
    let t = w.borrow().task(100).sched;
    assert_eq!((t.policy, t.nice), (SCHED_OTHER, -10));
    rec.reconcile(&want(&[(app, ext())])).unwrap();
    assert_eq!(w.borrow().task(100).sched.policy, SCHED_EXT);
    rec.reconcile(&Desired::nothing(&Config::default()))
        .unwrap();
    assert_eq!(w.borrow().task(100).sched, default_attr(3));
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn an_inherited_sched_ext_is_taken_for_sched_other_only_when_the_backend_says_so() {
    let w = Rc::new(RefCell::new(World::default()));
    let dir = tempfile::tempdir().unwrap();
    let born = w.borrow_mut().spawn(101, 100, 1, None);
    w.borrow_mut().tasks.get_mut(&101).unwrap().sched = uxsched_os::sched::SchedAttr {
        policy: SCHED_EXT,
        ..default_attr(0)
    };
    let mut rec = reconciler(&w, &dir.path().join("j"));
    // Someone else's SCHED_EXT thread (no backend of ours): not fair, left alone.
    rec.reconcile(&want(&[(born, ext())])).unwrap();
    assert!(rec.journal.entries().unwrap().is_empty());
    rec.ext_inherited = true;
    rec.reconcile(&want(&[(born, ext())])).unwrap();
    assert_eq!(rec.journal.entries().unwrap().len(), 1);
    rec.reconcile(&Desired::nothing(&Config::default()))
        .unwrap();
    assert_eq!(w.borrow().task(101).sched, default_attr(0));
}
