//! `performance`: pins every domain at its highest operating point (no sampling).

use super::{Governor, Sample};
use uxsched_model::Nanos;

pub struct Performance;

impl Governor for Performance {
    fn name(&self) -> &'static str {
        "performance"
    }
    fn initial_khz(&self, opps: &[u32]) -> Option<u32> {
        opps.last().copied()
    }
    fn period(&self) -> Option<Nanos> {
        None
    }
    fn sample(&mut self, s: &Sample) -> (u32, Option<Nanos>) {
        (*s.opps.last().expect("operating points"), None)
    }
}
