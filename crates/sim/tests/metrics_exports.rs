//! Metrics, exports and the digest on hand-built event logs whose answers are worked out by hand
//! in the comments.

use std::io::{self, Write};
use std::path::PathBuf;

use serde_json::Value;
use uxsched_sim::digest::Digest;
use uxsched_sim::export::{write_atomically, AtomicFile, GanttChart, PerfettoTrace};
use uxsched_sim::log::{DomainMeta, LeaveReason, Record, RunMeta, Sink, TaskId, TaskMeta};
use uxsched_sim::metrics::{MetricsCollector, Report, TableOptions};

use LeaveReason::{Blocked, Preempted, Yielded};

fn task(name: &str, process: &str, group: u32) -> TaskMeta {
    TaskMeta {
        name: name.into(),
        process: process.into(),
        group,
        policy: "SCHED_OTHER nice 0".into(),
        labels: vec![],
    }
}

fn meta(tasks: Vec<TaskMeta>) -> RunMeta {
    RunMeta {
        workload: "synthetic".into(),
        sched: "cfs".into(),
        seed: 1,
        hz: 250,
        cpus: 2,
        cpu_domain: vec![0, 0],
        domains: vec![DomainMeta {
            name: "little".into(),
            initial_khz: 1_000_000,
            max_khz: 1_800_000,
        }],
        tasks,
        groups: vec!["".into(), "/bg".into(), "/bg/low".into()],
        interactions: vec!["tap".into(), "frame".into()],
    }
}

fn sw(t: u64, cpu: u16, prev: Option<TaskId>, reason: LeaveReason, next: Option<TaskId>) -> Record {
    Record::Switch {
        t,
        cpu,
        prev,
        reason,
        next,
    }
}

fn wake(t: u64, task: TaskId, cpu: u16) -> Record {
    Record::Wakeup {
        t,
        task,
        cpu,
        waker: None,
    }
}

fn feed(sink: &mut dyn Sink, meta: &RunMeta, records: &[Record], end: u64) {
    sink.begin(meta);
    for r in records {
        sink.record(r);
    }
    sink.end(end);
}

fn report(meta: &RunMeta, records: &[Record], end: u64) -> Report {
    let mut m = MetricsCollector::new();
    feed(&mut m, meta, records, end);
    m.report(false)
}

/// Tasks A=0, B=1, C=2. A is woken at 0 and dispatched at 100 (wake-up latency 100), preempted
/// by B at 1100, back at 2100 (wait 1000), preempted by C at 3000, back at 3500 (wait 500) and
/// blocks at 4000: one activation with preemption latency 1500. A is woken again at 5000 on
/// CPU 0, migrated to CPU 1, runs at 5200 (latency 200), yields at 6000 (activation with 0),
/// runs again at 6300 (new activation, no wake-up) and blocks at 7000 (another 0).
fn two_preemptions() -> Vec<Record> {
    vec![
        wake(0, 0, 0),
        sw(100, 0, None, Blocked, Some(0)),
        wake(1000, 1, 0),
        sw(1100, 0, Some(0), Preempted, Some(1)),
        sw(2100, 0, Some(1), Blocked, Some(0)),
        wake(2900, 2, 0),
        sw(3000, 0, Some(0), Preempted, Some(2)),
        sw(3500, 0, Some(2), Blocked, Some(0)),
        sw(4000, 0, Some(0), Blocked, None),
        wake(5000, 0, 0),
        Record::Migrate {
            t: 5000,
            task: 0,
            from: 0,
            to: 1,
        },
        sw(5200, 1, None, Blocked, Some(0)),
        sw(6000, 1, Some(0), Yielded, None),
        sw(6300, 1, None, Blocked, Some(0)),
        sw(7000, 1, Some(0), Blocked, None),
    ]
}

fn abc_meta() -> RunMeta {
    meta(vec![
        task("A", "app", 0),
        task("B", "app", 1),
        task("C", "daemon", 2),
    ])
}

fn stats(s: &uxsched_sim::metrics::Summary) -> uxsched_sim::metrics::Stats {
    s.stats.expect("distribution has samples")
}

