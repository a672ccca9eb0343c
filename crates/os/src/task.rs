//! `/proc/TID/stat`: the fields uxsched needs of a task, among them its start time, which with
//! the tid names a task across tid reuse.

use std::io;

/// Fields of `/proc/<tid>/stat` that uxsched needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub comm: String,
    pub state: char,
    /// Start time in clock ticks since boot (field 22).
    pub start: u64,
    /// CPU the task last ran on (field 39).
    pub processor: u32,
}

/// Every field of a `stat` line, numbered as proc(5) numbers them: 1 pid, 2 comm, 3 state,
/// 4 ppid, 5 pgrp, 6 session, … 14 utime, 15 stime, 19 nice, 22 starttime, 39 processor,
/// 40 rt_priority, 41 policy. The one parser of these lines for every crate of uxsched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    comm: String,
    /// Fields 3 and after.
    rest: Vec<String>,
}

impl Fields {
    /// Parse a stat line. The comm is in parentheses and may itself contain spaces and
    /// parentheses, so fields are counted after the *last* ')'.
    pub fn parse(text: &str) -> Option<Fields> {
        let open = text.find('(')?;
        let close = text.rfind(')')?;
        Some(Fields {
            comm: text.get(open + 1..close)?.to_owned(),
            rest: text
                .get(close + 1..)?
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
        })
    }

    /// Read and parse `path` (`/proc/<pid>/stat`, `/proc/<pid>/task/<tid>/stat`,
    /// `/proc/thread-self/stat`); `NotFound` once the task has exited.
    pub fn read(path: impl AsRef<std::path::Path>) -> io::Result<Fields> {
        let path = path.as_ref();
        let text = crate::procfs::read_to_string(path)?;
        Fields::parse(&text).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: cannot parse {text:?}", path.display()),
            )
        })
    }

    pub fn comm(&self) -> &str {
        &self.comm
    }

    /// Field 3: `R`, `S`, `D`, `Z`, …
    pub fn state(&self) -> char {
        self.rest
            .first()
            .and_then(|s| s.chars().next())
            .unwrap_or('?')
    }

    /// Field `n` (≥ 3) as a number; `None` when absent or not a number.
    pub fn num<T: std::str::FromStr>(&self, n: usize) -> Option<T> {
        self.rest.get(n.checked_sub(3)?)?.parse().ok()
    }
}

/// Parse the text of `/proc/<tid>/stat` into the fields uxsched's identity needs.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let f = Fields::parse(text)?;
    Some(Stat {
        state: f.rest.first()?.chars().next()?,
        start: f.num(22)?,
        processor: f.num(39)?,
        comm: f.comm,
    })
}

/// Read a task's stat; `NotFound` once it has exited.
pub fn stat(tid: i32) -> io::Result<Stat> {
    read_stat(format!("/proc/{tid}/stat"))
}

/// Read thread `tid`'s stat through its process's directory, `/proc/<pid>/task/<tid>/stat`:
/// the kernel resolves that path only while `tid` is a thread of `pid` (`proc_task_lookup`
/// checks the thread group), so one read answers both "which process" and "which start time".
/// `NotFound` once the thread has exited or when it is not `pid`'s.
pub fn thread_stat(pid: i32, tid: i32) -> io::Result<Stat> {
    read_stat(format!("/proc/{pid}/task/{tid}/stat"))
}

/// An open `/proc/<pid>/task/<tid>/stat`. The descriptor names the task it was opened for: once
/// that task has exited, reads fail (ESRCH) whoever takes its tid later, so re-reading it proves
/// the task is still there in one syscall, where a read by path takes three (open, read, close).
#[derive(Debug)]
pub struct StatHandle {
    file: std::fs::File,
}

impl StatHandle {
    /// Open thread `tid` of process `pid` (`NotFound` once it has exited or when it is not `pid`'s).
    pub fn open(pid: i32, tid: i32) -> io::Result<StatHandle> {
        let file = std::fs::File::open(format!("/proc/{pid}/task/{tid}/stat"))?;
        Ok(StatHandle { file })
    }

