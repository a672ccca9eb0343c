//! The reconciler against the fake kernel (`fake.rs`): every rule of `mod.rs` with the failure it
//! prevents, including the ones found on real machines (a session's autogroup left raised after
//! the app exits; I/O priority inherited by children; a change landing on a recycled tid).

use super::fake::{default_attr, reconciler, Shared, World};
use crate::types::Key;
use crate::types::Kind;
use crate::types::Target;
use std::cell::RefCell;
use std::rc::Rc;
use uxsched_os::identity::TaskId;
use uxsched_os::ioprio::{encode, CLASS_BE, CLASS_RT};

const SHELL_SESSION: u64 = 7;
const BE4: u16 = 0x4004;

fn world() -> Shared {
    Rc::new(RefCell::new(World::default()))
}

/// A fake kernel with one app (pid 100) leading its own session, and a reconciler over it
/// (the journal lives as long as the returned directory).
fn one_app() -> (Shared, tempfile::TempDir, TaskId, super::Reconciler) {
    let w = world();
    let dir = tempfile::tempdir().unwrap();
    let app = w.borrow_mut().spawn(100, 100, SHELL_SESSION, None);
    let rec = reconciler(&w, &dir.path().join("j"));
    (w, dir, app, rec)
}

use super::fake::{nothing, want};

/// A target that names only an I/O priority.
fn io_target(class: u16, level: u16) -> Target {
    Target {
        ioprio: Some(encode(class, level)),
        ..Target::default()
    }
}

fn ui_target() -> Target {
    Target {
        nice: Some(-19),
        slice_ns: Some(100_000),
        autogroup_nice: Some(-19),
        ..Target::default()
    }
}

#[test]
fn applies_and_restores_exactly_and_the_journal_empties() {
    let (w, _dir, app, mut rec) = one_app();
    rec.reconcile(&want(&[(app, ui_target())])).unwrap();
    let t = w.borrow().task(100).sched;
    assert_eq!((t.nice, t.runtime), (-19, 100_000));
    assert_eq!(w.borrow().sessions[&SHELL_SESSION], -19);
    assert_eq!(rec.journal.entries().unwrap().len(), 2);
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().task(100).sched, default_attr(0));
    assert_eq!(w.borrow().sessions[&SHELL_SESSION], 0);
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn a_sessions_autogroup_is_restored_when_the_app_exits_and_the_session_lives_on() {
    // The shell (session leader) outlives the app it started: before objects were keys, the
    // row was forgotten with the app's thread and the session stayed at nice -19 for good.
    let w = world();
    let dir = tempfile::tempdir().unwrap();
    w.borrow_mut().spawn(50, 50, SHELL_SESSION, None);
    let app = w.borrow_mut().spawn(100, 100, SHELL_SESSION, Some(50));
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(&[(app, ui_target())])).unwrap();
    assert_eq!(w.borrow().sessions[&SHELL_SESSION], -19);
    w.borrow_mut().exit(100);
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(
        w.borrow().sessions[&SHELL_SESSION],
        0,
        "restored through the shell"
    );
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn a_killed_daemons_session_boost_is_restored_by_the_next_one() {
    let w = world();
    let dir = tempfile::tempdir().unwrap();
    w.borrow_mut().spawn(50, 50, SHELL_SESSION, None);
    let app = w.borrow_mut().spawn(100, 100, SHELL_SESSION, Some(50));
    let mut first = reconciler(&w, &dir.path().join("j"));
    first.reconcile(&want(&[(app, ui_target())])).unwrap();
    drop(first); // SIGKILL: nothing restored
    w.borrow_mut().exit(100);
    let mut second = reconciler(&w, &dir.path().join("j"));
    second.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().sessions[&SHELL_SESSION], 0);
}

