//! Scheduling attributes of one thread through `sched_getattr(2)` / `sched_setattr(2)`.
//!
//! glibc and the `libc` crate do not wrap these two system calls, so the kernel's
//! `struct sched_attr` (include/uapi/linux/sched/types.h, SCHED_ATTR_SIZE_VER1 = 56 bytes) is
//! declared here and the calls go through `syscall(2)`. The daemon and the sched_ext backend
//! share it. One call sets nice, policy, — on EEVDF kernels ≥ 6.12 — the custom slice (`sched_runtime` of a fair task) and — on kernels
//! built with CONFIG_UCLAMP_TASK — the utilisation clamp `uclamp.min` together.

use serde::{Deserialize, Serialize};
use std::io;

pub const SCHED_OTHER: u32 = 0;
pub const SCHED_FIFO: u32 = 1;
pub const SCHED_RR: u32 = 2;
pub const SCHED_BATCH: u32 = 3;
pub const SCHED_IDLE: u32 = 5;
pub const SCHED_DEADLINE: u32 = 6;
/// The sched_ext class (Linux >= 6.12 with `CONFIG_SCHED_CLASS_EXT`): scheduled by the loaded
/// BPF scheduler, by the fair class while none is loaded. Nice and the custom slice apply to it
/// as to `SCHED_OTHER`.
pub const SCHED_EXT: u32 = 7;

/// Children of a boosted thread start at nice 0, SCHED_OTHER and the default slice, so a boost
/// never leaks into processes or threads it spawns.
pub const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;
/// Keep the policy / the parameters (nice, priority, runtime) the thread has.
pub const SCHED_FLAG_KEEP_POLICY: u64 = 0x08;
pub const SCHED_FLAG_KEEP_PARAMS: u64 = 0x10;
pub const SCHED_FLAG_KEEP_ALL: u64 = SCHED_FLAG_KEEP_POLICY | SCHED_FLAG_KEEP_PARAMS;
/// Write `sched_util_min` / `sched_util_max` (without these flags the kernel leaves them).
pub const SCHED_FLAG_UTIL_CLAMP_MIN: u64 = 0x20;
pub const SCHED_FLAG_UTIL_CLAMP_MAX: u64 = 0x40;
/// The utilisation scale: `uclamp` values are 0..=1024 (SCHED_CAPACITY_SCALE).
pub const UCLAMP_SCALE: u32 = 1024;
/// `sched_util_min = -1` with SCHED_FLAG_UTIL_CLAMP_MIN: back to the class default, no longer
/// "user defined" (`uclamp_reset` in kernel/sched/syscalls.c).
const UCLAMP_RESET: u32 = u32::MAX;
/// `struct sched_attr`'s size from which it carries `sched_util_min/max` (SCHED_ATTR_SIZE_VER1).
const SCHED_ATTR_SIZE_VER1: u32 = 56;

/// `struct sched_attr`, version 1 layout.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct RawSchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

/// The scheduling settings uxsched reads, changes and restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedAttr {
    pub policy: u32,
    pub flags: u64,
    pub nice: i32,
    pub priority: u32,
    /// For fair tasks, the slice in ns as the kernel reports it (the default slice unless a
    /// custom one was set); for SCHED_DEADLINE the runtime.
    pub runtime: u64,
    pub deadline: u64,
    pub period: u64,
    /// The thread's utilisation clamps as read, where the kernel has them (CONFIG_UCLAMP_TASK);
    /// `None` there is no uclamp, or the value was journalled before uxsched read clamps — and
    /// then it is never written. Written (its `min` only) when `flags` has
    /// [`SCHED_FLAG_UTIL_CLAMP_MIN`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uclamp: Option<Uclamp>,
}

/// `sched_util_min` / `sched_util_max`: the utilisation (0..=[`UCLAMP_SCALE`]) the scheduler and
/// schedutil count the thread as having at least / at most while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uclamp {
    pub min: u32,
    pub max: u32,
}

