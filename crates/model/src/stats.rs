//! Percentiles, written once for every crate: nearest rank — the smallest sample with at least
//! p % of the samples at or below it, always a value that was measured (no interpolation), in
//! integer arithmetic so p99 of 100 samples is exactly the 99th.

/// The `permille`/10 percentile of ascending, non-empty `sorted` (p50 = 500, p99.9 = 999).
///
/// # Panics
/// On an empty slice: a percentile of nothing does not exist; callers say what they show then.
pub fn nearest_rank<T: Copy>(sorted: &[T], permille: u64) -> T {
    assert!(!sorted.is_empty(), "nearest_rank of no samples");
    let n = sorted.len() as u64;
    let rank = (permille * n).div_ceil(1000).clamp(1, n);
    sorted[(rank - 1) as usize]
}

/// A percentile given in percent (0–100, to a tenth) as permille for [`nearest_rank`].
pub fn permille(percent: f64) -> u64 {
    (percent * 10.0).round().clamp(0.0, 1000.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_to_a_hundred() {
        let v: Vec<u32> = (1..=100).collect();
        let at = |p: f64| nearest_rank(&v, permille(p));
        assert_eq!(
            (at(0.0), at(50.0), at(95.0), at(99.0), at(99.9), at(100.0)),
            (1, 50, 95, 99, 100, 100)
        );
        let k: Vec<u32> = (1..=1000).collect();
        assert_eq!(nearest_rank(&k, 999), 999);
        assert_eq!(nearest_rank(&[7.5], 990), 7.5);
    }
}
