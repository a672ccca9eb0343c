//! The group I/O class lever on a fixture tree: plain files stand in for cgroupfs, so the
//! kernel's side (a `+io` written to `cgroup.subtree_control` reads back as a list naming `io`)
//! is played by the test. The real kernel: `crates/uxsched/tests/io_levers_guest.rs`.

use super::*;
use crate::journal::Journal;
use uxsched_os::identity::TaskId;

fn no_sessions(_: &TaskId) -> Option<u64> {
    None
}

/// A cgroup2 root with the io controller available but not passed on, and uxsched's groups.
fn tree(dir: &Path) -> PathBuf {
    let m = dir.join("cg");
    for g in ["ux-fg", "ux-bg", "other"] {
        std::fs::create_dir_all(m.join(g)).unwrap();
        std::fs::write(m.join(g).join(PRIO), "no-change\n").unwrap();
        std::fs::write(m.join(g).join("io.weight"), "default 100\n").unwrap();
        std::fs::write(m.join(g).join(SUBTREE), "\n").unwrap();
    }
    std::fs::write(m.join("cgroup.controllers"), "cpu io memory\n").unwrap();
    std::fs::write(m.join(SUBTREE), "cpu\n").unwrap();
    m
}

fn text(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_owned()
}

#[test]
fn classes_are_journalled_written_and_restored_by_the_next_start() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tree(tmp.path());
    let jpath = tmp.path().join("j.sqlite");
    let j = Journal::open(&jpath, no_sessions).unwrap();
    let wanted = [
        (m.join("ux-fg"), "promote-to-rt"),
        (m.join("ux-bg"), "idle"),
    ];
    let made = apply(j.connection(), &m, &wanted).unwrap();
    assert_eq!(made.len(), 3, "{made:?}");
    assert_eq!(text(&m.join(SUBTREE)), "+io");
    assert_eq!(text(&m.join("ux-fg").join(PRIO)), "promote-to-rt");
    assert_eq!(text(&m.join("ux-bg").join(PRIO)), "idle");
    assert_eq!(
        changes(j.connection()).unwrap().len(),
        3,
        "every write journalled"
    );
    let lines = status_lines(j.connection(), &[], true);
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("idle while the daemon runs (was no-change)")),
        "{lines:?}"
    );
    // The kernel's side of `+io`.
    std::fs::write(m.join(SUBTREE), "cpu io\n").unwrap();
    // A daemon killed here: the next one opens the journal and restores.
    drop(j);
    let j = Journal::open(&jpath, no_sessions).unwrap();
    restore(j.connection()).unwrap();
    assert_eq!(text(&m.join("ux-fg").join(PRIO)), "no-change");
    assert_eq!(text(&m.join("ux-bg").join(PRIO)), "no-change");
    assert_eq!(
        text(&m.join(SUBTREE)),
        "-io",
        "disabled again: nothing else uses it"
    );
    assert!(changes(j.connection()).unwrap().is_empty());
    restore(j.connection()).unwrap();
}

#[test]
fn an_enabled_controller_and_a_class_already_right_are_not_touched() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tree(tmp.path());
    std::fs::write(m.join(SUBTREE), "cpu io\n").unwrap();
    std::fs::write(m.join("ux-bg").join(PRIO), "idle\n").unwrap();
    let j = Journal::open(&tmp.path().join("j.sqlite"), no_sessions).unwrap();
    let made = apply(j.connection(), &m, &[(m.join("ux-bg"), "idle")]).unwrap();
    assert!(made.is_empty(), "{made:?}");
    assert!(changes(j.connection()).unwrap().is_empty());
    assert_eq!(text(&m.join(SUBTREE)), "cpu io");
}

