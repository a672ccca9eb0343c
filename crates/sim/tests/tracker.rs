//! ShuffleDog's Thread Tracker (seed 003 §4) and the engine's cgroup move it relies on.

mod common;
use common::*;
use std::sync::{Arc, Mutex};
use uxsched_model::{Nanos, MS, SEC};
use uxsched_sim::engine::{Control, Mechanism, Sim};
use uxsched_sim::log::{LeaveReason, Record, VecSink};
use uxsched_sim::mechanism::shuffledog_cpu::{android_default, BG_GROUP};
use uxsched_sim::mechanism::tracker::{Findings, Tracker};
use uxsched_sim::workload::{Event, GroupSpec, TaskSpec, Workload};

fn labelled(mut t: TaskSpec, labels: &[&str]) -> TaskSpec {
    t.labels = labels.iter().map(|l| l.to_string()).collect();
    t
}

/// A MuPDF-like app on one CPU: each zoom, the UI thread pings an unrelated logger (which never
/// answers) and hands a 20 ms resize to an AsyncTask at nice 10, which posts the page back.
/// Two nice-0 hogs (CPUGenerator) and a nice-10 hog compete; Android's default puts the
/// nice-10 threads in the 52-share background group.
fn mupdf_like() -> Workload {
    let ui = labelled(
        task(
            "app.ui",
            nice(0),
            vec![
                Event::Sleep(50 * MS),
                Event::Begin("zoom".into()),
                Event::Run(4 * MS),
                Event::Send("log".into()),
                Event::Send("resize".into()),
                Event::Recv("page".into()),
                Event::Run(4 * MS),
                Event::End("zoom".into()),
            ],
        ),
        &["ui"],
    );
    let worker = task(
        "app.asynctask",
        nice(10),
        vec![
            Event::Recv("resize".into()),
            Event::Run(20 * MS),
            Event::Send("page".into()),
        ],
    );
    let logger = task(
        "app.logger",
        nice(10),
        vec![Event::Recv("log".into()), Event::Run(MS)],
    );
    let mut w = workload(vec![
        ui,
        worker,
        logger,
        hog("cpugen.0", nice(0)),
        hog("cpugen.1", nice(0)),
        hog("bg.hog", nice(10)),
    ]);
    android_default(&mut w);
    w
}

fn run_mechs(w: &Workload, dur: Nanos, mechs: Vec<Box<dyn Mechanism>>) -> VecSink {
    let mut sim = Sim::new(w, config("cfs", 1, dur)).expect("builds");
    for m in mechs {
        sim.add_mechanism(m);
    }
    let mut sink = VecSink::default();
    sim.run(&mut sink, &mut |_| {}).expect("runs");
    sink
}

fn run_tracked(w: &Workload, dur: Nanos) -> (VecSink, Findings) {
    let tracker = Tracker::new(3);
    let findings = tracker.findings();
    let log = run_mechs(w, dur, vec![Box::new(tracker)]);
    let f = findings.lock().unwrap().clone();
    (log, f)
}

#[test]
fn tracker_marks_the_thread_on_the_cycle_not_the_one_the_ui_only_wakes() {
    let w = mupdf_like();
    let (log, found) = run_tracked(&w, 3 * SEC);
    let (ui, worker, logger) = (
        task_id(&log, "app.ui"),
        task_id(&log, "app.asynctask"),
        task_id(&log, "app.logger"),
    );
    let marked: Vec<u32> = found
        .get(&ui)
        .map(|s| s.iter().copied().collect())
        .unwrap_or_default();
    assert_eq!(marked, vec![worker], "found {found:?}");
    assert!(!found.values().any(|s| s.contains(&logger)));
    // The logger did run (the UI woke it), so it was in the graph and was rejected.
    assert!(log.records.iter().any(|r| matches!(
        *r,
        Record::Wakeup { task, waker: Some(w), .. } if task == logger && w == ui
    )));
}

#[test]
fn tracker_marks_gl_threads_from_the_start() {
    let mut w = mupdf_like();
    w.tasks.push(task(
        "app.GLThread 7",
        nice(0),
        vec![Event::Run(MS), Event::Sleep(15 * MS)],
    ));
    w.tasks
        .push(labelled(hog("app.draw", nice(0)), &["render"]));
    let (log, found) = run_tracked(&w, 200 * MS);
    let gl: Vec<u32> = found[&uxsched_sim::mechanism::tracker::GL_CONTEXT]
        .iter()
        .copied()
        .collect();
    assert_eq!(
        gl,
        vec![task_id(&log, "app.GLThread 7"), task_id(&log, "app.draw")]
    );
}