#[test]
fn wakeup_latency_runs_from_wakeup_to_the_switch_that_runs_the_task() {
    let r = report(&abc_meta(), &two_preemptions(), 10_000);
    let a = &r.tasks[0].metrics;
    assert_eq!(a.wakeup_latency.count, 2);
    let w = stats(&a.wakeup_latency);
    assert_eq!((w.min, w.max, w.mean), (100, 200, 150.0));
    // B: woken 1000, ran 1100. C: woken 2900, ran 3000.
    assert_eq!(stats(&r.tasks[1].metrics.wakeup_latency).max, 100);
    assert_eq!(stats(&r.tasks[2].metrics.wakeup_latency).max, 100);
}

#[test]
fn preemption_latency_sums_the_waits_of_one_activation() {
    let r = report(&abc_meta(), &two_preemptions(), 10_000);
    let a = &r.tasks[0].metrics;
    assert_eq!(a.preemption_latency.count, 3);
    let p = stats(&a.preemption_latency);
    assert_eq!((p.max, p.min, p.p50), (1500, 0, 0));
    let waits = stats(&a.preemption_waits);
    assert_eq!(
        (a.preemption_waits.count, waits.min, waits.max),
        (2, 500, 1000)
    );
    assert_eq!(a.unfinished_activations, 0);
}

#[test]
fn context_switches_split_voluntary_and_involuntary_and_migrations_count() {
    let r = report(&abc_meta(), &two_preemptions(), 10_000);
    let a = &r.tasks[0].metrics;
    assert_eq!(
        (a.csw_voluntary, a.csw_involuntary, a.migrations),
        (3, 2, 1)
    );
    let b = &r.tasks[1].metrics;
    assert_eq!(
        (b.csw_voluntary, b.csw_involuntary, b.migrations),
        (1, 0, 0)
    );
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
}

#[test]
fn picking_the_same_task_again_is_not_a_context_switch() {
    // A runs 0..3000; at 1000 the tick finds nothing better, at 2000 it yields with nothing else
    // runnable: one running span, no context switch, but the yield ends a request.
    let recs = [
        wake(0, 0, 0),
        sw(0, 0, None, Blocked, Some(0)),
        sw(1000, 0, Some(0), Preempted, Some(0)),
        sw(2000, 0, Some(0), Yielded, Some(0)),
        sw(3000, 0, Some(0), Blocked, None),
    ];
    let r = report(&abc_meta(), &recs, 4000);
    let a = &r.tasks[0].metrics;
    assert_eq!((a.csw_voluntary, a.csw_involuntary, a.cpu_ns), (1, 0, 3000));
    assert_eq!(
        (a.preemption_latency.count, a.preemption_waits.count),
        (2, 0)
    );
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    let mut g = GanttChart::new(0, 4000).unwrap();
    feed(&mut g, &abc_meta(), &recs, 4000);
    assert_eq!(g.slices().len(), 1);
}

#[test]
fn cpu_share_is_cpu_time_over_simulated_time_and_groups_nest() {
    let r = report(&abc_meta(), &two_preemptions(), 10_000);
    // A: 1000 + 900 + 500 + 800 + 700; B: 1000; C: 500 — of 10 000 ns.
    let shares: Vec<(u64, f64)> = r
        .tasks
        .iter()
        .map(|t| (t.metrics.cpu_ns, t.metrics.cpu_share))
        .collect();
    assert_eq!(shares, vec![(3900, 0.39), (1000, 0.1), (500, 0.05)]);
    let by_name = |v: &[uxsched_sim::metrics::GroupReport], n: &str| {
        v.iter()
            .find(|g| g.name == n)
            .map(|g| (g.tasks, g.metrics.cpu_ns))
            .unwrap()
    };
    assert_eq!(by_name(&r.processes, "app"), (2, 4900));
    assert_eq!(by_name(&r.processes, "daemon"), (1, 500));
    assert_eq!(by_name(&r.groups, ""), (3, 5400));
    assert_eq!(by_name(&r.groups, "/bg"), (2, 1500));
    assert_eq!(by_name(&r.groups, "/bg/low"), (1, 500));
    // Merged distributions: /bg holds B's and C's wake-up latencies.
    let bg = r.groups.iter().find(|g| g.name == "/bg").unwrap();
    assert_eq!(bg.metrics.wakeup_latency.count, 2);
}

