//! Thin, safe wrappers over the kernel interfaces the harness touches: `/proc` reads, nice,
//! scheduling policy, RLIMIT_RTTIME, ioprio, sessions and the autogroup sysctl. Every setter
//! returns the `io::Error` with the thread id in its context so a failure says where it happened.

use anyhow::{Context, Result};
use std::fs;
use std::io;
use uxsched_os::task::Fields;

/// A thread's scheduling state as `/proc/<pid>/task/<tid>/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadSched {
    pub nice: i32,
    /// `SCHED_OTHER` 0, `SCHED_FIFO` 1, `SCHED_RR` 2, `SCHED_BATCH` 3, `SCHED_IDLE` 5.
    pub policy: i32,
    pub rt_priority: i32,
}

/// A `stat` file's fields (the one parser, `uxsched_os::task::Fields`).
fn stat_fields(path: &str) -> io::Result<Fields> {
    Fields::read(path)
}

/// Field `n` of proc(5)'s stat numbering, or an error naming it.
fn stat_field(fields: &Fields, n: usize) -> io::Result<i64> {
    fields
        .num(n)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("stat field {n}")))
}

/// The threads of a process, or an empty list when it has exited (the daemon's reader).
pub use uxsched_os::identity::threads;

/// A thread's name (`comm`), as models set it with `PR_SET_NAME`.
pub fn thread_name(pid: i32, tid: i32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_owned())
}

pub fn thread_sched(pid: i32, tid: i32) -> io::Result<ThreadSched> {
    let f = stat_fields(&(format!("/proc/{pid}/task/{tid}/stat")))?;
    Ok(ThreadSched {
        nice: stat_field(&f, 19)? as i32,
        rt_priority: stat_field(&f, 40)? as i32,
        policy: stat_field(&f, 41)? as i32,
    })
}

/// The session id of a process (`stat` field 6), `None` once it has exited.
pub fn session_of(pid: i32) -> Option<i32> {
    let f = stat_fields(&(format!("/proc/{pid}/stat"))).ok()?;
    stat_field(&f, 6).ok().map(|s| s as i32)
}

/// The process group and session ids of a live process (`stat` fields 5 and 6); `None` for a
/// zombie (dead, waiting for its reaper) or a process that is gone.
fn group_and_session(pid: i32) -> Option<(i32, i32)> {
    let f = stat_fields(&(format!("/proc/{pid}/stat"))).ok()?;
    if f.state() == 'Z' {
        return None;
    }
    let pgrp = stat_field(&f, 5).ok()? as i32;
    Some((pgrp, stat_field(&f, 6).ok()? as i32))
}

/// Every live (not zombie) process of the load led by `leader`: its session when the load has one of its
/// own (`setsid`), else its process group (a load started in the app's session, where the
/// session also holds the app and the harness).
pub fn load_members(leader: i32) -> Vec<i32> {
    live_pids()
        .into_iter()
        .filter(|&pid| group_and_session(pid).is_some_and(|(g, s)| g == leader || s == leader))
        .collect()
}

/// Every live process whose session id is `sid`.
pub fn session_members(sid: i32) -> Vec<i32> {
    live_pids()
        .into_iter()
        .filter(|&pid| session_of(pid) == Some(sid))
        .collect()
}

fn live_pids() -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

/// The parent of a process (`stat` field 4), `None` once it has exited.
fn parent_of(pid: i32) -> Option<i32> {
    let f = stat_fields(&(format!("/proc/{pid}/stat"))).ok()?;
    stat_field(&f, 4).ok().map(|p| p as i32)
}

/// Every descendant of `root` (`uxsched_os::process_tree`), found before anything is killed (a
/// killed parent's children are re-parented to init and the link is lost).
fn descendants(root: i32) -> Vec<i32> {
    let mut all = uxsched_os::process_tree::with_descendants(root);
    all.remove(&root);
    all.into_iter().collect()
}

/// SIGKILL a whole load: its process group, every member of its session (if it leads one; see
/// [`load_members`]), and every descendant
/// of its leader — some tools (fio's job processes) start sessions of their own.
pub fn kill_session(sid: i32) {
    let mut doomed = descendants(sid);
    doomed.extend(load_members(sid));
    // SAFETY: plain syscalls on integers; errors (already gone) are expected and ignored.
    unsafe { libc::killpg(sid, libc::SIGKILL) };
    for &pid in &doomed {
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    // A process in uninterruptible I/O (fio) dies only when its I/O completes: wait, bounded, so
    // the next run does not start beside the remains of this one.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while doomed.iter().any(|&pid| alive(pid)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The process exists and is not a zombie.
fn alive(pid: i32) -> bool {
    Fields::read(format!("/proc/{pid}/stat")).is_ok_and(|f| f.state() != 'Z')
}

/// Send `sig` to a process (a negative `pid` signals the process group `-pid`).
pub fn signal(pid: i32, sig: i32) {
    // SAFETY: a plain syscall; ESRCH (already gone) is fine.
    unsafe { libc::kill(pid, sig) };
}

fn check(ret: libc::c_long, what: impl FnOnce() -> String) -> Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error()).with_context(what)
    } else {
        Ok(())
    }
}

