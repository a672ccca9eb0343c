//! Moving one thread to `SCHED_EXT` (or back) with `sched_setattr(2)`, keeping its nice and its
//! custom slice (`sched_runtime`, Linux 6.12), and naming a thread by (tid, start time). The
//! system calls are `uxsched_os::sched`'s, the one `struct sched_attr` of the workspace.

use std::io;
pub use uxsched_os::sched::{SchedAttr, SCHED_EXT, SCHED_OTHER as SCHED_NORMAL};

/// The thread's current attributes (`sched_getattr`).
pub fn get(tid: i32) -> io::Result<SchedAttr> {
    uxsched_os::sched::get(tid)
        .map_err(|e| io::Error::new(e.kind(), format!("sched_getattr({tid}): {e}")))
}

/// Set policy (`SCHED_EXT`, `SCHED_NORMAL`, …), nice and custom slice of one thread.
pub fn set(tid: i32, policy: u32, nice: i32, runtime_ns: u64) -> io::Result<()> {
    let a = SchedAttr {
        policy,
        nice,
        runtime: runtime_ns,
        ..SchedAttr::ordinary()
    };
    uxsched_os::sched::set(tid, &a).map_err(|e| {
        let hint = if e.raw_os_error() == Some(libc::EINVAL) && policy == SCHED_EXT {
            " (this kernel has no sched_ext: CONFIG_SCHED_CLASS_EXT, Linux >= 6.12)"
        } else {
            ""
        };
        io::Error::new(
            e.kind(),
            format!("sched_setattr({tid}, policy {policy}, nice {nice}, runtime {runtime_ns} ns): {e}{hint}"),
        )
    })
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
    uxsched_os::task::stat(tid)
        .map(|s| s.start)
        .map_err(|e| io::Error::new(e.kind(), format!("/proc/{tid}/stat: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_threads_attributes_and_start_time_read_back() {
        let a = get(0).unwrap();
        // SAFETY: getpriority has no preconditions; for PRIO_PROCESS 0 it is this thread.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        assert_eq!(a.nice, nice, "{a:?}");
        assert!(start_ticks(std::process::id() as i32).unwrap() > 0);
        let e = get(1 << 30).unwrap_err().to_string();
        assert!(e.contains("sched_getattr(1073741824)"), "{e}");
    }
}
