//! `ondemand` (Pallipadi & Starikovskiy, OLS 2006 — seed 004's ref. [18]; `cpufreq_ondemand.c`,
//! `od_update`): above `up_threshold` % load jump straight to the highest frequency and stay
//! there `sampling_down_factor` periods; otherwise go to the lowest operating point ≥
//! min + load × (max − min).
//!
//! Defaults: `up_threshold` 80 (`DEF_FREQUENCY_UP_THRESHOLD`), `sampling_down_factor` 1, and a
//! `sampling_rate` of 20 ms — Linux 3.x's floor at HZ=1000 (`MIN_SAMPLING_RATE_RATIO` 2 × 10
//! jiffies), five scheduler ticks at our HZ=250.

use super::{relation_l, take_pct, take_period, Governor, Sample};
use crate::policy::Params;
use uxsched_model::{Nanos, MS};

pub struct Ondemand {
    pub up_threshold: u32,
    pub sampling_rate: Nanos,
    pub sampling_down_factor: u32,
}

impl Ondemand {
    pub fn from_params(p: &mut Params) -> Result<Self, String> {
        let sampling_down_factor = p
            .take_num::<u32>("ondemand.sampling_down_factor")?
            .unwrap_or(1);
        if !(1..=100_000).contains(&sampling_down_factor) {
            return Err(format!(
                "--param ondemand.sampling_down_factor={sampling_down_factor}: must be in 1..=100000"
            ));
        }
        Ok(Ondemand {
            up_threshold: take_pct(p, "ondemand.up_threshold", 80)?,
            sampling_rate: take_period(p, "ondemand.sampling_rate", 20 * MS)?,
            sampling_down_factor,
        })
    }
}

impl Governor for Ondemand {
    fn name(&self) -> &'static str {
        "ondemand"
    }
    fn period(&self) -> Option<Nanos> {
        Some(self.sampling_rate)
    }
    fn sample(&mut self, s: &Sample) -> (u32, Option<Nanos>) {
        let (min, max) = (s.opps[0], *s.opps.last().expect("operating points"));
        let load = s.load * 100.0;
        if load > self.up_threshold as f64 {
            // The kernel multiplies the next sampling delay by sampling_down_factor at max.
            let delay = self.sampling_rate * self.sampling_down_factor as u64;
            return (max, Some(delay));
        }
        let next = min as f64 + s.load * (max - min) as f64;
        (relation_l(s.opps, next), None)
    }
}
