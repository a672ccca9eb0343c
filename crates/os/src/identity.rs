//! Task identity: a pid (or tid) alone can be recycled by the kernel once its task exits, so
//! every task uxsched acts on is named by (tid, start time) and re-checked before and after each
//! change (rtkit's rule). A recycled pid has a different start time and is never touched.

use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
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

pub use crate::task::{parse_stat, stat, Stat};

fn proc_root() -> PathBuf {
    PathBuf::from("/proc")
}

/// The process (tgid) a task belongs to, from `/proc/<tid>/status`.
pub fn tgid(tid: i32) -> io::Result<i32> {
    let text = crate::procfs::read_to_string(proc_root().join(tid.to_string()).join("status"))?;
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

/// The uids (real, effective, saved, filesystem) of the process `task` belongs to, in two
/// reads — `/proc/<pid>/status`, then [`still_same`] — where [`observe`] takes six syscalls
/// more: the latency path (`state::chain`) asks this for each partner. The second read proves
/// the first was of `task`'s process (a recycled pid has another start time).
pub fn uids_of(task: &TaskId) -> io::Result<[u32; 4]> {
    let path = proc_root().join(task.pid.to_string()).join("status");
    let status = crate::procfs::read_to_string(&path)?;
    let uids = parse_uids(&status).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: no Uid", path.display()),
        )
    })?;
    if !still_same(task) {
        return Err(io::Error::new(io::ErrorKind::NotFound, "exited"));
    }
    Ok(uids)
}

/// The four uids of a `/proc/<pid>/status` text's `Uid:` line.
fn parse_uids(status: &str) -> Option<[u32; 4]> {
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    let uids: Vec<u32> = line
        .split_whitespace()
        .filter_map(|u| u.parse().ok())
        .collect();
    uids.try_into().ok()
}

/// Whether every uid in `uids` is `uid` (a set-uid program run by `uid` is not its).
pub fn all_uids_are(uids: &[u32; 4], uid: u32) -> bool {
    uids.iter().all(|&u| u == uid)
}

/// True while `id` names the same task as when it was recorded (not exited, not recycled).
///
/// The first check of a task opens its `/proc/<pid>/task/<tid>/stat` (the path resolves only
/// while `tid` is a thread of `pid`) and keeps it open ([`HANDLES`]); later checks re-read that
/// descriptor, which fails once the task has exited, whoever takes the tid — one syscall where a
/// read by path takes three. A boost checks its thread three to five times between an input and
/// its write (`daemon/fast.rs`), so this is latency.
pub fn still_same(id: &TaskId) -> bool {
    let same = |s: &Stat| s.start == id.start && s.state != 'Z';
    let held = handles().open.remove(id);
    let handle = match held {
        Some((handle, _)) => handle,
        None => match crate::task::StatHandle::open(id.pid, id.tid) {
            Ok(handle) => handle,
            Err(_) => return false,
        },
    };
    let alive = handle.read().is_ok_and(|s| same(&s));
    if alive {
        handles().keep(*id, handle);
    }
    alive
}

/// How long ago `id` started (its start time is in clock ticks since boot, on the boot-time
/// clock); `None` if the tick rate cannot be read.
pub fn age(id: &TaskId) -> Option<std::time::Duration> {
    // SAFETY: sysconf has no memory preconditions.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok()?;
    let now = crate::clock::ns(libc::CLOCK_BOOTTIME);
    let start = id.start.checked_mul(1_000_000_000)? / hz.max(1);
    Some(std::time::Duration::from_nanos(now.saturating_sub(start)))
}

/// How many tasks' stat descriptors [`still_same`] keeps open: the critical sets and the
/// focused app's boosted threads fit; the least recently checked is closed first.
pub const HANDLES: usize = 256;

#[derive(Default)]
struct Handles {
    open: std::collections::HashMap<TaskId, (crate::task::StatHandle, u64)>,
    uses: u64,
}

impl Handles {
    fn keep(&mut self, id: TaskId, handle: crate::task::StatHandle) {
        if self.open.len() >= HANDLES {
            let oldest = self.open.iter().min_by_key(|(_, (_, used))| *used);
            if let Some(oldest) = oldest.map(|(id, _)| *id) {
                self.open.remove(&oldest);
            }
        }
        self.uses += 1;
        self.open.insert(id, (handle, self.uses));
    }
}

fn handles() -> std::sync::MutexGuard<'static, Handles> {
    static OPEN: std::sync::OnceLock<std::sync::Mutex<Handles>> = std::sync::OnceLock::new();
    let m = OPEN.get_or_init(Default::default);
    m.lock().unwrap_or_else(|e| e.into_inner())
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

/// A pidfd (`pidfd_open(2)`, Linux ≥ 5.3): it names one process for the process's whole life,
/// whatever later happens to its pid. Reads of `/proc/<pid>` made while the pidfd's process has
/// not exited describe that process (a pid is reused only after its process has exited).
#[derive(Debug)]
pub struct Pidfd(OwnedFd);

