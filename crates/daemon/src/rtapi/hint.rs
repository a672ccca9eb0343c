//! Performance-hint sessions (Android's ADPF model: `createHintSession(tids, target)`,
//! `reportActualWorkDuration`, `updateTargetWorkDuration`, `close`): an app says how long each
//! unit of work (a frame) should take and how long it took; a feedback controller raises the
//! session threads' boost while they run over and lowers it while they run under, and drops
//! it when the reports stop (stale after [`STALE_TARGETS`] × target).
//!
//! The control law (docs/mechanisms.md derives it): the boost is a continuous nice level
//! `b ∈ [min_nice, 0]`, and each report moves it by
//!
//! ```text
//! b ← clamp(b − G · ln(clamp(actual/target, 1/R, R)) / ln 1.25,  min_nice, 0)
//! ```
//!
//! `ln 1.25` is the kernel's weight ratio between adjacent nice levels (`sched_prio_to_weight`),
//! so under heavy contention (a thread's CPU share ∝ its weight) one report with `G = 1` would
//! remove the whole overrun; `G = 1/2` halves each noisy sample's effect (the boost's variance
//! from white report noise is `G/(2−G) = 1/3` of the noise's) and still closes 94 % of a step
//! within four reports; `R = 2` bounds one outlier frame to `G·ln 2/ln 1.25 ≈ 1.55` levels.
//! The threads get `nice = round(b)` and, while `b` rounds below 0, an EEVDF slice of a tenth
//! of the target (so a boosted thread is re-queued at most every 10 % of its budget). Utilisation
//! clamping (`uclamp.min`) is reported as unavailable where the kernel lacks it.

use super::peer::Caller;
use super::Refused;
use crate::identity::{self, TaskId};
use crate::policy::Desired;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use uxsched_client::proto::{Refusal, Session, Until};

/// The controller's gain per report (see the module doc).
pub const GAIN: f64 = 0.5;
/// One report counts at most this ratio (or its inverse) of actual to target.
pub const MAX_RATIO: f64 = 2.0;
/// The kernel's weight ratio between adjacent nice levels (`sched_prio_to_weight`).
pub const NICE_WEIGHT_RATIO: f64 = 1.25;
/// A session without a report for this many targets is stale: its boost drops.
pub const STALE_TARGETS: u32 = 10;
/// While boosted, the slice is the target divided by this.
pub const SLICE_DIVISOR: u64 = 10;
/// Threads per session, and the targets a session may have (100 µs ..= 1 s).
pub const MAX_TIDS: usize = 32;
pub const TARGET_NS: std::ops::RangeInclusive<u64> = 100_000..=1_000_000_000;

/// One step of the control law (module doc): the new boost level after a report.
pub fn step(level: f64, actual_ns: u64, target_ns: u64, min_nice: i32) -> f64 {
    let ratio =
        (actual_ns.max(1) as f64 / target_ns.max(1) as f64).clamp(1.0 / MAX_RATIO, MAX_RATIO);
    (level - GAIN * ratio.ln() / NICE_WEIGHT_RATIO.ln()).clamp(f64::from(min_nice), 0.0)
}

/// The nice level and slice (ns) a boost level gives, within the kernel's slice range and not
/// above its default slice.
pub fn settings(level: f64, target_ns: u64, default_slice_ns: u64) -> (i32, Option<u64>) {
    let nice = level.round() as i32;
    let slice = (nice < 0).then(|| {
        (target_ns / SLICE_DIVISOR).clamp(100_000, default_slice_ns.clamp(100_000, 100_000_000))
    });
    (nice, slice)
}

#[derive(Debug, Clone)]
struct Hint {
    uid: u32,
    conn: u64,
    until: Until,
    tids: Vec<TaskId>,
    target_ns: u64,
    level: f64,
    /// The rule's `min_nice`: the strongest boost.
    floor: i32,
    last_report: Option<Instant>,
}

impl Hint {
    fn stale_at(&self) -> Option<Instant> {
        let stale = Duration::from_nanos(self.target_ns) * STALE_TARGETS;
        self.last_report.map(|t| t + stale)
    }
}

#[derive(Debug)]
pub struct Hints {
    sessions: BTreeMap<u64, Hint>,
    next_id: u64,
    default_slice_ns: u64,
    /// Why `uclamp.min` is not given, if it is not.
    uclamp: Option<String>,
    /// The session the last `hint_create` made.
    pub last_created: Option<u64>,
}

