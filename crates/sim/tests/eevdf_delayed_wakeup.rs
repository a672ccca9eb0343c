//! Regression test of `ttwu_runnable` for a delayed sleeper (kernel/sched/core.c 6.12–6.18): a
//! task that blocks while not eligible stays queued (DELAY_DEQUEUE), so its wake-up finds it
//! `on_rq` and requeues it on its own CPU — `select_task_rq` never runs, even with another CPU
//! idle. The model before chose a CPU at every wake-up and moved such a task to the idle one.

use uxsched_model::{Nanos, MS, SEC, US};
use uxsched_sim::engine::{Sim, SimConfig};
use uxsched_sim::log::{LeaveReason, Record, RunMeta, Sink};
use uxsched_sim::platform::PlatformSpec;
use uxsched_sim::policy::eevdf::{Eevdf, EevdfTunables};
use uxsched_sim::policy::{Entity, FairPolicy, FairRq};
use uxsched_sim::workload::{Event, Phase, TaskSpec, Workload};

/// CPUs of one task's wake-ups from its sleeps. The engine applies a phase's affinity by taking
/// the task off its CPU and waking it on an allowed one at the same instant; those wake-ups
/// (at the time of the task's last block) and its first start are left out.
#[derive(Default)]
struct WakeCpus {
    task: u32,
    last_block: Option<Nanos>,
    cpus: Vec<u16>,
}

impl Sink for WakeCpus {
    fn begin(&mut self, meta: &RunMeta) {
        self.task = meta.tasks.iter().position(|t| t.name == "a").unwrap() as u32;
    }

    fn record(&mut self, rec: &Record) {
        match *rec {
            Record::Switch {
                t,
                prev: Some(p),
                reason: LeaveReason::Blocked,
                ..
            } if p == self.task => self.last_block = Some(t),
            Record::Wakeup { t, task, cpu, .. }
                if task == self.task && self.last_block.is_some_and(|b| b < t) =>
            {
                self.cpus.push(cpu)
            }
            _ => {}
        }
    }
}

fn phase(name: &str, affinity: Option<Vec<usize>>, events: Vec<Event>) -> Phase {
    Phase {
        name: name.into(),
        loops: 1,
        events,
        affinity,
    }
}

/// A nice-0 hog pinned to CPU 0; task `a` runs 1.3–6.1 ms pinned to CPU 0 beside it, then,
/// free to run anywhere, sleeps 50 µs and runs 0.2 ms where it woke. CPU 1 is idle at every
/// one of `a`'s wake-ups.
fn workload() -> Workload {
    let hog = TaskSpec {
        name: "hog".into(),
        process: "hog".into(),
        affinity: Some(vec![0]),
        phases: vec![phase("run", None, vec![Event::Run(100 * SEC)])],
        ..TaskSpec::default()
    };
    // Runs of several lengths beside the hog, so that `a` blocks at several points of its
    // alternation with the hog: sometimes behind V, sometimes ahead of it.
    let mut phases = Vec::new();
    for run in [1300 * US, 2900 * US, 4400 * US, 6100 * US] {
        phases.push(phase(
            "beside-the-hog",
            Some(vec![0]),
            vec![Event::Run(run)],
        ));
        phases.push(phase(
            "free",
            None,
            vec![Event::Sleep(50 * US), Event::Run(200 * US)],
        ));
    }
    let a = TaskSpec {
        name: "a".into(),
        process: "a".into(),
        phases,
        ..TaskSpec::default()
    };
    Workload {
        name: "delayed-wakeup".into(),
        duration: Some(SEC),
        platform: Some(PlatformSpec::uniform(2)),
        groups: vec![],
        tasks: vec![hog, a],
        files: vec![],
    }
}

#[test]
fn a_delayed_sleeper_wakes_on_its_own_cpu_with_another_idle() {
    let mut cfg = SimConfig::new("eevdf", PlatformSpec::uniform(2));
    cfg.duration = SEC as Nanos;
    let mut sim = Sim::new(&workload(), cfg).expect("workload builds");
    let mut sink = WakeCpus::default();
    sim.run(&mut sink, &mut |_| {}).expect("run completes");
    let on0 = sink.cpus.iter().filter(|&&c| c == 0).count();
    let on1 = sink.cpus.len() - on0;
    eprintln!("a's wake-ups: {on0} on CPU 0 (beside the hog), {on1} on idle CPU 1");
    assert!(sink.cpus.len() > 100, "one wake-up per sleep");
    // Blocking at the end of its 1 ms beside the hog, `a` is sometimes ahead of V (not
    // eligible: delayed, woken in place on CPU 0) and sometimes behind it (dequeued, woken on
    // the idle CPU 1). Without the rule every wake-up went to CPU 1.
    assert!(
        on0 * 10 >= sink.cpus.len(),
        "delayed sleepers woken in place: {on0}"
    );
    assert!(
        on1 * 10 >= sink.cpus.len(),
        "eligible sleepers still choose a CPU: {on1}"
    );
}

/// The predicate itself: delayed on this queue and V not yet at its vruntime.
#[test]
fn only_a_sleeper_still_ahead_of_v_is_still_queued() {
    let policy = Eevdf::new(EevdfTunables::for_cpus(2));
    let e = |v: i64| Entity {
        weight: 1024,
        vruntime: v,
        deadline: v + MS as i64,
        on_rq: true,
        ..Entity::default()
    };
    let mut ents = vec![e(10 * MS as i64), e(12 * MS as i64)];
    let mut rq = FairRq::for_group(0);
    rq.min_vruntime = 10 * MS as i64;
    rq.curr = Some(0);
    rq.nr_running = 1;
    rq.load = 1024;
    // Entity 1 slept 2 ms ahead of V (= the current entity's vruntime): delayed.
    ents[1].on_rq = false;
    ents[1].delayed_on = Some(0);
    assert!(policy.wakes_where_queued(&rq, &ents, 1));
    // Once V has reached it the kernel would have picked and dequeued it.
    ents[0].vruntime = 12 * MS as i64;
    assert!(!policy.wakes_where_queued(&rq, &ents, 1));
    // Not delayed (it slept eligible): the wake-up chooses a CPU.
    ents[0].vruntime = 10 * MS as i64;
    ents[1].delayed_on = None;
    assert!(!policy.wakes_where_queued(&rq, &ents, 1));
}