/// Set one thread's nice value (Linux applies `PRIO_PROCESS` to a single thread id).
pub fn set_nice(tid: i32, nice: i32) -> Result<()> {
    // SAFETY: plain syscall with integer arguments.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    check(r as libc::c_long, || {
        format!("setpriority(tid {tid}, nice {nice})")
    })
}

pub const SCHED_OTHER: i32 = libc::SCHED_OTHER;
pub const SCHED_FIFO: i32 = libc::SCHED_FIFO;
/// Children of a boosted thread start back at SCHED_OTHER (rtkit's rule).
pub const SCHED_RESET_ON_FORK: i32 = 0x4000_0000;

pub fn set_policy(tid: i32, policy: i32, rt_priority: i32) -> Result<()> {
    let param = libc::sched_param {
        sched_priority: rt_priority,
    };
    // SAFETY: `param` outlives the call; integer arguments.
    let r = unsafe { libc::sched_setscheduler(tid, policy, &param) };
    check(r as libc::c_long, || {
        format!("sched_setscheduler(tid {tid}, policy {policy}, prio {rt_priority})")
    })
}

/// A process's RLIMIT_RTTIME as (soft, hard), in µs of RT CPU time without blocking.
pub fn rttime_limit(pid: i32) -> Result<(u64, u64)> {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `old` is a valid out-pointer; a null new value means "read only".
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_RTTIME, std::ptr::null(), &mut old) };
    check(r as libc::c_long, || {
        format!("prlimit(pid {pid}, RLIMIT_RTTIME)")
    })?;
    Ok((old.rlim_cur, old.rlim_max))
}

pub fn set_rttime_limit(pid: i32, soft: u64, hard: u64) -> Result<()> {
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `lim` is valid for the call; no old value requested.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_RTTIME, &lim, std::ptr::null_mut()) };
    check(r as libc::c_long, || {
        format!("prlimit(pid {pid}, RLIMIT_RTTIME)")
    })
}

/// A thread's I/O priority (`uxsched_os::ioprio`, with the tid in the error).
pub fn ioprio_get(tid: i32) -> Result<u16> {
    uxsched_os::ioprio::get(tid).with_context(|| format!("ioprio_get(tid {tid})"))
}

pub fn ioprio_set(tid: i32, value: u16) -> Result<()> {
    uxsched_os::ioprio::set(tid, value)
        .with_context(|| format!("ioprio_set(tid {tid}, {value:#x})"))
}

pub const AUTOGROUP_SYSCTL: &str = "/proc/sys/kernel/sched_autogroup_enabled";

/// The autogroup switch, `None` on kernels built without CONFIG_SCHED_AUTOGROUP.
pub fn autogroup() -> Option<bool> {
    fs::read_to_string(AUTOGROUP_SYSCTL)
        .ok()
        .map(|s| s.trim() == "1")
}

pub fn set_autogroup(on: bool) -> Result<()> {
    fs::write(AUTOGROUP_SYSCTL, if on { "1" } else { "0" })
        .with_context(|| format!("writing {AUTOGROUP_SYSCTL} (needs root)"))
}

pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Monotonic clock in nanoseconds (comparable across processes, unlike `Instant`).
pub fn now_ns() -> u64 {
    uxsched_os::clock::ns(libc::CLOCK_MONOTONIC)
}

