//! The seed papers' formulas, one function each, named after what they compute.
//!
//! Seed 000 = VT-CFS and framework-assisted task characterization (Android CFS, 2.6.3x);
//! seed 002 = MCFS; seed 003 = ShuffleDog; seed 004 = FA-CFS. Worked examples from the papers
//! are the tests.

use crate::time::{Nanos, MS};
use crate::weights::{NICE_0_LOAD, WEIGHT_NICE_MINUS_20};

/// Seed 000 eq. (1): virtual runtime advance for `delta` ns of CPU at weight `w`:
/// ω0 / W × A. Integer arithmetic as the kernel's `calc_delta_fair` (rounded down).
pub fn vruntime_delta(delta: Nanos, weight: u64) -> Nanos {
    if weight == NICE_0_LOAD {
        delta
    } else {
        match delta.checked_mul(NICE_0_LOAD) {
            // The same quotient without 128-bit division (the simulator's hottest formula).
            Some(p) => p / weight.max(1),
            None => ((delta as u128 * NICE_0_LOAD as u128) / weight.max(1) as u128) as Nanos,
        }
    }
}

/// Seed 000 eq. (3): the scheduling period P for `n` runnable tasks — 5 ms while n < 5, else
/// 1 ms × n (Android's `sched_latency` = 5 ms, `sched_min_granularity` = 1 ms, `nr_latency` = 5).
pub fn cfs_period(n: usize, latency: Nanos, min_granularity: Nanos) -> Nanos {
    let nr_latency = (latency / min_granularity.max(1)) as usize;
    if n > nr_latency {
        min_granularity * n as u64
    } else {
        latency
    }
}

/// Seed 000 eq. (3) with Android's constants (5 ms, 1 ms).
pub fn android_period(n: usize) -> Nanos {
    cfs_period(n, 5 * MS, MS)
}

/// Seed 000 eq. (2): a task's time slice, W / ΣW × P.
pub fn cfs_slice(weight: u64, total_weight: u64, period: Nanos) -> Nanos {
    match period.checked_mul(weight) {
        Some(p) => p / total_weight.max(1),
        None => ((period as u128 * weight as u128) / total_weight.max(1) as u128) as Nanos,
    }
}

/// Seed 000 eq. (6): the boost weight W'(τa) = C × ΣW / P, capped at ω−20, that gives the
/// user-interactive task a slice of at least C. `total_weight` is ΣW over the run-queue S
/// (the paper's S: the tasks in the run-queue when the task is boosted).
pub fn boost_weight(c: Nanos, total_weight: u64, period: Nanos) -> u64 {
    let w = (c as u128 * total_weight as u128).div_ceil(period.max(1) as u128);
    (w as u64).min(WEIGHT_NICE_MINUS_20)
}

/// Seed 000 eq. (7): VT-CFS wake-up placement, min_vruntime + (ω0 / ω−20) × T, where T is the
/// scheduling tick period. Places the woken task second from the left.
pub fn vtcfs_wakeup_vruntime(min_vruntime: Nanos, tick: Nanos) -> Nanos {
    min_vruntime + vruntime_delta(tick, WEIGHT_NICE_MINUS_20)
}

/// Seed 002 §III.A (Fig. 3): MCFS divides the vruntime increment (`delta_fair`) by the
/// system-wide cut-rate `c`. With `c` a power of two this is the paper's shift.
pub fn mcfs_delta_fair(delta_fair: Nanos, cut_rate: u32) -> Nanos {
    let c = cut_rate.max(1);
    if c.is_power_of_two() {
        delta_fair >> c.trailing_zeros()
    } else {
        delta_fair / c as u64
    }
}

/// Nice levels of weight gap that a cut-rate `c` is worth when MCFS is approximated on a stock
/// kernel by weights: dividing vruntime growth by c equals multiplying weight by c, and one nice
/// level is a factor 1.25, so log1.25(c) levels (c = 16 → 12.4).
pub fn mcfs_equivalent_nice_levels(cut_rate: u32) -> f64 {
    (cut_rate.max(1) as f64).ln() / 1.25f64.ln()
}

/// Seed 004 eq. (16): FA-CFS stretches a task's time slice by the frequency drop when it moves
/// from a core at `f_old` to one at `f_new` (or the governor lowers the clock):
/// S'ᵢ ≥ (fᵢʲ / fᵢᵏ) × Sᵢ, so the work done per slice (frequency × time) is unchanged.
pub fn facfs_scaled_slice(slice: Nanos, f_old: u64, f_new: u64) -> Nanos {
    ((slice as u128 * f_old as u128).div_ceil(f_new.max(1) as u128)) as Nanos
}

