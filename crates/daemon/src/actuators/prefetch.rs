//! EIMOS's I/O half (seed 001): for the topmost process, read ahead of it with a window of 8×
//! (or 16×) the device's `read_ahead_kb`, so its sequential reads hit the page cache.
//!
//! On a stock kernel the daemon cannot change one process's read-ahead window, so it reads
//! ahead *on its behalf*: for each open regular file whose position moved forward since the
//! last scan (a sequential reader), it duplicates the descriptor with `pidfd_getfd(2)` (Linux
//! ≥ 5.6; the pidfd also pins the process identity) and issues `POSIX_FADV_WILLNEED` from the
//! file position over the window. Nothing is journalled: page cache is not a setting to restore.

use crate::types::AppId;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use uxsched_os::identity::{self, Pidfd};

/// At most this many descriptors are examined per scan (bounded work per app).
const MAX_FDS: usize = 256;
/// Never read ahead more than this per file per scan, whatever the device says.
const MAX_WINDOW: u64 = 64 << 20;

/// Key of an open file of a process: (pid, fd, inode).
type FileKey = (i32, i32, u64);

#[derive(Debug, Default)]
pub struct Prefetcher {
    /// Last seen position per open file (to detect forward, sequential reading).
    last_pos: HashMap<FileKey, u64>,
    /// Bytes advised in total (reported in logs/tests).
    pub advised_bytes: u64,
}

fn pidfd_getfd(pidfd: &Pidfd, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain integer arguments; a non-negative result is a new fd we own.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_fd().as_raw_fd(), fd, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `r` is a fresh descriptor returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(r as i32) })
}

/// `pos:` and `flags:` (octal) of `/proc/<pid>/fdinfo/<fd>`.
fn fdinfo(pid: i32, fd: i32) -> Option<(u64, u32)> {
    let text = uxsched_os::procfs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_owned())
    };
    let pos = field("pos:")?.parse().ok()?;
    let flags = u32::from_str_radix(&field("flags:")?, 8).ok()?;
    Some((pos, flags))
}

/// The kernel's read-ahead for a backing device without a request queue (tmpfs, overlay, network
/// filesystems): `VM_READAHEAD_PAGES`, 128 KiB (include/linux/mm.h).
pub const NO_QUEUE_READ_AHEAD_KB: u64 = 128;

/// The device's `read_ahead_kb` for a file on device `dev` (partitions use their disk's queue);
/// an error where `dev` has no block queue in sysfs.
pub fn read_ahead_kb(dev: u64) -> io::Result<u64> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let base = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let disk = base.join("queue/read_ahead_kb");
    let path = if disk.exists() {
        disk
    } else {
        base.join("../queue/read_ahead_kb")
    };
    let text = uxsched_os::procfs::read_to_string(&path)?;
    text.trim().parse().map_err(|e| {
        let what = format!("{}: {text:?} is not a number: {e}", path.display());
        io::Error::new(io::ErrorKind::InvalidData, what)
    })
}

/// `POSIX_FADV_WILLNEED` over `window` bytes from `pos`, one read-ahead `chunk` at a time (the
/// kernel caps one WILLNEED at the device's read-ahead size). Returns the bytes advised.
fn advise(file: &OwnedFd, pos: u64, window: u64, chunk: u64) -> u64 {
    let mut off = 0;
    while off < window {
        let len = chunk.min(window - off);
        // SAFETY: `file` is a valid descriptor for the call's duration.
        let r = unsafe {
            libc::posix_fadvise(
                file.as_raw_fd(),
                (pos + off) as libc::off_t,
                len as libc::off_t,
                libc::POSIX_FADV_WILLNEED,
            )
        };
        if r != 0 {
            break;
        }
        off += len;
    }
    off
}

/// A readable regular file open in the process, as read from `/proc/<pid>/fd{,info}`.
struct OpenFile {
    fd: i32,
    key: FileKey,
    pos: u64,
    len: u64,
    dev: u64,
}

