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
