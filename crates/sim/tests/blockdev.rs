//! The engine's block device: `io` events block their task until an I/O scheduler (CFQ or noop)
//! has served them, tagged with the task's I/O priority — and CPU contention feeds into it.

mod common;
use common::*;
use uxsched_model::{Nanos, MS, SEC, US};
use uxsched_sim::engine::Sim;
use uxsched_sim::io::IoPrio;
use uxsched_sim::log::{Record, VecSink};
use uxsched_sim::workload::{self, Event, Phase, SchedPolicy, TaskSpec};

const READS: u64 = 100;

/// 100 × (1 ms read, 2 ms of CPU), once.
fn reader(prio: IoPrio) -> TaskSpec {
    let mut t = task("reader", nice(0), vec![]);
    t.phases = vec![Phase {
        name: "read".into(),
        loops: READS,
        events: vec![Event::Io(MS), Event::Run(2 * MS)],
        ..Default::default()
    }];
    t.loops = Some(1);
    t.ioprio = Some(prio);
    t
}

/// A fio job: synchronous 4 ms reads back to back, best-effort 4.
fn fio(i: usize) -> TaskSpec {
    let mut t = task(
        &format!("fio{i}"),
        nice(0),
        vec![Event::Run(50 * US), Event::Io(4 * MS)],
    );
    t.ioprio = Some(IoPrio::BestEffort(4));
    t
}

fn run_io(tasks: Vec<TaskSpec>, io_sched: &str, params: &[&str], cpus: usize) -> VecSink {
    let mut cfg = config("cfs", cpus, 10 * SEC);
    cfg.io_sched = io_sched.into();
    cfg.params = uxsched_sim::policy::Params::parse(params.iter().copied()).unwrap();
    run(&workload(tasks), cfg)
}

/// Each completed read of `task`: its wait before service.
fn waits(log: &VecSink, task: &str) -> Vec<Nanos> {
    let id = task_id(log, task);
    log.records
        .iter()
        .filter_map(|r| match *r {
            Record::Io { task, wait, .. } if task == id => Some(wait),
            _ => None,
        })
        .collect()
}

#[test]
fn a_read_blocks_its_task_for_the_service_time() {
    let mut t = task("t", nice(0), vec![Event::Io(5 * MS), Event::Run(MS)]);
    t.loops = Some(1);
    let log = run_io(vec![t], "cfq", &[], 1);
    let id = task_id(&log, "t");
    let io: Vec<_> = log
        .records
        .iter()
        .filter_map(|r| match *r {
            Record::Io {
                t,
                task,
                wait,
                service,
            } if task == id => Some((t, wait, service)),
            _ => None,
        })
        .collect();
    assert_eq!(io, vec![(5 * MS, 0, 5 * MS)]);
    // Woken by the completion, then 1 ms of CPU, then it exits at 6 ms.
    let exit = log.records.iter().find_map(|r| match *r {
        Record::Exit { t, task } if task == id => Some(t),
        _ => None,
    });
    assert_eq!(exit, Some(6 * MS));
}

#[test]
fn cfq_serves_a_real_time_reader_first_and_idles_for_it() {
    let log = run_io(
        vec![reader(IoPrio::RealTime(4)), fio(0), fio(1)],
        "cfq",
        &[],
        4,
    );
    let w = waits(&log, "reader");
    assert_eq!(w.len() as u64, READS);
    // Never behind more than the one best-effort read that may be on the device.
    assert!(w.iter().all(|&x| x <= 4 * MS), "{w:?}");
    // The idle window keeps the device for it between reads: almost no waits at all.
    assert!(w.iter().filter(|&&x| x > 0).count() <= 3, "{w:?}");
}

#[test]
fn cfq_gives_best_effort_streams_turns_and_noop_interleaves() {
    let tasks = || vec![reader(IoPrio::BestEffort(4)), fio(0), fio(1)];
    let w = waits(&run_io(tasks(), "cfq", &[], 4), "reader");
    // Inside its slice the reader waits for nothing; between slices it waits for the two fio
    // slices (≈ 2 × 100 ms).
    assert!(w.iter().any(|&x| x > 50 * MS), "{w:?}");
    assert!(w.iter().filter(|&&x| x == 0).count() > w.len() / 2, "{w:?}");
    // FIFO: every read queues behind the fio reads submitted before it.
    let w = waits(&run_io(tasks(), "noop", &[], 4), "reader");
    assert!(w.iter().skip(1).all(|&x| x > 0 && x <= 8 * MS), "{w:?}");
}

