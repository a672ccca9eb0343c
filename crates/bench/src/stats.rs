//! Percentiles, ratios to `idle` and bootstrap confidence intervals (seeded, so a report is
//! reproducible from its records). Percentiles use the nearest-rank definition.

use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use uxsched_model::stats;

/// The percentiles every report shows (VISION: never a lone mean).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

/// Nearest-rank percentile `p` (0–100) of sorted data ([`uxsched_model::stats`]); NaN for no
/// data, which the report shows as such.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    stats::nearest_rank(sorted, stats::permille(p))
}

pub fn sorted(samples: &[f64]) -> Vec<f64> {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

pub fn summarize(samples: &[f64]) -> Summary {
    let s = sorted(samples);
    Summary {
        n: s.len(),
        p50: percentile(&s, 50.0),
        p90: percentile(&s, 90.0),
        p95: percentile(&s, 95.0),
        p99: percentile(&s, 99.0),
        max: s.last().copied().unwrap_or(f64::NAN),
    }
}

/// A ratio with its 95 % bootstrap interval.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Ratio {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Ratio {
    pub fn overlaps(&self, other: &Ratio) -> bool {
        self.lo <= other.hi && other.lo <= self.hi
    }
}

pub const BOOTSTRAP_ROUNDS: usize = 1000;

/// Percentile-`p` ratio of `mode` to `idle` with a 95 % percentile-bootstrap interval: both
/// sample sets are resampled with replacement, independently, `rounds` times.
pub fn ratio_ci(mode: &[f64], idle: &[f64], p: f64, seed: u64, rounds: usize) -> Option<Ratio> {
    bootstrap_ratio(mode, idle, |s| percentile(s, p), seed, rounds)
}

/// Ratio of `mode`'s mean to `base`'s with a 95 % percentile-bootstrap interval, resampled as
/// [`ratio_ci`]: for figures a run gives once, such as the background's throughput, whose
/// spread from run to run the point ratio hides.
pub fn mean_ratio_ci(mode: &[f64], base: &[f64], seed: u64, rounds: usize) -> Option<Ratio> {
    bootstrap_ratio(mode, base, mean, seed, rounds)
}

/// The arithmetic mean (NaN when empty).
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// `stat(mode) / stat(base)` (each given sorted) and its 95 % interval over `rounds`
/// independent resamples of both.
fn bootstrap_ratio(
    mode: &[f64],
    base: &[f64],
    stat: impl Fn(&[f64]) -> f64,
    seed: u64,
    rounds: usize,
) -> Option<Ratio> {
    if mode.is_empty() || base.is_empty() {
        return None;
    }
    let value = stat(&sorted(mode)) / stat(&sorted(base));
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut buf_m = vec![0.0; mode.len()];
    let mut buf_b = vec![0.0; base.len()];
    let mut ratios: Vec<f64> = (0..rounds)
        .map(|_| {
            resample(&mut rng, mode, &mut buf_m);
            resample(&mut rng, base, &mut buf_b);
            stat(&buf_m) / stat(&buf_b)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    Some(Ratio {
        value,
        lo: percentile(&ratios, 2.5),
        hi: percentile(&ratios, 97.5),
    })
}

/// Fill `out` with a sorted resample of `data`.
fn resample(rng: &mut impl Rng, data: &[f64], out: &mut [f64]) {
    for x in out.iter_mut() {
        *x = data[rng.gen_range(0..data.len())];
    }
    out.sort_by(f64::total_cmp);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mean_ratio_brackets_its_value_and_narrows_with_less_spread() {
        let stock = [100.0, 104.0, 96.0, 100.0];
        let wide = mean_ratio_ci(&[90.0, 99.0, 81.0, 90.0], &stock, 7, 1000).unwrap();
        assert!((wide.value - 0.9).abs() < 1e-9);
        assert!(wide.lo < 0.9 && 0.9 < wide.hi, "{wide:?}");
        let narrow = mean_ratio_ci(&[90.0, 90.5, 89.5, 90.0], &stock, 7, 1000).unwrap();
        assert!(
            narrow.hi - narrow.lo < wide.hi - wide.lo,
            "{narrow:?} {wide:?}"
        );
        assert_eq!(mean_ratio_ci(&[], &stock, 7, 1000), None);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let data: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = summarize(&data);
        assert_eq!(
            (s.p50, s.p90, s.p95, s.p99, s.max),
            (50.0, 90.0, 95.0, 99.0, 100.0)
        );
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn bootstrap_is_seeded_and_brackets_the_ratio() {
        let idle: Vec<f64> = (0..200).map(|i| 1.0 + (i % 10) as f64 * 0.01).collect();
        let load: Vec<f64> = idle.iter().map(|x| x * 2.0).collect();
        let a = ratio_ci(&load, &idle, 95.0, 7, 300).unwrap();
        let b = ratio_ci(&load, &idle, 95.0, 7, 300).unwrap();
        assert_eq!(a, b);
        assert!((a.value - 2.0).abs() < 1e-9);
        assert!(a.lo <= a.value && a.value <= a.hi);
        let same = ratio_ci(&idle, &idle, 95.0, 7, 300).unwrap();
        assert!(
            !a.overlaps(&same),
            "a 2x slowdown must separate from 1x: {a:?} vs {same:?}"
        );
    }
}
