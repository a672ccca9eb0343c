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

/// z of a two-sided 95 % normal interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// Wilson's score interval for a proportion: `k` of `n` trials, two-sided at normal quantile `z`
/// (Wilson 1927, "Probable inference…", JASA 22: the `p` solving `|p̂ − p| = z·√(p(1−p)/n)`):
///
/// ```text
/// (p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n)
/// ```
///
/// Unlike p̂ ± z·√(p̂(1−p̂)/n) it stays within [0, 1] and is not empty at 0 or n of n — which
/// "frames over budget" often are. `None` for no trials.
pub fn wilson(k: u64, n: u64, z: f64) -> Option<(f64, f64)> {
    if n == 0 || k > n {
        return None;
    }
    let (nf, p) = (n as f64, k as f64 / n as f64);
    let z2 = z * z;
    let denom = 1.0 + z2 / nf;
    let centre = (p + z2 / (2.0 * nf)) / denom;
    let half = z * (p * (1.0 - p) / nf + z2 / (4.0 * nf * nf)).sqrt() / denom;
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
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

    #[test]
    fn wilson_intervals_match_the_closed_form_and_stay_in_range() {
        let close = |(a, b): (f64, f64), (x, y): (f64, f64)| {
            assert!((a - x).abs() < 1e-9 && (b - y).abs() < 1e-9, "{a} {b}");
        };
        close(
            wilson(5, 10, Z95).unwrap(),
            (0.236_593_090_512_564, 0.763_406_909_487_436),
        );
        close(wilson(0, 10, Z95).unwrap(), (0.0, 0.277_532_799_862_889));
        close(
            wilson(51, 90, Z95).unwrap(),
            (0.463_640_975_237_244, 0.664_234_274_687_512),
        );
        let (lo, hi) = wilson(120, 120, Z95).unwrap();
        assert!((lo - 0.968_980_833_581_297).abs() < 1e-9 && hi == 1.0);
        assert_eq!(wilson(0, 0, Z95), None);
        assert_eq!(wilson(3, 2, Z95), None);
    }
}
