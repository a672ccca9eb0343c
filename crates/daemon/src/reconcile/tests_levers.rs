//! `cpu_levers = false` against the fake kernel: the `uxsched` mode's pass, as the loop makes
//! it (policy, bounds, `Desired::cpu_switch`), writes the critical set's I/O class and nothing
//! of the CPU — no nice, slice, real-time class, autogroup nice or unit weight — and with the
//! switch on (the default) writes them as before.

use super::fake::{default_attr, nothing, reconciler, reconciler_with_units, Shared, World};
use crate::config::{Config, Lever, Mode};
use crate::policy::{for_mode, test_state::fg_state};
use crate::state::State;
use crate::types::{Critical, CriticalKind, Kind};
use std::cell::RefCell;
use std::rc::Rc;
use uxsched_os::ioprio::{encode, CLASS_RT};
use uxsched_os::sched::SCHED_FIFO;

const SESSION: u64 = 7;
const BE4: u16 = 0x4004;

/// A world with the test app (UI 100, render 101, worker 102 of pid 100, in its own session)
/// and a partner thread 400 on the interaction's chain; the state the loop would scan.
fn front() -> (Shared, State) {
    let w: Shared = Rc::new(RefCell::new(World::default()));
    let mut s = fg_state();
    let app = s.focus.as_mut().unwrap();
    for t in &mut app.threads {
        let tid = t.task.tid;
        t.task = w.borrow_mut().spawn(tid, 100, SESSION, None);
    }
    let partner = w.borrow_mut().spawn(400, 400, 9, None);
    s.chain = vec![Critical {
        task: partner,
        comm: "partner".into(),
        kind: CriticalKind::Partner,
        provisional: false,
        since_ns: 0,
    }];
    (w, s)
}

fn pass(rec: &mut super::Reconciler, s: &State, cfg: &Config) {
    let d = for_mode(Mode::Uxsched).desired(s, cfg).bounded(cfg);
    rec.reconcile(&d.cpu_switch(cfg)).unwrap();
}

fn off(lever: Lever) -> Config {
    let mut cfg = Config {
        cpu_levers: false,
        ..Config::default()
    };
    cfg.tracker.lever = lever;
    cfg
}

#[test]
fn cpu_levers_off_writes_the_critical_sets_io_class_and_nothing_of_the_cpu() {
    let rt4 = encode(CLASS_RT, 4);
    for lever in [Lever::Rt, Lever::Fair] {
        let (w, s) = front();
        let dir = tempfile::tempdir().unwrap();
        let mut rec = reconciler(&w, &dir.path().join("j"));
        pass(&mut rec, &s, &off(lever));
        for tid in [100, 101, 102, 400] {
            assert_eq!(w.borrow().task(tid).sched, default_attr(0), "tid {tid}");
        }
        assert!(w.borrow().sessions.values().all(|&n| n == 0), "autogroup");
        let io = |tid| w.borrow().task(tid).ioprio;
        assert_eq!([io(100), io(101), io(400), io(102)], [rt4, rt4, rt4, BE4]);
        let rows = rec.journal.entries().unwrap();
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|e| e.kind() == Kind::Ioprio), "{rows:?}");
        // Restored like every setting.
        rec.reconcile(&nothing()).unwrap();
        assert_eq!([io(100), io(101), io(400)], [BE4; 3]);
        assert!(rec.journal.entries().unwrap().is_empty());
    }
}

#[test]
fn cpu_levers_off_places_nothing_on_a_systemd_machine() {
    let (w, mut s) = front();
    s.autogroup = false; // the fg group (here: the unit's CPUWeight) instead of autogroup
    let dir = tempfile::tempdir().unwrap();
    let mut rec = reconciler_with_units(&w, &dir.path().join("j"));
    pass(&mut rec, &s, &off(Lever::Fair));
    assert!(w.borrow().units.is_empty(), "{:?}", w.borrow().units);
    assert!(rec.journal.entries().unwrap().is_empty());
    // On: the unit is raised, as before.
    let mut on = Config::default();
    on.tracker.lever = Lever::Fair;
    pass(&mut rec, &s, &on);
    assert!(!w.borrow().units.is_empty());
}

