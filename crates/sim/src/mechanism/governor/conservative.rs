//! `conservative` (`cpufreq_conservative.c`, `cs_dbs_update`): like ondemand's sampling, but
//! the requested frequency moves by `freq_step` % of the maximum per sample — up when the load
//! exceeds `up_threshold`, down when it is below `down_threshold` — so it ramps slowly (seed
//! 004 §5.1: "slow ramp up"). Going up takes the highest operating point ≤ the request
//! (`CPUFREQ_RELATION_H`), going down the lowest ≥ it (`RELATION_L`), so with coarse
//! operating points a step may need several samples.
//!
//! Defaults are the kernel's: 80 / 20 %, `freq_step` 5 %; `sampling_rate` 20 ms as ondemand.

use super::{relation_h, relation_l, take_pct, take_period, Governor, Sample};
use crate::policy::Params;
use uxsched_model::{Nanos, MS};

pub struct Conservative {
    pub up_threshold: u32,
    pub down_threshold: u32,
    pub freq_step: u32,
    pub sampling_rate: Nanos,
    /// Per domain: the request, which may lie between operating points.
    requested: Vec<Option<f64>>,
}

impl Conservative {
    pub fn from_params(p: &mut Params) -> Result<Self, String> {
        let up_threshold = take_pct(p, "conservative.up_threshold", 80)?;
        let down_threshold = take_pct(p, "conservative.down_threshold", 20)?;
        if down_threshold >= up_threshold {
            return Err(format!(
                "--param conservative.down_threshold={down_threshold} must be below up_threshold={up_threshold}"
            ));
        }
        Ok(Conservative {
            up_threshold,
            down_threshold,
            freq_step: take_pct(p, "conservative.freq_step", 5)?,
            sampling_rate: take_period(p, "conservative.sampling_rate", 20 * MS)?,
            requested: Vec::new(),
        })
    }
}

impl Governor for Conservative {
    fn name(&self) -> &'static str {
        "conservative"
    }
    fn period(&self) -> Option<Nanos> {
        Some(self.sampling_rate)
    }
    fn sample(&mut self, s: &Sample) -> (u32, Option<Nanos>) {
        if self.requested.len() <= s.domain {
            self.requested.resize(s.domain + 1, None);
        }
        let (min, max) = (s.opps[0] as f64, *s.opps.last().expect("opps") as f64);
        let step = max * self.freq_step as f64 / 100.0;
        let req = self.requested[s.domain].get_or_insert(s.cur_khz as f64);
        let load = s.load * 100.0;
        let khz = if load > self.up_threshold as f64 {
            *req = (*req + step).min(max);
            relation_h(s.opps, *req)
        } else if load < self.down_threshold as f64 {
            *req = (*req - step).max(min);
            relation_l(s.opps, *req)
        } else {
            s.cur_khz
        };
        (khz, None)
    }
}
