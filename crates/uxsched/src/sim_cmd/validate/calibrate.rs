//! The wake-up costs `sim validate` gives the simulator, measured on this machine: the time from
//! a timer's expiry to the woken thread running, when nothing else may delay it. Four rt-app
//! probes: the first two wake every 10 ms on CPUs kept busy by one nice-0 hog each (as the
//! suite's tasks find them), each for [`CALIBRATION_S`] s:
//!
//! - a SCHED_FIFO 10 probe (RT tasks get no timer slack and preempt at once): its median is the
//!   cost of an RT wake-up ([`uxsched_sim::engine::SimConfig::wakeup_cost`]);
//! - a SCHED_OTHER probe at nice −20, started with a 1 ns timer slack: a fair wake-up that
//!   preempts at once (its virtual deadline, V + slice × 1024/88761, is earlier than a hog's,
//!   and a hog that has run a tick since it was picked is no longer protected), through the
//!   fair class's own path — `enqueue_entity`, `place_entity`, `check_preempt_wakeup_fair`, the
//!   pick down the autogroup. Every sample is kept: the simulator draws one per fair timer
//!   wake-up ([`uxsched_sim::engine::SimConfig::fair_wakeup_costs`]), so a task that preempts at
//!   once has the kernel's spread of wake-up latency, not one median;
//! - the same fair probe with no hogs, so that every wake-up lands on an idle CPU, which must
//!   first leave its idle state (on this VM `haltpoll`, a VM exit): its samples are the cost of
//!   a fair wake-up onto an idle CPU ([`uxsched_sim::engine::SimConfig::idle_wakeup_costs`]),
//!   chosen by the simulator when a timer fires and the CPU it wakes on is idle;
//! - the same idle probe every 100 ms for [`LONG_IDLE_S`] s: a CPU idle that long takes longer
//!   to wake (docs/fidelity.md, "Wake-up costs"), so a CPU idle for
//!   at least [`LONG_IDLE_FROM`] — nearer, on a log scale, to the second probe's 100 ms than to
//!   the first's 10 ms — takes these samples
//!   ([`uxsched_sim::engine::SimConfig::long_idle_wakeup_costs`]).
//!
//! None is ever set from anything else.

use super::rtapp;
use crate::exit::bad_input;
use serde::Serialize;
use std::path::Path;
use std::time::Duration;
use uxsched_model::stats::nearest_rank;
use uxsched_model::time::fmt_ns;
use uxsched_model::Nanos;

/// Seconds each calibration probe runs (200 wake-ups at its [`PERIOD_US`]).
pub const CALIBRATION_S: u64 = 2;
/// The probes' timer period, µs.
const PERIOD_US: u64 = 10_000;
/// Seconds the long-idle probe runs (60 wake-ups at its [`LONG_PERIOD_US`]).
pub const LONG_IDLE_S: u64 = 6;
/// The long-idle probe's timer period, µs.
const LONG_PERIOD_US: u64 = 100_000;
/// The idle time from which the long-idle costs apply: √([`PERIOD_US`] × [`LONG_PERIOD_US`]).
pub const LONG_IDLE_FROM: Nanos = 31_623 * uxsched_model::US;

/// The measured wake-up costs.
#[derive(Debug, Default, Serialize)]
pub struct WakeupCosts {
    /// Median of the SCHED_FIFO probe.
    pub rt_ns: Nanos,
    pub rt_from: String,
    /// Every sample of the fair probe, sorted.
    #[serde(skip)]
    pub fair_ns: Vec<Nanos>,
    pub fair_p50_ns: Nanos,
    pub fair_from: String,
    /// Every sample of the fair probe on idle CPUs, sorted.
    #[serde(skip)]
    pub idle_ns: Vec<Nanos>,
    pub idle_p50_ns: Nanos,
    pub idle_from: String,
    /// Every sample of the fair probe on CPUs idle for 100 ms, sorted.
    #[serde(skip)]
    pub long_idle_ns: Vec<Nanos>,
    pub long_idle_p50_ns: Nanos,
    pub long_idle_from: String,
}