#[test]
fn tracker_speeds_up_the_worker_against_background_hogs() {
    let w = mupdf_like();
    let dur = 4 * SEC;
    let plain = responses(&run_mechs(&w, dur, vec![]));
    let (log, _) = run_tracked(&w, dur);
    let tracked = responses(&log);
    assert!(
        !plain.is_empty() && tracked.len() > plain.len(),
        "{plain:?} vs {tracked:?}"
    );
    // The first zoom pays for the discovery; afterwards the worker runs at nice 3 in the root.
    let first_plain = plain[0];
    assert!(
        tracked[0] * 10 > first_plain * 8,
        "{tracked:?} vs {plain:?}"
    );
    let later = &tracked[1..];
    assert!(later.len() >= 3, "{tracked:?}");
    assert!(
        later.iter().all(|&r| r * 4 < first_plain),
        "later zooms {later:?} should be far below {first_plain} ns"
    );
}

/// Moves one task between two cgroups from inside the run.
struct Mover {
    name: &'static str,
    tid: u32,
    groups: [usize; 2],
    at: Option<Nanos>,
    /// Move whenever the task starts running, wakes, or blocks, this many times.
    on_events: usize,
    kinds: Arc<Mutex<Vec<&'static str>>>,
}

impl Mover {
    fn toggle(&mut self, kind: &'static str, ctl: &mut Control) {
        let g = ctl.task_group(self.tid);
        let to = if g == self.groups[0] {
            self.groups[1]
        } else {
            self.groups[0]
        };
        assert!(ctl.set_task_group(self.tid, to));
        assert_eq!(ctl.task_group(self.tid), to);
        self.kinds.lock().unwrap().push(kind);
    }
}

impl Mechanism for Mover {
    fn name(&self) -> &'static str {
        "mover"
    }
    fn start(&mut self, ctl: &mut Control) {
        let m = ctl.meta();
        self.tid = m.tasks.iter().position(|t| t.name == self.name).unwrap() as u32;
        self.groups = [
            m.tasks[self.tid as usize].group as usize,
            if m.tasks[self.tid as usize].group == 0 {
                m.groups.len() - 1
            } else {
                0
            },
        ];
        if let Some(at) = self.at {
            ctl.timer_at(at, 0);
        }
    }
    fn timer(&mut self, _token: u64, ctl: &mut Control) {
        self.toggle("timer", ctl);
    }
    fn observe(&mut self, rec: &Record, ctl: &mut Control) {
        if self.kinds.lock().unwrap().len() >= self.on_events {
            return;
        }
        let kind = match *rec {
            Record::Switch { next: Some(n), .. } if n == self.tid => "running",
            Record::Wakeup { task, .. } if task == self.tid => "runnable",
            Record::Switch {
                prev: Some(p),
                reason: LeaveReason::Blocked,
                ..
            } if p == self.tid => "blocked",
            _ => return,
        };
        self.toggle(kind, ctl);
    }
}

fn mover(
    name: &'static str,
    at: Option<Nanos>,
    on_events: usize,
) -> (Mover, Arc<Mutex<Vec<&'static str>>>) {
    let kinds = Arc::new(Mutex::new(Vec::new()));
    let m = Mover {
        name,
        tid: 0,
        groups: [0, 0],
        at,
        on_events,
        kinds: Arc::clone(&kinds),
    };
    (m, kinds)
}

/// CPU time of `task` within [from, to), from the switch records (one CPU).
fn cpu_in(log: &VecSink, task: u32, from: Nanos, to: Nanos) -> Nanos {
    let overlap = |s: Nanos, e: Nanos| e.min(to).saturating_sub(s.max(from));
    let mut total = 0;
    let mut running: Option<Nanos> = None;
    for r in &log.records {
        if let Record::Switch { t, prev, next, .. } = *r {
            if let (Some(s), Some(p)) = (running, prev) {
                if p == task {
                    total += overlap(s, t);
                }
            }
            running = (next == Some(task)).then_some(t);
        }
    }
    total + running.map_or(0, |s| overlap(s, log.end))
}

fn bg_workload(tasks: Vec<TaskSpec>) -> Workload {
    let mut w = workload(tasks);
    w.groups.push(GroupSpec {
        path: BG_GROUP.into(),
        shares: 52,
        bandwidth: None,
    });
    w
}

