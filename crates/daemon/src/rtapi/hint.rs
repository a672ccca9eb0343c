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
//! of the target (so a boosted thread is re-queued at most every 10 % of its budget) and,
//! where the kernel has utilisation clamping, a `uclamp.min` proportional to the boost:
//!
//! ```text
//! u = min(round(H · b / min_nice), S)
//! ```
//!
//! Pixel's ADPF PowerHAL moves `uclamp.min` with its controller's output within
//! `[UclampMin_Low, UclampMin_High] = [0, 384]`; no published constant relates that range to a
//! nice level, so `u` maps this controller's range `[min_nice, 0]` linearly onto `[H, 0]`: the
//! strongest boost gets `H` (`[rtapi] hint_uclamp_max`, default [`crate::config::rtapi::UCLAMP_HIGH`] = 384), no
//! boost gets 0. `S` is the system's limit, `/proc/sys/kernel/sched_util_clamp_min` (read at
//! start and on every pass), which the kernel would apply anyway; `u` is reported as given.
//! Where the kernel has no uclamp the reply says so and only nice and slice are given.

use super::Refused;
use crate::types::Desired;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use uxsched_client::proto::{Refusal, Session, Until};
use uxsched_os::identity::{self, TaskId};
use uxsched_os::peer::Caller;

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
/// The system's limit on `uclamp.min` (present with CONFIG_UCLAMP_TASK).
const UCLAMP_SYSCTL: &str = "/proc/sys/kernel/sched_util_clamp_min";

/// One step of the control law (module doc): the new boost level after a report.
pub fn step(level: f64, actual_ns: u64, target_ns: u64, min_nice: i32) -> f64 {
    let ratio =
        (actual_ns.max(1) as f64 / target_ns.max(1) as f64).clamp(1.0 / MAX_RATIO, MAX_RATIO);
    (level - GAIN * ratio.ln() / NICE_WEIGHT_RATIO.ln()).clamp(f64::from(min_nice), 0.0)
}

/// The `uclamp.min` a boost level gives (module doc): `high` at the rule's floor, 0 unboosted,
/// at most `limit`.
pub fn uclamp_for(level: f64, floor: i32, high: u32, limit: u32) -> u32 {
    if floor >= 0 {
        return 0;
    }
    let u = (f64::from(high) * (level / f64::from(floor)).clamp(0.0, 1.0)).round() as u32;
    u.min(limit)
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
    /// `uclamp.min` of the strongest boost and the system's limit, or why none is given.
    uclamp: Result<(u32, u32), String>,
    /// The session the last `hint_create` made.
    pub last_created: Option<u64>,
}

/// What a session's threads get: a nice level, while boosted a slice (ns) and, where the kernel
/// has it, a `uclamp.min`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Boost {
    nice: i32,
    slice: Option<u64>,
    uclamp_min: Option<u32>,
}

/// `uclamp.min` of the strongest boost and the system's limit, or why there is none.
fn uclamp_caps(high: u32) -> Result<(u32, u32), String> {
    uxsched_os::sched::uclamp_support().map_err(|why| format!("{why}: nice and slice only"))?;
    if high == 0 {
        return Err("`[rtapi] hint_uclamp_max = 0`: nice and slice only".into());
    }
    let limit = uxsched_os::procfs::read_to_string(UCLAMP_SYSCTL)
        .map_err(|e| format!("cannot read {UCLAMP_SYSCTL}: {e}: nice and slice only"))?;
    let limit = limit
        .trim()
        .parse()
        .map_err(|e| format!("{UCLAMP_SYSCTL} holds {limit:?}: {e}: nice and slice only"))?;
    Ok((high, limit))
}

impl Hints {
    /// Sessions whose strongest boost gives `uclamp_high` as `uclamp.min` (0: none).
    pub fn new(default_slice_ns: u64, uclamp_high: u32) -> Hints {
        Hints {
            sessions: BTreeMap::new(),
            next_id: 1,
            default_slice_ns,
            uclamp: uclamp_caps(uclamp_high),
            last_created: None,
        }
    }

