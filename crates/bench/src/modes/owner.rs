//! RLIMIT_RTTIME of another user's process. `prlimit(2)` on a process of another user needs
//! CAP_SYS_RESOURCE, which containers and this development VM drop from root; without it the
//! kernel still lets a caller whose *real* uid and gid are the target's (`check_prlimit_permission`).
//! So for a process of another user (the browser and its helpers, run as `uxsched-bench`) the
//! call is made from a short-lived thread that takes the target's ids as its real ids only —
//! raw `setresgid`/`setresuid` change the calling thread alone (glibc's wrappers would change
//! every thread), the effective ids stay root and keep their capabilities — and then ends.

use crate::sys;
use anyhow::{Context, Result};

/// The process's RLIMIT_RTTIME (soft, hard).
pub(super) fn rttime_limit(pid: i32) -> Result<(u64, u64)> {
    match sys::rttime_limit(pid) {
        Err(e) if is_eperm(&e) => as_owner(pid, || sys::rttime_limit(pid)),
        other => other,
    }
}

/// Set the process's RLIMIT_RTTIME (the hard limit is never raised: see `Changes`).
pub(super) fn set_rttime_limit(pid: i32, soft: u64, hard: u64) -> Result<()> {
    match sys::set_rttime_limit(pid, soft, hard) {
        Err(e) if is_eperm(&e) => as_owner(pid, || sys::set_rttime_limit(pid, soft, hard)),
        other => other,
    }
}

fn is_eperm(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .and_then(|io| io.raw_os_error())
        == Some(libc::EPERM)
}

/// Real uid and gid of `pid` (`/proc/<pid>/status`: the first of the `Uid:`/`Gid:` values).
fn owner(pid: i32) -> Result<(u32, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(anyhow::Error::from)
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let id = |key: &str| -> Option<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    match (id("Uid:"), id("Gid:")) {
        (Some(u), Some(g)) => Ok((u, g)),
        _ => anyhow::bail!("no Uid:/Gid: in /proc/{pid}/status"),
    }
}

/// Run `f` on a thread whose real uid and gid are those of `pid`'s owner.
fn as_owner<T: Send>(pid: i32, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    let (uid, gid) = owner(pid)?;
    std::thread::scope(|s| {
        s.spawn(move || {
            let keep = libc::c_long::from(-1i32);
            // SAFETY: raw syscalls with integer arguments; they change this thread's ids only,
            // and the thread ends right after `f`.
            let set = unsafe {
                libc::syscall(libc::SYS_setresgid, libc::c_long::from(gid), keep, keep) == 0
                    && libc::syscall(libc::SYS_setresuid, libc::c_long::from(uid), keep, keep) == 0
            };
            if !set {
                return Err(std::io::Error::last_os_error()).with_context(|| {
                    format!("taking uid {uid} gid {gid} as real ids to reach pid {pid}")
                });
            }
            f()
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the thread acting as pid {pid}'s owner panicked"))?
    })
}
