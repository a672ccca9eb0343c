//! `[backend]`: which backend carries the daemon's wishes to the kernel's scheduler, and the
//! sched_ext scheduler's parameters (`backend/`).

use super::ranged;
use serde::{Deserialize, Deserializer, Serialize};

/// `[backend]` of the daemon's config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BackendConfig {
    pub kind: Kind,
    /// The sched_ext scheduler's policy (`kind = "scx"`).
    pub policy: ScxPolicy,
    /// `SCX_OPS_SWITCH_PARTIAL`: the scheduler runs only the threads the daemon switches to
    /// `SCHED_EXT`; `false` runs every fair thread (docs/mechanisms.md, "sched_ext").
    pub partial: bool,
    /// MCFS's cut-rate c (seed 002 §III.A).
    #[serde(deserialize_with = "cut_rate")]
    pub cut_rate: u32,
    /// VT-CFS's preemption tick T (seed 000 Fig. 5), ms.
    #[serde(deserialize_with = "tick_ms")]
    pub tick_ms: u64,
    /// Eq. 6's C (seed 000 §IV), ms.
    #[serde(deserialize_with = "boost_c_ms")]
    pub boost_c_ms: u64,
}

ranged!(cut_rate, u32, "backend.cut_rate", 1, 1024);
ranged!(tick_ms, u64, "backend.tick_ms", 1, 100);
ranged!(boost_c_ms, u64, "backend.boost_c_ms", 1, 1000);

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
            kind: Kind::Stock,
            policy: ScxPolicy::Vtcfs,
            partial: true,
            cut_rate: 16,
            tick_ms: 3,
            boost_c_ms: 4,
        }
    }
}

/// Which backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Stock,
    Scx,
}

impl Kind {
    pub fn parse(s: &str) -> Result<Kind, String> {
        match s {
            "stock" => Ok(Kind::Stock),
            "scx" => Ok(Kind::Scx),
            _ => Err(format!("unknown backend {s:?}: use stock or scx")),
        }
    }
}

/// The sched_ext scheduler's policies (`uxsched_scx::Policy`, named here for the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScxPolicy {
    Vtcfs,
    Mcfs,
    Facfs,
}

impl ScxPolicy {
    pub fn parse(s: &str) -> Result<ScxPolicy, String> {
        Ok(match s.parse::<uxsched_scx::Policy>()? {
            uxsched_scx::Policy::Vtcfs => ScxPolicy::Vtcfs,
            uxsched_scx::Policy::Mcfs => ScxPolicy::Mcfs,
            uxsched_scx::Policy::Facfs => ScxPolicy::Facfs,
        })
    }

    pub fn scx(self) -> uxsched_scx::Policy {
        match self {
            ScxPolicy::Vtcfs => uxsched_scx::Policy::Vtcfs,
            ScxPolicy::Mcfs => uxsched_scx::Policy::Mcfs,
            ScxPolicy::Facfs => uxsched_scx::Policy::Facfs,
        }
    }
}
