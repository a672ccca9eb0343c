//! The nice value of a process's autogroup (`/proc/<pid>/autogroup`, "/autogroup-N nice K").
//!
//! With `kernel.sched_autogroup_enabled=1` each session is a task group and its weight, set by
//! this nice value, is what competes with other sessions; a thread's own nice only counts inside
//! its session. Raising the focused app's autogroup keeps the app in its own group — where its
//! threads' short custom slices keep working (measured: moving it to a cgroup lost them) — and
//! gives the whole session that weight, so the same-session case is ordered by thread nice and
//! the cross-session case by this one.

use crate::process_tree;
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

/// Parse "/autogroup-123 nice -5" into (123, -5).
pub fn parse_line(text: &str) -> Option<(u64, i32)> {
    let id = text.trim().strip_prefix("/autogroup-")?;
    let id = id.split_whitespace().next()?.parse().ok()?;
    Some((id, parse(text)?))
}

/// The autogroup id and nice of `pid`'s session.
pub fn read(pid: i32) -> io::Result<(u64, i32)> {
    let text = crate::procfs::read_to_string(path(pid))?;
    if text.trim().is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("pid {pid} has no autogroup of its own (boot session)"),
        ));
    }
    parse_line(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bad autogroup line for pid {pid}: {text:?}"),
        )
    })
}

/// The autogroup nice of `pid`'s session.
///
/// A process still in the boot session (never `setsid`, e.g. started by a PID 1 that is not
/// an init) shares the root task group: the kernel prints an empty line and refuses a new nice
/// with EINVAL. That case is `ErrorKind::NotFound`, so callers can fall back to a cgroup.
pub fn get(pid: i32) -> io::Result<i32> {
    read(pid).map(|(_, nice)| nice)
}

/// Set the autogroup nice of `pid`'s session (−20..19; negative needs CAP_SYS_NICE).
pub fn set(pid: i32, nice: i32) -> io::Result<()> {
    std::fs::write(path(pid), nice.to_string())
}

/// Whether autogroup scheduling is on.
pub fn enabled() -> bool {
    crate::procfs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled")
        .is_ok_and(|s| s.trim() == "1")
}

/// Every process now in autogroup `id`.
pub fn members(id: u64) -> io::Result<Vec<i32>> {
    Ok(process_tree::all_processes()?
        .into_iter()
        .filter(|&p| read(p).is_ok_and(|(g, _)| g == id))
        .collect())
}

/// Whether `pid`'s session autogroup holds nothing but `pid` and the processes it forked — the
/// only case where raising the autogroup raises the app and nothing else (a terminal's session
/// also holds its shell and whatever the shell starts, such as a build).
pub fn exclusive_to(pid: i32) -> io::Result<bool> {
    let (id, _) = read(pid)?;
    let own = process_tree::with_descendants(pid);
    Ok(members(id)?.iter().all(|p| own.contains(p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_proc_line() {
        assert_eq!(parse("/autogroup-9 nice 0\n"), Some(0));
        assert_eq!(parse("/autogroup-12 nice -19\n"), Some(-19));
        assert_eq!(parse("garbage"), None);
        assert_eq!(parse_line("/autogroup-12 nice -19\n"), Some((12, -19)));
        assert_eq!(parse_line("\n"), None);
    }

    #[test]
    fn a_new_session_has_its_own_autogroup() {
        use std::os::unix::process::CommandExt;
        assert!(
            enabled(),
            "this test needs autogroup: kernel.sched_autogroup_enabled=1 (sysctl)"
        );
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("5");
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        let nice = get(child.id() as i32);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            nice.unwrap(),
            0,
            "a fresh session starts at autogroup nice 0"
        );
        // Whatever session this test runs in, reading it never yields garbage.
        match get(std::process::id() as i32) {
            Ok(n) => assert!((-20..=19).contains(&n)),
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}"),
        }
    }
}
