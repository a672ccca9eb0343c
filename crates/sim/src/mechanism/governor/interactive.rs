//! `interactive` (Android's `cpufreq_interactive.c`, seed 004's default governor): every
//! `timer_rate` it computes the domain's load at the current frequency; at or above
//! `go_hispeed_load` % it jumps to `hispeed_freq` at once (or higher, if already there);
//! otherwise it picks the lowest frequency at which the load would be `target_load` %. Going
//! above `hispeed_freq` waits `above_hispeed_delay`; going down waits until the current
//! frequency has been held `min_sample_time` — fast up, lazy down.
//!
//! Defaults are the driver's: `go_hispeed_load` 99, `target_load` 90, `timer_rate` 20 ms,
//! `above_hispeed_delay` = `timer_rate`, `min_sample_time` 80 ms. The driver's default
//! `hispeed_freq` is the maximum; phones set a middle one in their init scripts, so ours is the
//! middle operating point unless `interactive.hispeed_freq` (kHz) is given.

use super::{relation_l, take_pct, take_period, Governor, Sample};
use crate::policy::Params;
use uxsched_model::{Nanos, MS};

pub struct Interactive {
    pub hispeed_khz: Option<u32>,
    pub go_hispeed_load: u32,
    pub target_load: u32,
    pub timer_rate: Nanos,
    pub above_hispeed_delay: Nanos,
    pub min_sample_time: Nanos,
    validate: Vec<Validate>,
}

/// Per-domain hold-off state (the driver's `hispeed_validate_time`, `floor_freq`,
/// `floor_validate_time`).
#[derive(Debug, Clone, Copy, Default)]
struct Validate {
    hispeed_at: Nanos,
    floor_khz: u32,
    floor_at: Nanos,
}

impl Interactive {
    pub fn from_params(p: &mut Params) -> Result<Self, String> {
        let timer_rate = take_period(p, "interactive.timer_rate", 20 * MS)?;
        Ok(Interactive {
            hispeed_khz: p.take_num::<u32>("interactive.hispeed_freq")?,
            go_hispeed_load: take_pct(p, "interactive.go_hispeed_load", 99)?,
            target_load: take_pct(p, "interactive.target_load", 90)?,
            timer_rate,
            above_hispeed_delay: take_period(p, "interactive.above_hispeed_delay", timer_rate)?,
            min_sample_time: take_period(p, "interactive.min_sample_time", 80 * MS)?,
            validate: Vec::new(),
        })
    }

    fn hispeed(&self, opps: &[u32]) -> u32 {
        match self.hispeed_khz {
            Some(k) => relation_l(opps, k as f64),
            None => opps[(opps.len() - 1) / 2],
        }
    }
}

impl Governor for Interactive {
    fn name(&self) -> &'static str {
        "interactive"
    }
    fn period(&self) -> Option<Nanos> {
        Some(self.timer_rate)
    }
    fn sample(&mut self, s: &Sample) -> (u32, Option<Nanos>) {
        if self.validate.len() <= s.domain {
            self.validate.resize(s.domain + 1, Validate::default());
        }
        if self.validate[s.domain].floor_khz == 0 {
            // The driver starts with the floor at the current frequency, validated when the
            // governor started — one timer_rate before the first sample.
            let started = s.now.saturating_sub(self.timer_rate);
            self.validate[s.domain] = Validate {
                hispeed_at: started,
                floor_khz: s.cur_khz,
                floor_at: started,
            };
        }
        let hispeed = self.hispeed(s.opps);
        let cur = s.cur_khz;
        let load = s.load * 100.0;
        // choose_freq: lowest frequency that keeps the load at or under target_load.
        let fit = relation_l(s.opps, cur as f64 * load / self.target_load as f64);
        let next = if load >= self.go_hispeed_load as f64 {
            if cur < hispeed {
                hispeed
            } else {
                fit.max(hispeed)
            }
        } else {
            fit
        };
        // cpufreq_interactive_timer's two hold-offs, in its order.
        let v = &mut self.validate[s.domain];
        if cur >= hispeed && next > cur && s.now - v.hispeed_at < self.above_hispeed_delay {
            return (cur, None); // above hispeed: wait above_hispeed_delay before going higher
        }
        v.hispeed_at = s.now;
        if next < v.floor_khz && s.now - v.floor_at < self.min_sample_time {
            return (cur, None); // hold the floor at least min_sample_time
        }
        v.floor_khz = next;
        v.floor_at = s.now;
        (next, None)
    }
}
