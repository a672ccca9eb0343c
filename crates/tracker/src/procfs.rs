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

/// The real uid of process `pid` (`/proc/<pid>/status`, not the directory's owner: a
/// non-dumpable process, like a sandboxed renderer, shows as root's there).
pub fn uid(pid: u32) -> Option<u32> {
    let text = uxsched_os::procfs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// The parent of process `pid` (`/proc/<pid>/stat` field 4).
fn parent(pid: u32) -> Option<u32> {
    uxsched_os::task::Fields::read(format!("/proc/{pid}/stat"))
        .ok()?
        .num(4)
}

/// The process family of `root` (docs/tracker.md, "Pipelines"): its live descendants that run
/// as the same user, through any number of generations (a browser → zygote → zygote →
/// renderer). A descendant under another uid (a set-uid helper) and its own children are
/// left out. `root` itself is not listed.
pub fn family(root: u32) -> Vec<u32> {
    let Some(user) = uid(root) else {
        return Vec::new();
    };
    let mut children: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    for pid in numbers(Path::new("/proc")) {
        if let Some(pp) = parent(pid) {
            children.entry(pp).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or_default() {
            if uid(c) == Some(user) {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out
}

/// What a process of an app's family is for, stable across launches (the learning store's
/// context keys on it instead of a pid, seed 003 §6): the executable's file name and the
/// `--type=` argument where there is one (Chromium's and Electron's `renderer`, `gpu-process`,
/// `utility`, with `--utility-sub-type=`), else the name the process gave itself when it differs
/// from the executable's (a forked helper that renamed itself). A zygote's child rewrites its
/// command line in place, one space-separated string, so arguments are split on spaces too.
pub fn role(pid: u32) -> Option<String> {
    let exe = fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let exe = exe.file_name()?.to_string_lossy().into_owned();
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let args: Vec<&str> = text.split(['\0', ' ']).filter(|a| !a.is_empty()).collect();
    let kind = |key: &str| args.iter().find_map(|a| a.strip_prefix(key));
    if let Some(t) = kind("--type=") {
        return Some(match kind("--utility-sub-type=") {
            Some(sub) => format!("{exe} --type={t} --utility-sub-type={sub}"),
            None => format!("{exe} --type={t}"),
        });
    }
    let comm = task(pid, pid)?.comm;
    Some(if exe.starts_with(&comm) {
        exe
    } else {
        format!("{exe} {comm}")
    })
}

/// Whether process `pid` serves a FUSE mount: it holds `/dev/fuse` open (a daemon mounted by
/// root opens it itself; one mounted by a user through `fusermount3` is handed the descriptor).
/// A process gone or unreadable is not one.
pub fn serves_fuse(pid: u32) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    (fds.flatten()).any(|fd| fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == "/dev/fuse"))
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
        // SAFETY: getuid has no preconditions.
        assert_eq!(uid(me), Some(unsafe { libc::getuid() }));
        assert!(
            role(me).unwrap().starts_with("uxsched_tracker"),
            "{:?}",
            role(me)
        );
        // kthreadd (pid 2) is a kernel thread.
        if let Some(k) = task(2, 2) {
            assert!(k.kthread, "{k:?}");
        }
    }

    #[test]
    fn family_lists_descendants_of_the_same_user() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let fam = family(std::process::id());
        let role_of_child = role(child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(fam.contains(&child.id()), "{fam:?}");
        assert_eq!(role_of_child.as_deref(), Some("sleep"));
    }
}
