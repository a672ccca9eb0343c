//! What the tracker reads from /proc: threads and their names (to find input and display
//! threads already running, and the app's threads when it comes to the front) and an app's
//! identity (executable and arguments).

use crate::wire::{Task, USER_HZ};
use std::fs;
use std::path::Path;

const PF_KTHREAD: u64 = 0x0020_0000;

/// The thread `tid` of process `tgid` as the kernel's events describe it; `None` once gone.
pub fn task(tgid: u32, tid: u32) -> Option<Task> {
    let f = uxsched_os::task::Fields::read(format!("/proc/{tgid}/task/{tid}/stat")).ok()?;
    let flags: u64 = f.num(9)?;
    let start: u64 = f.num(22)?;
    let comm = f.comm().to_owned();
    Some(Task {
        tid,
        tgid,
        start_ns: start * (1_000_000_000 / USER_HZ),
        comm,
        kthread: flags & PF_KTHREAD != 0,
    })
}

fn numbers(dir: &Path) -> Vec<u32> {
    fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The live threads of process `tgid`.
pub fn threads(tgid: u32) -> Vec<Task> {
    numbers(Path::new(&format!("/proc/{tgid}/task")))
        .into_iter()
        .filter_map(|tid| task(tgid, tid))
        .collect()
}

/// Every live thread of the machine (a few hundred to a few thousand reads; done at start).
pub fn all_threads() -> Vec<Task> {
    numbers(Path::new("/proc"))
        .into_iter()
        .flat_map(threads)
        .collect()
}

/// The executable and the arguments after argv[0] of process `pid`.
pub fn identity(pid: u32) -> std::io::Result<(String, Vec<String>)> {
    let exe = fs::read_link(format!("/proc/{pid}/exe"))?;
    let raw = fs::read(format!("/proc/{pid}/cmdline"))?;
    let args = raw
        .split(|&b| b == 0)
        .skip(1)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    Ok((exe.to_string_lossy().into_owned(), args))
}

/// CLOCK_MONOTONIC in ns, the clock of `bpf_ktime_get_ns`.
pub fn monotonic_ns() -> u64 {
    uxsched_os::clock::ns(libc::CLOCK_MONOTONIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_threads_and_identity() {
        let me = std::process::id();
        let t = task(me, me).expect("own main thread");
        assert_eq!((t.tid, t.tgid, t.kthread), (me, me, false));
        assert!(threads(me).iter().any(|t| t.tid == me));
        let (exe, _) = identity(me).unwrap();
        assert!(exe.contains("uxsched_tracker"), "{exe}");
        // kthreadd (pid 2) is a kernel thread.
        if let Some(k) = task(2, 2) {
            assert!(k.kthread, "{k:?}");
        }
    }
}
