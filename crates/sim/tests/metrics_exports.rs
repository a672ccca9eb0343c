//! Metrics on hand-built event logs whose answers are worked out by hand in the comments (see
//! `synthetic/mod.rs` for the shared story).

mod synthetic;

use uxsched_sim::export::GanttChart;
use uxsched_sim::log::{LeaveReason, Record, TaskMeta};
use uxsched_sim::metrics::{MetricsCollector, TableOptions};

use synthetic::*;

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
    let [begin, end] = tap(7, 1000, 0, 4500, 1);
    let [unfinished, _] = tap(8, 6000, 0, 0, 0);
    let recs = [begin, end, unfinished];
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