#[test]
fn a_session_whose_members_all_exited_is_forgotten_without_writes() {
    let (w, _dir, app, mut rec) = one_app();
    rec.reconcile(&want(&[(app, ui_target())])).unwrap();
    let writes = w.borrow().writes;
    w.borrow_mut().exit(100);
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().writes, writes);
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn two_threads_of_one_session_make_one_row_for_it() {
    let w = world();
    let dir = tempfile::tempdir().unwrap();
    let ui = w.borrow_mut().spawn(100, 100, SHELL_SESSION, None);
    let other = w.borrow_mut().spawn(101, 100, SHELL_SESSION, Some(100));
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(&[(ui, ui_target()), (other, ui_target())]))
        .unwrap();
    let sessions = rec
        .journal
        .entries()
        .unwrap()
        .into_iter()
        .filter(|e| e.kind() == Kind::Autogroup)
        .count();
    assert_eq!(sessions, 1);
    // The thread it was journalled under exits; the other still wants it: kept, re-keyed.
    w.borrow_mut().exit(100);
    rec.reconcile(&want(&[(other, ui_target())])).unwrap();
    assert_eq!(w.borrow().sessions[&SHELL_SESSION], -19);
    let e = rec
        .journal
        .get(Kind::Autogroup, &Key::Session(SHELL_SESSION))
        .unwrap()
        .unwrap();
    assert_eq!(e.via, other);
}

#[test]
fn someone_elses_change_stands_and_is_not_reboosted_this_focus() {
    let (w, _dir, app, mut rec) = one_app();
    let d = want(&[(
        app,
        Target {
            nice: Some(-10),
            ..Target::default()
        },
    )]);
    rec.reconcile(&d).unwrap();
    w.borrow_mut().tasks.get_mut(&100).unwrap().sched.nice = 5; // the user renices it
    rec.reconcile(&d).unwrap();
    assert_eq!(w.borrow().task(100).sched.nice, 5);
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(
        w.borrow().task(100).sched.nice,
        5,
        "theirs is not 'restored'"
    );
    rec.new_episode();
    rec.reconcile(&d).unwrap();
    assert_eq!(
        w.borrow().task(100).sched.nice,
        -10,
        "a new focus may boost again"
    );
}

#[test]
fn a_change_that_lands_on_a_recycled_tid_is_undone_at_once() {
    let (w, _dir, app, mut rec) = one_app();
    // The app exits and another task takes tid 100 between the check and the write.
    w.borrow_mut().recycle_on_write = Some((100, 999));
    rec.reconcile(&want(&[(
        app,
        Target {
            nice: Some(-19),
            ..Target::default()
        },
    )]))
    .unwrap();
    assert_eq!(w.borrow().task(100).id.start, 999);
    assert_eq!(w.borrow().task(100).sched, default_attr(0), "undone");
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn io_priority_inherited_by_children_is_put_back() {
    let (w, _dir, ui, mut rec) = one_app();
    let rt = io_target(CLASS_RT, 4);
    let d = want(&[(ui, rt)]);
    rec.reconcile(&d).unwrap();
    assert_eq!(w.borrow().task(100).ioprio, encode(CLASS_RT, 4));
    // The boosted thread forks a helper process, which forks again: both copy RT 4.
    w.borrow_mut().spawn(200, 200, SHELL_SESSION, Some(100));
    w.borrow_mut().spawn(201, 201, SHELL_SESSION, Some(200));
    assert_eq!(w.borrow().task(201).ioprio, encode(CLASS_RT, 4));
    rec.reconcile(&d).unwrap();
    assert_eq!(
        w.borrow().task(100).ioprio,
        encode(CLASS_RT, 4),
        "still boosted"
    );
    for child in [200, 201] {
        assert_eq!(w.borrow().task(child).ioprio, BE4, "child {child}");
    }
    // A child forked just before the owner exits is found among the orphans.
    w.borrow_mut().spawn(202, 202, SHELL_SESSION, Some(100));
    w.borrow_mut().tasks.get_mut(&202).unwrap().parent = None; // re-parented to init
    w.borrow_mut().exit(100);
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().task(202).ioprio, BE4);
    assert!(rec.journal.entries().unwrap().is_empty());
}

