//! `[rtapi]`: who may ask for what over the real-time API, and the rtkit-grade limits. Defaults
//! are rtkit's (rtkit-daemon's `--max-realtime-priority=20 --min-nice-level=-15
//! --rttime-usec-max=200000 --processes-per-user-max=15 --threads-per-user-max=25
//! --actions-burst-sec=20 --actions-per-burst-max=25 --canary-refuse-sec=300`), with a faster
//! canary and a bound on simultaneous real-time grants (seed 002 §III.B).

use super::ranged;
use serde::{Deserialize, Deserializer, Serialize};
use std::path::PathBuf;

/// The rule entry that lets a client name processes of its own uid.
pub const SAME_UID: &str = "same-uid";

/// The `uclamp.min` of the strongest boost by default: Pixel ADPF's `UclampMin_High`.
pub const UCLAMP_HIGH: u32 = 384;

ranged!(rttime_max_us, u64, "rttime_max_us", 1_000, 200_000);
ranged!(
    per_user,
    usize,
    "max_threads_per_user/max_processes_per_user",
    1,
    4096
);
ranged!(max_rt_threads, usize, "max_rt_threads", 0, 1024);
ranged!(rate_max, u32, "rate_max", 1, 100_000);
ranged!(rate_window_ms, u64, "rate_window_ms", 100, 3_600_000);
ranged!(canary_period_ms, u64, "canary_period_ms", 5, 60_000);
ranged!(canary_timeout_ms, u64, "canary_timeout_ms", 20, 600_000);
ranged!(canary_refuse_ms, u64, "canary_refuse_ms", 0, 86_400_000);
// 99 is kept for the canary's watchdog, which must preempt every grant.
ranged!(max_rt_priority, u32, "max_rt_priority", 0, 98);
ranged!(rule_min_nice, i32, "min_nice", -20, 19);
ranged!(
    max_dependency_threads,
    usize,
    "max_dependency_threads",
    1,
    4096
);
ranged!(interaction_max_ms, u64, "interaction_max_ms", 10, 60_000);
ranged!(hint_uclamp_max, u32, "hint_uclamp_max", 0, 1024);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RtApi {
    /// Answer real-time API requests at all (off: every request is refused as `disabled`).
    pub enabled: bool,
    /// RT only for a process whose hard RLIMIT_RTTIME is at most this (µs): the kernel then
    /// stops a thread that runs that long without blocking.
    #[serde(deserialize_with = "rttime_max_us")]
    pub rttime_max_us: u64,
    /// Threads with a grant per user, and processes they belong to.
    #[serde(deserialize_with = "per_user")]
    pub max_threads_per_user: usize,
    #[serde(deserialize_with = "per_user")]
    pub max_processes_per_user: usize,
    /// Real-time grants on the whole machine at once (seed 002: many RT apps at once defeat
    /// the purpose); hitting it is logged.
    #[serde(deserialize_with = "max_rt_threads")]
    pub max_rt_threads: usize,
    /// At most `rate_max` granted requests per user within `rate_window_ms`.
    #[serde(deserialize_with = "rate_max")]
    pub rate_max: u32,
    #[serde(deserialize_with = "rate_window_ms")]
    pub rate_window_ms: u64,
    /// The canary, an ordinary (SCHED_OTHER) daemon thread, must run every `canary_period_ms`;
    /// if it has not for `canary_timeout_ms`, all RT grants are revoked and new ones refused
    /// for `canary_refuse_ms`.
    #[serde(deserialize_with = "canary_period_ms")]
    pub canary_period_ms: u64,
    #[serde(deserialize_with = "canary_timeout_ms")]
    pub canary_timeout_ms: u64,
    #[serde(deserialize_with = "canary_refuse_ms")]
    pub canary_refuse_ms: u64,
    /// At most this many threads of one dependency are raised (`rtapi/deps.rs`).
    #[serde(deserialize_with = "max_dependency_threads")]
    pub max_dependency_threads: usize,
    /// An `interaction_start` boosts its thread for at most this long without an
    /// `interaction_end` (`rtapi/interact.rs`).
    #[serde(deserialize_with = "interaction_max_ms")]
    pub interaction_max_ms: u64,
    /// The `uclamp.min` (0..=1024) a hint session's strongest boost gives its threads, where the
    /// kernel has uclamp (`rtapi/hint.rs`; default Pixel ADPF's `UclampMin_High`, 384); 0 = none.
    #[serde(deserialize_with = "hint_uclamp_max")]
    pub hint_uclamp_max: u32,
    /// Who may ask for what: the first rule matching the caller decides; none = refused.
    pub allow: Vec<Allow>,
}

