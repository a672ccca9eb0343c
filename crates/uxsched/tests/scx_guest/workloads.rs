//! The workloads of the guest checks, defined once: `scx_guest.rs` turns them into the shell
//! variables its script starts the roles with (`SCX_*`, see `roles.rs`), and
//! `scx_sim_direction.rs` builds the same tasks in the simulator, so the two cannot drift apart.
#![allow(dead_code)]

/// A periodic task: wakes every `period_us` on an absolute timer, works `work_us`, for
/// `seconds` after a 0.3 s warm-up (`roles::probe`).
pub struct Probe {
    pub period_us: u64,
    pub work_us: u64,
    pub seconds: u64,
}

/// Bursts of `burst_us` of CPU separated by `sleep_us` sleeps at `nice` (`roles::share`).
pub struct Share {
    pub nice: i32,
    pub burst_us: u64,
    pub sleep_us: u64,
    pub seconds: u64,
}

/// The wake-up probe of the mixed workload and of the custom-slice check, pinned to CPU 0.
pub const PROBE: Probe = Probe {
    period_us: 10_000,
    work_us: 300,
    seconds: 3,
};

/// CPU hogs pinned to CPU 0 next to the probe (the mixed workload adds one unpinned hog).
pub const HOGS_ON_CPU0: usize = 2;

/// The mixed workload's unpinned bursty task.
pub const MIXED_SHARE: Share = Share {
    nice: -5,
    burst_us: 20_000,
    sleep_us: 5_000,
    seconds: 3,
};

/// MCFS's elevated task, against `MCFS_HOGS` hogs on CPU 0, at each of `MCFS_CUT_RATES`.
pub const MCFS_SHARE: Share = Share {
    nice: -3,
    burst_us: 20_000,
    sleep_us: 30_000,
    seconds: 3,
};
pub const MCFS_HOGS: usize = 3;
pub const MCFS_CUT_RATES: [u32; 2] = [1, 16];

/// The custom slice (sched_attr.sched_runtime) of the short-slice probe, in µs.
pub const SHORT_SLICE_US: u64 = 500;

/// VT-CFS's preemption tick T (`uxsched scx run --tick-ms` default) and the kernel's tick
/// (the guest kernel's HZ = 1000), in µs: the woken task's bound is T + tick.
pub const VTCFS_T_US: u64 = 3_000;
pub const KERNEL_TICK_US: u64 = 1_000;

/// Eq. 6's C (`uxsched scx run --boost-c-ms` default), in ms.
pub const BOOST_C_MS: u64 = 4;

impl Probe {
    /// The role's settings on CPU 0.
    pub fn env(&self) -> String {
        format!(
            "SCX_CPU=0 SCX_SECONDS={} SCX_PERIOD_US={} SCX_WORK_US={}",
            self.seconds, self.period_us, self.work_us
        )
    }
}

impl Share {
    pub fn env(&self) -> String {
        format!(
            "SCX_NICE={} SCX_BURST_US={} SCX_SLEEP_US={} SCX_SECONDS={}",
            self.nice, self.burst_us, self.sleep_us, self.seconds
        )
    }
}

/// The shell variables the guest script reads (prepended to it).
pub fn shell_vars() -> String {
    let cuts: Vec<String> = MCFS_CUT_RATES.iter().map(u32::to_string).collect();
    format!(
        "PROBE=\"{}\"\nHOGS_ON_CPU0={HOGS_ON_CPU0}\nMIXED_SHARE=\"{}\"\nMCFS_SHARE=\"{}\"\n\
         MCFS_HOGS={MCFS_HOGS}\nMCFS_CUT_RATES=\"{}\"\nSHORT_SLICE_US={SHORT_SLICE_US}\n\
         TICK_MS={}\nBOOST_C_MS={BOOST_C_MS}\n",
        PROBE.env(),
        MIXED_SHARE.env(),
        MCFS_SHARE.env(),
        cuts.join(" "),
        VTCFS_T_US / 1000,
    )
}
