//! Regression tests of the 6.17–6.18 EEVDF rules modelled for issue 34 (the `sim validate`
//! suite against kernel 6.18.44), one per rule, each on one run-queue so that the rule alone
//! decides, plus the fair wake-up cost drawn per wake-up:
//!
//! - `update_curr` reschedules once the current entity's protection is over
//!   (`if (resched || !protect_slice(curr))`, 6.17+), not only when it is also ineligible after
//!   a PREEMPT_SHORT cancel (6.12's `did_preempt_short`);
//! - a wakee with a shorter slice that is *not* the pick leaves the current entity's protection
//!   in place, shrunk to v + the smallest queued slice (`update_protect_slice`, 6.17+), where
//!   the model cancelled it;
//! - `SimConfig::fair_wakeup_costs`: each fair timer wake-up is delayed by one measured sample.

mod common;
use common::rq_of;
use std::path::Path;

use uxsched_model::{Nanos, MS, SEC, US};
use uxsched_sim::engine::{Sim, SimConfig};
use uxsched_sim::log::{Record, RunMeta, Sink};
use uxsched_sim::platform::PlatformSpec;
use uxsched_sim::policy::eevdf::{Eevdf, EevdfTunables};
use uxsched_sim::policy::{Entity, FairPolicy, FairRq};
use uxsched_sim::workload;

fn ent(v: i64, slice: Nanos) -> Entity {
    Entity {
        weight: 1024,
        vruntime: v,
        deadline: v + slice as i64,
        vprot: v + slice as i64,
        slice,
        custom_slice: slice != 3 * MS,
        on_rq: true,
        ..Entity::default()
    }
}

#[test]
fn the_end_of_the_protection_asks_for_a_pick_at_the_next_accounting() {
    let policy = Eevdf::new(EevdfTunables::for_cpus(2));
    let v = 100 * MS as i64;
    // The current entity: eligible (it is behind the other), its deadline 2 ms away, its
    // protection over (re-picked after a deadline renewal, so never re-protected).
    let mut curr = ent(v, 3 * MS);
    curr.deadline = v + 2 * MS as i64;
    curr.vprot = v;
    let mut ents = vec![curr, ent(v + 500 * US as i64, 3 * MS)];
    ents[1].deadline = v + MS as i64; // the earlier deadline
    let mut rq = rq_of(&ents);
    // 6.12's `did_preempt_short` left an eligible current entity alone until its deadline.
    assert!(
        policy.charge(&mut rq, &mut ents, 0, 10 * US),
        "protection over: update_curr reschedules"
    );
    // Still protected: no reschedule.
    ents[0].vprot = ents[0].vruntime + MS as i64;
    assert!(!policy.charge(&mut rq, &mut ents, 0, 10 * US));
}

#[test]
fn a_short_wakee_that_is_not_the_pick_shrinks_the_protection_instead_of_cancelling_it() {
    let policy = Eevdf::new(EevdfTunables::for_cpus(2));
    let v = 100 * MS as i64;
    // 0: current, 3 ms slice, protected to its deadline. 1: a queued entity with the earliest
    // deadline. 2: the wakee, 0.5 ms slice, eligible, deadline between the two.
    let mut ents = vec![
        ent(v, 3 * MS),
        ent(v - 100 * US as i64, 3 * MS),
        ent(v - 100 * US as i64, 500 * US),
    ];
    ents[1].deadline = v + 200 * US as i64;
    ents[2].deadline = v + 400 * US as i64;
    let mut rq = rq_of(&ents);
    assert!(
        !policy.wakeup_preempt(&mut rq, &mut ents, 0, 2),
        "entity 1 is the pick"
    );
    assert_eq!(
        ents[0].vprot,
        v + 500 * US as i64,
        "protection shrunk to v + the smallest queued slice, not cancelled (vprot = v)"
    );
    // Without entity 1's earlier deadline the wakee is the pick: it preempts and the
    // protection is cancelled.
    ents[1].deadline = v + 3 * MS as i64;
    let mut rq = rq_of(&ents);
    ents[0].vprot = ents[0].deadline;
    assert!(policy.wakeup_preempt(&mut rq, &mut ents, 0, 2));
    assert_eq!(ents[0].vprot, ents[0].vruntime, "cancel_protect_slice");
}

