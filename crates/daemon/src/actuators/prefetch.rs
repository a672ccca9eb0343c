//! EIMOS's I/O half (seed 001): for the topmost process, read ahead of it with a window of 8×
//! (or 16×) the device's `read_ahead_kb`, so its sequential reads hit the page cache.
//!
//! On a stock kernel the daemon cannot change one process's read-ahead window, so it reads
//! ahead *on its behalf*: for each open regular file whose position moved forward since the
//! last scan (a sequential reader), it duplicates the descriptor with `pidfd_getfd(2)` (Linux
//! ≥ 5.6; the pidfd also pins the process identity) and issues `POSIX_FADV_WILLNEED` from the
//! file position over the window. Nothing is journalled: page cache is not a setting to restore.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

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

fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain integer arguments; a non-negative result is a new fd we own.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `r` is a fresh descriptor returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(r as i32) })
}

fn pidfd_getfd(pidfd: &OwnedFd, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain integer arguments; a non-negative result is a new fd we own.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `r` is a fresh descriptor returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(r as i32) })
}

/// `pos:` and `flags:` (octal) of `/proc/<pid>/fdinfo/<fd>`.
fn fdinfo(pid: i32, fd: i32) -> Option<(u64, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
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
    let text = std::fs::read_to_string(&path)?;
    text.trim().parse().map_err(|e| {
        let what = format!("{}: {text:?} is not a number: {e}", path.display());
        io::Error::new(io::ErrorKind::InvalidData, what)
    })
}

impl Prefetcher {
    /// One scan of process `pid`: advise the kernel to read ahead of every file it reads
    /// sequentially. `factor` is EIMOS's multiplier (8 or 16). Returns the files advised.
    pub fn scan(&mut self, pid: i32, factor: u64) -> io::Result<usize> {
        let pidfd = pidfd_open(pid)?;
        let mut seen: Vec<FileKey> = Vec::new();
        let mut advised = 0;
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
            if !meta.is_file() || !readable {
                continue;
            }
            let key = (pid, fd, meta.ino());
            seen.push(key);
            let previous = self.last_pos.insert(key, pos);
            let sequential = previous.is_some_and(|p| pos > p);
            if !sequential || pos >= meta.len() {
                continue;
            }
            let chunk = read_ahead_kb(meta.dev()).unwrap_or_else(|e| {
                tracing::debug!(pid, fd, "no block queue ({e}): kernel default read-ahead");
                NO_QUEUE_READ_AHEAD_KB
            }) * 1024;
            let window = (factor * chunk).min(MAX_WINDOW).min(meta.len() - pos);
            let Ok(local) = pidfd_getfd(&pidfd, fd) else {
                continue; // closed meanwhile, or not permitted
            };
            // The kernel caps one WILLNEED at the device's read-ahead size, so the window is
            // advised one read-ahead chunk at a time.
            let mut off = 0;
            while off < window {
                let len = chunk.min(window - off);
                // SAFETY: `local` is a valid descriptor for the call's duration.
                let r = unsafe {
                    libc::posix_fadvise(
                        local.as_raw_fd(),
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
            tracing::debug!(pid, fd, pos, bytes = off, "prefetched");
            advised += 1;
            self.advised_bytes += off;
        }
        // Forget files of this process that were closed (bounded memory).
        self.last_pos.retain(|k, _| k.0 != pid || seen.contains(k));
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
        let want: u64 = std::fs::read_to_string(queue)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(read_ahead_kb(dev).unwrap(), want);
        // Device 0:0 has no queue: an error, not a made-up value.
        let e = read_ahead_kb(0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }
}
