//! The process tree as /proc shows it: a process's descendants (`/proc/<pid>/task/<tid>/children`,
//! which lists the children each thread forked) and every process on the machine. Used where a
//! setting reaches beyond the thread it was set on: I/O priorities that children inherit, and a
//! session's autogroup that every process of the session shares.

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
        sh.kill().unwrap();
        sh.wait().unwrap();
        assert_eq!(found.len(), 3, "sh and its two sleeps: {found:?}");
        assert!(
            found.iter().all(|p| mine.contains(p)),
            "{found:?} ⊄ {mine:?}"
        );
        assert!(all_processes().unwrap().contains(&me));
    }
}
