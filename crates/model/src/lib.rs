//! The shared vocabulary of uxsched.
//!
//! Everything here is pure and small: the kernel's nice→weight table, time units, and the
//! formulas of the five seed papers as functions whose doc comments cite the equation they
//! implement. The simulator (`uxsched-sim`), the daemon and the harness all compute with these,
//! so a formula is written exactly once.

pub mod formulas;
pub mod size;
pub mod stats;
pub mod time;
pub mod weights;

pub use time::{Nanos, MS, SEC, US};
pub use weights::{nice_to_weight, weight_to_nice_at_least, NICE_0_LOAD};