#[test]
fn someone_elses_change_and_a_recreated_group_are_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tree(tmp.path());
    let j = Journal::open(&tmp.path().join("j.sqlite"), no_sessions).unwrap();
    apply(
        j.connection(),
        &m,
        &[
            (m.join("ux-fg"), "promote-to-rt"),
            (m.join("ux-bg"), "idle"),
        ],
    )
    .unwrap();
    std::fs::write(m.join(SUBTREE), "cpu io\n").unwrap();
    std::fs::write(m.join("ux-fg").join(PRIO), "restrict-to-be\n").unwrap();
    // Another group of the same name (the old one kept aside, so its inode is not reused).
    std::fs::rename(m.join("ux-bg"), tmp.path().join("old-bg")).unwrap();
    std::fs::create_dir(m.join("ux-bg")).unwrap();
    std::fs::write(m.join("ux-bg").join(PRIO), "idle\n").unwrap();
    restore(j.connection()).unwrap();
    assert_eq!(
        text(&m.join("ux-fg").join(PRIO)),
        "restrict-to-be",
        "someone else's"
    );
    assert_eq!(
        text(&m.join("ux-bg").join(PRIO)),
        "idle",
        "another group now"
    );
    assert_eq!(
        text(&m.join(SUBTREE)),
        "cpu io",
        "left on: ux-fg's class is someone else's setting"
    );
    assert!(
        changes(j.connection()).unwrap().is_empty(),
        "every row forgotten"
    );
}

#[test]
fn the_controller_stays_on_while_another_group_uses_it() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tree(tmp.path());
    assert_eq!(io_in_use(&m), None);
    std::fs::write(m.join("other/io.weight"), "default 100\n8:0 300\n").unwrap();
    assert!(
        io_in_use(&m).unwrap().contains("io.weight"),
        "{:?}",
        io_in_use(&m)
    );
    std::fs::write(m.join("other/io.weight"), "default 100\n").unwrap();
    std::fs::write(m.join("other").join(SUBTREE), "io\n").unwrap();
    assert!(io_in_use(&m).unwrap().contains("passes it on"));
    let j = Journal::open(&tmp.path().join("j.sqlite"), no_sessions).unwrap();
    apply(j.connection(), &m, &[(m.join("ux-bg"), "idle")]).unwrap();
    std::fs::write(m.join(SUBTREE), "cpu io\n").unwrap();
    restore(j.connection()).unwrap();
    assert_eq!(text(&m.join("ux-bg").join(PRIO)), "no-change");
    assert_eq!(text(&m.join(SUBTREE)), "cpu io", "another group uses it");
}

#[test]
fn without_an_io_controller_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tree(tmp.path());
    std::fs::write(m.join("cgroup.controllers"), "cpu memory\n").unwrap();
    let j = Journal::open(&tmp.path().join("j.sqlite"), no_sessions).unwrap();
    assert!(apply(j.connection(), &m, &[(m.join("ux-bg"), "idle")])
        .unwrap()
        .is_empty());
    assert_eq!(text(&m.join(SUBTREE)), "cpu");
    assert_eq!(text(&m.join("ux-bg").join(PRIO)), "no-change");
    let lines = status_lines(j.connection(), &[], false);
    assert!(lines[0].contains("none set"), "{lines:?}");
    let lines = status_lines(j.connection(), &[], true);
    assert!(lines[0].contains("asked for"), "{lines:?}");
}

#[test]
fn a_kernel_without_io_prio_class_gets_the_controller_switched_off_again_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tree(tmp.path());
    for g in ["ux-fg", "ux-bg"] {
        std::fs::remove_file(m.join(g).join(PRIO)).unwrap();
    }
    let j = Journal::open(&tmp.path().join("j.sqlite"), no_sessions).unwrap();
    let wanted = [
        (m.join("ux-fg"), "promote-to-rt"),
        (m.join("ux-bg"), "idle"),
    ];
    let made = apply(j.connection(), &m, &wanted).unwrap();
    assert!(made.is_empty(), "nothing held: {made:?}");
    assert!(
        changes(j.connection()).unwrap().is_empty(),
        "nothing left for stop to undo"
    );
    // The switch-off itself is the kernel's side (a plain file reads back `+io`, not a list
    // naming `io`); `disable_io` is what the first test checks.
}

#[test]
fn each_elevator_is_said_to_honour_the_class_or_not() {
    let dev = |name: &str, s: &str| Device {
        name: name.into(),
        dev: (7, 0),
        scheduler: Some(s.into()),
        available: vec!["none".into(), "mq-deadline".into()],
        rotational: Some(false),
        slaves: Vec::new(),
        root: false,
    };
    let lines = device_lines(&[
        dev("loop0", "none"),
        dev("vda", "mq-deadline"),
        dev("sda", "bfq"),
    ]);
    assert_eq!(
        lines,
        [
            "loop0: the groups' io.prio.class does nothing under none (mq-deadline or bfq honour it)",
            "vda: the groups' io.prio.class is honoured (mq-deadline)",
            "sda: the groups' io.prio.class is honoured (bfq)",
        ]
    );
}
