//! The workload readers against real inputs: Debian's rt-app examples, the shipped scenarios,
//! and malformed files whose errors must say where and what.

use std::path::{Path, PathBuf};

use uxsched_model::{MS, SEC, US};
use uxsched_sim::workload::{self, native, rtapp, Event, SchedPolicy, Workload};

const RTAPP_DOCS: &str = "/usr/share/doc/rt-app/examples";

/// Debian's examples, or `None` (with a notice) where rt-app is not installed.
fn rtapp_examples() -> Option<PathBuf> {
    let dir = PathBuf::from(RTAPP_DOCS);
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("NOTICE: {RTAPP_DOCS} is absent (apt-get install rt-app); skipping");
        None
    }
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

fn task<'a>(w: &'a Workload, name: &str) -> &'a workload::TaskSpec {
    w.tasks
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no task {name} in {}", w.name))
}

#[test]
fn every_debian_example_parses() {
    let Some(dir) = rtapp_examples() else { return };
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
    let Some(dir) = rtapp_examples() else { return };
    let w = rtapp::load(&dir.join("tutorial/example5.json")).unwrap();
    let t1 = task(&w, "thread1");
    assert_eq!(t1.loops, Some(3));
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
    let t0 = task(&w, "thread0");
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
    let Some(dir) = rtapp_examples() else { return };
    let w = rtapp::load(&dir.join("tutorial/example7.json")).unwrap();
    assert_eq!(w.duration, Some(5 * SEC));
    let kinds: Vec<&str> = task(&w, "task0").phases[0]
        .events
        .iter()
        .map(Event::kind)
        .collect();
    assert_eq!(
        kinds,
        ["runtime", "sleep", "barrier", "runtime", "barrier", "runtime", "sleep", "barrier"]
    );
    assert_eq!(
        task(&w, "task1").phases[0].events[0],
        Event::Runtime(2 * MS)
    );
}

