//! The kernel interfaces uxsched changes, one file each. Actuators only read and write; the
//! decisions (what, whether it is still ours, journalling) are the reconciler's.

pub mod autogroup;
pub mod cgroup;
pub mod ioprio;
pub mod prefetch;
pub mod sched;