/// A child forked a moment ago keeps what it inherited while its parent stays boosted (its exec
/// may make it a launch), and is put back once older; a restore puts back heirs of any age.
#[test]
fn a_newborn_heir_keeps_its_inherited_class_while_the_boost_lasts_not_after() {
    let (w, _dir, ui, mut rec) = one_app();
    let rt4 = encode(CLASS_RT, 4);
    let rt = io_target(CLASS_RT, 4);
    let d = want(&[(ui, rt)]);
    rec.reconcile(&d).unwrap();
    w.borrow_mut().spawn(200, 200, SHELL_SESSION, Some(100));
    w.borrow_mut().newborn.insert(200);
    rec.reconcile(&d).unwrap();
    assert_eq!(w.borrow().task(200).ioprio, rt4, "kept while newborn");
    w.borrow_mut().newborn.clear();
    rec.reconcile(&d).unwrap();
    assert_eq!(w.borrow().task(200).ioprio, BE4, "put back once older");
    // At the end of the boost a newborn heir goes back with its parent.
    w.borrow_mut().spawn(201, 201, SHELL_SESSION, Some(100));
    w.borrow_mut().newborn.insert(201);
    assert_eq!(w.borrow().task(201).ioprio, rt4);
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().task(201).ioprio, BE4);
    assert!(rec.journal.entries().unwrap().is_empty());
}

/// The boosted thread exits while the policy still wants it (the focus has not moved yet): its
/// row is forgotten in that pass, so a newborn heir is put back then — not left for a later
/// pass that would never look for it.
#[test]
fn a_newborn_heir_of_a_thread_that_exited_while_wanted_is_put_back() {
    let (w, _dir, ui, mut rec) = one_app();
    let rt = io_target(CLASS_RT, 4);
    let d = want(&[(ui, rt)]);
    rec.reconcile(&d).unwrap();
    w.borrow_mut().spawn(200, 200, SHELL_SESSION, Some(100));
    w.borrow_mut().newborn.insert(200);
    w.borrow_mut().tasks.get_mut(&200).unwrap().parent = None; // re-parented to init
    w.borrow_mut().exit(100);
    rec.reconcile(&d).unwrap();
    assert_eq!(w.borrow().task(200).ioprio, BE4);
    assert!(rec.journal.entries().unwrap().is_empty());
}

/// The boosted thread's wish changes (the app leaves the front and the policy lowers it): a
/// newborn heir of the value it held is put back in that pass — after the update nothing
/// applies that value any more, and no later pass would look for it.
#[test]
fn a_newborn_heir_is_put_back_when_its_parents_value_changes() {
    let (w, _dir, ui, mut rec) = one_app();
    rec.reconcile(&want(&[(ui, io_target(CLASS_RT, 4))]))
        .unwrap();
    w.borrow_mut().spawn(200, 200, SHELL_SESSION, Some(100));
    w.borrow_mut().newborn.insert(200);
    rec.reconcile(&want(&[(ui, io_target(CLASS_BE, 7))]))
        .unwrap();
    assert_eq!(w.borrow().task(100).ioprio, encode(CLASS_BE, 7));
    assert_eq!(w.borrow().task(200).ioprio, BE4, "not left real-time");
    rec.reconcile(&nothing()).unwrap();
    assert!(rec.journal.entries().unwrap().is_empty());
}