#[test]
fn moving_a_hog_out_of_the_background_group_changes_its_share() {
    let mut a = hog("a", nice(0));
    a.group = Some(BG_GROUP.into());
    let w = bg_workload(vec![a, hog("b", nice(0))]);
    let (m, kinds) = mover("a", Some(SEC), 0);
    let log = run_mechs(&w, 2 * SEC, vec![Box::new(m)]);
    assert_eq!(*kinds.lock().unwrap(), vec!["timer"]);
    let a = task_id(&log, "a");
    let before = cpu_in(&log, a, 200 * MS, SEC) as f64 / (800 * MS) as f64;
    let after = cpu_in(&log, a, 1200 * MS, 2 * SEC) as f64 / (800 * MS) as f64;
    // 52 / (1024 + 52) ≈ 5 % in the group; 50 % beside b in the root.
    assert!(before < 0.10, "share in the background group {before}");
    assert!((0.4..0.6).contains(&after), "share in the root {after}");
}

#[test]
fn moving_a_task_while_running_runnable_or_blocked_keeps_the_engine_consistent() {
    let mut p = task("p", nice(0), vec![Event::Run(2 * MS), Event::Sleep(5 * MS)]);
    p.group = Some(BG_GROUP.into());
    let mut bg = hog("bghog", nice(0));
    bg.group = Some(BG_GROUP.into());
    let w = bg_workload(vec![p, bg, hog("root", nice(0))]);
    // An odd number of moves: p ends in the root group, where it must run freely.
    let (m, kinds) = mover("p", None, 59);
    let log = run_mechs(&w, SEC, vec![Box::new(m)]);
    let kinds = kinds.lock().unwrap();
    for k in ["running", "runnable", "blocked"] {
        assert!(kinds.contains(&k), "no move while {k}: {kinds:?}");
    }
    // The CPU is never idle (two hogs) and every task still runs after the moves.
    let times = cpu_time(&log);
    assert_eq!(times.iter().sum::<Nanos>(), log.end);
    let p = task_id(&log, "p");
    let passes: Vec<Nanos> = log
        .records
        .iter()
        .filter_map(|r| match *r {
            Record::LoopDone { t, task } if task == p => Some(t),
            _ => None,
        })
        .collect();
    // Once the moves stop (in the root), each 2 ms run + 5 ms sleep pass takes ~7 ms.
    assert!(passes.len() > 30, "{passes:?}");
    let tail = &passes[passes.len() - 30..];
    assert!(
        tail.windows(2).all(|w| w[1] - w[0] <= 8 * MS),
        "p does not run freely after its last move: {passes:?}"
    );
    assert!(times.iter().all(|&t| t > 0), "{times:?}");
}

/// The I/O manager side: once the tracker knows the AsyncTask, its reads (and the UI thread's)
/// are real-time and no longer wait for fio's best-effort slices.
#[test]
fn learned_threads_get_real_time_io() {
    use uxsched_sim::io::IoPrio;
    let ui = labelled(
        task(
            "app.ui",
            nice(0),
            vec![
                Event::Sleep(50 * MS),
                Event::Begin("open".into()),
                Event::Send("job".into()),
                Event::Recv("done".into()),
                Event::End("open".into()),
            ],
        ),
        &["ui"],
    );
    let mut worker = task("app.asynctask", nice(0), vec![]);
    worker.phases = vec![
        uxsched_sim::workload::Phase {
            name: "wait".into(),
            loops: 1,
            events: vec![Event::Recv("job".into())],
            ..Default::default()
        },
        uxsched_sim::workload::Phase {
            name: "read".into(),
            loops: 40,
            events: vec![Event::Io(MS), Event::Run(MS)],
            ..Default::default()
        },
        uxsched_sim::workload::Phase {
            name: "post".into(),
            loops: 1,
            events: vec![Event::Send("done".into())],
            ..Default::default()
        },
    ];
    let fio = |i: usize| {
        let mut t = task(&format!("fio{i}"), nice(0), vec![Event::Io(4 * MS)]);
        t.ioprio = Some(IoPrio::BestEffort(4));
        t
    };
    let mut w = workload(vec![ui, worker, fio(0), fio(1)]);
    for t in &mut w.tasks[..2] {
        t.ioprio = Some(IoPrio::BestEffort(4));
    }
    let dur = 3 * SEC;
    let mut without = Tracker::new(3);
    without.io = false;
    let r_off = responses(&run_mechs(&w, dur, vec![Box::new(without)]));
    let r_on = responses(&run_mechs(&w, dur, vec![Box::new(Tracker::new(3))]));
    assert!(r_on.len() >= 3 && r_off.len() >= 2, "{r_on:?} {r_off:?}");
    // The first interaction teaches the tracker; the later ones run with real-time I/O: 40 ×
    // (1 ms read + 1 ms CPU), each read behind at most one 4 ms fio read.
    let later_on = *r_on[1..].iter().max().unwrap();
    let later_off = *r_off[1..].iter().max().unwrap();
    assert!(later_on <= 40 * 6 * MS, "{r_on:?}");
    assert!(
        later_off > 2 * later_on,
        "without the I/O manager: {r_off:?}"
    );
}