/// Seed 004 eq. (17)–(18): since CFS's slice is ωᵢ / Ωr × P (eq. 1), eq. (16) is obtained by
/// scaling the weight instead: ω'ᵢ / Ωr × P ≥ (fʲ / fᵏ) × ωᵢ / Ωr × P (17), i.e.
/// ω'ᵢ ≥ (fᵢʲ / fᵢᵏ) × ωᵢ (18). Rounded up, as the inequality asks.
pub fn facfs_scaled_weight(weight: u64, f_old: u64, f_new: u64) -> u64 {
    (weight as u128 * f_old as u128).div_ceil(f_new.max(1) as u128) as u64
}

/// Seed 003 eq. (1): ShuffleDog's adaptive GPU inflight, ⌊16.7 ms / x⌋ where x is the median
/// execution time of the last five best-effort command batches; at least 1.
pub fn adaptive_inflight(median_batch: Nanos) -> u32 {
    const FRAME: Nanos = 16_700_000;
    (FRAME / median_batch.max(1)).clamp(1, u32::MAX as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::nice_to_weight;

    fn ms(x: Nanos) -> f64 {
        x as f64 / MS as f64
    }

    #[test]
    fn example_1_ten_hogs_give_one_millisecond_slices() {
        // Seed 000 Example 1: ten nice-0 hogs plus the interactive task, n = 11.
        let p = android_period(11);
        assert_eq!(p, 11 * MS);
        assert_eq!(cfs_slice(1024, 11 * 1024, p), MS);
    }

    #[test]
    fn example_2_slices_are_0_42_and_6_18_ms() {
        // Seed 000 Example 2: nine nice-0 and one nice −12 hog, n = 10.
        let total = 9 * 1024 + nice_to_weight(-12);
        let p = android_period(10);
        assert!((ms(cfs_slice(1024, total, p)) - 0.42).abs() < 0.005);
        assert!((ms(cfs_slice(nice_to_weight(-12), total, p)) - 6.18).abs() < 0.01);
    }

    #[test]
    fn eq6_boost_reaches_the_cap_and_gives_9_86_ms() {
        // Seed 000 §IV on Example 1: τa is promoted to ω−20 and its slice becomes 9.86 ms.
        let total = 11 * 1024;
        let w = boost_weight(100 * MS, total, android_period(11));
        assert_eq!(w, WEIGHT_NICE_MINUS_20);
        let slice = cfs_slice(w, 10 * 1024 + w, android_period(11));
        assert!((ms(slice) - 9.86).abs() < 0.01, "{}", ms(slice));
    }

    #[test]
    fn eq6_uncapped_boost_gives_a_slice_of_c() {
        let total = 4 * 1024;
        let p = android_period(4);
        let w = boost_weight(3 * MS, total, p);
        // C × ΣW / P with ΣW taken before the boost: the slice against that ΣW is C (rounded up).
        let slice = cfs_slice(w, total, p);
        assert!((3 * MS..3 * MS + 1_000).contains(&slice), "{slice}");
    }

    #[test]
    fn eq7_places_one_nice_minus_20_tick_after_min() {
        let v = vtcfs_wakeup_vruntime(1_000_000, 4 * MS);
        assert_eq!(v, 1_000_000 + 4 * MS * 1024 / 88761);
    }

    #[test]
    fn mcfs_cut_is_a_shift_for_powers_of_two() {
        assert_eq!(mcfs_delta_fair(1600, 16), 100);
        assert_eq!(mcfs_delta_fair(1600, 1), 1600);
        assert_eq!(mcfs_delta_fair(1600, 3), 533);
        assert!((mcfs_equivalent_nice_levels(16) - 12.43).abs() < 0.01);
    }

    #[test]
    fn facfs_compensates_a_frequency_drop_exactly() {
        // 2.0 GHz -> 1.0 GHz halves the speed: slice and weight double (eq. 16, 18).
        assert_eq!(facfs_scaled_slice(3 * MS, 2_000_000, 1_000_000), 6 * MS);
        assert_eq!(facfs_scaled_weight(1024, 2_000_000, 1_000_000), 2048);
        // No change without a frequency change; a rise shrinks them (the inequality's equality).
        assert_eq!(facfs_scaled_weight(1024, 1_500_000, 1_500_000), 1024);
        assert_eq!(facfs_scaled_weight(1024, 1_000_000, 2_000_000), 512);
        // Work per slice (f × S) is preserved: 2.0 GHz × 3 ms = 1.2 GHz × 5 ms.
        assert_eq!(facfs_scaled_slice(3 * MS, 2_000_000, 1_200_000), 5 * MS);
    }

    #[test]
    fn inflight_follows_eq1() {
        assert_eq!(adaptive_inflight(7 * MS), 2);
        assert_eq!(adaptive_inflight(4 * MS), 4);
        assert_eq!(adaptive_inflight(40 * MS), 1);
    }
}