/// A newborn heir that is raised itself (its exec made it a launch) while it still holds the
/// class it inherited: its original is what its boosted parent had, not the inherited class, so
/// its restore puts it back to best effort (reading the inherited class as its own left a
/// forked child in the real-time class after the daemon stopped).
#[test]
fn a_raised_heir_is_restored_to_its_parents_original_not_the_class_it_inherited() {
    let (w, _dir, ui, mut rec) = one_app();
    let rt = io_target(CLASS_RT, 4);
    rec.reconcile(&want(&[(ui, rt.clone())])).unwrap();
    let launch = w.borrow_mut().spawn(200, 200, SHELL_SESSION, Some(100));
    w.borrow_mut().newborn.insert(200);
    rec.reconcile(&want(&[(ui, rt.clone()), (launch, rt)]))
        .unwrap();
    let row = rec.journal.entries().unwrap();
    let row = row
        .iter()
        .find(|e| e.via.tid == 200)
        .expect("the launch is journalled");
    assert_eq!(
        row.original,
        crate::types::Value::Ioprio(BE4),
        "its parent's original"
    );
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().task(200).ioprio, BE4);
    assert_eq!(w.borrow().task(100).ioprio, BE4);
    assert!(rec.journal.entries().unwrap().is_empty());
}

#[test]
fn threads_the_policy_boosts_are_not_taken_for_inheritors() {
    let w = world();
    let dir = tempfile::tempdir().unwrap();
    let ui = w.borrow_mut().spawn(100, 100, SHELL_SESSION, None);
    let render = w.borrow_mut().spawn(101, 100, SHELL_SESSION, Some(100));
    let mut rec = reconciler(&w, &dir.path().join("j"));
    let rt = io_target(CLASS_RT, 4);
    let d = want(&[(ui, rt.clone()), (render, rt)]);
    for _ in 0..3 {
        rec.reconcile(&d).unwrap();
        assert_eq!(w.borrow().task(101).ioprio, encode(CLASS_RT, 4));
    }
}

#[test]
fn a_failed_restore_keeps_its_row_is_listed_and_retried() {
    let (w, _dir, app, mut rec) = one_app();
    let d = want(&[(
        app,
        Target {
            ioprio: Some(encode(CLASS_BE, 0)),
            ..Target::default()
        },
    )]);
    rec.reconcile(&d).unwrap();
    w.borrow_mut().refuse.insert(Kind::Ioprio);
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(rec.journal.entries().unwrap().len(), 1, "row kept");
    let (id, why) = rec.failures.iter().next().unwrap();
    assert_eq!(id.0, Kind::Ioprio);
    assert!(why.contains("cannot restore"), "{why}");
    w.borrow_mut().refuse.clear();
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().task(100).ioprio, BE4);
    assert!(rec.journal.entries().unwrap().is_empty());
    assert!(rec.failures.is_empty());
}

#[test]
fn nice_is_never_raised_above_the_original_nor_a_session_lowered() {
    let w = world();
    let dir = tempfile::tempdir().unwrap();
    let app = w.borrow_mut().spawn(100, 100, SHELL_SESSION, None);
    w.borrow_mut().tasks.get_mut(&100).unwrap().sched.nice = -15;
    w.borrow_mut().sessions.insert(SHELL_SESSION, -19);
    let mut rec = reconciler(&w, &dir.path().join("j"));
    rec.reconcile(&want(&[(
        app,
        Target {
            nice: Some(-5),
            autogroup_nice: Some(-5),
            ..Target::default()
        },
    )]))
    .unwrap();
    assert_eq!(w.borrow().task(100).sched.nice, -15);
    assert_eq!(w.borrow().sessions[&SHELL_SESSION], -19);
    assert!(
        rec.journal.entries().unwrap().is_empty(),
        "nothing to do, nothing journalled"
    );
}

