//! The native TOML reader: the shipped scenarios, every model feature, and malformed files
//! whose errors must name the line and the key.

mod common;
use common::find_task;

use std::path::{Path, PathBuf};

use uxsched_model::{MS, SEC, US};
use uxsched_sim::workload::{self, native, Event, SchedPolicy};

fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

#[test]
fn every_scenario_parses_and_is_builtin() {
    let mut count = 0;
    for entry in std::fs::read_dir(scenario_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            continue; // scenarios/validate/: rt-app workloads for `sim validate`, not built-ins
        }
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
    let interactive = find_task(&e2, "interactive");
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
    let render3 = find_task(&phone, "render-3");
    assert_eq!(render3.phases[0].events[0], Event::Recv("frame-3".into()));
    assert_eq!(find_task(&phone, "svc-e-2").delay, 2 * 7_143 * US);

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
    assert_eq!(find_task(&w, "sync").phases.len(), 2);
}
