//! The nice value of a process's autogroup (`/proc/<pid>/autogroup`, "/autogroup-N nice K").
//!
//! With `kernel.sched_autogroup_enabled=1` each session is a task group and its weight, set by
//! this nice value, is what competes with other sessions; a thread's own nice only counts inside
//! its session. Raising the focused app's autogroup keeps the app in its own group — where its
//! threads' short custom slices keep working (measured: moving it to a cgroup lost them) — and
//! gives the whole session that weight, so the same-session case is ordered by thread nice and
//! the cross-session case by this one.

use std::io;

fn path(pid: i32) -> String {
    format!("/proc/{pid}/autogroup")
}

/// Parse "/autogroup-123 nice -5".
pub fn parse(text: &str) -> Option<i32> {
    text.split_whitespace()
        .skip_while(|w| *w != "nice")
        .nth(1)?
        .parse()
        .ok()
}

/// The autogroup nice of `pid`'s session.
pub fn get(pid: i32) -> io::Result<i32> {
    let text = std::fs::read_to_string(path(pid))?;
    parse(&text).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad autogroup line"))
}

/// Set the autogroup nice of `pid`'s session (−20..19; negative needs CAP_SYS_NICE).
pub fn set(pid: i32, nice: i32) -> io::Result<()> {
    std::fs::write(path(pid), nice.to_string())
}

/// Whether autogroup scheduling is on.
pub fn enabled() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled")
        .is_ok_and(|s| s.trim() == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_proc_line() {
        assert_eq!(parse("/autogroup-9 nice 0\n"), Some(0));
        assert_eq!(parse("/autogroup-12 nice -19\n"), Some(-19));
        assert_eq!(parse("garbage"), None);
        assert!(get(std::process::id() as i32).is_ok());
    }
}