/// Per task, each timer's expiry to the task's next switch-in (rt-app's `wu_lat`).
#[derive(Default)]
struct TimerLatency {
    names: Vec<String>,
    expiry: Vec<Option<Nanos>>,
    lat: Vec<Vec<i64>>,
}

impl Sink for TimerLatency {
    fn begin(&mut self, meta: &RunMeta) {
        self.names = meta.tasks.iter().map(|t| t.name.clone()).collect();
        self.expiry = vec![None; self.names.len()];
        self.lat = vec![Vec::new(); self.names.len()];
    }

    fn record(&mut self, rec: &Record) {
        match *rec {
            Record::Period { t, task, slack } if slack > 0 => {
                self.expiry[task as usize] = Some(t + slack as Nanos);
            }
            Record::Switch {
                t, next: Some(n), ..
            } => {
                if let Some(e) = self.expiry[n as usize].take() {
                    self.lat[n as usize].push(t.saturating_sub(e) as i64);
                }
            }
            _ => {}
        }
    }
}

fn periodic_latencies(costs: Vec<Nanos>, seed: u64) -> Vec<i64> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/validate/periodic-vs-hogs.json");
    let w = workload::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut cfg = SimConfig::new("eevdf", PlatformSpec::uniform(2));
    cfg.duration = 10 * SEC;
    cfg.seed = seed;
    cfg.timer_slack = 50 * US;
    cfg.wakeup_cost = 25 * US; // RT tasks only, once fair costs are given
    cfg.fair_wakeup_costs = costs;
    let mut sim = Sim::new(&w, cfg).expect("workload builds");
    let mut sink = TimerLatency::default();
    sim.run(&mut sink, &mut |_| {}).expect("run completes");
    let i = sink.names.iter().position(|n| n == "periodic").unwrap();
    sink.lat[i].clone()
}

#[test]
fn each_fair_timer_wakeup_takes_one_measured_cost() {
    let costs = vec![10 * US, 40 * US];
    let lat = periodic_latencies(costs.clone(), 1);
    // A wake-up that preempts at once is late by the slack plus the drawn cost, exactly.
    let at_once: Vec<i64> = lat
        .iter()
        .copied()
        .filter(|&l| l < 200 * US as i64)
        .collect();
    assert!(at_once.len() > 50, "most wake-ups preempt at once: {lat:?}");
    for c in &costs {
        let n = at_once
            .iter()
            .filter(|&&l| l == (50 * US + c) as i64)
            .count();
        assert!(n >= 10, "cost {c} ns drawn {n} times: {at_once:?}");
    }
    assert_eq!(lat, periodic_latencies(costs, 1), "same seed, same draws");
    // Without measured fair costs the single `wakeup_cost` applies to every wake-up.
    let single = periodic_latencies(Vec::new(), 1);
    assert!(single
        .iter()
        .filter(|&&l| l < 200 * US as i64)
        .all(|&l| l == 75 * US as i64));
}

#[test]
fn a_migrated_entity_keeps_the_rest_of_its_request() {
    use uxsched_sim::policy::Enqueue;
    let policy = Eevdf::new(EevdfTunables::for_cpus(2));
    let v = 100 * MS as i64;
    // Entity 1, queued behind 0 with 0.4 ms of its 1.5 ms request left, is pulled away.
    let mut ents = vec![ent(v, 1500 * US), ent(v, 1500 * US)];
    ents[1].deadline = v + 400 * US as i64;
    let from = rq_of(&ents);
    policy.on_dequeue(&from, &mut ents, 1, false);
    // The destination queue: one entity at 50 ms.
    let mut dest = vec![ent(50 * MS as i64, 1500 * US)];
    dest.push(ents[1].clone());
    let mut to = FairRq::for_group(0);
    to.min_vruntime = 50 * MS as i64;
    to.curr = Some(0);
    to.nr_running = 1;
    to.load = 1024;
    policy.place(&to, &mut dest, 1, Enqueue::Migrated);
    let e = &dest[1];
    assert_eq!(
        e.deadline - e.vruntime,
        400 * US as i64,
        "PLACE_REL_DEADLINE: the 0.4 ms left, not a new 1.5 ms request"
    );
    assert!(!e.rel_deadline);
    // Dequeued to sleep, it gets a full new request at its wake-up.
    let mut ents = vec![ent(v, 1500 * US), ent(v, 1500 * US)];
    ents[1].deadline = v + 400 * US as i64;
    let from = rq_of(&ents);
    policy.on_dequeue(&from, &mut ents, 1, true);
    let mut dest = vec![ent(50 * MS as i64, 1500 * US), ents[1].clone()];
    policy.place(&to, &mut dest, 1, Enqueue::Wakeup);
    assert_eq!(dest[1].deadline - dest[1].vruntime, 1500 * US as i64);
}

