//! `uxsched-daemon`: the on-device manager. Finds the app in front of the user and gives its
//! threads precedence through stable kernel interfaces (sched_setattr nice and custom slice,
//! cgroup weights, ioprio), safely and reversibly.
//!
//! The pipeline is the folder layout: `sources/` (what is in front) → [`state`] (apps, threads,
//! roles) → `policy/` (one file per mode: state → desired settings) → [`reconcile`] (desired vs
//! journal vs kernel) → `actuators/` (one file per kernel interface), with [`journal`] (crash
//! safety), [`identity`] (pid reuse) and [`server`] (the control socket) beside it. The loop
//! that ties them together is [`daemon`]. See docs/daemon.md.

pub mod actuators;
pub mod backend;
pub mod config;
pub mod daemon;
pub mod devices;
pub mod features;
pub mod journal;
pub mod policy;
pub mod reconcile;
pub mod rt_budget;
pub mod rt_guard;
pub mod rtapi;
pub mod server;
pub mod sources;
pub mod state;
pub mod types;

pub use config::{Config, Mode};
