//! The kernel's nice→weight table (`sched_prio_to_weight`, kernel/sched/core.c).
//!
//! Each nice step is a factor of about 1.25 in CPU share ("10% effect"); nice 0 is 1024.

/// Weight of a nice-0 task (`NICE_0_LOAD` after scale-down): ω0 in seed 000.
pub const NICE_0_LOAD: u64 = 1024;

/// `sched_prio_to_weight[]`, index 0 = nice −20 … index 39 = nice 19.
pub const PRIO_TO_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, // -20 .. -16
    29154, 23254, 18705, 14949, 11916, // -15 .. -11
    9548, 7620, 6100, 4904, 3906, // -10 .. -6
    3121, 2501, 1991, 1586, 1277, // -5 .. -1
    1024, 820, 655, 526, 423, // 0 .. 4
    335, 272, 215, 172, 137, // 5 .. 9
    110, 87, 70, 56, 45, // 10 .. 14
    36, 29, 23, 18, 15, // 15 .. 19
];

/// Weight of `SCHED_IDLE` tasks (`WEIGHT_IDLEPRIO`).
pub const WEIGHT_IDLEPRIO: u64 = 3;

/// ω−20, the largest weight a nice value can give.
pub const WEIGHT_NICE_MINUS_20: u64 = PRIO_TO_WEIGHT[0];

/// Weight of a nice value; values outside −20..=19 are clamped as the kernel does.
pub fn nice_to_weight(nice: i32) -> u64 {
    PRIO_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// The largest nice value whose weight is at least `weight` (seed 000 §IV: "assigns τa a new nice
/// value whose corresponding weight is larger than W'"). Weights above ω−20 give −20.
pub fn weight_to_nice_at_least(weight: u64) -> i32 {
    (-20..=19)
        .rev()
        .find(|&n| nice_to_weight(n) >= weight)
        .unwrap_or(-20)
}

/// `cpu.weight` of a cgroup with the default weight: the same task-group weight as 1024 shares.
pub const CGROUP_WEIGHT_DFL: u64 = 100;

/// cgroup v1 `cpu.shares` → the v2 `cpu.weight` that gives the task group the same load weight.
///
/// The kernel's equivalence is `cpu.weight` 100 ≡ 1024 shares (`sched_weight_to_cgroup` in
/// kernel/sched/sched.h: `DIV_ROUND_CLOSEST(weight × 100, 1024)` clamped to 1..=10000), so 71755
/// shares (nice −19) is 7007. This is not runc's linear *range* mapping (`1 + (shares − 2) ×
/// 9999 / 262142`, which maps 1024 shares to 39 and 71755 to 2737): that one maps the ends of
/// the two ranges onto each other and gives the group another CPU share than v1 would.
pub fn shares_to_cgroup_weight(shares: u64) -> u64 {
    let w = (shares.saturating_mul(CGROUP_WEIGHT_DFL) + NICE_0_LOAD / 2) / NICE_0_LOAD;
    w.clamp(1, 10_000)
}

/// cgroup v2 `cpu.weight` → the group entity's load weight (`sched_weight_from_cgroup`:
/// `DIV_ROUND_CLOSEST(weight × 1024, 100)`, so the default 100 is nice 0's 1024).
pub fn cgroup_weight_to_load(weight: u64) -> u64 {
    (weight.clamp(1, 10_000) * NICE_0_LOAD + CGROUP_WEIGHT_DFL / 2) / CGROUP_WEIGHT_DFL
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_endpoints_match_the_kernel() {
        assert_eq!(nice_to_weight(0), 1024);
        assert_eq!(nice_to_weight(-20), 88761);
        assert_eq!(nice_to_weight(19), 15);
        assert_eq!(nice_to_weight(-12), 14949); // seed 000 Example 2
        assert_eq!(nice_to_weight(5), 335);
        assert_eq!(nice_to_weight(99), 15);
    }

    #[test]
    fn each_step_is_about_a_quarter() {
        for n in -20..19 {
            let r = nice_to_weight(n) as f64 / nice_to_weight(n + 1) as f64;
            assert!((1.2..1.3).contains(&r), "nice {n}: ratio {r}");
        }
    }

    #[test]
    fn nice_for_weight_rounds_towards_more_weight() {
        assert_eq!(weight_to_nice_at_least(1024), 0);
        assert_eq!(weight_to_nice_at_least(1025), -1);
        assert_eq!(weight_to_nice_at_least(1_000_000), -20);
        assert_eq!(weight_to_nice_at_least(1), 19);
    }

    #[test]
    fn cgroup_conversions_are_the_kernels() {
        assert_eq!(
            shares_to_cgroup_weight(1024),
            100,
            "the default is the default"
        );
        assert_eq!(shares_to_cgroup_weight(71755), 7007, "nice -19");
        assert_eq!(shares_to_cgroup_weight(10240), 1000);
        assert_eq!(
            shares_to_cgroup_weight(128),
            13,
            "12.5 rounds to the closest"
        );
        assert_eq!(shares_to_cgroup_weight(2), 1, "clamped to the minimum");
        assert_eq!(
            shares_to_cgroup_weight(262_144),
            10_000,
            "clamped to the maximum"
        );
        assert_eq!(cgroup_weight_to_load(100), 1024);
        assert_eq!(cgroup_weight_to_load(7007), 71752);
        // Through the kernel and back: every shares value lands within one weight step.
        for shares in [2, 3, 100, 1024, 5000, 71755, 88761, 102_400] {
            let w = shares_to_cgroup_weight(shares);
            assert_eq!(
                shares_to_cgroup_weight(cgroup_weight_to_load(w)),
                w,
                "{shares}"
            );
        }
    }
}
