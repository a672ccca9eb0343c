//! The storage lever on a systemd machine, against the fake kernel: the `IOWeight` of the unit in
//! front raised and of a background app's unit lowered (`[storage] front_unit_io_weight`,
//! `background_unit_io_weight`), each journalled and restored exactly — by the daemon that made
//! it and by the next one after a SIGKILL — and nothing written while both are 0 (the default).

use super::fake::{nothing, reconciler_with_units, Shared, World};
use crate::actuators::unit::UNSET;
use crate::config::{Config, Mode};
use crate::policy::{for_mode, test_state::fg_state};
use crate::state::{App, Role, State, ThreadInfo};
use crate::types::{AppId, Kind};
use std::cell::RefCell;
use std::rc::Rc;

/// The app in front's session (one unit per session in the fake).
const FRONT: u64 = 7;
/// The app that was in front before: a file manager left copying.
const LEFT: u64 = 8;

/// The test app in front (pid 100) and a background app (pid 200, unit `LEFT`).
fn world() -> (Shared, State) {
    let w: Shared = Rc::new(RefCell::new(World::default()));
    let mut s = fg_state();
    for t in &mut s.focus.as_mut().unwrap().threads {
        t.task = w.borrow_mut().spawn(t.task.tid, 100, FRONT, None);
    }
    let bg = w.borrow_mut().spawn(200, 200, LEFT, None);
    s.background.push(App {
        id: AppId {
            pid: 200,
            start: bg.start,
        },
        threads: vec![ThreadInfo {
            task: bg,
            comm: "nautilus".into(),
            role: Role::Background,
            cpu: 1,
        }],
    });
    (w, s)
}

fn pass(rec: &mut super::Reconciler, s: &State, cfg: &Config) {
    let d = for_mode(Mode::Uxsched).desired(s, cfg).bounded(cfg);
    rec.reconcile(&d.cpu_switch(cfg)).unwrap();
}

fn io_levers(front: u64, background: u64) -> Config {
    let mut cfg = Config::default();
    cfg.storage.front_unit_io_weight = front;
    cfg.storage.background_unit_io_weight = background;
    cfg
}

fn io_of(w: &Shared, unit: u64) -> Option<u64> {
    w.borrow().unit_io.get(&unit).copied()
}

#[test]
fn nothing_is_written_while_both_weights_are_zero() {
    let (w, s) = world();
    let dir = tempfile::tempdir().unwrap();
    let mut rec = reconciler_with_units(&w, &dir.path().join("j"));
    pass(&mut rec, &s, &Config::default());
    assert!(w.borrow().unit_io.is_empty(), "{:?}", w.borrow().unit_io);
    let rows = rec.journal.entries().unwrap();
    assert!(rows.iter().all(|e| e.kind() != Kind::UnitIo), "{rows:?}");
}

#[test]
fn the_front_unit_is_raised_and_a_background_apps_lowered_then_both_restored() {
    let (w, s) = world();
    w.borrow_mut().unit_io.insert(LEFT, 300); // configured by its owner: lowered from there
    let dir = tempfile::tempdir().unwrap();
    let mut rec = reconciler_with_units(&w, &dir.path().join("j"));
    pass(&mut rec, &s, &io_levers(1000, 10));
    assert_eq!((io_of(&w, FRONT), io_of(&w, LEFT)), (Some(1000), Some(10)));
    let rows = rec.journal.entries().unwrap();
    let io_rows: Vec<_> = rows.iter().filter(|e| e.kind() == Kind::UnitIo).collect();
    assert_eq!(
        io_rows.len(),
        2,
        "one row per unit, not per thread: {rows:?}"
    );
    // The CPU weight is left to its own lever (autogroup carries the CPU side here).
    assert!(w.borrow().units.is_empty(), "{:?}", w.borrow().units);
    // Only ever raised / only ever lowered: a front already above the weight keeps its own.
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(
        (io_of(&w, FRONT), io_of(&w, LEFT)),
        (Some(UNSET), Some(300))
    );
    w.borrow_mut().unit_io.insert(FRONT, 5000);
    pass(&mut rec, &s, &io_levers(1000, 10));
    assert_eq!(io_of(&w, FRONT), Some(5000));
    rec.reconcile(&nothing()).unwrap();
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn a_unit_the_front_shares_with_a_background_app_is_never_lowered() {
    let (w, mut s) = world();
    // The background app runs in the front's unit (one session scope for a whole X11 session).
    // A lower tid than the front's: met first in the pass.
    let shared = w.borrow_mut().spawn(50, 50, FRONT, None);
    s.background[0].threads[0].task = shared;
    let dir = tempfile::tempdir().unwrap();
    let mut rec = reconciler_with_units(&w, &dir.path().join("j"));
    pass(&mut rec, &s, &io_levers(1000, 10));
    assert_eq!(io_of(&w, FRONT), Some(1000));
    // Even with the front's own raise off.
    rec.reconcile(&nothing()).unwrap();
    pass(&mut rec, &s, &io_levers(0, 10));
    assert_eq!(io_of(&w, FRONT), Some(UNSET), "restored and not lowered");
}

#[test]
fn the_next_daemon_restores_a_killed_ones_weights() {
    let (w, s) = world();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j");
    {
        let mut rec = reconciler_with_units(&w, &journal);
        pass(&mut rec, &s, &io_levers(1000, 10));
        // Dropped without a restore: what SIGKILL leaves.
    }
    assert_eq!((io_of(&w, FRONT), io_of(&w, LEFT)), (Some(1000), Some(10)));
    // The next daemon starts with the lever off; its first pass puts both back.
    let mut next = reconciler_with_units(&w, &journal);
    next.reconcile(&nothing()).unwrap();
    assert_eq!(
        (io_of(&w, FRONT), io_of(&w, LEFT)),
        (Some(UNSET), Some(UNSET))
    );
    assert!(next.journal.entries().unwrap().is_empty());
}
