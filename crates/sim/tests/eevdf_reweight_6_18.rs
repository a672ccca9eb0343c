//! Regression tests of `reweight_entity` as kernel 6.14–6.18 has it (commit 6d71a9c61604,
//! "sched/fair: Fix EEVDF entity placement bug causing scheduling lag"): a group entity is
//! reweighted whenever a task of its group wakes or sleeps (`update_cfs_group`), so in the
//! `cgroups` validate workload every tick task's wake-up moves both groups' entities.
//!
//! - the lag is taken with `update_entity_lag`, hence clamped to ±max(2 × slice, tick), then
//!   scaled by old / new weight and re-applied by `place_entity` (inflated by (W + w) / W);
//! - for the current entity `avg_vruntime` and place_entity's load still count it, at its new
//!   weight: a current entity with positive lag is placed further back than its lag says (an
//!   error of 6.14–6.18, a revert posted on LKML after 6.18). The model before kept V and the
//!   scaled lag exactly and never clamped.

mod common;
use common::rq_of;
use uxsched_model::{Nanos, MS, US};
use uxsched_sim::policy::eevdf::{Eevdf, EevdfTunables};
use uxsched_sim::policy::{Entity, FairPolicy};

const SLICE: Nanos = 1400 * US;

fn ent(v: i64) -> Entity {
    Entity {
        weight: 1024,
        vruntime: v,
        deadline: v + SLICE as i64,
        vprot: v + SLICE as i64,
        slice: SLICE,
        on_rq: true,
        ..Entity::default()
    }
}

fn policy() -> Eevdf {
    let mut t = EevdfTunables::for_cpus(2);
    t.base_slice = SLICE;
    Eevdf::new(t)
}

#[test]
fn a_queued_entity_s_lag_is_clamped_before_it_is_rescaled() {
    let (ms, v0) = (MS as i64, 200 * MS as i64);
    // Entity 1 is queued 100 ms behind the current one: a lag far beyond its limit.
    let mut ents = vec![ent(v0), ent(v0 - 100 * ms)];
    let rq = rq_of(&ents);
    policy().reweight(&rq, &mut ents, 1, 512);
    // update_entity_lag: V = v0 − 50 ms, lag 50 ms clamped to calc_delta_fair(max(2 × 1.4 ms,
    // 4 ms), w = 1024) = 4 ms; × 1024 / 512 = 8 ms; place_entity against the current entity
    // alone (V = v0, W = 1024): × (1024 + 512) / 1024 = 12 ms.
    assert_eq!(ents[1].weight, 512);
    assert_eq!(
        ents[1].vruntime,
        v0 - 12 * ms,
        "clamped lag, rescaled, inflated"
    );
    // The deadline keeps its distance from the vruntime, scaled by old / new weight.
    assert_eq!(ents[1].deadline - ents[1].vruntime, 2 * SLICE as i64);
}

#[test]
fn the_current_entity_is_placed_against_a_v_that_still_counts_it() {
    let (us, v0) = (US as i64, 100 * MS as i64);
    // Current entity 0 at v0, queued entity 1 at v0 + 1 ms: V = v0 + 0.5 ms, the current
    // entity's lag +0.5 ms. Its weight doubles (its group gained a runnable task).
    let mut ents = vec![ent(v0), ent(v0 + 1000 * us)];
    let rq = rq_of(&ents);
    policy().reweight(&rq, &mut ents, 0, 2048);
    // vlag 500 µs × 1024 / 2048 = 250 µs. place_entity: avg_vruntime counts the current entity
    // at 2048 with its old vruntime: V' = v0 + 1000 × 1024 / 3072 = v0 + 333 µs (rounded
    // down); load = 3072, so the lag is inflated by (3072 + 2048) / 3072 to 416 µs:
    // v' = v0 + 333 − 416 = v0 − 83 µs. Keeping V and the scaled lag (the model before)
    // gives v0 + 500 − 250 = v0 + 250 µs.
    let v_place = v0 + (1000 * us * 1024).div_euclid(3072);
    let lag = 250 * us * (3072 + 2048) / 3072;
    assert_eq!(ents[0].vruntime, v_place - lag);
    assert!(
        ents[0].vruntime < v0,
        "moved back: {}",
        ents[0].vruntime - v0
    );
    assert_eq!(ents[0].deadline - ents[0].vruntime, SLICE as i64 / 2);
}

#[test]
fn an_entity_alone_on_its_queue_is_placed_at_v_without_lag() {
    let v0 = 50 * MS as i64;
    let mut ents = vec![ent(v0)];
    let rq = rq_of(&ents);
    policy().reweight(&rq, &mut ents, 0, 300);
    // nr_queued-- leaves nothing: place_entity applies no lag and V is its own vruntime.
    assert_eq!(ents[0].vruntime, v0);
    assert_eq!(ents[0].weight, 300);
}

#[test]
fn a_sleeping_entity_only_has_its_saved_lag_rescaled() {
    let mut e = ent(10 * MS as i64);
    e.on_rq = false;
    e.vlag = 3 * MS as i64;
    let mut ents = vec![ent(0), e];
    let rq = rq_of(&ents[..1]);
    policy().reweight(&rq, &mut ents, 1, 2048);
    assert_eq!(ents[1].vlag, 3 * MS as i64 / 2);
    assert_eq!(ents[1].vruntime, 10 * MS as i64, "not placed while asleep");
}
