//! Backends: how the daemon's wishes reach the kernel's scheduler. `stock` writes the fair and
//! real-time levers (nice, custom slices, SCHED_FIFO, groups) as the policies ask; `scx` loads
//! the sched_ext scheduler (`uxsched-scx`, `bpf/scx_uxsched.bpf.c`) and instead moves the
//! competing threads to `SCHED_EXT` with their boost class in its map ([`scx`]). Each backend
//! is one file behind the small [`Backend`] trait; the loop calls it once per pass.

pub mod scx;

use crate::config::backend::{BackendConfig, Kind};
use crate::state::State;
use crate::types::Desired;
use uxsched_client::control::BackendStatus;

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
    use crate::config::backend::ScxPolicy;

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