/// CPU time consumed by the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    uxsched_os::clock::ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Sleep until an absolute CLOCK_MONOTONIC time (drift-free periodic loops).
pub fn sleep_until_ns(deadline: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is valid; EINTR is retried.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

/// Name the calling thread so modes can find UI/render threads by `comm`, as Android does.
pub fn name_this_thread(name: &str) {
    let mut buf = [0u8; 16];
    let n = name.len().min(15);
    buf[..n].copy_from_slice(&name.as_bytes()[..n]);
    // SAFETY: `buf` is NUL-terminated and lives through the call.
    unsafe { libc::prctl(libc::PR_SET_NAME, buf.as_ptr()) };
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub fn gettid() -> i32 {
    // SAFETY: gettid cannot fail.
    unsafe { libc::gettid() }
}

/// SIGKILL a process and every descendant (found before anything is killed), waiting a
/// bounded time until they are gone: a program started in the caller's own session, whose
/// session therefore cannot be killed as a whole.
pub fn kill_tree(pid: i32) {
    let mut doomed = descendants(pid);
    doomed.push(pid);
    for &p in &doomed {
        // SAFETY: a plain syscall; ESRCH (already gone) is fine.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while doomed.iter().any(|&p| alive(p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The live children of a process.
pub fn children(pid: i32) -> Vec<i32> {
    live_pids()
        .into_iter()
        .filter(|&p| parent_of(p) == Some(pid))
        .collect()
}

/// A live process's CPU time so far (user + system, all its threads), ns, from
/// `/proc/<pid>/stat` fields 14–15 in clock ticks.
pub fn process_cpu_ns(pid: i32) -> Option<u64> {
    cpu_ns_in(&format!("/proc/{pid}/stat"))
}

/// User plus system CPU time of thread `tid` of process `pid` so far, ns.
pub fn task_cpu_ns(pid: i32, tid: i32) -> Option<u64> {
    cpu_ns_in(&format!("/proc/{pid}/task/{tid}/stat"))
}

/// User plus system CPU time of processes `pids` so far, with what each already reaped of its
/// children (`cutime`, `cstime`), ns: the difference of two readings is what the tree used in
/// between, a child that exited and was waited for included (a browser's zygote reaps its
/// renderers). A process gone by the reading counts nothing.
pub fn tree_cpu_ns(pids: &[i32]) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    pids.iter()
        .filter_map(|p| {
            let f = Fields::read(format!("/proc/{p}/stat")).ok()?;
            Some((14..=17).filter_map(|i| f.num::<u64>(i)).sum::<u64>())
        })
        .sum::<u64>()
        * 1_000_000_000
        / hz
}

/// Fields 14 and 15 (utime, stime) of a `stat` file, ns.
fn cpu_ns_in(path: &str) -> Option<u64> {
    let f = Fields::read(path).ok()?;
    let ticks: u64 = f.num::<u64>(14)? + f.num::<u64>(15)?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(ticks * 1_000_000_000 / hz)
}

/// User plus system time of a `rusage`.
pub fn cpu_time(usage: &libc::rusage) -> std::time::Duration {
    let tv = |t: libc::timeval| {
        std::time::Duration::from_secs(t.tv_sec as u64)
            + std::time::Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Reap `pid`, a child of this process, if it has exited, without blocking: the CPU time it
/// used, user and system, together with the descendants it waited for (`wait4`'s rusage), or
/// `None` while it runs. A load's leader waits for its workers, so this is the whole load's.
pub fn try_reap(pid: i32) -> io::Result<Option<std::time::Duration>> {
    let mut status = 0;
    // SAFETY: `usage` is a valid out-pointer, zero-initialised plain data.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child with valid out-pointers.
    match unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) } {
        0 => Ok(None),
        r if r < 0 => Err(io::Error::last_os_error()),
        _ => Ok(Some(cpu_time(&usage))),
    }
}

/// A memory figure of a live process from `/proc/<pid>/status`, KiB (`field`: `VmRSS`,
/// `VmHWM` — the peak resident set — …).
pub fn status_kib(pid: i32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Voluntary + involuntary context switches of all threads of a process so far (0 once it
/// has exited).
pub fn context_switches(pid: i32) -> u64 {
    threads(pid)
        .into_iter()
        .filter_map(|tid| fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::zombie_processes, reason = "try_reap is what reaps it")]
    fn reaping_a_child_counts_the_cpu_of_the_workers_it_waited_for() {
        // The shell busy-loops (1–2 s) in a child it waits for: its own time is nearly nil.
        let child = std::process::Command::new("sh")
            .args([
                "-c",
                "(end=$(($(date +%s) + 2)); while [ $(date +%s) -lt $end ]; do :; done) & wait",
            ])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let cpu = loop {
            if let Some(cpu) = try_reap(pid).unwrap() {
                break cpu;
            }
            assert!(std::time::Instant::now() < deadline, "sh did not finish");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(cpu > std::time::Duration::from_millis(100), "{cpu:?}");
        assert!(try_reap(pid).is_err(), "reaped once");
    }

    #[test]
    fn reads_own_cpu_time_and_peak_rss() {
        let me = std::process::id() as i32;
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(30) {
            std::hint::spin_loop();
        }
        assert!(process_cpu_ns(me).unwrap() >= 10_000_000, "spun 30 ms");
        assert!(status_kib(me, "VmHWM").unwrap() > 0);
        assert_eq!(process_cpu_ns(i32::MAX), None);
    }

    #[test]
    fn reads_own_thread_state() {
        let pid = std::process::id() as i32;
        assert!(threads(pid).contains(&gettid()));
        let s = thread_sched(pid, gettid()).unwrap();
        assert!((-20..=19).contains(&s.nice));
        assert_eq!(session_of(pid).unwrap(), unsafe { libc::getsid(0) });
    }

    #[test]
    fn ioprio_of_this_thread_is_set_and_put_back() {
        use uxsched_os::ioprio::{encode, CLASS_BE};
        let tid = gettid();
        let old = ioprio_get(tid).unwrap();
        ioprio_set(tid, encode(CLASS_BE, 7)).unwrap();
        assert_eq!(ioprio_get(tid).unwrap(), 0x4007);
        ioprio_set(tid, old).unwrap();
        assert_eq!(ioprio_get(tid).unwrap(), old);
    }
}
