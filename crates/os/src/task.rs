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