fn lone_thread_latencies(idle: Vec<Nanos>, busy: Vec<Nanos>) -> Vec<i64> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/validate/debian-template.json");
    let w = workload::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut cfg = SimConfig::new("eevdf", PlatformSpec::uniform(2));
    cfg.duration = 2 * SEC;
    cfg.timer_slack = 50 * US;
    cfg.fair_wakeup_costs = busy;
    cfg.idle_wakeup_costs = idle;
    let mut sim = Sim::new(&w, cfg).expect("workload builds");
    let mut sink = TimerLatency::default();
    sim.run(&mut sink, &mut |_| {}).expect("run completes");
    sink.lat[0].clone()
}

#[test]
fn a_wakeup_onto_an_idle_cpu_takes_the_idle_cost() {
    // One thread alone on two CPUs: every timer wakes an idle CPU.
    let lat = lone_thread_latencies(vec![30 * US], vec![10 * US]);
    assert!(lat.len() >= 15, "{lat:?}");
    assert!(lat.iter().all(|&l| l == 80 * US as i64), "{lat:?}");
    // Against busy CPUs (periodic-vs-hogs) the busy cost applies, chosen as the timer fires.
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/validate/periodic-vs-hogs.json");
    let w = workload::load(&path).unwrap();
    let mut cfg = SimConfig::new("eevdf", PlatformSpec::uniform(2));
    cfg.duration = 5 * SEC;
    cfg.timer_slack = 50 * US;
    cfg.fair_wakeup_costs = vec![10 * US];
    cfg.idle_wakeup_costs = vec![30 * US];
    let mut sim = Sim::new(&w, cfg).unwrap();
    let mut sink = TimerLatency::default();
    sim.run(&mut sink, &mut |_| {}).unwrap();
    let i = sink.names.iter().position(|n| n == "periodic").unwrap();
    let at_once: Vec<i64> = sink.lat[i]
        .iter()
        .copied()
        .filter(|&l| l < 200 * US as i64)
        .collect();
    assert!(!at_once.is_empty());
    assert!(at_once.iter().all(|&l| l == 60 * US as i64), "{at_once:?}");
}

/// A CPU idle for `long_idle` or more takes the long-idle costs: Debian's template thread runs
/// 10 ms every 100 ms, so its CPU has been idle 90–100 ms at each timer; with the threshold
/// above that, the short idle costs apply.
#[test]
fn a_cpu_idle_for_long_takes_the_long_idle_cost() {
    let run = |long_idle: Nanos| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios/validate/debian-template.json");
        let w = workload::load(&path).unwrap();
        let mut cfg = SimConfig::new("eevdf", PlatformSpec::uniform(2));
        cfg.duration = 2 * SEC;
        cfg.timer_slack = 50 * US;
        cfg.fair_wakeup_costs = vec![10 * US];
        cfg.idle_wakeup_costs = vec![30 * US];
        cfg.long_idle_wakeup_costs = vec![100 * US];
        cfg.long_idle = long_idle;
        let mut sim = Sim::new(&w, cfg).unwrap();
        let mut sink = TimerLatency::default();
        sim.run(&mut sink, &mut |_| {}).unwrap();
        sink.lat[0].clone()
    };
    let long = run(30 * MS);
    assert!(long.len() >= 15, "{long:?}");
    assert!(long.iter().all(|&l| l == 150 * US as i64), "{long:?}");
    let short = run(150 * MS);
    assert!(short.iter().all(|&l| l == 80 * US as i64), "{short:?}");
}
