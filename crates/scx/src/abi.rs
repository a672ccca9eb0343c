//! The layout shared with the BPF program (`bpf/scx_uxsched.h`), field for field.

use std::fmt;
use std::str::FromStr;

/// The policy the scheduler runs: the BPF counterpart of the simulator's policy of that name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// VT-CFS (seed 000 §V): slice T, wake-up placement of eq. 7, no wake-up preemption.
    Vtcfs,
    /// MCFS (seed 002 §III.A): vtime charge divided by the cut-rate.
    Mcfs,
    /// FA-CFS (seed 004 §4): charge and slice scaled by the CPU's performance level (eq. 16–18).
    Facfs,
}

impl Policy {
    pub const ALL: [Policy; 3] = [Policy::Vtcfs, Policy::Mcfs, Policy::Facfs];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Vtcfs => "vtcfs",
            Policy::Mcfs => "mcfs",
            Policy::Facfs => "facfs",
        }
    }

    pub(crate) fn code(self) -> u32 {
        self as u32
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown sched_ext policy {s:?}: use vtcfs, mcfs or facfs"))
    }
}

/// What the daemon says a thread is (`enum uxs_class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    None = 0,
    /// Seed 000 eq. 6: boosted to W' = C × ΣW / P at each wake-up until it leaves the CPU.
    Interactive = 1,
    /// Seed 003 §5.1 (ShuffleDog): nice 3's weight, never the background's.
    Critical = 2,
    /// Seed 001 §3.2 (EIMOS): the topmost process, nice − 19.
    Topmost = 3,
    /// Seed 003 §5.1: Android's background group share (52).
    Background = 4,
}

impl Class {
    pub const ALL: [Class; 5] = [
        Class::None,
        Class::Interactive,
        Class::Critical,
        Class::Topmost,
        Class::Background,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::None => "none",
            Class::Interactive => "interactive",
            Class::Critical => "critical",
            Class::Topmost => "topmost",
            Class::Background => "background",
        }
    }
}

impl FromStr for Class {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Class::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                format!(
                "unknown boost class {s:?}: use none, interactive, critical, topmost or background"
            )
            })
    }
}

/// `struct uxs_conf`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Conf {
    pub ops_flags_offset: u64,
    pub policy: u32,
    pub cut_rate: u32,
    pub tick_ns: u64,
    pub sched_tick_ns: u64,
    pub latency_ns: u64,
    pub min_gran_ns: u64,
    pub wakeup_gran_ns: u64,
    pub boost_c_ns: u64,
    pub user_hz: u32,
    pub min_perf: u32,
}

/// `struct uxs_boost`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BoostValue {
    pub class: u32,
    pub pad: u32,
    pub start_ticks: u64,
}

pub(crate) const EXIT_REASON_LEN: usize = 128;
pub(crate) const EXIT_MSG_LEN: usize = 1024;
/// `sizeof(struct uxs_exit)`.
pub(crate) const EXIT_SIZE: usize = 16 + EXIT_REASON_LEN + EXIT_MSG_LEN;

/// The counters of `enum uxs_stat`, in order.
pub const STAT_NAMES: [&str; 9] = [
    "enqueued",
    "direct_to_idle",
    "wakeup_preemptions",
    "interactive_boosts",
    "custom_slice_runs",
    "stale_boost_entries",
    "slices_renewed",
    "stolen",
    "away_from_other_class",
];

/// `SCX_OPS_SWITCH_PARTIAL` (6.12's `enum scx_ops_flags`).
pub(crate) const SCX_OPS_SWITCH_PARTIAL: u64 = 8;

/// A `#[repr(C)]` plain-old-data value as its bytes.
pub(crate) fn bytes_of<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: T is a Copy #[repr(C)] struct of integers without padding (checked by the tests).
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_c_header() {
        // bpf/scx_uxsched.h: 8 + 4 + 4 + 6 × 8 + 4 + 4, and 4 + 4 + 8.
        assert_eq!(std::mem::size_of::<Conf>(), 72);
        assert_eq!(std::mem::offset_of!(Conf, boost_c_ns), 56);
        assert_eq!(std::mem::size_of::<BoostValue>(), 16);
        assert_eq!(EXIT_SIZE, 1168);
    }

    #[test]
    fn names_round_trip_and_unknowns_say_what_exists() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>().unwrap(), p);
        }
        for c in Class::ALL {
            assert_eq!(c.name().parse::<Class>().unwrap(), c);
        }
        assert!("cfs".parse::<Policy>().unwrap_err().contains("vtcfs"));
        assert!("ui".parse::<Class>().unwrap_err().contains("interactive"));
    }
}