    /// The task's stat now; an error once it has exited.
    pub fn read(&self) -> io::Result<Stat> {
        use std::os::unix::fs::FileExt;
        // A stat line is under 400 bytes for any comm (16 bytes at most).
        let mut buf = [0u8; 1024];
        let n = self.file.read_at(&mut buf, 0)?;
        parsed(&String::from_utf8_lossy(&buf[..n]), "stat")
    }
}

fn read_stat(path: String) -> io::Result<Stat> {
    parsed(&crate::procfs::read_to_string(&path)?, &path)
}

/// `text` parsed as a stat line, or an error naming `what` was read.
fn parsed(text: &str, what: &str) -> io::Result<Stat> {
    parse_stat(text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{what}: cannot parse {text:?}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_count_after_the_last_parenthesis() {
        let text = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 12345 1000 10 \
                    0 0 0 0 0 0 0 0 0 0 0 0 0 0 3";
        let s = parse_stat(text).unwrap();
        assert_eq!(
            (s.comm.as_str(), s.state, s.start, s.processor),
            ("a) b (c", 'S', 12345, 3)
        );
        assert!(parse_stat("42 (x) S 1").is_none());
        let f = Fields::parse(text).unwrap();
        assert_eq!((f.comm(), f.state()), ("a) b (c", 'S'));
        assert_eq!(
            (f.num::<i32>(4), f.num::<i64>(18), f.num::<u32>(41)),
            (Some(1), Some(20), None)
        );
        assert_eq!(f.num::<u64>(2), None, "field 2 is the comm, not a number");
    }

    #[test]
    fn this_threads_fields_say_its_policy() {
        let f = Fields::read("/proc/thread-self/stat").unwrap();
        assert_eq!(f.state(), 'R');
        assert_eq!(f.num::<u32>(41), Some(crate::sched::get(0).unwrap().policy));
    }

    #[test]
    fn this_process_reads_back_and_a_missing_task_is_not_found() {
        let me = stat(std::process::id() as i32).unwrap();
        assert!(me.start > 0 && me.state != 'Z');
        assert_eq!(stat(1 << 30).unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_thread_is_found_under_its_own_process_only() {
        let me = std::process::id() as i32;
        assert_eq!(thread_stat(me, me).unwrap().start, stat(me).unwrap().start);
        // The test's own thread is a thread of this process but not its main thread.
        let live = unsafe { libc::gettid() };
        assert_eq!(
            thread_stat(me, live).unwrap().start,
            stat(live).unwrap().start
        );
        assert_eq!(
            thread_stat(1, me).unwrap_err().kind(),
            io::ErrorKind::NotFound,
            "not init's"
        );
        // A thread that has exited: `join` returns before the kernel has released it, so
        // wait (bounded) for it to go.
        let gone = std::thread::spawn(|| unsafe { libc::gettid() })
            .join()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while thread_stat(me, gone).is_ok() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(
            thread_stat(me, gone).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn a_stat_handle_reads_its_thread_until_it_exits() {
        let me = std::process::id() as i32;
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            stop_rx.recv().ok();
        });
        let tid = rx.recv().unwrap();
        let handle = StatHandle::open(me, tid).unwrap();
        let first = handle.read().unwrap();
        assert_eq!(first.start, thread_stat(me, tid).unwrap().start);
        assert_eq!(handle.read().unwrap().start, first.start, "it reads again");
        stop_tx.send(()).unwrap();
        t.join().unwrap();
        // `join` returns before the kernel has released the thread: wait (bounded) for it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while handle.read().is_ok() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(
            handle.read().is_err(),
            "an exited thread's descriptor fails"
        );
        assert!(StatHandle::open(me, me + 1_000_000).is_err());
    }
}
