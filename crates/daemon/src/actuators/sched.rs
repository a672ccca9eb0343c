//! Scheduling attributes of one thread through `sched_getattr(2)` / `sched_setattr(2)`.
//!
//! glibc and the `libc` crate do not wrap these two system calls, so the kernel's
//! `struct sched_attr` (include/uapi/linux/sched/types.h, SCHED_ATTR_SIZE_VER1 = 56 bytes) is
//! declared here and the calls go through `syscall(2)`. One call sets nice, policy and — on
//! EEVDF kernels ≥ 6.12 — the custom slice (`sched_runtime` of a fair task) together.

use super::{Actuator, Key};
use crate::identity::TaskId;
use crate::journal::{Kind, Value};
use serde::{Deserialize, Serialize};
use std::io;

pub const SCHED_OTHER: u32 = 0;
pub const SCHED_FIFO: u32 = 1;
pub const SCHED_RR: u32 = 2;
pub const SCHED_BATCH: u32 = 3;
pub const SCHED_IDLE: u32 = 5;
pub const SCHED_DEADLINE: u32 = 6;

/// Children of a boosted thread start at nice 0, SCHED_OTHER and the default slice, so a boost
/// never leaks into processes or threads it spawns.
pub const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

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
        }
    }

    /// SCHED_FIFO or SCHED_RR.
    pub fn is_rt(&self) -> bool {
        matches!(self.policy, SCHED_FIFO | SCHED_RR)
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
    Ok(SchedAttr {
        policy: raw.sched_policy,
        flags: raw.sched_flags,
        nice: raw.sched_nice,
        priority: raw.sched_priority,
        runtime: raw.sched_runtime,
        deadline: raw.sched_deadline,
        period: raw.sched_period,
    })
}

/// Write a thread's attributes. For fair policies `runtime` = 0 means "no custom slice" (the
/// kernel's default); a non-zero value is clamped by the kernel to 0.1–100 ms.
pub fn set(tid: i32, a: &SchedAttr) -> io::Result<()> {
    let fair = a.is_fair();
    let raw = RawSchedAttr {
        size: std::mem::size_of::<RawSchedAttr>() as u32,
        sched_policy: a.policy,
        sched_flags: a.flags,
        sched_nice: a.nice,
        sched_priority: a.priority,
        // Only fair (slice) and deadline tasks have a runtime.
        sched_runtime: if a.is_rt() { 0 } else { a.runtime },
        sched_deadline: if fair { 0 } else { a.deadline },
        sched_period: if fair { 0 } else { a.period },
        sched_util_min: 0,
        sched_util_max: 0,
    };
    // SAFETY: `raw` is a valid, fully initialised sched_attr that outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid as libc::pid_t,
            &raw as *const RawSchedAttr,
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
/// turn a default slice into a pinned custom one.
pub fn restorable(original: &SchedAttr, default_slice: u64) -> SchedAttr {
    let mut a = *original;
    if a.is_fair() && a.runtime == default_slice {
        a.runtime = 0;
    }
    a
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
}

/// Scheduling attributes (nice, policy, custom slice) as an [`Actuator`]: one thread each.
pub struct Sched;

impl Actuator for Sched {
    fn kind(&self) -> Kind {
        Kind::Sched
    }

    fn key(&self, task: &TaskId) -> io::Result<Option<Key>> {
        Ok(Some(Key::Thread(*task)))
    }

    fn reach(&self, key: &Key) -> Option<i32> {
        super::reach_task(key)
    }

    fn read(&self, via: i32) -> io::Result<Value> {
        get(via).map(Value::Sched)
    }

    fn write(&self, via: i32, value: &Value) -> io::Result<()> {
        match value {
            Value::Sched(a) => set(via, a),
            other => Err(super::wrong_kind(Kind::Sched, other)),
        }
    }

    fn holds(&self, now: &Value, applied: &Value) -> bool {
        matches!((now, applied), (Value::Sched(n), Value::Sched(a)) if holds(n, a))
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
        };
        assert_eq!(restorable(&orig, 2_800_000).runtime, 0);
        assert_eq!(restorable(&orig, 3_000_000).runtime, 2_800_000);
        let mut now = orig;
        assert!(holds(&now, &SchedAttr { runtime: 0, ..orig }));
        now.nice = 4;
        assert!(!holds(&now, &orig));
    }

    #[test]
    fn errors_name_the_missing_thread() {
        // Pid max is below 2^22 on Linux; this tid cannot exist.
        let e = get(1 << 30).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH));
    }
}
