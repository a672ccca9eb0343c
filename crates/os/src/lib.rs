//! The OS layer: every read and write of kernel state that uxsched's crates share — the daemon,
//! its sched_ext backend, the tracker and the harness. One `struct sched_attr`, one
//! `/proc/TID/stat` parser, one notion of a task's identity across pid reuse (tid + start time,
//! pidfds), one way to read the kernel's small text files. Decisions live above it: this crate
//! only names, reads and writes.

pub mod autogroup;
pub mod block;
pub mod clock;
pub mod identity;
pub mod ioprio;
pub mod own;
pub mod peer;
pub mod process_tree;
pub mod procfs;
pub mod sched;
pub mod task;