#[test]
fn instances_phases_affinity_and_bare_suspend() {
    let Some(dir) = rtapp_examples() else { return };
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
    let sf = task(&w, "surfaceflinger");
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
    let Some(dir) = rtapp_examples() else { return };
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
    assert_eq!(w.duration, Some(5 * SEC));
    assert_eq!(w.tasks.len(), 4);
    let s = |x: &str| x.to_string();
    // thread0: wait (under sync_mutex), m0 for 1 ms, broadcast (under m1), the rest of exec,
    // then the next 5 ms period.
    assert_eq!(
        task(&w, "thread0").phases[0].events,
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
        task(&w, "thread1").phases[0].events[4],
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
    let Some(dir) = rtapp_examples() else { return };
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

fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

#[test]
fn every_scenario_parses_and_is_builtin() {
    let mut count = 0;
    for entry in std::fs::read_dir(scenario_dir()).unwrap() {
        let path = entry.unwrap().path();
        let w = workload::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let stem = path.file_stem().unwrap().to_str().unwrap();
        assert_eq!(w.name, stem);
        let builtin = workload::builtin(stem).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(builtin.tasks.len(), w.tasks.len());
        count += 1;
    }
    assert_eq!(
        count,
        workload::BUILTINS.len(),
        "every scenario is a builtin and vice versa"
    );
    assert!(workload::builtin("nope")
        .unwrap_err()
        .to_string()
        .contains("showcase"));
}

#[test]
fn scenario_facts() {
    let e1 = workload::builtin("example1").unwrap();
    assert_eq!(e1.tasks.len(), 11);
    assert_eq!(e1.platform.as_ref().unwrap().cpu_count(), 1);
    let e2 = workload::builtin("example2").unwrap();
    assert_eq!(e2.tasks.len(), 11);
    let strong: Vec<&str> = e2
        .tasks
        .iter()
        .filter(|t| t.policy == SchedPolicy::Normal { nice: -12 })
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(strong, ["heavy"]);
    let interactive = task(&e2, "interactive");
    assert_eq!(interactive.labels, ["interactive"]);
    assert_eq!(
        interactive.phases[0].events[1..],
        [
            Event::Begin("request".into()),
            Event::Run(3 * MS),
            Event::End("request".into())
        ]
    );

    let phone = workload::builtin("phone").unwrap();
    assert_eq!(phone.tasks.len(), 200);
    assert_eq!(
        phone.platform,
        Some(uxsched_sim::platform::PlatformSpec::phone())
    );
    assert!(phone.tasks.iter().all(|t| t.loops.is_none()));
    let render3 = task(&phone, "render-3");
    assert_eq!(render3.phases[0].events[0], Event::Recv("frame-3".into()));
    assert_eq!(task(&phone, "svc-e-2").delay, 2 * 7_143 * US);

    let show = workload::builtin("showcase").unwrap();
    assert_eq!(show.groups[0].shares, 52);
    let hogs = show
        .tasks
        .iter()
        .filter(|t| t.group.as_deref() == Some("bg"))
        .count();
    assert_eq!(hogs, 6);
}

fn native_err(text: &str) -> String {
    native::parse(text, "w.toml").unwrap_err().to_string()
}

#[test]
fn native_errors_name_line_and_key() {
    let task = "[[task]]\nname = \"a\"\n";
    // A bad duration, at its own line.
    let err = native_err(&format!("{task}events = [{{ run = \"3 parsecs\" }}]\n"));
    assert!(
        err.starts_with("w.toml:3:") && err.contains("parsecs"),
        "{err}"
    );
    // Unknown keys anywhere.
    let err = native_err(&format!(
        "{task}colour = \"red\"\nevents = [{{ run = \"1ms\" }}]\n"
    ));
    assert!(
        err.starts_with("w.toml:") && err.contains("colour"),
        "{err}"
    );
    let err = native_err(&format!(
        "{task}events = [{{ run = \"1ms\", speed = 2 }}]\n"
    ));
    assert!(
        err.starts_with("w.toml:3:") && err.contains("speed"),
        "{err}"
    );
    // Malformed TOML.
    let err = native_err("[[task]\nname = 1\n");
    assert!(err.starts_with("w.toml:1:"), "{err}");
    // Ranges and references.
    let err = native_err(&format!(
        "{task}nice = -21\nevents = [{{ run = \"1ms\" }}]\n"
    ));
    assert!(
        err.starts_with("w.toml:3:") && err.contains("nice"),
        "{err}"
    );
    let err = native_err(&format!(
        "{task}slice = \"50us\"\nevents = [{{ run = \"1ms\" }}]\n"
    ));
    assert!(
        err.starts_with("w.toml:3:") && err.contains("slice"),
        "{err}"
    );
    let err = native_err(&format!(
        "{task}policy = \"fifo\"\nevents = [{{ run = \"1ms\" }}]\n"
    ));
    assert!(err.contains("prio"), "{err}");
    let err = native_err(&format!(
        "{task}group = \"bg\"\nevents = [{{ run = \"1ms\" }}]\n"
    ));
    assert!(
        err.starts_with("w.toml:1:") && err.contains("`bg` is not declared"),
        "{err}"
    );
    let err = native_err(&format!(
        "{task}events = [{{ run = \"1ms\", sleep = \"1ms\" }}]\n"
    ));
    assert!(
        err.starts_with("w.toml:3:") && err.contains("one event per table"),
        "{err}"
    );
    let err = native_err(&format!("{task}events = [{{ wait = \"c\" }}]\n"));
    assert!(err.contains("needs a `mutex`"), "{err}");
    let err = native_err(
        "[[group]]\npath = \"a/b\"\n[[task]]\nname = \"t\"\nevents = [{ run = \"1ms\" }]\n",
    );
    assert!(
        err.starts_with("w.toml:1:") && err.contains("parent group `a`"),
        "{err}"
    );
}

#[test]
fn native_expresses_the_whole_model() {
    let text = r#"
name = "all"
duration = "2s"
[[platform.domain]]
name = "little"
cpus = 2
capacity = 512
opps_khz = [1000000, 2000000]
[[group]]
path = "apps"
[[group]]
path = "apps/bg"
shares = 52
quota = "10ms"
[[task]]
name = "t"
process = "p"
policy = "batch"
nice = 3
slice = "2ms"
cpus = [1]
group = "apps/bg"
delay = "1.5ms"
loops = 4
instances = 2
stagger = "1ms"
labels = ["ui"]
oom_adj = 7
[[task.phase]]
name = "first"
loops = 2
cpus = [0]
events = [
  { run = "1ms" }, { runtime = "2ms" }, { sleep = "3ms" },
  { timer = "tk-{i}", period = "4ms", absolute = true },
  { lock = "m" }, { wait = "c", mutex = "m" }, { sync = "c", mutex = "m" }, { unlock = "m" },
  { signal = "c" }, { broadcast = "c" }, { barrier = "b" }, { suspend = "s" }, { resume = "s" },
  { send = "ch" }, { recv = "ch" }, { yield = true }, { begin = "x" }, { end = "x" },
]
"#;
    let w = native::parse(text, "all.toml").unwrap();
    assert_eq!(w.name, "all");
    assert_eq!(w.duration, Some(2 * SEC));
    let d = &w.platform.as_ref().unwrap().domains[0];
    assert_eq!((d.cpus, d.capacity, d.initial_khz), (2, 512, 2_000_000));
    let bw = w.groups[1].bandwidth.unwrap();
    assert_eq!((bw.quota, bw.period), (10 * MS, 100 * MS));
    assert_eq!(w.tasks.len(), 2);
    let t = &w.tasks[1];
    assert_eq!(t.name, "t-1");
    assert_eq!(t.process, "p");
    assert_eq!(t.policy, SchedPolicy::Batch { nice: 3 });
    assert_eq!(t.slice, Some(2 * MS));
    assert_eq!(t.affinity, Some(vec![1]));
    assert_eq!(t.group.as_deref(), Some("apps/bg"));
    assert_eq!(t.delay, 2_500 * US);
    assert_eq!(t.loops, Some(4));
    assert_eq!(
        (t.labels.clone(), t.oom_adj),
        (vec!["ui".to_string()], Some(7))
    );
    let p = &t.phases[0];
    assert_eq!(
        (p.name.as_str(), p.loops, p.affinity.clone()),
        ("first", 2, Some(vec![0]))
    );
    let kinds: Vec<&str> = p.events.iter().map(Event::kind).collect();
    assert_eq!(
        kinds,
        [
            "run", "runtime", "sleep", "timer", "lock", "wait", "sync", "unlock", "signal",
            "broad", "barrier", "suspend", "resume", "send", "recv", "yield", "begin", "end"
        ]
    );
    assert_eq!(
        p.events[3],
        Event::Timer {
            name: "tk-1".into(),
            period: 4 * MS,
            absolute: true
        }
    );
}

#[test]
fn dispatcher_rejects_unknown_extensions() {
    let err = workload::load(Path::new("x.yaml")).unwrap_err().to_string();
    assert!(err.contains(".toml") && err.contains(".json"), "{err}");
    let err = workload::load(Path::new("/nonexistent/w.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot read"), "{err}");
}

#[test]
fn the_documented_example_parses() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/workloads.md"),
    )
    .unwrap();
    let start = doc.find("```toml\n").expect("docs have a TOML example") + 8;
    let end = start + doc[start..].find("```").unwrap();
    let w = native::parse(&doc[start..end], "docs/workloads.md").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(w.tasks.len(), 7);
    assert_eq!(task(&w, "sync").phases.len(), 2);
}