/// The readable regular files `pid` has open (at most [`MAX_FDS`] descriptors looked at).
fn open_files(pid: i32) -> io::Result<Vec<OpenFile>> {
    let mut files = Vec::new();
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd"))?;
    for entry in dir.flatten().take(MAX_FDS) {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        // Follows the magic link: the metadata of the open file itself.
        let Ok(meta) = std::fs::metadata(entry.path()) else {
            continue;
        };
        let Some((pos, flags)) = fdinfo(pid, fd) else {
            continue;
        };
        let readable = flags & libc::O_ACCMODE as u32 != libc::O_WRONLY as u32;
        if meta.is_file() && readable {
            files.push(OpenFile {
                fd,
                key: (pid, fd, meta.ino()),
                pos,
                len: meta.len(),
                dev: meta.dev(),
            });
        }
    }
    Ok(files)
}

impl Prefetcher {
    /// One scan of process `app`: advise the kernel to read ahead of every file it reads
    /// sequentially. `factor` is EIMOS's multiplier (8 or 16). Returns the files advised.
    ///
    /// The pid is trusted only while it is `app`: the pidfd is opened first, the start time
    /// checked after it (so the pidfd names `app`), and what `/proc/<pid>/fd` said is used only
    /// if the pidfd's process is still alive after reading it (so no recycled pid answered).
    pub fn scan(&mut self, app: AppId, factor: u64) -> io::Result<usize> {
        let pid = app.pid;
        let pidfd = Pidfd::open(pid)?;
        let recycled = || io::Error::new(io::ErrorKind::NotFound, "no longer the focused process");
        if identity::stat(pid)?.start != app.start {
            return Err(recycled());
        }
        let files = open_files(pid)?;
        if pidfd.exited() {
            return Err(recycled());
        }
        let mut advised = 0;
        for f in &files {
            let previous = self.last_pos.insert(f.key, f.pos);
            let sequential = previous.is_some_and(|p| f.pos > p);
            if !sequential || f.pos >= f.len {
                continue;
            }
            let chunk = read_ahead_kb(f.dev).unwrap_or_else(|e| {
                tracing::debug!(
                    pid,
                    fd = f.fd,
                    "no block queue ({e}): kernel default read-ahead"
                );
                NO_QUEUE_READ_AHEAD_KB
            }) * 1024;
            let window = (factor * chunk).min(MAX_WINDOW).min(f.len - f.pos);
            let Ok(local) = pidfd_getfd(&pidfd, f.fd) else {
                continue; // closed meanwhile, or not permitted
            };
            let bytes = advise(&local, f.pos, window, chunk);
            tracing::debug!(pid, fd = f.fd, pos = f.pos, bytes, "prefetched");
            advised += 1;
            self.advised_bytes += bytes;
        }
        // Forget files of this process that were closed (bounded memory).
        self.last_pos
            .retain(|k, _| k.0 != pid || files.iter().any(|f| f.key == *k));
        Ok(advised)
    }

    /// Forget every process but `keep` (when the focus changes).
    pub fn retain_only(&mut self, keep: Option<i32>) {
        self.last_pos.retain(|k, _| Some(k.0) == keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fdinfo_of_this_process() {
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        let (pos, flags) = fdinfo(std::process::id() as i32, f.as_raw_fd()).unwrap();
        assert_eq!(pos, 0);
        assert_eq!(flags & libc::O_ACCMODE as u32, libc::O_RDONLY as u32);
    }

    #[test]
    fn read_ahead_is_the_queue_value_of_the_disk_or_its_partition() {
        use std::os::unix::fs::MetadataExt;
        // The disk holding this test binary (a partition of it, or the disk itself).
        let dev = std::fs::metadata(std::env::current_exe().unwrap())
            .unwrap()
            .dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let base = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}"))
            .expect("the test binary lives on a block device");
        let queue = if base.join("queue").exists() {
            base.join("queue/read_ahead_kb")
        } else {
            base.join("../queue/read_ahead_kb")
        };
        let want: u64 = uxsched_os::procfs::read_to_string(queue)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(read_ahead_kb(dev).unwrap(), want);
        // Device 0:0 has no queue: an error, not a made-up value.
        let e = read_ahead_kb(0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }

    #[test]
    fn a_process_that_is_not_the_one_named_is_not_read() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let app = AppId::of(child.id() as i32).unwrap();
        let mut p = Prefetcher::default();
        assert_eq!(p.scan(app, 8).unwrap(), 0, "first scan: nothing moved yet");
        let recycled = AppId {
            start: app.start + 1,
            ..app
        };
        let e = p.scan(recycled, 8).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(p.scan(app, 8).is_err());
    }
}