impl SchedAttr {
    /// Fair-class policies, the only ones uxsched changes: real-time and deadline threads
    /// belong to someone who asked for them (rtkit, audio servers) and are left alone.
    pub fn is_fair(&self) -> bool {
        matches!(self.policy, SCHED_OTHER | SCHED_BATCH)
    }

    /// SCHED_OTHER at nice 0 with the kernel's default slice: an ordinary thread.
    pub const fn ordinary() -> SchedAttr {
        SchedAttr {
            policy: SCHED_OTHER,
            flags: 0,
            nice: 0,
            priority: 0,
            runtime: 0,
            deadline: 0,
            period: 0,
            uclamp: None,
        }
    }

    /// SCHED_FIFO or SCHED_RR.
    pub fn is_rt(&self) -> bool {
        matches!(self.policy, SCHED_FIFO | SCHED_RR)
    }

    /// SCHED_EXT: the sched_ext backend's (a fair thread it switched, or someone else's).
    pub fn is_ext(&self) -> bool {
        self.policy == SCHED_EXT
    }

    /// These fair attributes under `SCHED_EXT` (nice and custom slice kept), reset on fork.
    pub fn in_ext(self) -> SchedAttr {
        SchedAttr {
            policy: SCHED_EXT,
            flags: self.flags | SCHED_FLAG_RESET_ON_FORK,
            ..self
        }
    }

    /// What a thread that inherited `SCHED_EXT` from one the daemon switched had before: the
    /// same under `SCHED_OTHER`.
    pub fn inherited_ext_origin(self) -> SchedAttr {
        SchedAttr {
            policy: SCHED_OTHER,
            ..self
        }
    }
}

/// Read a thread's attributes.
pub fn get(tid: i32) -> io::Result<SchedAttr> {
    let mut raw = RawSchedAttr::default();
    let size = std::mem::size_of::<RawSchedAttr>() as libc::c_uint;
    // SAFETY: `raw` is a valid, writable sched_attr of `size` bytes for the call's duration.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid as libc::pid_t,
            &mut raw as *mut RawSchedAttr,
            size,
            0 as libc::c_uint,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // Without CONFIG_UCLAMP_TASK the kernel still fills a 56-byte struct, with zeros.
    let uclamp = (raw.size >= SCHED_ATTR_SIZE_VER1 && uclamp_support().is_ok()).then_some(Uclamp {
        min: raw.sched_util_min,
        max: raw.sched_util_max,
    });
    Ok(SchedAttr {
        policy: raw.sched_policy,
        flags: raw.sched_flags,
        nice: raw.sched_nice,
        priority: raw.sched_priority,
        runtime: raw.sched_runtime,
        deadline: raw.sched_deadline,
        period: raw.sched_period,
        uclamp,
    })
}

/// Write a thread's attributes. For fair policies `runtime` = 0 means "no custom slice" (the
/// kernel's default); a non-zero value is clamped by the kernel to 0.1–100 ms. `uclamp.min` is
/// written only with [`SCHED_FLAG_UTIL_CLAMP_MIN`] in `flags` (and a `uclamp`); for a fair
/// thread a `min` of 0 is written as "back to the default" (0 too, but not pinned as the
/// thread's own, so a later switch to real time gets the RT default again); `max` is never
/// written.
pub fn set(tid: i32, a: &SchedAttr) -> io::Result<()> {
    // Nice, slice and clamps, no deadline parameters: the fair class and sched_ext.
    let fair = a.is_fair() || a.is_ext();
    let mut flags = a.flags & !(SCHED_FLAG_UTIL_CLAMP_MIN | SCHED_FLAG_UTIL_CLAMP_MAX);
    let mut util_min = 0;
    if let (true, Some(u)) = (a.flags & SCHED_FLAG_UTIL_CLAMP_MIN != 0, a.uclamp) {
        flags |= SCHED_FLAG_UTIL_CLAMP_MIN;
        util_min = if fair && u.min == 0 {
            UCLAMP_RESET
        } else {
            u.min
        };
    }
    let raw = RawSchedAttr {
        size: std::mem::size_of::<RawSchedAttr>() as u32,
        sched_policy: a.policy,
        sched_flags: flags,
        sched_nice: a.nice,
        sched_priority: a.priority,
        // Only fair (slice) and deadline tasks have a runtime.
        sched_runtime: if a.is_rt() { 0 } else { a.runtime },
        sched_deadline: if fair { 0 } else { a.deadline },
        sched_period: if fair { 0 } else { a.period },
        sched_util_min: util_min,
        sched_util_max: 0,
    };
    syscall_set(tid, &raw)
}

