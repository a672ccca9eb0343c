//! One simulator run the way `uxsched sim run` does it: settings → `SimConfig` → engine with its
//! mechanisms → metrics and the event log's digest → tidy rows. The CLI (`sim run`, `sim sweep`'s
//! local threads) and the Python package that Ray workers call (`python/`) both run points
//! through this crate, so a point's result cannot depend on where it ran (docs/sweep.md).

pub mod point;
pub mod rows;
pub mod run;
pub mod source;

pub use point::{run_job, run_point, Job, Outcome};
pub use run::{build_sim, config_for, measure, simulate, RunSettings};
pub use source::WorkloadSource;

/// An error in what the user gave (a setting, a tunable, a workload): the CLI exits with code 2.
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

pub(crate) fn bad_input(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(msg.into()))
}

/// The engine's version and a hash of its sources (build.rs); a Ray worker's wheel must match.
pub const ENGINE: &str = env!("UXSCHED_ENGINE");
