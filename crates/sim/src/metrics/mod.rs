//! Metrics computed from the event log: per task, per process, per cgroup, per interaction.
//!
//! [`MetricsCollector`] is a [`crate::log::Sink`]; after the run, [`MetricsCollector::report`]
//! gives a serialisable [`Report`], and [`Report::to_table`] renders it for humans.
//! Definitions: `docs/metrics.md` (VISION.md's "Measurement definitions").

mod aggregate;
mod collector;
pub mod dist;
mod report;
mod table;

pub use collector::MetricsCollector;
pub use dist::{Stats, Summary};
pub use report::{Anomalies, GroupReport, InteractionReport, Report, TallyReport, TaskReport};
pub use table::TableOptions;