/// Run the probes in `dir`: the busy ones with one hog on each of `cpus` CPUs.
pub fn calibrate(rtapp: &Path, dir: &Path, cpus: usize) -> anyhow::Result<WakeupCosts> {
    std::fs::create_dir(dir)?;
    let rt = probe(rtapp, &dir.join("rt"), cpus, ProbeClass::Fifo)?;
    let fair = probe(rtapp, &dir.join("fair"), cpus, ProbeClass::Fair)?;
    let idle = probe(rtapp, &dir.join("idle"), cpus, ProbeClass::FairIdle)?;
    let long = probe(
        rtapp,
        &dir.join("long-idle"),
        cpus,
        ProbeClass::FairIdleLong,
    )?;
    let samples = |v: &[i64]| v.iter().map(|&x| x.max(0) as Nanos).collect();
    Ok(WakeupCosts {
        long_idle_p50_ns: nearest_rank(&long, 50).max(0) as Nanos,
        long_idle_from: describe(FAIR, &long, 0, LONG_PERIOD_US),
        long_idle_ns: samples(&long),
        idle_p50_ns: nearest_rank(&idle, 50).max(0) as Nanos,
        idle_from: describe(FAIR, &idle, 0, PERIOD_US),
        idle_ns: samples(&idle),
        rt_ns: nearest_rank(&rt, 50).max(0) as Nanos,
        rt_from: describe("SCHED_FIFO 10", &rt, cpus, PERIOD_US),
        fair_p50_ns: nearest_rank(&fair, 50).max(0) as Nanos,
        fair_from: describe(FAIR, &fair, cpus, PERIOD_US),
        fair_ns: samples(&fair),
    })
}

#[derive(Clone, Copy)]
enum ProbeClass {
    Fifo,
    Fair,
    /// The fair probe alone: every CPU idle when its timer fires.
    FairIdle,
    /// The same every 100 ms: every CPU idle for about that long when its timer fires.
    FairIdleLong,
}

/// One probe's `wu_lat` samples, sorted.
fn probe(rtapp: &Path, dir: &Path, cpus: usize, class: ProbeClass) -> anyhow::Result<Vec<i64>> {
    std::fs::create_dir(dir)?;
    let (policy, priority, slack, hogs) = match class {
        ProbeClass::Fifo => ("SCHED_FIFO", 10, None, cpus),
        ProbeClass::Fair => ("SCHED_OTHER", -20, Some(1), cpus),
        ProbeClass::FairIdle | ProbeClass::FairIdleLong => ("SCHED_OTHER", -20, Some(1), 0),
    };
    let (seconds, period_us) = match class {
        ProbeClass::FairIdleLong => (LONG_IDLE_S, LONG_PERIOD_US),
        _ => (CALIBRATION_S, PERIOD_US),
    };
    let mut json = serde_json::json!({
        "global": {"duration": seconds, "default_policy": "SCHED_OTHER", "calibration": 100},
        "tasks": {
            "probe": {"policy": policy, "priority": priority, "runtime": 50,
                      "timer": {"ref": "probe", "period": period_us}, "loop": -1}
        }
    });
    if hogs > 0 {
        json["tasks"]["hog"] =
            serde_json::json!({"instance": hogs, "priority": 0, "runtime": 1000000});
    }
    let file = dir.join("calibration.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&json)?)?;
    let limit = Duration::from_secs(seconds + 30);
    let logs = rtapp::run(rtapp, &file, dir, limit, slack, &Default::default()).map_err(|e| {
        bad_input(format!(
            "wake-up cost calibration ({policy} rt-app probe; needs root or CAP_SYS_NICE): {e}"
        ))
    })?;
    let mut lat: Vec<i64> = logs
        .logs
        .get("probe")
        .and_then(|v| v.first())
        .map(|l| l.wu_lat.clone())
        .unwrap_or_default();
    if lat.len() < 20 {
        return Err(bad_input(format!(
            "wake-up cost calibration: rt-app logged {} {policy} probe wake-ups in \
             {seconds} s (expected ~{}); is the machine overloaded?",
            lat.len(),
            seconds * 1_000_000 / period_us
        )));
    }
    lat.sort_unstable();
    Ok(lat)
}

/// The fair probes, as [`describe`] names them.
const FAIR: &str = "SCHED_OTHER nice -20, timer slack 1 ns,";

/// How a probe was measured; `busy` CPUs each had a hog (0: all idle).
fn describe(what: &str, lat: &[i64], busy: usize, period_us: u64) -> String {
    let cpus = match busy {
        0 => "idle CPUs".to_string(),
        n => format!("{n} busy CPUs"),
    };
    format!(
        "wu_lat of a {what} probe every {} ms over {cpus} ({} wake-ups; p10 {}, p50 {}, p90 {})",
        period_us / 1000,
        lat.len(),
        fmt_ns(nearest_rank(lat, 10) as f64),
        fmt_ns(nearest_rank(lat, 50) as f64),
        fmt_ns(nearest_rank(lat, 90) as f64)
    )
}
