//! The process tree as /proc shows it: a process's descendants (`/proc/<pid>/task/<tid>/children`,
//! which lists the children each thread forked) and every process on the machine. Used where a
//! setting reaches beyond the thread it was set on: I/O priorities that children inherit, and a
//! session's autogroup that every process of the session shares; and an app's process family
//! (a browser's zygotes, renderers and GPU process), which is the app as far as placing it goes.

use std::collections::BTreeSet;
use std::io;

/// `pid` and every process it forked, transitively (bounded: a fork bomb cannot make this loop
/// forever). Processes that exit while being read are skipped.
pub fn with_descendants(pid: i32) -> BTreeSet<i32> {
    const MAX: usize = 65_536;
    let mut seen = BTreeSet::from([pid]);
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for child in children(p) {
            if seen.len() < MAX && seen.insert(child) {
                todo.push(child);
            }
        }
    }
    seen
}

/// The program a process runs: the device and inode of its executable (`/proc/<pid>/exe`,
/// which stays the same file across the zygote's forks and the helpers' command-line rewrites).
fn program(pid: i32) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(format!("/proc/{pid}/exe")).ok()?;
    Some((m.dev(), m.ino()))
}

/// `pid`'s process family: its descendants that run the same program as the same user (every
/// uid equal to the leader's real uid) — Chromium's zygotes, renderers, GPU and utility
/// processes, or Firefox's content processes. A different program started under it (the shell
/// of a terminal, a compiler run from an editor) is not the app, nor are its descendants: the
/// walk does not go through it, so a build started from a terminal is never counted as the
/// terminal. Without `pid` itself; empty when `pid` is gone.
pub fn family(pid: i32) -> Vec<i32> {
    const MAX: usize = 1024;
    let (Some(exe), Ok(uid)) = (program(pid), real_uid(pid)) else {
        return Vec::new();
    };
    let same = |p: i32| {
        program(p) == Some(exe)
            && crate::identity::task_id(p)
                .and_then(|t| crate::identity::uids_of(&t))
                .is_ok_and(|u| crate::identity::all_uids_are(&u, uid))
    };
    let mut found = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for child in children(p) {
            if found.len() < MAX && !found.contains(&child) && same(child) {
                found.push(child);
                todo.push(child);
            }
        }
    }
    found
}

/// The real uid of process `pid`.
fn real_uid(pid: i32) -> io::Result<u32> {
    let leader = crate::identity::task_id(pid)?;
    Ok(crate::identity::uids_of(&leader)?[0])
}

/// The direct children of every thread of `pid`.
fn children(pid: i32) -> Vec<i32> {
    crate::identity::threads(pid)
        .into_iter()
        .filter_map(|tid| {
            crate::procfs::read_to_string(format!("/proc/{pid}/task/{tid}/children")).ok()
        })
        .flat_map(|t| {
            t.split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// The parent of process `pid` (`/proc/<pid>/stat`'s fourth field).
pub fn parent(pid: i32) -> io::Result<i32> {
    stat_field(pid, 1, "parent")
}

/// The session of process `pid` (`/proc/<pid>/stat`'s sixth field): with autogroup on, the
/// processes of one session share one task group.
pub fn session(pid: i32) -> io::Result<i32> {
    stat_field(pid, 3, "session")
}

/// Field `n` after the command name of `/proc/<pid>/stat` (0: the state), read after the name's
/// closing parenthesis: a name may hold spaces and parentheses.
fn stat_field(pid: i32, n: usize, what: &str) -> io::Result<i32> {
    let stat = crate::procfs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rfind(')').map(|i| &stat[i + 1..]).unwrap_or("");
    after
        .split_whitespace()
        .nth(n)
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("/proc/{pid}/stat: no {what} field"),
            )
        })
}

/// Whether `ancestor` is `pid`'s parent, or its parent's parent, … up to `depth` generations.
pub fn descends_from(pid: i32, ancestor: i32, depth: usize) -> bool {
    let mut p = pid;
    for _ in 0..depth {
        match parent(p) {
            Ok(up) if up == ancestor => return true,
            Ok(up) if up > 1 => p = up,
            _ => return false,
        }
    }
    false
}

/// Every process on the machine now.
pub fn all_processes() -> io::Result<Vec<i32>> {
    Ok(std::fs::read_dir("/proc")?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_in_its_parents_session_until_setsid() {
        use std::os::unix::process::CommandExt;
        let me = std::process::id() as i32;
        let mut same = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let mut own = std::process::Command::new("sleep");
        own.arg("5");
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            own.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut own = own.spawn().unwrap();
        let (a, b) = (same.id() as i32, own.id() as i32);
        let got = (
            session(me).unwrap(),
            session(a).unwrap(),
            session(b).unwrap(),
        );
        for c in [&mut same, &mut own] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        assert_eq!(got.1, got.0, "a child stays in its parent's session");
        assert_eq!(got.2, b, "setsid makes it the leader of its own");
    }

    #[test]
    fn finds_grandchildren() {
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & sleep 5 & wait"])
            .spawn()
            .unwrap();
        let pid = sh.id() as i32;
        let end = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut found = BTreeSet::new();
        while found.len() < 3 && std::time::Instant::now() < end {
            found = with_descendants(pid);
        }
        let me = std::process::id() as i32;
        let mine = with_descendants(me);
        let sleeper = *found.iter().find(|p| **p != pid).unwrap();
        let ancestry = [
            descends_from(sleeper, me, 0),
            descends_from(sleeper, me, 1),
            descends_from(sleeper, me, 2),
            descends_from(pid, me, 1),
        ];
        let sh_parent = parent(pid).unwrap();
        sh.kill().unwrap();
        sh.wait().unwrap();
        assert_eq!(found.len(), 3, "sh and its two sleeps: {found:?}");
        assert!(
            found.iter().all(|p| mine.contains(p)),
            "{found:?} ⊄ {mine:?}"
        );
        assert!(all_processes().unwrap().contains(&me));
        // A grandchild is not a child, but is within two generations.
        assert_eq!(ancestry, [false, false, true, true]);
        assert_eq!(sh_parent, me);
    }

    /// The same program under the app is its family; another program (`sleep`, `timeout`) is
    /// not, nor is the same program again under another one (`timeout`'s `sh`).
    #[test]
    fn the_family_is_the_same_program_under_the_app() {
        // `; :` keeps each shell from replacing itself with its last command.
        let script = "sh -c 'sleep 9; :' & timeout 9 sh -c 'sleep 9; :' & wait";
        let mut sh = std::process::Command::new("sh")
            .args(["-c", script])
            .spawn()
            .unwrap();
        let pid = sh.id() as i32;
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut all = BTreeSet::new();
        while all.len() < 6 && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(20));
            all = with_descendants(pid);
        }
        let fam = family(pid);
        for p in all.iter().rev() {
            // SAFETY: kill has no memory preconditions; these are our own children.
            unsafe { libc::kill(*p, libc::SIGKILL) };
        }
        sh.wait().unwrap();
        assert_eq!(all.len(), 6, "sh, sh, sleep, timeout, sh, sleep: {all:?}");
        assert_eq!(fam.len(), 1, "only the first inner sh: {fam:?} of {all:?}");
        let inner = fam[0];
        assert_eq!(program(inner), program(pid));
        assert!(
            family(1 << 30).is_empty(),
            "a process that is not there has none"
        );
    }
}