/// [`set`], but a fair thread made real-time passes through the fair class at `a.nice` first.
///
/// The fair class keeps a thread's lag in virtual time, in units of its weight (nice), and
/// rescales it only when the weight changes *inside* the fair class (`reweight_entity`). A nice
/// written while the thread is real-time is stored raw (`set_load_weight`: the rt class has no
/// `reweight_task`), so a thread raised from nice 0 or 10 straight to SCHED_FIFO and later
/// demoted to nice −20 comes back with its old lag read at 86–800× the weight, which
/// `place_entity` inflates further: the demoted thread waited behind nice-0 hogs. Measured on
/// Linux 6.18 by `tests/lag.rs` (one CPU, three nice-0 hogs, a busy nice-10 thread made FIFO
/// for 2 ms, then nice −20 fair): with the direct write it ran 0 ms of the next 100 ms in 4 of
/// 8 trials, through the fair class 88–96 ms in every trial; and a `perf` trace of the
/// harness's `painting` showed the UI thread runnable at nice −20 for 156 ms after the rt
/// lever's guard demoted it (docs/mechanisms.md). With the nice set first, the
/// demotion to `a.nice` changes no weight and the lag stays true.
pub fn set_keeping_lag(tid: i32, a: &SchedAttr) -> io::Result<()> {
    if a.is_rt() {
        let now = get(tid)?;
        if now.is_fair() && now.nice != a.nice {
            set(
                tid,
                &SchedAttr {
                    nice: a.nice,
                    flags: now.flags & !(SCHED_FLAG_UTIL_CLAMP_MIN | SCHED_FLAG_UTIL_CLAMP_MAX),
                    ..now
                },
            )?;
        }
    }
    set(tid, a)
}

fn syscall_set(tid: i32, raw: &RawSchedAttr) -> io::Result<()> {
    // SAFETY: `raw` is a valid, fully initialised sched_attr that outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid as libc::pid_t,
            raw as *const RawSchedAttr,
            0 as libc::c_uint,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The attributes to write back to restore `original`: its fair-class slice is written as 0
/// (no custom slice) when it equals the kernel's default slice, so that restoring does not
/// turn a default slice into a pinned custom one; its `uclamp.min`, where it was read, is
/// written back too (see [`set`] for how a default 0 is written).
pub fn restorable(original: &SchedAttr, default_slice: u64) -> SchedAttr {
    let mut a = *original;
    if a.is_fair() && a.runtime == default_slice {
        a.runtime = 0;
    }
    if a.is_fair() && a.uclamp.is_some() {
        a.flags |= SCHED_FLAG_UTIL_CLAMP_MIN;
    }
    a
}

/// The `uclamp` to write for a fair thread whose original is `original` when `want` is asked:
/// never below what the thread had (a boost only raises it), never above its own `max` (the
/// kernel refuses min > max). `None` where the kernel has no uclamp.
pub fn raised_uclamp(original: &SchedAttr, want: Option<u32>) -> Option<Uclamp> {
    let u = original.uclamp?;
    let min = want.map_or(u.min, |w| w.clamp(u.min, u.max.max(u.min)));
    Some(Uclamp { min, ..u })
}

/// Whether the kernel's view `now` still holds what uxsched `applied` (the coexistence check):
/// policy, nice and — if uxsched set one — the custom slice must match; for a real-time class,
/// policy and priority (the kernel reports neither nice nor slice for RT tasks: `get_params` in
/// kernel/sched/syscalls.c).
pub fn holds(now: &SchedAttr, applied: &SchedAttr) -> bool {
    if applied.is_rt() {
        return now.policy == applied.policy && now.priority == applied.priority;
    }
    now.policy == applied.policy
        && now.nice == applied.nice
        && (applied.runtime == 0 || now.runtime == applied.runtime)
        && (applied.flags & SCHED_FLAG_UTIL_CLAMP_MIN == 0
            || now.uclamp.map(|u| u.min) == applied.uclamp.map(|u| u.min))
}

/// Whether this kernel has utilisation clamping, probed once per process: `Err` says why not.
///
/// The probe asks the kernel to validate a clamp on the calling thread without changing it:
/// `sched_setattr` with SCHED_FLAG_KEEP_ALL | SCHED_FLAG_UTIL_CLAMP_MIN and `sched_util_min`
/// 1025, one above the scale. With CONFIG_UCLAMP_TASK, `uclamp_validate` refuses the value
/// (EINVAL) before anything is set or uclamp's static key is switched on; without it the same
/// call fails with EOPNOTSUPP. A `struct sched_attr` shorter than SCHED_ATTR_SIZE_VER1 from
/// `sched_getattr` (kernels before 5.3) has no clamp fields at all.
pub fn uclamp_support() -> Result<(), &'static str> {
    static SUPPORT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    SUPPORT
        .get_or_init(probe_uclamp)
        .as_ref()
        .map(|_| ())
        .map_err(|s| s.as_str())
}

