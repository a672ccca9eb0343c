//! The kernel's clocks in nanoseconds.

/// `clock_gettime(clock)` in ns: `CLOCK_MONOTONIC` for the kernel's event times (the tracker's,
/// a boost's), `CLOCK_THREAD_CPUTIME_ID` for the calling thread's CPU time.
pub fn ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn monotonic_time_does_not_go_back_and_cpu_time_grows_with_work() {
        let (t0, c0) = (
            super::ns(libc::CLOCK_MONOTONIC),
            super::ns(libc::CLOCK_THREAD_CPUTIME_ID),
        );
        while super::ns(libc::CLOCK_THREAD_CPUTIME_ID) - c0 < 1_000_000 {
            std::hint::black_box(());
        }
        assert!(super::ns(libc::CLOCK_MONOTONIC) >= t0 + 1_000_000);
    }
}
