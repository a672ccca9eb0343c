//! Reading the kernel's small text files (`/proc`, `/sys`, cgroup control files) in one go.
//!
//! `std::fs::read_to_string` sizes its buffer from the file's length, which is 0 for these
//! files, so it probes with 32 bytes and doubles: a 1.4 KiB `/proc/TID/status` took a `statx`
//! and 8 `read`s (strace of the daemon's fast path). The daemon reads a few of these
//! files per thread between an input and its boost, so each syscall is latency. Here: one
//! `open`, one `read` into a page-sized buffer, one `read` that returns 0.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// A page: every file the daemon reads per task fits, so two `read`s suffice.
const FIRST_READ: usize = 4096;

/// The running kernel's release (`6.18.44-fc`, `6.1.0-56-amd64`), from
/// `/proc/sys/kernel/osrelease`; empty if it cannot be read.
pub fn kernel_release() -> String {
    read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// The whole content of a small kernel text file, read with as few syscalls as it allows.
/// Errors are `File::open`'s and `read`'s (`NotFound` once a task has exited), and
/// `InvalidData` for content that is not UTF-8.
pub fn read_to_string(path: impl AsRef<Path>) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; FIRST_READ];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_std_reads_from_proc_and_from_a_long_file() {
        for path in ["/proc/self/status", "/proc/self/stat", "/proc/self/maps"] {
            // The files change between two reads (fault counters, the allocator's maps):
            // compare what cannot, the first line up to stat's comm.
            let stable = |t: &str| {
                t.lines()
                    .next()
                    .map(|l| l.split(')').next().unwrap().to_owned())
            };
            let ours = read_to_string(path).unwrap();
            let std = std::fs::read_to_string(path).unwrap();
            assert_eq!(stable(&ours), stable(&std), "{path}");
            assert!(ours.ends_with('\n'), "{path} read whole");
        }
        let dir = std::env::temp_dir().join(format!("uxsched-os-procfs-{}", std::process::id()));
        let long: String = (0..3000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&dir, &long).unwrap();
        assert_eq!(
            read_to_string(&dir).unwrap(),
            long,
            "longer than the first read"
        );
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn a_missing_file_is_not_found_and_bytes_that_are_not_utf8_are_invalid_data() {
        let err = read_to_string("/proc/0/status").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        let file = std::env::temp_dir().join(format!("uxsched-os-bin-{}", std::process::id()));
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert_eq!(
            read_to_string(&file).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        std::fs::remove_file(&file).unwrap();
    }
}