#[test]
fn cpu_levers_on_is_as_before() {
    let rt4 = encode(CLASS_RT, 4);
    let (w, mut s) = front();
    let dir = tempfile::tempdir().unwrap();
    let mut rec = reconciler(&w, &dir.path().join("j"));
    let mut cfg = Config::default();
    assert!(cfg.cpu_levers);
    cfg.tracker.lever = Lever::Fair;
    // The switch on leaves the mode's wish exactly as it was.
    let d = for_mode(Mode::Uxsched).desired(&s, &cfg).bounded(&cfg);
    assert_eq!(d.clone().cpu_switch(&cfg), d);
    pass(&mut rec, &s, &cfg);
    let sched = |tid| w.borrow().task(tid).sched;
    assert_eq!((sched(100).nice, sched(100).runtime), (-19, 100_000));
    assert_eq!((sched(102).nice, sched(102).runtime), (-5, 100_000));
    assert_eq!(sched(400).nice, -19);
    assert_eq!(w.borrow().sessions[&SESSION], -19);
    assert_eq!(w.borrow().task(100).ioprio, rt4);
    // The rt lever (the default) makes the critical set real-time.
    cfg.tracker.lever = Lever::Rt;
    s.rt_suspended = false;
    pass(&mut rec, &s, &cfg);
    assert_eq!(sched(100).policy, SCHED_FIFO);
    assert_eq!(w.borrow().task(100).ioprio, rt4);
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(sched(100), default_attr(0));
}

/// Where a disk runs BFQ, a thread uxsched renices in the fair class and that has no I/O
/// priority of its own (class none: what `ioprio_get` returns for an untouched thread) is given
/// best-effort 4 while raised, so BFQ keeps weight-raising its reads; a real-time thread, whose
/// I/O class the kernel derives from its policy, and one with a priority of its own are left
/// alone; all of it journalled and put back.
#[test]
fn a_reniced_thread_keeps_the_io_level_bfq_weight_raises_where_a_disk_runs_bfq() {
    let rt4 = encode(CLASS_RT, 4);
    let (w, mut s) = front();
    for t in w.borrow_mut().tasks.values_mut() {
        t.ioprio = 0;
    }
    w.borrow_mut().tasks.get_mut(&101).unwrap().ioprio = encode(CLASS_RT, 7);
    let dir = tempfile::tempdir().unwrap();
    let mut rec = reconciler(&w, &dir.path().join("j"));
    let io = |tid| w.borrow().task(tid).ioprio;
    let mut cfg = Config::default();
    cfg.tracker.lever = Lever::Fair;
    // No BFQ: the worker (nice −5, not critical) keeps the kernel's derivation.
    pass(&mut rec, &s, &cfg);
    assert_eq!(w.borrow().task(102).sched.nice, -5);
    assert_eq!([io(100), io(101), io(102)], [rt4, rt4, 0]);
    rec.reconcile(&nothing()).unwrap();
    rec.pin_io_weight = true;
    pass(&mut rec, &s, &cfg);
    assert_eq!([io(100), io(102), io(400)], [rt4, BE4, rt4]);
    // The front's class off and the rt lever: the critical UI thread is FIFO with class none.
    cfg.storage.front_class = crate::config::storage::FrontClass::Off;
    cfg.tracker.lever = Lever::Rt;
    s.rt_suspended = false;
    rec.reconcile(&nothing()).unwrap();
    pass(&mut rec, &s, &cfg);
    assert_eq!(w.borrow().task(100).sched.policy, SCHED_FIFO);
    assert_eq!(io(100), 0, "the policy's real-time I/O class is kept");
    assert_eq!(io(101), encode(CLASS_RT, 7), "its own priority is kept");
    assert_eq!(io(102), BE4);
    rec.reconcile(&nothing()).unwrap();
    assert_eq!([io(100), io(101), io(102)], [0, encode(CLASS_RT, 7), 0]);
    assert!(rec.journal.entries().unwrap().is_empty());
}

/// On a kernel before 6.12 a fair thread has no custom slice: a boost asks none there, so the
/// kernel holds all of it, the next pass keeps it as uxsched's, and the end of the wish puts the
/// nice back. (With the slice asked, the kernel read back no runtime, the pass after took the
/// boost for someone else's change and left the thread at nice -5: Debian 12's 6.1 kernel.)
#[test]
fn before_6_12_a_boost_asks_no_slice_and_is_restored() {
    use super::fake::{nothing, reconciler_before_6_12, want};
    let w = std::rc::Rc::new(std::cell::RefCell::new(super::fake::World {
        before_6_12: true,
        ..Default::default()
    }));
    let dir = tempfile::tempdir().unwrap();
    let app = w.borrow_mut().spawn(100, 100, 7, None);
    let mut rec = reconciler_before_6_12(&w, &dir.path().join("j"));
    let boost = crate::types::Target {
        nice: Some(-5),
        slice_ns: Some(100_000),
        ..Default::default()
    };
    rec.reconcile(&want(&[(app, boost.clone())])).unwrap();
    let t = w.borrow().task(100).sched;
    assert_eq!((t.nice, t.runtime), (-5, 0));
    rec.reconcile(&want(&[(app, boost)])).unwrap();
    assert_eq!(w.borrow().task(100).sched.nice, -5, "held, as uxsched's");
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().task(100).sched.nice, 0, "put back");
}
