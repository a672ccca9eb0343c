//! The rt-app JSON reader against real inputs: Debian's rt-app examples (including the merge
//! fragments and the legacy taskset), and malformed files whose errors must say where and what.

mod common;
use common::find_task;

use std::path::{Path, PathBuf};

use uxsched_model::{MS, SEC, US};
use uxsched_sim::workload::{rtapp, Event, SchedPolicy};

const RTAPP_DOCS: &str = "/usr/share/doc/rt-app/examples";

/// Debian's examples; the tests fail where rt-app is not installed (make test installs it).
fn rtapp_examples() -> PathBuf {
    let dir = PathBuf::from(RTAPP_DOCS);
    assert!(
        dir.is_dir(),
        "{RTAPP_DOCS} is absent: install rt-app (scripts/setup.sh does; make test runs it)"
    );
    dir
}

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            json_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

#[test]
fn every_debian_example_parses() {
    let dir = rtapp_examples();
    let mut files = Vec::new();
    json_files(&dir, &mut files);
    let (fragments, whole): (Vec<PathBuf>, Vec<PathBuf>) = files
        .into_iter()
        .partition(|p| p.parent().is_some_and(|d| d.ends_with("merge")));
    assert!(
        whole.len() >= 18,
        "expected the full example set, found {whole:?}"
    );
    for path in &whole {
        let w = rtapp::load(path).unwrap_or_else(|e| panic!("{e}"));
        assert!(!w.tasks.is_empty(), "{}", path.display());
    }
    // The merge/ fragments only make sense merged, as rt-app's merge.py does.
    assert_eq!(fragments.len(), 6, "{fragments:?}");
    rtapp::load_many(&fragments).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn repeated_keys_keep_their_order() {
    let dir = rtapp_examples();
    let w = rtapp::load(&dir.join("tutorial/example5.json")).unwrap();
    let t1 = find_task(&w, "thread1");
    // Events written in the task: its `loop` repeats the one phase, as rt-app does.
    assert_eq!((t1.loops, t1.phases[0].loops), (Some(1), 3));
    assert_eq!(t1.policy, SchedPolicy::Normal { nice: -19 });
    assert_eq!(t1.affinity, Some(vec![1]));
    let lock = |s: &str| s.to_string();
    assert_eq!(
        t1.phases[0].events,
        [
            Event::Lock(lock("mutex")),
            Event::Wait {
                cond: lock("queue"),
                mutex: lock("mutex")
            },
            Event::Unlock(lock("mutex")),
            Event::Run(10 * MS),
            Event::Suspend(lock("thread1")),
            Event::Run(10 * MS),
            Event::Suspend(lock("thread1")),
            Event::Run(10 * MS),
        ]
    );
    let t0 = find_task(&w, "thread0");
    let names: Vec<&str> = t0.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["p0", "p1"]);
    assert_eq!(t0.phases[1].loops, 8);
    assert_eq!(
        t0.phases[1].events,
        [
            Event::Lock(lock("mutex")),
            Event::Run(10 * MS),
            Event::Signal(lock("queue")),
            Event::Run(10 * MS),
            Event::Unlock(lock("mutex")),
            Event::Run(100 * MS),
            Event::Resume(lock("thread1")),
            Event::Timer {
                name: lock("tick"),
                period: 200 * MS,
                absolute: false
            },
        ]
    );
}

#[test]
fn numbered_keys_runtime_and_barriers() {
    let dir = rtapp_examples();
    let w = rtapp::load(&dir.join("tutorial/example7.json")).unwrap();
    assert_eq!(w.duration, Some(5 * SEC));
    let kinds: Vec<&str> = find_task(&w, "task0").phases[0]
        .events
        .iter()
        .map(Event::kind)
        .collect();
    assert_eq!(
        kinds,
        ["runtime", "sleep", "barrier", "runtime", "barrier", "runtime", "sleep", "barrier"]
    );
    assert_eq!(
        find_task(&w, "task1").phases[0].events[0],
        Event::Runtime(2 * MS)
    );
}

#[test]
fn instances_phases_affinity_and_bare_suspend() {
    let dir = rtapp_examples();
    // 12 instances, each with its own "unique" timer.
    let w = rtapp::load(&dir.join("tutorial/example3.json")).unwrap();
    assert_eq!(w.tasks.len(), 12);
    assert_eq!(w.tasks[0].name, "thread0-0");
    assert_eq!(w.tasks[11].name, "thread0-11");
    assert_eq!(w.tasks[3].loops, Some(1));
    let Event::Timer { name, period, .. } = &w.tasks[3].phases[1].events[1] else {
        panic!("expected a timer")
    };
    assert_eq!((name.as_str(), *period), ("thread0-3/unique", 30 * MS));
    // Per-phase CPU affinity, inheriting the task's when a phase has none.
    let w = rtapp::load(&dir.join("tutorial/example8.json")).unwrap();
    let t = &w.tasks[0];
    assert_eq!(t.affinity, Some(vec![2]));
    let phases: Vec<Option<Vec<usize>>> = t.phases.iter().map(|p| p.affinity.clone()).collect();
    assert_eq!(phases, [Some(vec![0]), Some(vec![1]), None]);
    // workgen's bare "suspend" waits on the thread's own name.
    let w = rtapp::load(&dir.join("video-short.json")).unwrap();
    let sf = find_task(&w, "surfaceflinger");
    assert_eq!(
        sf.phases[0].events[0],
        Event::Suspend("surfaceflinger".into())
    );
    assert_eq!(sf.policy, SchedPolicy::Normal { nice: -7 });
    // A SCHED_FIFO default policy gives RT priority 10.
    let w = rtapp::load(&dir.join("cpufreq_governor_efficiency/calibration.json")).unwrap();
    assert_eq!(w.tasks[0].policy, SchedPolicy::Fifo { prio: 10 });
}