/// One approval rule (like an install-time manifest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Allow {
    /// Uids this rule is for; empty = every uid.
    pub uids: Vec<u32>,
    /// Executables (`/proc/<pid>/exe`) this rule is for; empty = any.
    pub executables: Vec<PathBuf>,
    /// Highest RT priority granted (0 = no real time).
    #[serde(deserialize_with = "max_rt_priority")]
    pub max_rt_priority: u32,
    /// Lowest nice granted.
    #[serde(deserialize_with = "rule_min_nice")]
    pub min_nice: i32,
    /// Which processes a client may name as dependencies: `"same-uid"` (its own uid's) and/or
    /// absolute paths of executables (`/proc/<pid>/exe`); empty = none.
    #[serde(deserialize_with = "dependencies")]
    pub dependencies: Vec<String>,
}

/// `dependencies`: each entry `"same-uid"` or an absolute path.
fn dependencies<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let v = Vec::<String>::deserialize(d)?;
    match v.iter().find(|e| *e != SAME_UID && !e.starts_with('/')) {
        Some(bad) => Err(serde::de::Error::custom(format!(
            "`dependencies` entry {bad:?} is neither \"same-uid\" nor an absolute executable path"
        ))),
        None => Ok(v),
    }
}

impl Default for RtApi {
    fn default() -> Self {
        RtApi {
            enabled: true,
            rttime_max_us: 200_000,
            max_threads_per_user: 25,
            max_processes_per_user: 15,
            max_rt_threads: 8,
            rate_max: 25,
            rate_window_ms: 20_000,
            canary_period_ms: 500,
            canary_timeout_ms: 5_000,
            canary_refuse_ms: 300_000,
            max_dependency_threads: 64,
            interaction_max_ms: 1_000,
            hint_uclamp_max: UCLAMP_HIGH,
            allow: vec![Allow::default()],
        }
    }
}

impl Default for Allow {
    fn default() -> Self {
        Allow {
            uids: Vec::new(),
            executables: Vec::new(),
            max_rt_priority: 20,
            min_nice: -15,
            dependencies: vec![SAME_UID.into()],
        }
    }
}

impl RtApi {
    /// The rule for `uid` running `exe`, if any.
    pub fn rule(&self, uid: u32, exe: Option<&std::path::Path>) -> Option<&Allow> {
        self.allow.iter().find(|r| {
            (r.uids.is_empty() || r.uids.contains(&uid))
                && (r.executables.is_empty()
                    || exe.is_some_and(|e| r.executables.iter().any(|x| x == e)))
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    fn parse(s: &str) -> Result<Config, String> {
        Config::parse(s, Path::new("t.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn rules_and_limits_are_checked_with_key_and_line() {
        let e = parse("[rtapi]\nrttime_max_us = 900000\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("rttime_max_us"), "{e}");
        let e = parse("[rtapi]\n\n[[rtapi.allow]]\nmax_rt_priority = 99\n").unwrap_err();
        assert!(e.contains("line 4") && e.contains("max_rt_priority"), "{e}");
        let e = parse("[[rtapi.allow]]\nuid = 5\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("uid"), "{e}");
        let c = parse("[[rtapi.allow]]\nuids = [1000]\nexecutables = [\"/usr/bin/x\"]\nmax_rt_priority = 5\n\n[[rtapi.allow]]\nmax_rt_priority = 0\n").unwrap();
        let r = &c.rtapi;
        assert_eq!(
            r.rule(1000, Some(Path::new("/usr/bin/x")))
                .unwrap()
                .max_rt_priority,
            5
        );
        assert_eq!(
            r.rule(1000, Some(Path::new("/usr/bin/y")))
                .unwrap()
                .max_rt_priority,
            0
        );
        assert_eq!(r.rule(7, None).unwrap().max_rt_priority, 0);
        let e = parse("[[rtapi.allow]]\ndependencies = [\"media\"]\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("same-uid"), "{e}");
        let e = parse("[rtapi]\nhint_uclamp_max = 2000\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("hint_uclamp_max"), "{e}");
        assert_eq!(parse("").unwrap().rtapi.hint_uclamp_max, 384);
        let none = parse("[rtapi]\nallow = []\n").unwrap();
        assert!(none.rtapi.rule(0, None).is_none());
    }
}
