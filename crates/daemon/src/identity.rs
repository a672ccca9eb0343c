//! Task identity: a pid (or tid) alone can be recycled by the kernel once its task exits, so
//! every task uxsched acts on is named by (tid, start time) and re-checked before and after each
//! change (rtkit's rule). A recycled pid has a different start time and is never touched.

use serde::{Deserialize, Serialize};
use std::io;
use std::path::PathBuf;

/// A kernel task (thread) as uxsched knows it: its tid, its process (tgid) and its start time
/// in clock ticks since boot (`/proc/<tid>/stat` field 22), which together are unique for the
/// lifetime of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskId {
    pub tid: i32,
    pub pid: i32,
    pub start: u64,
}

/// Fields of `/proc/<tid>/stat` that uxsched needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub comm: String,
    pub state: char,
    pub start: u64,
    /// CPU the task last ran on (field 39).
    pub processor: u32,
}

fn proc_root() -> PathBuf {
    PathBuf::from("/proc")
}

/// Parse the text of `/proc/<tid>/stat`. The comm is in parentheses and may itself contain
/// spaces and parentheses, so fields are counted after the *last* ')'.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_owned();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state); field n is rest[n - 3].
    Some(Stat {
        comm,
        state: rest.first()?.chars().next()?,
        start: rest.get(22 - 3)?.parse().ok()?,
        processor: rest.get(39 - 3)?.parse().ok()?,
    })
}

/// Read a task's stat; `NotFound` once it has exited.
pub fn stat(tid: i32) -> io::Result<Stat> {
    let text = std::fs::read_to_string(proc_root().join(tid.to_string()).join("stat"))?;
    parse_stat(&text).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad stat"))
}

/// The process (tgid) a task belongs to, from `/proc/<tid>/status`.
pub fn tgid(tid: i32) -> io::Result<i32> {
    let text = std::fs::read_to_string(proc_root().join(tid.to_string()).join("status"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Tgid"))
}

/// The identity of a live task now.
pub fn task_id(tid: i32) -> io::Result<TaskId> {
    let pid = tgid(tid)?;
    Ok(TaskId {
        tid,
        pid,
        start: stat(tid)?.start,
    })
}

/// True while `id` names the same task as when it was recorded (not exited, not recycled).
pub fn still_same(id: &TaskId) -> bool {
    matches!(stat(id.tid), Ok(s) if s.start == id.start && s.state != 'Z')
        && matches!(tgid(id.tid), Ok(p) if p == id.pid)
}

/// The threads of a process, from `/proc/<pid>/task`; empty once it has exited.
pub fn threads(pid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(proc_root().join(pid.to_string()).join("task")) else {
        return Vec::new();
    };
    let mut tids: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    tids
}

/// Owner uid of a process (real uid from `/proc/<pid>/status`).
pub fn owner_uid(pid: i32) -> io::Result<u32> {
    let text = std::fs::read_to_string(proc_root().join(pid.to_string()).join("status"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Uid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_comm_with_spaces_and_parentheses() {
        let mut line = String::from("123 (a) b (c)) S 1 123 123 0 -1");
        for i in 9..=52 {
            line.push_str(&format!(" {i}"));
        }
        let s = parse_stat(&line).unwrap();
        assert_eq!(s.comm, "a) b (c)");
        assert_eq!(s.state, 'S');
        assert_eq!(s.start, 22);
        assert_eq!(s.processor, 39);
    }

    #[test]
    fn own_identity_is_stable_and_a_changed_start_time_is_not_the_same_task() {
        let me = std::process::id() as i32;
        let id = task_id(me).unwrap();
        assert_eq!(id.pid, me);
        assert!(still_same(&id));
        // Same pid, another start time: what a recycled pid looks like.
        let recycled = TaskId {
            start: id.start + 1,
            ..id
        };
        assert!(!still_same(&recycled));
        assert!(threads(me).contains(&me));
    }

    #[test]
    fn an_exited_process_is_not_the_same_task() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let id = task_id(pid).expect("a live child has an identity");
        assert!(still_same(&id));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            !still_same(&id),
            "an exited (reaped) process is not the same task"
        );
        assert!(threads(pid).is_empty());
    }
}
