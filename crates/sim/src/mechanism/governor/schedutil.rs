//! `schedutil` (`cpufreq_schedutil.c`, `get_next_freq`): next = 1.25 × f_max × util / capacity
//! with frequency-invariant utilization, i.e. 1.25 × busy fraction × current frequency, at the
//! lowest operating point ≥ it; decisions at most every `rate_limit` (`rate_limit_us`, which
//! the cpufreq core caps at 10 ms by default — `cpufreq_policy_transition_delay_us`).
//!
//! Approximation: the kernel's utilization is PELT's decaying average updated at every
//! scheduler event; ours is the busy fraction over the last `rate_limit` window.

use super::{relation_l, take_period, Governor, Sample};
use crate::policy::Params;
use uxsched_model::{Nanos, MS};

pub struct Schedutil {
    pub rate_limit: Nanos,
}

impl Schedutil {
    pub fn from_params(p: &mut Params) -> Result<Self, String> {
        Ok(Schedutil {
            rate_limit: take_period(p, "schedutil.rate_limit", 10 * MS)?,
        })
    }
}

impl Governor for Schedutil {
    fn name(&self) -> &'static str {
        "schedutil"
    }
    fn period(&self) -> Option<Nanos> {
        Some(self.rate_limit)
    }
    fn sample(&mut self, s: &Sample) -> (u32, Option<Nanos>) {
        (relation_l(s.opps, 1.25 * s.load * s.cur_khz as f64), None)
    }
}