impl Hints {
    pub fn new(default_slice_ns: u64) -> Hints {
        let uclamp = std::path::Path::new("/proc/sys/kernel/sched_util_clamp_min").exists();
        Hints {
            sessions: BTreeMap::new(),
            next_id: 1,
            default_slice_ns,
            uclamp: Some(if uclamp {
                "this kernel has uclamp, but uxsched does not set it yet: nice and slice only"
            } else {
                "this kernel has no utilisation clamping (CONFIG_UCLAMP_TASK): nice and slice only"
            }
            .into()),
            last_created: None,
        }
    }

    /// A new session for `caller`'s thread aiming at `target_ns`.
    pub fn create(
        &mut self,
        caller: &Caller,
        conn: u64,
        until: Until,
        target_ns: u64,
        min_nice: i32,
        max_per_user: usize,
    ) -> Result<u64, Refused> {
        check_target(target_ns)?;
        let mine = self
            .sessions
            .values()
            .filter(|h| h.uid == caller.uid)
            .count();
        if mine >= max_per_user {
            return Err((
                Refusal::UserCap,
                format!(
                    "uid {} already has {mine} hint sessions (`max_threads_per_user`); close some",
                    caller.uid
                ),
            ));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.sessions.insert(
            id,
            Hint {
                uid: caller.uid,
                conn,
                until,
                tids: vec![caller.task],
                target_ns,
                level: 0.0,
                floor: min_nice,
                last_report: None,
            },
        );
        self.last_created = Some(id);
        Ok(id)
    }

    /// The session `id` of connection `conn`, or the refusal.
    fn mine(&mut self, conn: u64, id: u64) -> Result<&mut Hint, Refused> {
        self.sessions
            .get_mut(&id)
            .filter(|h| h.conn == conn)
            .ok_or_else(|| {
                (
                    Refusal::NoSession,
                    format!(
                        "hint session {id} is not open on this connection (closed, or never \
                         created here); create one with hint_create"
                    ),
                )
            })
    }

    /// Add `caller`'s thread to session `id`.
    pub fn add(&mut self, caller: &Caller, conn: u64, id: u64) -> Result<(), Refused> {
        let h = self.mine(conn, id)?;
        if !h.tids.contains(&caller.task) {
            if h.tids.len() >= MAX_TIDS {
                return Err((
                    Refusal::UserCap,
                    format!("hint session {id} already has {MAX_TIDS} threads"),
                ));
            }
            h.tids.push(caller.task);
        }
        Ok(())
    }

    /// A report: one controller step. Whether the threads' settings change.
    pub fn report(&mut self, conn: u64, id: u64, actual_ns: u64) -> Result<bool, Refused> {
        let default_slice = self.default_slice_ns;
        let h = self.mine(conn, id)?;
        let before = settings(h.level, h.target_ns, default_slice);
        h.level = step(h.level, actual_ns, h.target_ns, h.floor);
        h.last_report = Some(Instant::now());
        Ok(settings(h.level, h.target_ns, default_slice) != before)
    }

    /// A new target. Whether the threads' settings change (the slice follows the target).
    pub fn retarget(&mut self, conn: u64, id: u64, target_ns: u64) -> Result<bool, Refused> {
        check_target(target_ns)?;
        let default_slice = self.default_slice_ns;
        let h = self.mine(conn, id)?;
        let before = settings(h.level, h.target_ns, default_slice);
        h.target_ns = target_ns;
        Ok(settings(h.level, h.target_ns, default_slice) != before)
    }

    pub fn close(&mut self, conn: u64, id: u64) -> Result<(), Refused> {
        self.mine(conn, id)?;
        self.sessions.remove(&id);
        Ok(())
    }

    /// Connection `conn` closed: its `Close` sessions end. Whether any did.
    pub fn closed(&mut self, conn: u64) -> bool {
        let before = self.sessions.len();
        self.sessions
            .retain(|_, h| h.conn != conn || h.until == Until::Exit);
        before != self.sessions.len()
    }

    /// Forget exited threads (and sessions left without any); drop the boost of stale sessions.
    pub fn prune(&mut self, now: Instant) {
        for h in self.sessions.values_mut() {
            h.tids.retain(identity::still_same);
            if h.stale_at().is_some_and(|t| now >= t) {
                h.level = 0.0;
                h.last_report = None;
            }
        }
        self.sessions.retain(|_, h| !h.tids.is_empty());
    }

    /// When the next boosted session goes stale (the loop must pass then).
    pub fn next_wake(&self) -> Option<Instant> {
        self.sessions
            .values()
            .filter(|h| h.level.round() < 0.0)
            .filter_map(Hint::stale_at)
            .min()
    }

    /// Every boosted session's threads get its nice and slice (the stronger of these and what
    /// they already have).
    pub fn merge_into(&self, desired: &mut Desired) {
        for h in self.sessions.values() {
            let (nice, slice) = settings(h.level, h.target_ns, self.default_slice_ns);
            if nice >= 0 {
                continue;
            }
            for task in &h.tids {
                let t = desired.threads.entry(*task).or_default();
                t.nice = Some(t.nice.map_or(nice, |n| n.min(nice)));
                if let Some(s) = slice {
                    t.slice_ns = Some(t.slice_ns.map_or(s, |m| m.min(s)));
                }
            }
        }
    }

    /// Session `id` as the reply shows it.
    pub fn info(&self, id: u64) -> Option<Session> {
        let h = self.sessions.get(&id)?;
        let (nice, slice) = settings(h.level, h.target_ns, self.default_slice_ns);
        Some(Session {
            id,
            target_ns: h.target_ns,
            tids: h.tids.iter().map(|t| t.tid).collect(),
            nice,
            slice_us: slice.map(|s| s / 1000),
            uclamp_min: None,
            uclamp: self.uclamp.clone(),
        })
    }
}

fn check_target(target_ns: u64) -> Result<(), Refused> {
    if TARGET_NS.contains(&target_ns) {
        return Ok(());
    }
    Err((
        Refusal::BadRequest,
        format!(
            "target {target_ns} ns is outside {}..={} ns (100 µs to 1 s per unit of work)",
            TARGET_NS.start(),
            TARGET_NS.end()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 10_000_000;

    #[test]
    fn over_target_raises_under_lowers_within_bounds() {
        // 25 % over: one report moves half of one nice level (1.25 is one level's weight).
        let b = step(0.0, T * 5 / 4, T, -15);
        assert!((b + 0.5).abs() < 1e-9, "{b}");
        // A 10x outlier counts as 2x: ≈ 1.55 levels, not 5.2.
        let b = step(0.0, 10 * T, T, -15);
        assert!((b + 0.5 * 2f64.ln() / 1.25f64.ln()).abs() < 1e-9, "{b}");
        // Under target lowers the boost, never above 0 (no penalty) …
        assert_eq!(
            step(-3.0, T / 2, T, -15),
            -3.0 + 0.5 * 2f64.ln() / 1.25f64.ln()
        );
        assert_eq!(step(-0.2, T / 2, T, -15), 0.0);
        // … and over target never past the rule's floor.
        assert_eq!(step(-14.9, 2 * T, T, -15), -15.0);
        // On target: no change.
        assert_eq!(step(-4.0, T, T, -15), -4.0);
    }

    #[test]
    fn converges_on_a_plant_whose_time_goes_with_the_weight() {
        // A thread needing 1.8x its budget at nice 0 under heavy contention, its time ∝
        // 1.25^nice: the fixed point is nice = −ln 1.8 / ln 1.25 ≈ −2.63.
        let plant = |b: f64| (1.8 * T as f64 * 1.25f64.powf(b)) as u64;
        let mut b = 0.0;
        let mut trace = Vec::new();
        for _ in 0..12 {
            b = step(b, plant(b), T, -15);
            trace.push(b);
        }
        let want = -(1.8f64.ln() / 1.25f64.ln());
        assert!((trace[3] - want).abs() < 0.07 * want.abs(), "{trace:?}");
        assert!(
            trace.windows(2).all(|w| w[1] <= w[0] + 1e-12),
            "monotone {trace:?}"
        );
        assert!((b - want).abs() < 1e-3, "{trace:?}");
        assert_eq!(settings(b, T, 3_000_000), (-3, Some(1_000_000)));
        assert_eq!(settings(-0.4, T, 3_000_000), (0, None));
        // The slice is within the kernel's range and not above the default.
        assert_eq!(settings(-1.0, 100_000_000, 3_000_000).1, Some(3_000_000));
        assert_eq!(settings(-1.0, 200_000, 3_000_000).1, Some(100_000));
    }
}