impl Pidfd {
    /// Open a pidfd for process `pid` (a thread id that is not a process is refused: EINVAL).
    pub fn open(pid: i32) -> io::Result<Pidfd> {
        // SAFETY: plain integer arguments; a non-negative result is a new fd we own.
        let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `r` is a fresh descriptor returned by the kernel.
        Ok(Pidfd(unsafe { OwnedFd::from_raw_fd(r as i32) }))
    }

    /// True once the process has exited (zombie or reaped): a pidfd polls readable then.
    pub fn exited(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; zero timeout.
        let r = unsafe { libc::poll(&mut pfd, 1, 0) };
        r != 0 // readable, or poll failed: either way not provably alive
    }
}

impl From<OwnedFd> for Pidfd {
    /// A pidfd the kernel handed over some other way (`SO_PEERPIDFD`).
    fn from(fd: OwnedFd) -> Pidfd {
        Pidfd(fd)
    }
}

impl AsFd for Pidfd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// A process as seen at one instant: every field read while a pidfd opened before the reads
/// showed it alive, so they all describe the same process (no recycled pid in between).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: i32,
    pub start: u64,
    /// Real, effective, saved and filesystem uid (`Uid:` of `/proc/<pid>/status`).
    pub uids: [u32; 4],
    /// Its cgroup v2 path (`0::` line of `/proc/<pid>/cgroup`), if it has one.
    pub cgroup: Option<String>,
}

impl Process {
    /// Whether every uid of the process is `uid` (a set-uid program run by `uid` is not).
    pub fn owned_by(&self, uid: u32) -> bool {
        all_uids_are(&self.uids, uid)
    }
}

/// Look at process `pid` consistently: pidfd first, then one read each of `status` and `stat`
/// (and `cgroup`), then a check that the pidfd's process is still alive.
pub fn observe(pid: i32) -> io::Result<(Process, Pidfd)> {
    let pidfd = Pidfd::open(pid)?;
    let dir = proc_root().join(pid.to_string());
    let status = crate::procfs::read_to_string(dir.join("status"))?;
    let start = stat(pid)?.start;
    let cgroup = crate::procfs::read_to_string(dir.join("cgroup"))?;
    if pidfd.exited() {
        return Err(io::Error::new(io::ErrorKind::NotFound, "exited"));
    }
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("no {what}"));
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name));
    let tgid: i32 = field("Tgid:")
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| bad("Tgid"))?;
    if tgid != pid {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{pid} is a thread of process {tgid}, not a process"),
        ));
    }
    let uids = parse_uids(&status).ok_or_else(|| bad("Uid"))?;
    let cgroup = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned);
    let process = Process {
        pid,
        start,
        uids,
        cgroup,
    };
    Ok((process, pidfd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_just_started_is_young_and_init_is_old() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let id = task_id(child.id() as i32).unwrap();
        let young = age(&id).unwrap();
        let init = age(&task_id(1).unwrap()).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert!(young < std::time::Duration::from_secs(1), "{young:?}");
        assert!(init > young, "init {init:?}, child {young:?}");
    }

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
    fn uids_of_answers_for_the_task_it_names_and_not_for_a_recycled_pid() {
        let me = task_id(std::process::id() as i32).unwrap();
        // SAFETY: getuid/geteuid have no preconditions.
        let (uid, euid) = unsafe { (libc::getuid(), libc::geteuid()) };
        let uids = uids_of(&me).unwrap();
        assert_eq!((uids[0], uids[1]), (uid, euid));
        assert_eq!(uids[0..2], observe(me.pid).unwrap().0.uids[0..2]);
        let recycled = TaskId {
            start: me.start + 1,
            ..me
        };
        assert!(
            uids_of(&recycled).is_err(),
            "the pid's process has another start time"
        );
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
    fn a_kept_descriptor_answers_for_its_task_only_while_it_lives() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let id = task_id(child.id() as i32).unwrap();
        assert!(still_same(&id));
        assert!(
            handles().open.contains_key(&id),
            "the first check keeps it open"
        );
        assert!(still_same(&id), "and the kept descriptor answers");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!still_same(&id), "an exited task is not the same task");
        assert!(
            !handles().open.contains_key(&id),
            "its descriptor is closed"
        );
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
        let (seen, pidfd) = observe(pid).expect("a live child can be observed");
        assert_eq!((seen.pid, seen.start), (id.pid, id.start));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            !still_same(&id),
            "an exited (reaped) process is not the same task"
        );
        assert!(pidfd.exited());
        assert!(observe(pid).is_err());
        assert!(threads(pid).is_empty());
    }

    #[test]
    fn observing_gives_this_process_its_owner_and_refuses_a_thread() {
        let me = std::process::id() as i32;
        let (p, pidfd) = observe(me).unwrap();
        assert_eq!(p.start, stat(me).unwrap().start);
        // SAFETY: getuid has no preconditions.
        assert!(p.owned_by(unsafe { libc::getuid() }));
        assert!(!pidfd.exited());
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(200));
        });
        let tid = rx.recv().unwrap();
        assert!(observe(tid).is_err(), "a thread is not a process");
        t.join().unwrap();
    }
}