#[test]
fn merged_fragments_translate_legacy_tasks() {
    let dir = rtapp_examples();
    let merge = dir.join("merge");
    let parts = [
        "global",
        "resources",
        "thread0",
        "thread1",
        "thread2",
        "thread3",
    ]
    .map(|n| merge.join(format!("{n}.json")));
    let w = rtapp::load_many(&parts).unwrap();
    assert_eq!(w.name, "merge");
    assert_eq!(w.duration, Some(5 * SEC));
    assert_eq!(w.tasks.len(), 4);
    let s = |x: &str| x.to_string();
    // thread0: wait (under sync_mutex), m0 for 1 ms, broadcast (under m1), the rest of exec,
    // then the next 5 ms period.
    assert_eq!(
        find_task(&w, "thread0").phases[0].events,
        [
            Event::Lock(s("sync_mutex")),
            Event::Wait {
                cond: s("wait"),
                mutex: s("sync_mutex")
            },
            Event::Unlock(s("sync_mutex")),
            Event::Lock(s("m0")),
            Event::Run(MS),
            Event::Unlock(s("m0")),
            Event::Lock(s("m1")),
            Event::Broadcast(s("wake")),
            Event::Unlock(s("m1")),
            Event::Run(4 * MS),
            Event::Timer {
                name: s("thread0/period"),
                period: 5 * MS,
                absolute: true
            },
        ]
    );
    assert_eq!(
        find_task(&w, "thread1").phases[0].events[4],
        Event::Signal(s("wait"))
    );
    // Without the resources fragment the legacy tasks cannot be typed.
    let err = rtapp::load_many(&[&parts[0], &parts[2]])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("thread0.json") && err.contains("not declared"),
        "{err}"
    );
}

#[test]
fn mem_and_iorun_become_busy_time() {
    let dir = rtapp_examples();
    let w = rtapp::load(&dir.join("tutorial/example6.json")).unwrap();
    let events = &w.tasks[0].phases[0].events;
    assert_eq!(events.len(), 4);
    assert_eq!(events[0], Event::Run(MS));
    assert!(matches!(events[1], Event::Runtime(ns) if ns > 0));
    assert_eq!(events[2], Event::Sleep(5 * MS));
    assert!(matches!(events[3], Event::Runtime(ns) if ns > 0));
}

#[test]
fn comments_trailing_commas_and_positions() {
    let text = "{\n  /* a comment */\n  \"tasks\": {\n    \"t\": { \"run\": 5, \"sleep\": 5, \"run\": 7, },\n  },\n}\n";
    let w = rtapp::parse(text, "inline.json").unwrap();
    assert_eq!(
        w.tasks[0].phases[0].events,
        [Event::Run(5 * US), Event::Sleep(5 * US), Event::Run(7 * US)]
    );
    assert_eq!(w.tasks[0].loops, None, "rt-app loops forever by default");
    let err = rtapp::parse("{\n \"tasks\": { \"t\": { \"run\" 5 } } }", "bad.json").unwrap_err();
    assert!(err.to_string().starts_with("bad.json:2:"), "{err}");
}

