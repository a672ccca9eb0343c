//! A thread's run-time alarm: the kernel signals a chosen thread each time a watched thread has
//! been on a CPU for another `period` — a perf software counter of the watched thread's task
//! clock (perf_event_open(2), `PERF_COUNT_SW_TASK_CLOCK` with `sample_period`), whose overflows
//! are delivered as a signal (`F_SETSIG`) to one thread (`F_SETOWN_EX`, `F_OWNER_TID`) instead
//! of through a ring buffer. The task clock advances only while the watched thread runs (its
//! hrtimer is started at switch-in and its remainder kept at switch-out, kernel/events/core.c
//! `perf_swevent_{start,cancel}_hrtimer`), so a thread that sleeps costs nothing and one that
//! runs is seen after `period` of running, whenever it began.
//!
//! The rt guard uses it to sleep while the threads it bounds are idle (`rt_guard.rs`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER0` (64 bytes; include/uapi/linux/
/// perf_event.h): every later field is zero, which the kernel accepts at this size.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// The bit field (`disabled`, `inherit`, `exclude_*`, …): all clear.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// fcntl(2) commands and `struct f_owner_ex` (include/uapi/asm-generic/fcntl.h), which the libc
/// crate does not export for glibc targets.
const F_SETSIG: libc::c_int = 10;
const F_SETOWN_EX: libc::c_int = 15;
const F_OWNER_TID: libc::c_int = 0;

#[repr(C)]
struct FOwnerEx {
    kind: libc::c_int,
    pid: libc::pid_t,
}

/// An armed alarm; closing it (drop) disarms it.
#[derive(Debug)]
pub struct RunAlarm {
    fd: OwnedFd,
}

impl RunAlarm {
    /// Signal `notify` (a thread of this process, which should block `signal` and read it
    /// with signalfd) with `signal` each time thread `tid` has run another `period_ns`.
    /// Needs the right to trace `tid` and CAP_PERFMON (or root) unless `perf_event_paranoid`
    /// allows less.
    pub fn arm(tid: i32, period_ns: u64, signal: i32, notify: i32) -> io::Result<RunAlarm> {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_TASK_CLOCK,
            sample_period: period_ns.max(1),
            ..Default::default()
        };
        // SAFETY: a valid attr for the call's duration; pid = tid, any CPU, no group.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                tid,
                -1 as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel just returned this descriptor and nobody else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let raw = fd.as_raw_fd();
        let owner = FOwnerEx {
            kind: F_OWNER_TID,
            pid: notify,
        };
        // SAFETY: fcntl on a descriptor we own, with a live `f_owner_ex` for F_SETOWN_EX.
        let failed = unsafe {
            libc::fcntl(raw, F_SETOWN_EX, &owner as *const FOwnerEx) < 0
                || libc::fcntl(raw, F_SETSIG, signal) < 0
                || libc::fcntl(raw, libc::F_SETFL, libc::O_ASYNC) < 0
        };
        if failed {
            return Err(io::Error::last_os_error());
        }
        Ok(RunAlarm { fd })
    }

    /// The watched thread's task clock so far, ns (a `read` of the counter).
    pub fn run_ns(&self) -> io::Result<u64> {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a live u64 from a descriptor we own.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        if n != 8 {
            return Err(io::Error::last_os_error());
        }
        Ok(v)
    }
}

/// Block `signal` in the calling thread and return a signalfd that reads it (close-on-exec).
pub fn signal_fd(signal: i32) -> io::Result<OwnedFd> {
    // SAFETY: a zeroed sigset initialised by sigemptyset, used only for the calls below.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Wait up to `timeout_ms` (−1: for ever) for signals on `fd` (from [`signal_fd`]) and read
/// every one queued; how many.
pub fn wait_signals(fd: &OwnedFd, timeout_ms: i32) -> io::Result<usize> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the call's duration.
    if unsafe { libc::poll(&mut p, 1, timeout_ms) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut n = 0;
    if p.revents & libc::POLLIN != 0 {
        // SAFETY: signalfd_siginfo is plain data; a read fills whole records.
        let mut buf: [libc::signalfd_siginfo; 16] = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of_val(&buf);
        // Non-blocking drain: the descriptor is blocking, so read once (it had data).
        let got = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), size) };
        if got > 0 {
            n = got as usize / std::mem::size_of::<libc::signalfd_siginfo>();
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn gettid() -> i32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() }
    }

    /// A thread that sleeps until `go`, then spins until `stop`; its tid.
    fn worker(go: Arc<AtomicBool>, stop: Arc<AtomicBool>) -> (std::thread::JoinHandle<()>, i32) {
        let tid = Arc::new(AtomicI32::new(0));
        let t = tid.clone();
        let h = std::thread::spawn(move || {
            t.store(gettid(), Ordering::SeqCst);
            while !go.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        while tid.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        (h, tid.load(Ordering::SeqCst))
    }

    #[test]
    #[ignore = "needs perf_event_open on another thread (root or perf_event_paranoid ≤ 1): make test runs it as root"]
    fn a_thread_that_runs_rings_and_one_that_sleeps_does_not() {
        let signal = libc::SIGRTMIN() + 4;
        let sfd = signal_fd(signal).unwrap();
        let (go, stop) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (h, tid) = worker(go.clone(), stop.clone());
        let alarm = RunAlarm::arm(tid, 2_000_000, signal, gettid()).expect("perf_event_open");
        // Asleep (1 ms naps for 100 ms: well under 2 ms of running): no alarm.
        let quiet = wait_signals(&sfd, 100).unwrap();
        let t0 = Instant::now();
        go.store(true, Ordering::SeqCst);
        let rang = wait_signals(&sfd, 1000).unwrap();
        let took = t0.elapsed();
        let ran = alarm.run_ns().unwrap();
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        assert_eq!(quiet, 0, "a sleeping thread rang");
        assert!(rang >= 1, "a spinning thread did not ring in 1 s");
        assert!(ran >= 2_000_000, "task clock {ran} ns");
        // 2 ms of running, with slack for a loaded 2-CPU machine.
        assert!(took < Duration::from_millis(100), "rang after {took:?}");
    }
}
