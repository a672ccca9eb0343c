//! The sched_ext backend: the seed papers' fair-class policies (VT-CFS, MCFS, FA-CFS) and the
//! daemon's boost classes as a BPF scheduler for Linux >= 6.12 (`bpf/scx_uxsched.bpf.c`, whose
//! opening comment maps each rule to its paper and equation), and the loader that runs it.
//!
//! ```no_run
//! use uxsched_scx::{Class, Options, Policy, Scheduler};
//! let sched = Scheduler::load(&Options { policy: Policy::Mcfs, ..Options::default() }).unwrap();
//! sched.boosts().set(1234, Class::Interactive).unwrap();
//! uxsched_scx::thread::switch(1234, uxsched_scx::thread::SCHED_EXT).unwrap(); // partial mode
//! println!("{}", sched.stop()); // "unregistered (kind 64): …"
//! ```
//!
//! Partial mode (the default) schedules only `SCHED_EXT` threads; in 6.12 the ext class ranks
//! below the fair class, so those run only when no fair thread wants the CPU (docs/scx.md).

pub mod abi;
mod boosts;
mod loader;
pub mod thread;

pub use abi::{Class, Policy, STAT_NAMES};
pub use boosts::{Boosts, PinnedBoosts};
pub use loader::{state, Error, ExitInfo, Options, Scheduler, OPS_FILE, STATE_FILE};