#[test]
fn a_task_still_running_at_the_end_is_charged_and_its_request_is_unfinished() {
    let recs = [wake(0, 0, 0), sw(0, 0, None, Blocked, Some(0))];
    let r = report(&abc_meta(), &recs, 2_000);
    let a = &r.tasks[0].metrics;
    assert_eq!(
        (
            a.cpu_ns,
            a.unfinished_activations,
            a.preemption_latency.count
        ),
        (2000, 1, 0)
    );
    assert_eq!(a.cpu_share, 1.0);
}

#[test]
fn exit_is_logged_before_the_switch_that_removes_the_task() {
    // The engine's order: A runs 0..500, logs Exit at 500, then switches it out as Exited.
    let recs = [
        wake(0, 0, 0),
        sw(0, 0, None, Blocked, Some(0)),
        Record::Exit { t: 500, task: 0 },
        sw(500, 0, Some(0), LeaveReason::Exited, None),
    ];
    let r = report(&abc_meta(), &recs, 1000);
    let a = &r.tasks[0].metrics;
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!(
        (
            a.cpu_ns,
            a.preemption_latency.count,
            a.unfinished_activations
        ),
        (500, 1, 0)
    );
    assert_eq!((a.csw_voluntary, a.csw_involuntary), (0, 0));
}

#[test]
fn interaction_response_time_spans_tasks() {
    let recs = [
        Record::InteractionBegin {
            t: 1000,
            id: 7,
            name: 0,
            task: 0,
        },
        Record::InteractionEnd {
            t: 4500,
            id: 7,
            task: 1,
        },
        Record::InteractionBegin {
            t: 6000,
            id: 8,
            name: 0,
            task: 0,
        },
    ];
    let r = report(&abc_meta(), &recs, 10_000);
    let tap = &r.interactions[0];
    assert_eq!(
        (tap.name.as_str(), tap.begun, tap.unfinished),
        ("tap", 2, 1)
    );
    assert_eq!(tap.response_time.count, 1);
    assert_eq!(stats(&tap.response_time).p99, 3500);
    let frame = &r.interactions[1];
    assert_eq!((frame.begun, frame.response_time.count), (0, 0));
}

#[test]
fn slack_samples_and_deadline_misses() {
    let recs = [
        Record::Period {
            t: 100,
            task: 0,
            slack: 300,
        },
        Record::Period {
            t: 200,
            task: 0,
            slack: -200,
        },
        Record::Period {
            t: 300,
            task: 0,
            slack: 0,
        },
    ];
    let r = report(&abc_meta(), &recs, 1_000);
    let a = &r.tasks[0].metrics;
    assert_eq!(a.deadline_misses, 1);
    let s = stats(&a.slack);
    assert_eq!((s.min, s.p50, s.max), (-200, 0, 300));
}

#[test]
fn loops_give_throughput_per_simulated_second() {
    let recs: Vec<Record> = (1..=4)
        .map(|i| Record::LoopDone {
            t: i * 1000,
            task: 2,
        })
        .collect();
    let r = report(&abc_meta(), &recs, 2_000_000_000);
    assert_eq!(
        (r.tasks[2].metrics.loops, r.tasks[2].metrics.loops_per_s),
        (4, 2.0)
    );
}

#[test]
fn percentiles_of_latencies_one_to_hundred() {
    // Task 0 is woken at 1000·i and runs i ns later, for i = 1..=100.
    let mut recs = Vec::new();
    for i in 1..=100u64 {
        recs.push(wake(1000 * i, 0, 0));
        recs.push(sw(1000 * i + i, 0, None, Blocked, Some(0)));
        recs.push(sw(1000 * i + 500, 0, Some(0), Blocked, None));
    }
    let r = report(&abc_meta(), &recs, 200_000);
    let w = stats(&r.tasks[0].metrics.wakeup_latency);
    assert_eq!(
        (w.p50, w.p90, w.p95, w.p99, w.p999, w.max),
        (50, 90, 95, 99, 100, 100)
    );
    assert_eq!(w.mean, 50.5);
}

