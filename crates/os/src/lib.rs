//! The OS layer shared by the daemon (`uxsched-daemon`, which re-exports it from
//! `actuators::sched` and `identity`) and the sched_ext backend (`uxsched-scx`), which cannot
//! depend on the daemon since the daemon depends on it: one `struct sched_attr`, one
//! `/proc/TID/stat` parser, one way to read the kernel's small text files.

pub mod clock;
pub mod procfs;
pub mod sched;
pub mod task;
