//! `powersave`: pins every domain at its lowest operating point (no sampling).

use super::{Governor, Sample};
use uxsched_model::Nanos;

pub struct Powersave;

impl Governor for Powersave {
    fn name(&self) -> &'static str {
        "powersave"
    }
    fn initial_khz(&self, opps: &[u32]) -> Option<u32> {
        opps.first().copied()
    }
    fn period(&self) -> Option<Nanos> {
        None
    }
    fn sample(&mut self, s: &Sample) -> (u32, Option<Nanos>) {
        (s.opps[0], None)
    }
}