fn probe_uclamp() -> Result<(), String> {
    let mut raw = RawSchedAttr::default();
    let size = std::mem::size_of::<RawSchedAttr>() as libc::c_uint;
    // SAFETY: `raw` is a valid, writable sched_attr of `size` bytes for the call's duration.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut raw as *mut RawSchedAttr,
            size,
            0,
        )
    };
    if r != 0 {
        return Err(format!(
            "sched_getattr failed: {}",
            io::Error::last_os_error()
        ));
    }
    if raw.size < SCHED_ATTR_SIZE_VER1 {
        return Err(format!(
            "this kernel's struct sched_attr has {} bytes, no utilisation clamps (Linux < 5.3)",
            raw.size
        ));
    }
    let probe = RawSchedAttr {
        size: SCHED_ATTR_SIZE_VER1,
        sched_flags: SCHED_FLAG_KEEP_ALL | SCHED_FLAG_UTIL_CLAMP_MIN,
        sched_util_min: UCLAMP_SCALE + 1,
        ..RawSchedAttr::default()
    };
    match syscall_set(0, &probe).map_err(|e| e.raw_os_error()) {
        Err(Some(libc::EINVAL)) => Ok(()),
        Err(Some(libc::EOPNOTSUPP)) => Err("this kernel has no utilisation clamping \
                                            (CONFIG_UCLAMP_TASK is not set)"
            .into()),
        Err(e) => Err(format!(
            "the uclamp probe (sched_setattr with SCHED_FLAG_UTIL_CLAMP_MIN) failed with {}",
            io::Error::from_raw_os_error(e.unwrap_or(0))
        )),
        Ok(()) => Err(
            "the kernel accepted an out-of-range uclamp.min (1025): its clamps \
                       cannot be trusted"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_matches_the_kernels_version_1_layout() {
        assert_eq!(std::mem::size_of::<RawSchedAttr>(), 56);
    }

    #[test]
    fn reads_this_thread() {
        let a = get(0).unwrap();
        // SCHED_IDLE when the tests run at idle priority (`chrt -i 0`): still the fair class.
        assert!(a.is_fair() || a.policy == SCHED_IDLE, "{a:?}");
        assert!(!a.is_rt());
        assert!(a.runtime > 0, "fair tasks report their slice");
    }

    #[test]
    fn default_slice_is_restored_as_no_custom_slice() {
        let orig = SchedAttr {
            policy: SCHED_OTHER,
            flags: 0,
            nice: 3,
            priority: 0,
            runtime: 2_800_000,
            deadline: 0,
            period: 0,
            uclamp: None,
        };
        assert_eq!(restorable(&orig, 2_800_000).runtime, 0);
        assert_eq!(restorable(&orig, 3_000_000).runtime, 2_800_000);
        let mut now = orig;
        assert!(holds(&now, &SchedAttr { runtime: 0, ..orig }));
        now.nice = 4;
        assert!(!holds(&now, &orig));
    }

    #[test]
    fn uclamp_is_written_back_only_where_it_was_read_and_checked_only_where_written() {
        let plain = SchedAttr::ordinary();
        assert_eq!(restorable(&plain, 0).flags & SCHED_FLAG_UTIL_CLAMP_MIN, 0);
        assert_eq!(
            raised_uclamp(&plain, Some(300)),
            None,
            "no uclamp: nothing to raise"
        );
        let orig = SchedAttr {
            uclamp: Some(Uclamp { min: 0, max: 1024 }),
            ..plain
        };
        let back = restorable(&orig, 0);
        assert_ne!(back.flags & SCHED_FLAG_UTIL_CLAMP_MIN, 0);
        assert_eq!(back.uclamp, orig.uclamp);
        // Raised, never lowered, never above the thread's own max.
        let up = |o: &SchedAttr, w| raised_uclamp(o, w).map(|u| u.min);
        assert_eq!(up(&orig, Some(300)), Some(300));
        assert_eq!(up(&orig, None), Some(0));
        let capped = SchedAttr {
            uclamp: Some(Uclamp { min: 100, max: 200 }),
            ..plain
        };
        assert_eq!(up(&capped, Some(300)), Some(200));
        assert_eq!(up(&capped, Some(50)), Some(100));
        // `holds` looks at uclamp.min only when uxsched wrote it.
        let applied = SchedAttr {
            flags: SCHED_FLAG_UTIL_CLAMP_MIN,
            uclamp: raised_uclamp(&orig, Some(300)),
            ..orig
        };
        assert!(holds(&applied, &applied));
        assert!(!holds(&orig, &applied), "someone put uclamp.min back");
        assert!(holds(&applied, &orig), "not written: not checked");
    }

    #[test]
    fn a_journal_value_from_before_uclamp_loads_without_clamps() {
        let old = r#"{"policy":0,"flags":1,"nice":-5,"priority":0,"runtime":1000000,"deadline":0,"period":0}"#;
        let a: SchedAttr = serde_json::from_str(old).unwrap();
        assert_eq!((a.nice, a.uclamp), (-5, None));
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            old,
            "and is written the same way"
        );
        let new = SchedAttr {
            uclamp: Some(Uclamp { min: 7, max: 1000 }),
            ..a
        };
        let back: SchedAttr = serde_json::from_str(&serde_json::to_string(&new).unwrap()).unwrap();
        assert_eq!(back, new);
    }

    #[test]
    fn the_uclamp_probe_agrees_with_the_kernels_sysctl() {
        // The sysctl exists exactly when the kernel is built with CONFIG_UCLAMP_TASK
        // (kernel/sched/core.c); the probe must not claim otherwise, either way.
        let sysctl = std::path::Path::new("/proc/sys/kernel/sched_util_clamp_min").exists();
        match uclamp_support() {
            Ok(()) => assert!(
                sysctl,
                "probe found uclamp, the kernel has no uclamp sysctl"
            ),
            Err(why) => {
                assert!(!sysctl, "the kernel has uclamp, the probe says: {why}");
                assert!(why.contains("CONFIG_UCLAMP_TASK"), "{why}");
            }
        }
        // And the probe changed nothing: this thread reads the same as before and as ever.
        let a = get(0).unwrap();
        assert_eq!(a.uclamp.is_some(), sysctl, "{a:?}");
    }

    #[test]
    fn errors_name_the_missing_thread() {
        // Pid max is below 2^22 on Linux; this tid cannot exist.
        let e = get(1 << 30).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH));
    }
}
