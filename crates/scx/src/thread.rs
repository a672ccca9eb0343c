//! Moving one thread to `SCHED_EXT` (or back) with `sched_setattr(2)`, keeping its nice and its
//! custom slice (`sched_runtime`, Linux 6.12), and naming a thread by (tid, start time).

use std::io;

/// `SCHED_EXT` (include/uapi/linux/sched.h, Linux >= 6.12).
pub const SCHED_EXT: u32 = 7;
/// `SCHED_NORMAL`.
pub const SCHED_NORMAL: u32 = 0;

/// `struct sched_attr` (SCHED_ATTR_SIZE_VER1).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SchedAttr {
    pub size: u32,
    pub policy: u32,
    pub flags: u64,
    pub nice: i32,
    pub priority: u32,
    /// For fair and ext threads since 6.12: the custom slice (0 = the default).
    pub runtime: u64,
    pub deadline: u64,
    pub period: u64,
    pub util_min: u32,
    pub util_max: u32,
}

/// The thread's current attributes (`sched_getattr`).
pub fn get(tid: i32) -> io::Result<SchedAttr> {
    let mut a = SchedAttr::default();
    let size = std::mem::size_of::<SchedAttr>() as u32;
    // SAFETY: the kernel writes at most `size` bytes into `a`, which is that large.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut a as *mut SchedAttr,
            size,
            0,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("sched_getattr({tid}): {e}"),
        ));
    }
    Ok(a)
}

/// Set policy (`SCHED_EXT`, `SCHED_NORMAL`, …), nice and custom slice of one thread.
pub fn set(tid: i32, policy: u32, nice: i32, runtime_ns: u64) -> io::Result<()> {
    let a = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy,
        nice,
        runtime: runtime_ns,
        ..SchedAttr::default()
    };
    // SAFETY: `a` is a valid sched_attr of the size it says.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &a as *const SchedAttr, 0) };
    if r != 0 {
        let e = io::Error::last_os_error();
        let hint = if e.raw_os_error() == Some(libc::EINVAL) && policy == SCHED_EXT {
            " (this kernel has no sched_ext: CONFIG_SCHED_CLASS_EXT, Linux >= 6.12)"
        } else {
            ""
        };
        return Err(io::Error::new(
            e.kind(),
            format!("sched_setattr({tid}, policy {policy}, nice {nice}, runtime {runtime_ns} ns): {e}{hint}"),
        ));
    }
    Ok(())
}

/// Move a thread to `policy` keeping its nice and custom slice (a fair thread's
/// `sched_getattr` reports the custom slice as its runtime).
pub fn switch(tid: i32, policy: u32) -> io::Result<()> {
    let a = get(tid)?;
    set(tid, policy, a.nice, a.runtime)
}

/// Field 22 of `/proc/TID/stat`: the thread's start time in clock ticks since boot — with the
/// tid, what names a thread across tid reuse (the boost map checks it).
pub fn start_ticks(tid: i32) -> io::Result<u64> {
    let path = format!("/proc/{tid}/stat");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    parse_start_ticks(&text)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("{path}: no field 22")))
}

fn parse_start_ticks(stat: &str) -> Option<u64> {
    // The comm (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_field_22_even_with_odd_names() {
        let stat = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 12345 1000 10";
        assert_eq!(parse_start_ticks(stat), Some(12345));
        let me = start_ticks(std::process::id() as i32).unwrap();
        assert!(me > 0);
    }

    #[test]
    fn this_threads_attributes_read_back() {
        let a = get(0).unwrap();
        // SAFETY: getpriority has no preconditions; for PRIO_PROCESS 0 it is this thread.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        assert_eq!(a.nice, nice, "{a:?}");
        assert!(a.size as usize >= 48);
    }
}
