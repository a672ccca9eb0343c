//! Exact distribution summaries: count, mean and nearest-rank percentiles.
//!
//! Samples are kept whole (not binned) so that every percentile is an observed value and two
//! runs can be compared exactly. Nearest-rank: the p-th percentile of n sorted samples is the
//! sample at 1-based rank ⌈p·n/100⌉ (rank ≥ 1). It is computed in integer per-mille so that
//! p99.9 of 1000 samples is rank 999, not 1000 through a floating-point rounding.

use serde::Serialize;

/// Percentiles reported for every distribution, in per-mille.
const PERCENTILES_PERMILLE: [u64; 5] = [500, 900, 950, 990, 999];

/// A summary of signed samples (nanoseconds for times; slack can be negative).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub count: u64,
    /// Absent when there are no samples, so that an empty distribution never reads as "0 ns".
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stats: Option<Stats>,
    /// The raw samples in observation order, only when asked for (plots); never by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<Vec<i64>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    pub mean: f64,
    pub min: i64,
    pub p50: i64,
    pub p90: i64,
    pub p95: i64,
    pub p99: i64,
    #[serde(rename = "p99.9")]
    pub p999: i64,
    pub max: i64,
}

impl Summary {
    /// Summarise `samples`; `keep_samples` copies them into the summary as observed.
    pub fn of(samples: &[i64], keep_samples: bool) -> Summary {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let stats = (!sorted.is_empty()).then(|| {
            let sum: i128 = sorted.iter().map(|&v| v as i128).sum();
            let [p50, p90, p95, p99, p999] =
                PERCENTILES_PERMILLE.map(|pm| nearest_rank(&sorted, pm));
            Stats {
                mean: sum as f64 / sorted.len() as f64,
                min: sorted[0],
                p50,
                p90,
                p95,
                p99,
                p999,
                max: sorted[sorted.len() - 1],
            }
        });
        Summary {
            count: samples.len() as u64,
            stats,
            samples: keep_samples.then(|| samples.to_vec()),
        }
    }
}

pub use uxsched_model::stats::nearest_rank;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_one_to_hundred_are_nearest_rank() {
        let data: Vec<i64> = (1..=100).rev().collect();
        let s = Summary::of(&data, false).stats.unwrap();
        assert_eq!((s.p50, s.p90, s.p95, s.p99, s.p999), (50, 90, 95, 99, 100));
        assert_eq!((s.min, s.max), (1, 100));
        assert_eq!(s.mean, 50.5);
    }

    #[test]
    fn p999_of_a_thousand_samples_is_rank_999() {
        let data: Vec<i64> = (1..=1000).collect();
        assert_eq!(nearest_rank(&data, 999), 999);
        assert_eq!(nearest_rank(&data, 990), 990);
    }

    #[test]
    fn single_sample_is_every_percentile() {
        let s = Summary::of(&[7], false).stats.unwrap();
        assert_eq!((s.p50, s.p999, s.max), (7, 7, 7));
    }

    #[test]
    fn empty_distribution_has_no_stats_and_samples_only_on_request() {
        let json = serde_json::to_value(Summary::of(&[], false)).unwrap();
        assert_eq!(json, serde_json::json!({ "count": 0 }));
        let kept = Summary::of(&[3, 1], true);
        assert_eq!(kept.samples, Some(vec![3, 1]));
        let json = serde_json::to_value(Summary::of(&[3, 1], false)).unwrap();
        assert!(json.get("samples").is_none());
        assert_eq!(json["p99.9"], 3);
    }
}