#[test]
fn without_an_idle_window_cfq_takes_turns_request_by_request() {
    // Every queue runs dry between its synchronous reads (the reader computes, fio needs 50 µs
    // of CPU to resubmit), and with `slice_idle = 0` CFQ does not wait for it: the slices end
    // at once and the queues alternate one request at a time, like noop.
    let tasks = vec![reader(IoPrio::BestEffort(4)), fio(0), fio(1)];
    let w = waits(&run_io(tasks, "cfq", &["cfq.slice_idle=0ms"], 4), "reader");
    assert!(w.iter().skip(1).all(|&x| x > 0 && x <= 8 * MS), "{w:?}");
}

#[test]
fn cpu_starvation_costs_the_reader_its_idle_window() {
    // The reader shares one CPU with a hog at nice 0 while it runs at nice 10: its 2 ms of CPU
    // per chunk stretches past CFQ's 8 ms idle window, so it also waits behind fio's slices.
    let mut starved = reader(IoPrio::BestEffort(4));
    starved.policy = nice(10);
    let alone = waits(
        &run_io(
            vec![reader(IoPrio::BestEffort(4)), fio(0), fio(1)],
            "cfq",
            &[],
            1,
        ),
        "reader",
    );
    let loaded = waits(
        &run_io(
            vec![starved, fio(0), fio(1), hog("hog", nice(0))],
            "cfq",
            &[],
            1,
        ),
        "reader",
    );
    let long = |w: &[Nanos]| w.iter().filter(|&&x| x > 50 * MS).count() as f64 / w.len() as f64;
    assert!(
        long(&loaded) > 5.0 * long(&alone) && long(&loaded) > 0.3,
        "reads waiting > 50 ms: {:.2} alone, {:.2} CPU-starved",
        long(&alone),
        long(&loaded)
    );
}

#[test]
fn default_io_priority_follows_the_cpu_policy() {
    assert_eq!(IoPrio::of_policy(nice(0)), IoPrio::BestEffort(4));
    assert_eq!(IoPrio::of_policy(nice(10)), IoPrio::BestEffort(6));
    assert_eq!(IoPrio::of_policy(nice(-20)), IoPrio::BestEffort(0));
    assert_eq!(IoPrio::of_policy(nice(19)), IoPrio::BestEffort(7));
    assert_eq!(IoPrio::of_policy(SchedPolicy::Idle), IoPrio::Idle);
    assert_eq!(
        IoPrio::of_policy(SchedPolicy::Fifo { prio: 50 }),
        IoPrio::RealTime(4)
    );
    assert_eq!(IoPrio::parse("rt0"), Ok(IoPrio::RealTime(0)));
    assert_eq!(IoPrio::parse("be7"), Ok(IoPrio::BestEffort(7)));
    assert_eq!(IoPrio::parse("idle"), Ok(IoPrio::Idle));
    assert!(IoPrio::parse("be8").unwrap_err().contains("0..=7"));
    assert!(IoPrio::parse("fast").unwrap_err().contains("rt0..rt7"));
}

#[test]
fn native_workloads_read_io_events_and_priorities_with_located_errors() {
    let text = r#"
[[task]]
name = "r"
ioprio = "rt2"
loops = 1
events = [{ io = "3ms" }, { run = "1ms" }]
"#;
    let w = workload::native::parse(text, "t.toml").unwrap();
    assert_eq!(w.tasks[0].ioprio, Some(IoPrio::RealTime(2)));
    assert_eq!(w.tasks[0].phases[0].events[0], Event::Io(3 * MS));
    let bad = text.replace("rt2", "rt9");
    let e = workload::native::parse(&bad, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("t.toml:4:"), "{e}");
    assert!(e.contains("0..=7"), "{e}");
}

#[test]
fn io_scheduler_names_and_tunables_are_checked() {
    let w = workload(vec![reader(IoPrio::BestEffort(4))]);
    let mut cfg = config("cfs", 1, SEC);
    cfg.io_sched = "deadline".into();
    let e = Sim::new(&w, cfg).err().unwrap().to_string();
    assert!(e.contains("deadline") && e.contains("cfq, noop"), "{e}");
    let mut cfg = config("cfs", 1, SEC);
    cfg.params = uxsched_sim::policy::Params::parse(["cfq.slice_nope=1ms"]).unwrap();
    let e = Sim::new(&w, cfg).err().unwrap().to_string();
    assert!(e.contains("cfq.slice_nope"), "{e}");
}