#[test]
fn inconsistent_records_are_reported_not_ignored() {
    let recs = [
        wake(0, 0, 0),
        wake(10, 0, 0),
        Record::InteractionEnd {
            t: 20,
            id: 3,
            task: 0,
        },
    ];
    let r = report(&abc_meta(), &recs, 100);
    assert_eq!(r.anomalies.count, 2);
    assert!(r.anomalies.examples[0].contains("wake-up of task 0"));
    let backwards = [wake(50, 0, 0), sw(40, 0, None, Blocked, Some(0))];
    let r = report(&abc_meta(), &backwards, 100);
    assert!(
        r.anomalies.examples[0].contains("time went back"),
        "{:?}",
        r.anomalies
    );
    assert_eq!(
        stats(&r.tasks[0].metrics.wakeup_latency).max,
        0,
        "no underflow"
    );
}

#[test]
fn json_has_no_raw_samples_unless_asked() {
    let mut m = MetricsCollector::new();
    feed(&mut m, &abc_meta(), &two_preemptions(), 10_000);
    let plain = serde_json::to_value(m.report(false)).unwrap();
    assert!(plain["tasks"][0]["wakeup_latency"].get("samples").is_none());
    assert_eq!(plain["tasks"][0]["wakeup_latency"]["p99.9"], 200);
    let full = serde_json::to_value(m.report(true)).unwrap();
    assert_eq!(
        full["tasks"][0]["wakeup_latency"]["samples"],
        serde_json::json!([100, 200])
    );
}

#[test]
fn table_lists_the_worst_tasks_and_summarises_the_rest() {
    // 30 tasks, task i woken at 10 000·i and run i·10 ns later; task 3, "render", is labelled.
    let mut tasks: Vec<TaskMeta> = (0..30)
        .map(|i| task(&format!("svc{i:02}"), "svc", 0))
        .collect();
    tasks[3].labels = vec!["ui".into()];
    tasks[3].name = "render".into();
    let mut recs = Vec::new();
    for i in 0..30u32 {
        let t = 10_000 * u64::from(i);
        recs.push(wake(t, i, 0));
        recs.push(sw(t + 10 * u64::from(i), 0, None, Blocked, Some(i)));
        recs.push(sw(t + 5_000, 0, Some(i), Blocked, None));
    }
    let r = report(&meta(tasks), &recs, 400_000);
    let top5 = TableOptions {
        top: 5,
        filter: None,
    };
    let table = r.to_table(&top5);
    for shown in 25..30 {
        assert!(table.contains(&format!("svc{shown}")), "{table}");
    }
    assert!(
        !table.contains("svc24") && !table.contains("render"),
        "{table}"
    );
    assert!(table.contains("25 more tasks hidden"), "{table}");
    assert!(table.contains("290ns"), "task 29's p99 is shown: {table}");
    // Everyone is still summarised: by label and by family.
    let label = r.labels.iter().find(|l| l.name == "ui").expect("ui label");
    assert_eq!((label.tasks, label.metrics.wakeup_latency.count), (1, 1));
    let family = r
        .families
        .iter()
        .find(|f| f.name == "svc#")
        .expect("family");
    assert_eq!(family.tasks, 29);
    assert!(
        table.contains("task family") && table.contains("svc#"),
        "{table}"
    );
    assert!(table.contains("\nui "), "label row: {table}");

    let by_label = r.to_table(&TableOptions {
        top: 5,
        filter: Some("ui".into()),
    });
    assert!(by_label.contains("render") && by_label.contains("29 tasks not matching `ui` hidden"));
    let by_name = r.to_table(&TableOptions {
        top: 5,
        filter: Some("svc0".into()),
    });
    assert!(by_name.contains("svc00") && by_name.contains("svc09") && !by_name.contains("svc10"));
    assert!(
        by_name.contains("21 tasks not matching `svc0` hidden"),
        "{by_name}"
    );
    // Few tasks: all shown, no footer, no family table.
    let all = r.to_table(&TableOptions {
        top: 30,
        filter: None,
    });
    assert!(all.contains("render") && !all.contains("hidden") && !all.contains("task family"));
}

