//! uxsched's delay-critical thread tracker (issue 10; seed 003 §4's Thread Tracker, seed 000's
//! framework-assisted characterization), on the real kernel.
//!
//! - `bpf/tracker.bpf.c` (kernel): from the input wake-up of a foreground-app thread, follows
//!   every thread it wakes, across processes and kernel workers, and reports each new
//!   waker→wakee edge of the episode once through a ring buffer.
//! - [`classify`] (pure): episodes, seed 003's cycle rule ([`episode`]), provisional and
//!   confirmed members, ⟨context, decision⟩ pairs in the [`store`].
//! - [`Tracker`]: loads the BPF object, keeps its maps in step, feeds the classifier.
//!
//! Design and limits: docs/tracker.md.

pub mod classify;
pub mod config;
pub mod critical;
pub mod episode;
pub mod family;
pub mod fuse;
pub mod procfs;
pub mod store;
mod tracker;
pub mod wire;

pub use config::TrackerConfig;
pub use critical::{EndReason, EpisodeInfo, Kind, Member, Snapshot, Source, Status, ThreadId};
pub use tracker::{Tracker, Unavailable};
