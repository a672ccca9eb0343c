//! Who is asking: the process at the other end of the socket, named by the kernel (never by the
//! message), and the thread of it a request names — checked so that no grant lands on another
//! process's thread or on a tid recycled meanwhile.

use crate::identity::{self, Pidfd, TaskId};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;

/// `SO_PEERPIDFD` (Linux ≥ 6.5, include/uapi/asm-generic/socket.h): a pidfd of the process that
/// connected, taken by the kernel at connect time.
const SO_PEERPIDFD: libc::c_int = 77;

/// The uid of the process at the other end of the Unix socket `stream`.
pub fn peer_uid(stream: &impl AsRawFd) -> std::io::Result<u32> {
    peer_cred(stream).map(|c| c.uid)
}

/// `SO_PEERCRED` of the connected Unix socket `stream`: the peer's pid, uid and gid as of
/// `connect(2)`.
pub fn peer_cred(stream: &impl AsRawFd) -> std::io::Result<libc::ucred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred)
}

/// The process that connected: uid and pid from `SO_PEERCRED`, and a pidfd that names that
/// very process for as long as the connection lives.
#[derive(Debug)]
pub struct Peer {
    pub uid: u32,
    pub pid: i32,
    pidfd: Option<Pidfd>,
}

impl Peer {
    /// Read the peer of a connected Unix socket. Without `SO_PEERPIDFD` (kernel < 6.5) the pidfd
    /// is opened now: the peer must then still be the process that connected (a small window
    /// that the newer kernels close).
    pub fn of(stream: &impl AsRawFd) -> io::Result<Peer> {
        let fd = stream.as_raw_fd();
        let cred = peer_cred(stream)?;
        let mut pidfd: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `pidfd` and `len` are valid for writes of the sizes given.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                SO_PEERPIDFD,
                &mut pidfd as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        };
        let pidfd = if r == 0 && pidfd >= 0 {
            // SAFETY: the kernel returned a fresh descriptor that we now own.
            Some(Pidfd::from(unsafe { OwnedFd::from_raw_fd(pidfd) }))
        } else {
            Pidfd::open(cred.pid).ok()
        };
        Ok(Peer {
            uid: cred.uid,
            pid: cred.pid,
            pidfd,
        })
    }

    /// A caller named by someone other than a socket's kernel credentials — the D-Bus bus
    /// (`rtkit.rs`): `uid` and `pid` as the bus saw them, and a pidfd of that process (the bus's
    /// `ProcessFD`, or one opened now: the process must then still be the one that called).
    pub fn named(uid: u32, pid: i32, pidfd: Option<Pidfd>) -> Peer {
        let pidfd = pidfd.or_else(|| Pidfd::open(pid).ok());
        Peer { uid, pid, pidfd }
    }

    /// Whether the process that connected is still alive (so `pid` still names it).
    pub fn alive(&self) -> bool {
        self.pidfd.as_ref().is_some_and(|p| !p.exited())
    }
}

/// A thread of the caller's process, as checked for one request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub task: TaskId,
    pub uid: u32,
    /// `/proc/<pid>/exe`, if readable (the approval rules may name executables).
    pub exe: Option<PathBuf>,
}

/// Check that `tid` is a live thread of the peer's own process, owned (every uid) by the peer's
/// uid: the process is looked at while its pidfd shows it alive before and after the reads, so
/// the tid's identity and the process's owner describe the process that connected.
pub fn thread_of(peer: &Peer, tid: i32) -> Result<Caller, String> {
    if !peer.alive() {
        return Err(format!(
            "your process {} has exited (or cannot be named by a pidfd)",
            peer.pid
        ));
    }
    let (process, _pidfd) = identity::observe(peer.pid)
        .map_err(|e| format!("cannot look at your process {}: {e}", peer.pid))?;
    if !process.owned_by(peer.uid) {
        return Err(format!(
            "process {} runs as uids {:?}, not only as uid {} who connected (set-uid?)",
            peer.pid, process.uids, peer.uid
        ));
    }
    let task = identity::task_id(tid).map_err(|_| {
        format!("tid {tid} is not a live thread (it exited?); name a thread of your process")
    })?;
    let exe = std::fs::read_link(format!("/proc/{}/exe", peer.pid)).ok();
    if task.pid != peer.pid {
        return Err(format!(
            "tid {tid} is a thread of process {}, not of your process {}: only your own \
             threads can be named",
            task.pid, peer.pid
        ));
    }
    if !peer.alive() || !identity::still_same(&task) {
        return Err(format!("tid {tid} changed while it was checked; ask again"));
    }
    Ok(Caller {
        task,
        uid: peer.uid,
        exe,
    })
}

/// The hard `RLIMIT_RTTIME` of process `pid` in µs (`None` = unlimited).
pub fn rttime_hard(pid: i32) -> io::Result<Option<u64>> {
    let mut old = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reading only (`new` is null); `old` is valid for writes.
    let r = unsafe { libc::prlimit64(pid, libc::RLIMIT_RTTIME, std::ptr::null(), &mut old) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((old.rlim_max != libc::RLIM64_INFINITY).then_some(old.rlim_max))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn the_peer_is_this_process_and_only_its_threads_pass() {
        let (a, _b) = UnixStream::pair().unwrap();
        let peer = Peer::of(&a).unwrap();
        assert_eq!(peer.pid, std::process::id() as i32);
        assert!(peer.alive());
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        let c = thread_of(&peer, me).unwrap();
        assert_eq!((c.task.tid, c.task.pid), (me, peer.pid));
        // Another process's thread, an exited thread.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let e = thread_of(&peer, child.id() as i32).unwrap_err();
        assert!(e.contains("not of your process"), "{e}");
        child.kill().unwrap();
        child.wait().unwrap();
        let t = std::thread::spawn(|| unsafe { libc::gettid() });
        let gone = t.join().unwrap();
        // `join` returns before the kernel has released the thread: wait (bounded) for it.
        let task = std::path::PathBuf::from(format!("/proc/self/task/{gone}"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while task.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(thread_of(&peer, gone).is_err());
    }

    #[test]
    fn reads_the_rttime_hard_limit() {
        // util-linux's prlimit(1) sets it for the command it runs.
        let mut child = std::process::Command::new("prlimit")
            .args(["--rttime=50000:100000", "sleep", "30"])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let got = rttime_hard(child.id() as i32);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(got.unwrap(), Some(100_000));
    }
}