fn perfetto_bytes(records: &[Record]) -> Vec<u8> {
    let mut trace = PerfettoTrace::new(Vec::new());
    let mut recs = records.to_vec();
    recs.push(Record::Freq {
        t: 4000,
        domain: 0,
        khz: 1_800_000,
    });
    recs.push(Record::InteractionBegin {
        t: 50,
        id: 1,
        name: 0,
        task: 0,
    });
    recs.push(Record::InteractionEnd {
        t: 4000,
        id: 1,
        task: 2,
    });
    recs.sort_by_key(Record::time);
    feed(&mut trace, &abc_meta(), &recs, 10_000);
    trace.finish().unwrap()
}

#[test]
fn perfetto_trace_parses_and_has_slices_counters_and_names() {
    let bytes = perfetto_bytes(&two_preemptions());
    let json: Value = serde_json::from_slice(&bytes).expect("valid JSON");
    let events = json["traceEvents"].as_array().unwrap();
    let slices: Vec<(String, u64, f64, f64)> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == 1)
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["tid"].as_u64().unwrap(),
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
            )
        })
        .collect();
    // CPU 0 is tid 1, CPU 1 tid 2; times in µs.
    assert_eq!(
        slices,
        vec![
            ("A".into(), 1, 0.1, 1.0),
            ("B".into(), 1, 1.1, 1.0),
            ("A".into(), 1, 2.1, 0.9),
            ("C".into(), 1, 3.0, 0.5),
            ("A".into(), 1, 3.5, 0.5),
            ("A".into(), 2, 5.2, 0.8),
            ("A".into(), 2, 6.3, 0.7),
        ]
    );
    // A's waits on its own track (tid = 2 CPUs + 1 + task 0): woken 0..0.1 µs, preempted
    // 1.1..2.1 and 3.0..3.5, woken 5.0..5.2, yielded 6.0..6.3.
    let waits: Vec<(f64, f64, &str)> = events
        .iter()
        .filter(|e| e["name"] == "runnable" && e["tid"] == 3)
        .map(|e| {
            let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
            (ts, dur, e["args"]["since"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        waits,
        vec![
            (0.0, 0.1, "woken"),
            (1.1, 1.0, "preempted"),
            (3.0, 0.5, "preempted"),
            (5.0, 0.2, "woken"),
            (6.0, 0.3, "yielded"),
        ]
    );
    let freq: Vec<(f64, u64)> = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "freq little")
        .map(|e| {
            (
                e["ts"].as_f64().unwrap(),
                e["args"]["kHz"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(freq, vec![(0.0, 1_000_000), (4.0, 1_800_000)]);
    let named = |kind: &str, name: &str| {
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["name"] == kind && e["args"]["name"] == name)
    };
    assert!(
        named("thread_name", "CPU 0 (little)")
            && named("thread_name", "C")
            && named("process_name", "daemon")
    );
    let wakeups = events
        .iter()
        .filter(|e| e["ph"] == "i" && e["name"] == "wakeup")
        .count();
    assert_eq!(wakeups, 4);
    let async_ids: Vec<(&str, u64)> = events
        .iter()
        .filter(|e| e["cat"] == "interaction")
        .map(|e| (e["ph"].as_str().unwrap(), e["id"].as_u64().unwrap()))
        .collect();
    assert_eq!(async_ids, vec![("b", 1), ("e", 1)]);
}

#[test]
fn identical_logs_give_identical_trace_bytes_and_digests() {
    assert_eq!(
        perfetto_bytes(&two_preemptions()),
        perfetto_bytes(&two_preemptions())
    );
    let digest = |recs: &[Record]| {
        let mut d = Digest::new();
        feed(&mut d, &abc_meta(), recs, 10_000);
        d.hex()
    };
    let mut other = two_preemptions();
    other[1] = sw(101, 0, None, Blocked, Some(0));
    assert_eq!(digest(&two_preemptions()), digest(&two_preemptions()));
    assert_ne!(digest(&two_preemptions()), digest(&other));
    let mut renamed = abc_meta();
    renamed.tasks[2].name = "D".into();
    let mut d = Digest::new();
    feed(&mut d, &renamed, &two_preemptions(), 10_000);
    assert_ne!(
        d.hex(),
        digest(&two_preemptions()),
        "metadata is part of the digest"
    );
}

#[derive(Debug)]
struct BrokenPipe;

impl Write for BrokenPipe {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::new(io::ErrorKind::BrokenPipe, "gone"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn trace_write_errors_surface_at_finish() {
    let mut trace = PerfettoTrace::new(BrokenPipe);
    feed(&mut trace, &abc_meta(), &two_preemptions(), 10_000);
    assert_eq!(
        trace.finish().unwrap_err().kind(),
        io::ErrorKind::BrokenPipe
    );
}

#[test]
fn gantt_draws_only_what_is_inside_the_window() {
    let mut g = GanttChart::new(2000, 3500).unwrap();
    feed(&mut g, &abc_meta(), &two_preemptions(), 10_000);
    let got: Vec<(TaskId, u64, u64)> = g
        .slices()
        .iter()
        .map(|s| (s.task, s.start, s.end))
        .collect();
    // B (1100..2100) clipped, A whole, C whole; A from 3500 starts at the excluded end.
    assert_eq!(got, vec![(1, 2000, 2100), (0, 2100, 3000), (2, 3000, 3500)]);
    let svg = g.to_svg();
    assert_eq!(svg.matches(r#"class="slice""#).count(), 3);
    assert_eq!(
        svg.matches(r#"class="wakeup""#).count(),
        1,
        "only C's wake-up at 2900"
    );
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("time (ms)") && svg.contains("CPU 0"));
    let mut again = GanttChart::new(2000, 3500).unwrap();
    feed(&mut again, &abc_meta(), &two_preemptions(), 10_000);
    assert_eq!(svg, again.to_svg());
}

#[test]
fn gantt_marks_interactions_in_the_window() {
    let recs = [
        Record::InteractionBegin {
            t: 1000,
            id: 7,
            name: 0,
            task: 0,
        },
        Record::InteractionEnd {
            t: 4500,
            id: 7,
            task: 1,
        },
    ];
    let mut g = GanttChart::new(0, 2000).unwrap();
    feed(&mut g, &abc_meta(), &recs, 10_000);
    let svg = g.to_svg();
    assert_eq!(svg.matches("interaction-begin").count(), 1);
    assert_eq!(svg.matches("interaction-end").count(), 0);
    assert!(svg.contains("tap #7 begins on A"));
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("uxsched-sim-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn atomic_write_leaves_no_file_on_error_and_keeps_the_old_one() {
    let dir = scratch("atomic");
    let path = dir.join("trace.json");
    let err = write_atomically(&path, |w| {
        w.write_all(b"partial")?;
        Err::<(), _>(io::Error::other("boom"))
    })
    .unwrap_err();
    assert_eq!(err.to_string(), "boom");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "neither the file nor .tmp"
    );

    write_atomically(&path, |w| w.write_all(b"old")).unwrap();
    let _ = write_atomically(&path, |w| {
        w.write_all(b"new, half")?;
        Err::<(), _>(io::Error::other("boom"))
    });
    assert_eq!(std::fs::read(&path).unwrap(), b"old");

    {
        let mut f = AtomicFile::create(dir.join("gantt.svg")).unwrap();
        f.write_all(b"<svg").unwrap();
        // Dropped without commit, as when the run fails midway.
    }
    assert!(!dir.join("gantt.svg").exists() && !dir.join("gantt.svg.tmp").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failed_rename_cleans_up_and_errors_name_the_file() {
    let dir = scratch("rename");
    let target = dir.join("out.svg");
    std::fs::create_dir_all(target.join("occupied")).unwrap();
    let err = write_atomically(&target, |w| w.write_all(b"<svg/>")).unwrap_err();
    assert!(err.to_string().contains("out.svg"), "{err}");
    assert!(!dir.join("out.svg.tmp").exists());
    let missing = dir.join("no/such/dir/t.json");
    let err = AtomicFile::create(&missing).err().expect("cannot create");
    assert!(err.to_string().contains("no/such/dir/t.json.tmp"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn streamed_trace_into_an_atomic_file_appears_complete() {
    let dir = scratch("stream");
    let path = dir.join("t.json");
    let mut trace = PerfettoTrace::new(AtomicFile::create(&path).unwrap());
    feed(&mut trace, &abc_meta(), &two_preemptions(), 10_000);
    assert!(!path.exists(), "nothing at the path before commit");
    trace.finish().unwrap().commit().unwrap();
    let json: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert!(json["traceEvents"].as_array().unwrap().len() > 10);
    std::fs::remove_dir_all(&dir).unwrap();
}
