//! Backends: how the daemon's wishes reach the kernel's scheduler. `stock` writes the fair and
//! real-time levers (nice, custom slices, SCHED_FIFO, groups) as the policies ask; `scx` loads
//! the sched_ext scheduler (`uxsched-scx`, `bpf/scx_uxsched.bpf.c`) and instead moves the
//! competing threads to `SCHED_EXT` with their boost class in its map ([`scx`]). Each backend
//! is one file behind the small [`Backend`] trait; the loop calls it once per pass.

pub mod scx;

use crate::policy::Desired;
use crate::state::State;
use serde::{Deserialize, Deserializer, Serialize};
use uxsched_client::control::BackendStatus;

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

crate::config::ranged!(cut_rate, u32, "backend.cut_rate", 1, 1024);
crate::config::ranged!(tick_ms, u64, "backend.tick_ms", 1, 100);
crate::config::ranged!(boost_c_ms, u64, "backend.boost_c_ms", 1, 1000);

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

/// One backend: reshapes each pass's desired settings into its own levers.
pub trait Backend {
    /// Rewrite `desired` (the mode's wishes for `state`) into this backend's levers, and write
    /// whatever the backend keeps outside the journal (the boost map).
    fn shape(&mut self, state: &State, desired: &mut Desired);
    /// The same for the tracker's fast path (`daemon/fast.rs`): `desired` holds only new
    /// members of the critical set; those of process `app` are the app's own threads.
    fn shape_critical(&mut self, app: i32, desired: &mut Desired);
    /// Whether the reconciler should take a `SCHED_EXT` thread it has not switched for one that
    /// inherited the class from a thread it did (its original is then `SCHED_OTHER`).
    fn ext_inherited(&self) -> bool;
    fn status(&self) -> BackendStatus;
}

/// The stock kernel's levers, exactly as the modes ask.
pub struct Stock;

impl Backend for Stock {
    fn shape(&mut self, _: &State, _: &mut Desired) {}
    fn shape_critical(&mut self, _: i32, _: &mut Desired) {}
    fn ext_inherited(&self) -> bool {
        false
    }
    fn status(&self) -> BackendStatus {
        BackendStatus {
            kind: "stock".into(),
            state: "running".into(),
            ..BackendStatus::default()
        }
    }
}

/// The backend the config asks for; `Err` (with what to do) when it cannot run here — the
/// daemon refuses to start rather than fall back silently.
pub fn start(cfg: &BackendConfig) -> Result<Box<dyn Backend>, uxsched_scx::Error> {
    match cfg.kind {
        Kind::Stock => Ok(Box::new(Stock)),
        Kind::Scx => Ok(Box::new(scx::Scx::load(cfg)?)),
    }
}

/// Whether this kernel can run the `scx` backend at all (checked before anything is touched).
pub fn check(cfg: &BackendConfig) -> Result<(), uxsched_scx::Error> {
    if cfg.kind == Kind::Scx && uxsched_scx::state().is_none() {
        return Err(uxsched_scx::Error::NoSchedExt);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknowns_say_what_exists() {
        assert_eq!(Kind::parse("scx"), Ok(Kind::Scx));
        assert!(Kind::parse("bpf").unwrap_err().contains("stock or scx"));
        assert_eq!(ScxPolicy::parse("mcfs"), Ok(ScxPolicy::Mcfs));
        assert!(ScxPolicy::parse("cfs").unwrap_err().contains("vtcfs"));
        for p in [ScxPolicy::Vtcfs, ScxPolicy::Mcfs, ScxPolicy::Facfs] {
            assert_eq!(ScxPolicy::parse(p.scx().name()), Ok(p));
        }
    }
}
