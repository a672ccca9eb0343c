//! uxsched's deterministic discrete-event simulator of Linux CPU scheduling.
//!
//! Map (see `docs/architecture.md`):
//! - [`workload`]: the workload model and its readers (native TOML, rt-app JSON);
//! - [`platform`]: CPUs, frequency domains, operating points;
//! - [`engine`]: virtual time, the event queue, run-queues, classes (RT, fair, idle), cgroups;
//! - [`policy`]: fair-class policies behind the [`policy::FairPolicy`] trait, one file each;
//! - [`log`]: the one event log the engine writes, and the [`log::Sink`] trait;
//! - [`metrics`], [`export`]: sinks — per-task/group/interaction metrics, Perfetto trace, Gantt SVG;
//! - [`digest`]: a fingerprint sink for `--determinism-check`.

pub mod digest;
pub mod engine;
pub mod export;
pub mod gpu;
pub mod io;
pub mod log;
pub mod mechanism;
pub mod metrics;
pub mod platform;
pub mod policy;
pub mod reproduce;
pub mod workload;