    /// The kernel's default fair slice the sessions were made with (0 before Linux 6.12).
    pub fn default_slice_ns(&self) -> u64 {
        self.default_slice_ns
    }

    /// What `h`'s threads get now.
    fn boost(&self, h: &Hint) -> Boost {
        self.boost_at(h.level, h.target_ns, h.floor)
    }

    /// What a session at `level` aiming at `target_ns` gives its threads.
    fn boost_at(&self, level: f64, target_ns: u64, floor: i32) -> Boost {
        let (nice, slice) = settings(level, target_ns, self.default_slice_ns);
        let uclamp_min = self.uclamp.as_ref().ok().map(|&(high, limit)| {
            if nice < 0 {
                uclamp_for(level, floor, high, limit)
            } else {
                0
            }
        });
        Boost {
            nice,
            slice,
            uclamp_min,
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
        self.change(conn, id, |h| {
            h.level = step(h.level, actual_ns, h.target_ns, h.floor);
            h.last_report = Some(Instant::now());
        })
    }

    /// A new target. Whether the threads' settings change (the slice follows the target).
    pub fn retarget(&mut self, conn: u64, id: u64, target_ns: u64) -> Result<bool, Refused> {
        check_target(target_ns)?;
        self.change(conn, id, |h| h.target_ns = target_ns)
    }

    /// Apply `f` to session `id` in place; whether its threads' boost changed.
    fn change(&mut self, conn: u64, id: u64, f: impl FnOnce(&mut Hint)) -> Result<bool, Refused> {
        let h = self.mine(conn, id)?;
        let (level, target_ns) = (h.level, h.target_ns);
        f(h);
        let (after_level, after_target, floor) = (h.level, h.target_ns, h.floor);
        let before = self.boost_at(level, target_ns, floor);
        Ok(self.boost_at(after_level, after_target, floor) != before)
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

    /// Forget exited threads (and sessions left without any); drop the boost of stale sessions;
    /// read the system's uclamp limit again (only while a session is open: it is read for them).
    pub fn prune(&mut self, now: Instant) {
        if self.sessions.is_empty() {
            return;
        }
        if let Ok((high, limit)) = &mut self.uclamp {
            if let Ok((_, fresh)) = uclamp_caps(*high) {
                *limit = fresh;
            }
        }
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

    /// Every boosted session's threads get its nice, slice and `uclamp.min` (the stronger of
    /// these and what they already have).
    pub fn merge_into(&self, desired: &mut Desired) {
        for h in self.sessions.values() {
            let b = self.boost(h);
            if b.nice >= 0 {
                continue;
            }
            for task in &h.tids {
                let t = desired.threads.entry(*task).or_default();
                t.nice = Some(t.nice.map_or(b.nice, |n| n.min(b.nice)));
                if let Some(s) = b.slice {
                    t.slice_ns = Some(t.slice_ns.map_or(s, |m| m.min(s)));
                }
                if let Some(u) = b.uclamp_min.filter(|u| *u > 0) {
                    t.uclamp_min = Some(t.uclamp_min.map_or(u, |m| m.max(u)));
                }
            }
        }
    }

    /// Session `id` as the reply shows it.
    pub fn info(&self, id: u64) -> Option<Session> {
        let h = self.sessions.get(&id)?;
        let b = self.boost(h);
        Some(Session {
            id,
            target_ns: h.target_ns,
            tids: h.tids.iter().map(|t| t.tid).collect(),
            nice: b.nice,
            slice_us: b.slice.map(|s| s / 1000),
            uclamp_min: b.uclamp_min,
            uclamp: self.uclamp.as_ref().err().cloned(),
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

    #[test]
    fn uclamp_min_is_proportional_to_the_boost_and_capped() {
        // The floor gets H, no boost 0, half-way H/2 (rounded); the system's limit caps it.
        assert_eq!(uclamp_for(-15.0, -15, 384, 1024), 384);
        assert_eq!(uclamp_for(0.0, -15, 384, 1024), 0);
        assert_eq!(uclamp_for(-7.5, -15, 384, 1024), 192);
        assert_eq!(uclamp_for(-1.0, -15, 384, 1024), 26); // 25.6
        assert_eq!(uclamp_for(-15.0, -15, 384, 100), 100);
        // A rule that allows no boost gives none; never beyond the floor's value.
        assert_eq!(uclamp_for(0.0, 0, 384, 1024), 0);
        assert_eq!(uclamp_for(-20.0, -15, 384, 1024), 384);
        // Monotone in the boost.
        let us: Vec<u32> = (0..=15)
            .map(|n| uclamp_for(-f64::from(n), -15, 384, 1024))
            .collect();
        assert!(us.windows(2).all(|w| w[0] < w[1]), "{us:?}");
    }

    fn hints_with(uclamp: Result<(u32, u32), String>) -> (Hints, TaskId) {
        let mut hs = Hints::new(3_000_000, crate::config::rtapi::UCLAMP_HIGH);
        hs.uclamp = uclamp;
        let task = TaskId {
            tid: 42,
            pid: 42,
            start: 1,
        };
        hs.sessions.insert(
            1,
            Hint {
                uid: 1000,
                conn: 7,
                until: Until::Close,
                tids: vec![task],
                target_ns: T,
                level: 0.0,
                floor: -15,
                last_report: None,
            },
        );
        (hs, task)
    }

    #[test]
    fn a_session_gives_uclamp_min_with_its_boost_where_the_kernel_has_it() {
        let (mut hs, task) = hints_with(Ok((384, 1024)));
        assert_eq!(hs.info(1).unwrap().uclamp_min, Some(0));
        // 2x over target: one report moves ≈ 1.55 levels → nice −2, uclamp.min 40 (≈ 384·1.55/15).
        assert!(hs.report(7, 1, 2 * T).unwrap(), "the boost changed");
        let s = hs.info(1).unwrap();
        assert_eq!((s.nice, s.uclamp_min, s.uclamp), (-2, Some(40), None));
        let mut d = Desired::default();
        hs.merge_into(&mut d);
        assert_eq!(d.threads[&task].uclamp_min, Some(40));
        // A stronger uclamp.min another source asks for stays.
        d.threads.get_mut(&task).unwrap().uclamp_min = Some(500);
        hs.merge_into(&mut d);
        assert_eq!(d.threads[&task].uclamp_min, Some(500));
        // Within one nice level the uclamp.min still moves: the reconciler must run.
        assert!(hs.report(7, 1, T * 21 / 20).unwrap());
        assert_eq!(hs.info(1).unwrap().nice, -2);
        // Stale: all back to nothing.
        hs.prune(Instant::now() + Duration::from_secs(60));
        let mut d = Desired::default();
        hs.merge_into(&mut d);
        assert!(d.threads.is_empty(), "{d:?}");
    }

    #[test]
    fn without_uclamp_the_reply_says_why_and_nice_and_slice_still_come() {
        let why = "this kernel has no utilisation clamping (CONFIG_UCLAMP_TASK is not set): \
                   nice and slice only";
        let (mut hs, task) = hints_with(Err(why.into()));
        hs.report(7, 1, 2 * T).unwrap();
        let s = hs.info(1).unwrap();
        assert_eq!((s.nice, s.uclamp_min), (-2, None));
        assert_eq!(s.uclamp.as_deref(), Some(why));
        let mut d = Desired::default();
        hs.merge_into(&mut d);
        let t = &d.threads[&task];
        assert_eq!(
            (t.nice, t.slice_ns, t.uclamp_min),
            (Some(-2), Some(1_000_000), None)
        );
        // Turned off by the config: said so.
        let off = Hints::new(3_000_000, 0);
        match (&off.uclamp, uxsched_os::sched::uclamp_support()) {
            (Err(e), Ok(())) => assert!(e.contains("hint_uclamp_max = 0"), "{e}"),
            (Err(e), Err(k)) => assert!(e.contains(k), "{e}"),
            (Ok(_), _) => panic!("hint_uclamp_max = 0 still gives uclamp"),
        }
    }
}