#[test]
fn a_crash_between_journalling_an_update_and_writing_it_leaves_nothing_behind() {
    // Found by `uxsched reliability`: the update is journalled first; killed before the write,
    // the kernel still held the older value and the next daemon took it for someone else's.
    let (w, dir, app, mut rec) = one_app();
    let io = |class, level| Target {
        ioprio: Some(encode(class, level)),
        ..Target::default()
    };
    rec.reconcile(&want(&[(app, io(CLASS_RT, 4))])).unwrap();
    // The app goes to the background: the update to BE 7 is journalled, then SIGKILL.
    w.borrow_mut().refuse.insert(Kind::Ioprio);
    rec.reconcile(&want(&[(app, io(CLASS_BE, 7))])).unwrap();
    drop(rec);
    assert_eq!(
        w.borrow().task(100).ioprio,
        encode(CLASS_RT, 4),
        "never written"
    );
    w.borrow_mut().refuse.clear();
    let mut next = reconciler(&w, &dir.path().join("j"));
    next.reconcile(&nothing()).unwrap();
    assert_eq!(
        w.borrow().task(100).ioprio,
        BE4,
        "restored, not left as someone else's"
    );
    assert!(next.journal.entries().unwrap().is_empty());
}

#[test]
fn on_a_systemd_machine_the_apps_unit_is_raised_in_place_and_put_back() {
    use super::fake::reconciler_with_units;
    use crate::actuators::unit::UNSET;
    use crate::types::Group;
    let w = world();
    let dir = tempfile::tempdir().unwrap();
    let app = w.borrow_mut().spawn(100, 100, SHELL_SESSION, None);
    let other = w.borrow_mut().spawn(200, 200, 9, None);
    let mut rec = reconciler_with_units(&w, &dir.path().join("j"));
    let place = |g| Target {
        group: Some(g),
        ..Target::default()
    };
    rec.reconcile(&want(&[(app, place(Group::Fg)), (other, place(Group::Bg))]))
        .unwrap();
    assert_eq!(
        w.borrow().units[&SHELL_SESSION],
        7007,
        "71755 shares as cpu.weight"
    );
    assert_eq!(w.borrow().units[&9], 13, "128 shares as cpu.weight");
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(w.borrow().units[&SHELL_SESSION], UNSET, "back to not set");
    assert_eq!(w.borrow().units[&9], UNSET);
    assert!(rec.journal.entries().unwrap().is_empty());
}

/// The tracker's `rt` lever (`policy/uxsched.rs`): FIFO 2 while within budget; a thread that used
/// it up gets the fair boost (an update of the same row, not a restore), then FIFO again after
/// its cool-down — and unfocus still restores the fair original, not an intermediate value.
#[test]
fn the_rt_lever_demoted_to_fair_and_back_still_restores_the_original() {
    use crate::types::{Rt, RtPolicy};
    use uxsched_os::sched::{SCHED_FIFO, SCHED_FLAG_RESET_ON_FORK, SCHED_OTHER};
    let (w, _dir, app, mut rec) = one_app();
    w.borrow_mut().tasks.get_mut(&100).unwrap().sched = default_attr(3);
    let fifo = Target {
        rt: Some(Rt {
            policy: RtPolicy::Fifo,
            priority: 1,
        }),
        ..Target::default()
    };
    let fair = Target {
        nice: Some(-19),
        slice_ns: Some(100_000),
        ..Target::default()
    };
    let sched = |w: &Shared| w.borrow().task(100).sched;
    rec.reconcile(&want(&[(app, fifo.clone())])).unwrap();
    assert_eq!((sched(&w).policy, sched(&w).priority), (SCHED_FIFO, 1));
    assert_ne!(sched(&w).flags & SCHED_FLAG_RESET_ON_FORK, 0);
    rec.reconcile(&want(&[(app, fair)])).unwrap(); // over budget: demoted
    let s = sched(&w);
    assert_eq!((s.policy, s.nice, s.runtime), (SCHED_OTHER, -19, 100_000));
    rec.reconcile(&want(&[(app, fifo)])).unwrap(); // cool-down over
    assert_eq!(sched(&w).policy, SCHED_FIFO);
    assert_eq!(
        rec.journal.entries().unwrap().len(),
        1,
        "one row throughout"
    );
    rec.reconcile(&nothing()).unwrap();
    assert_eq!(sched(&w), default_attr(3));
    assert!(rec.journal.entries().unwrap().is_empty());
}