/// Each unsupported thing names file, line, task, phase and event.
#[test]
fn unsupported_events_are_located_errors() {
    let cases = [
        (
            r#"{"tasks": {"t": {"phases": {"p1": {"run": 10, "fork": "x"}}}}}"#,
            "p1",
            "fork",
        ),
        (
            r#"{"tasks": {"t": {"phases": {"p1": {"run": 10, "sched": 1}}}}}"#,
            "p1",
            "sched",
        ),
        (
            r#"{"tasks": {"t": {"run": 10, "dl-period": 100}}}"#,
            "main",
            "dl-period",
        ),
        (
            r#"{"tasks": {"t": {"run": 10, "util_min": 100}}}"#,
            "main",
            "util_min",
        ),
        (
            r#"{"global": {"io_device": "/tmp/x"}, "tasks": {"t": {"iorun": 10}}}"#,
            "main",
            "iorun",
        ),
        (r#"{"tasks": {"t": {"run": -5}}}"#, "main", "run"),
        (
            r#"{"tasks": {"t": {"phases": {"p": {"priority": 5, "run": 1}}}}}"#,
            "p",
            "priority",
        ),
        (
            r#"{"tasks": {"t": {"timer": {"ref": "a"}}}}"#,
            "main",
            "timer",
        ),
    ];
    for (text, phase, event) in cases {
        let err = rtapp::parse(text, "w.json").unwrap_err().to_string();
        for needle in [
            "w.json:1:",
            "task `t`",
            &format!("phase `{phase}`"),
            &format!("event `{event}`"),
        ] {
            assert!(err.contains(needle), "`{err}` lacks `{needle}`");
        }
    }
    let err = rtapp::parse(
        r#"{"tasks": {"t": {"policy": "SCHED_DEADLINE", "run": 1}}}"#,
        "d.json",
    )
    .unwrap_err();
    assert!(err.to_string().contains("SCHED_DEADLINE"), "{err}");
    let err =
        rtapp::parse(r#"{"tasks": {"t": {"priority": 30, "run": 1}}}"#, "n.json").unwrap_err();
    assert!(err.to_string().contains("nice 30"), "{err}");
    // rt-app ≥ 1.1: dl-runtime on a fair task is its custom slice (upstream custom-slice.json).
    let w = rtapp::parse(
        r#"{"tasks": {"t": {"priority": -19, "dl-runtime": 3000, "run": 1}}}"#,
        "s.json",
    )
    .unwrap();
    assert_eq!(w.tasks[0].slice, Some(3 * MS));
    let err = rtapp::parse(
        r#"{"tasks": {"t": {"policy": "SCHED_FIFO", "dl-runtime": 3000, "run": 1}}}"#,
        "s.json",
    )
    .unwrap_err();
    assert!(err.to_string().contains("custom slice"), "{err}");
}

/// Debian also ships rt-app's legacy `taskset.json`: periodic phases and `sleep: false`.
#[test]
fn legacy_taskset_with_phases() {
    let dir = rtapp_examples();
    let w = rtapp::load(&dir.join("../taskset.json")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(w.tasks.len(), 4);
    let b = find_task(&w, "ThreadB");
    assert_eq!(b.policy, SchedPolicy::Normal { nice: -16 });
    let names: Vec<(&str, u64)> = b
        .phases
        .iter()
        .map(|p| (p.name.as_str(), p.loops))
        .collect();
    assert_eq!(names, [("phase1", 1), ("phase2", 2)]);
    // sleep: false — no wait for the next period; 4000 µs exec, 300 µs of it in r0.
    let last = b.phases[1].events.last().unwrap();
    assert_eq!(*last, Event::Run(3_700 * US));
    assert_eq!(
        b.phases[1].events[..3],
        [
            Event::Lock("trig1_mutex".into()),
            Event::Wait {
                cond: "wait1".into(),
                mutex: "trig1_mutex".into()
            },
            Event::Unlock("trig1_mutex".into()),
        ]
    );
    // ThreadA keeps its period.
    let a = find_task(&w, "ThreadA");
    assert!(matches!(
        a.phases[0].events.last(),
        Some(Event::Timer { period, absolute: true, .. }) if *period == 24 * MS
    ));
}

/// uxsched's `uxsched_cgroup_weights` (rt-app has no key for a group's weight): the groups of
/// `taskgroup` get those shares; a group no task names, a weight out of cgroup v1's range or a
/// path that is not `/group` is an error naming the place.
#[test]
fn cgroup_weights_give_taskgroups_their_shares() {
    let text = |weights: &str| {
        format!(
            r#"{{"global": {{"duration": 1, "{}": {weights}}},
                "tasks": {{"a": {{"taskgroup": "/heavy", "run": 100}},
                           "b": {{"taskgroup": "/light/x", "run": 100}},
                           "c": {{"run": 100}}}}}}"#,
            rtapp::CGROUP_WEIGHTS
        )
    };
    let w = rtapp::parse(&text(r#"{"/heavy": 2048, "/light": 512}"#), "g.json").unwrap();
    let shares = |p: &str| w.groups.iter().find(|g| g.path == p).map(|g| g.shares);
    assert_eq!(shares("heavy"), Some(2048));
    assert_eq!(shares("light"), Some(512));
    assert_eq!(
        shares("light/x"),
        Some(1024),
        "a group the key does not name keeps 1024"
    );
    let without = rtapp::parse(&text("{}"), "g.json").unwrap();
    assert!(without.groups.iter().all(|g| g.shares == 1024));
    for (bad, says) in [
        (r#"{"/nobody": 100}"#, "no task has `taskgroup` /nobody"),
        (r#"{"/heavy": 1}"#, "2..=262144"),
        (r#"{"heavy": 100}"#, "not a /group path"),
        (r#"{"/a/../b": 100}"#, "not a /group path"),
    ] {
        let e = rtapp::parse(&text(bad), "g.json").unwrap_err().to_string();
        assert!(e.contains(says) && e.starts_with("g.json:"), "{bad}: {e}");
    }
}
