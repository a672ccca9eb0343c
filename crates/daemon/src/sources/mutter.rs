//! The GNOME/Mutter source: Mutter marks each app's systemd scope cgroup (`app-*.scope`) with
//! the extended attribute `user.xdg.inactive-since`; the focused app's is `-1` (uresourced and
//! dmemcg-booster read the same). Event-driven: inotify IN_ATTRIB on the scopes (an xattr change
//! is an attribute change) and IN_CREATE on their parents for new apps, with a slow rescan as
//! a safety net. The cgroup root is configurable for fixtures.

use super::Event;
use crate::config::SourceName;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;

pub const XATTR: &str = "user.xdg.inactive-since";
/// Bounds on the cgroup tree walk (no unbounded work on a huge hierarchy).
const MAX_DEPTH: usize = 12;
const MAX_DIRS: usize = 20_000;
const RESCAN_MS: i32 = 5_000;

fn xattr(path: &Path, name: &str) -> Option<String> {
    let p = CString::new(path.as_os_str().as_bytes()).ok()?;
    let n = CString::new(name).ok()?;
    let mut buf = [0u8; 64];
    // SAFETY: valid C strings and a writable buffer of the length given.
    let len = unsafe {
        libc::getxattr(
            p.as_ptr(),
            n.as_ptr(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
        )
    };
    (len >= 0).then(|| {
        String::from_utf8_lossy(&buf[..len as usize])
            .trim()
            .to_owned()
    })
}

/// Every directory under `root` (bounded), and the `app-*.scope` ones among them.
fn walk(root: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut dirs, mut scopes) = (Vec::new(), Vec::new());
    let mut stack = vec![(root.to_owned(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        if dirs.len() >= MAX_DIRS {
            break;
        }
        let is_scope = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("app-") && n.ends_with(".scope"));
        if is_scope {
            scopes.push(dir.clone());
        }
        if depth < MAX_DEPTH {
            if let Ok(rd) = std::fs::read_dir(&dir) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push((e.path(), depth + 1));
                    }
                }
            }
        }
        dirs.push(dir);
    }
    (dirs, scopes)
}

/// The focused app's main pid: the lowest pid in the focused scope's `cgroup.procs`; among
/// several scopes marked `-1`, the most recently changed.
pub fn focused(scopes: &[PathBuf]) -> Option<i32> {
    scopes
        .iter()
        .filter(|s| xattr(s, XATTR).as_deref() == Some("-1"))
        .filter_map(|s| {
            let ctime = std::fs::metadata(s).ok()?;
            let pid = std::fs::read_to_string(s.join("cgroup.procs"))
                .ok()?
                .lines()
                .filter_map(|l| l.trim().parse::<i32>().ok())
                .min()?;
            Some(((ctime.ctime(), ctime.ctime_nsec()), pid))
        })
        .max()
        .map(|(_, pid)| pid)
}

/// Watch `root` and send a focus event whenever the focused app changes.
pub fn spawn(root: PathBuf, events: Sender<Event>) -> std::io::Result<()> {
    // SAFETY: no pointer arguments.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    std::thread::Builder::new()
        .name("uxsched-mutter".into())
        .spawn(move || {
            let mut last = None;
            loop {
                let (dirs, scopes) = walk(&root);
                for d in &dirs {
                    if let Ok(p) = CString::new(d.as_os_str().as_bytes()) {
                        let mask = libc::IN_ATTRIB | libc::IN_CREATE | libc::IN_DELETE;
                        // SAFETY: valid fd and C string; re-adding a watch is idempotent.
                        unsafe { libc::inotify_add_watch(fd, p.as_ptr(), mask) };
                    }
                }
                let now = focused(&scopes);
                if now != last {
                    last = now;
                    let ev = Event::Focus {
                        source: SourceName::Mutter,
                        pid: now,
                    };
                    if events.send(ev).is_err() {
                        // SAFETY: closing the descriptor this thread owns.
                        unsafe { libc::close(fd) };
                        return;
                    }
                }
                wait_and_drain(fd);
            }
        })?;
    Ok(())
}

/// Block until inotify reports something (or the rescan period passes), then drain it.
fn wait_and_drain(fd: i32) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, RESCAN_MS) };
    let mut buf = [0u8; 4096];
    // SAFETY: writable buffer of the length given; non-blocking fd.
    while unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) } > 0 {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn set_xattr(path: &Path, value: &str) -> bool {
        let p = CString::new(path.as_os_str().as_bytes()).unwrap();
        let n = CString::new(XATTR).unwrap();
        // SAFETY: valid C strings and buffer.
        unsafe {
            libc::setxattr(
                p.as_ptr(),
                n.as_ptr(),
                value.as_ptr() as *const libc::c_void,
                value.len(),
                0,
            ) == 0
        }
    }

    fn scope(root: &Path, name: &str, pids: &str) -> PathBuf {
        let d = root
            .join("user.slice/user-1000.slice/user@1000.service/app.slice")
            .join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cgroup.procs"), pids).unwrap();
        d
    }

    #[test]
    fn fixture_scopes_xattrs_drive_focus_events() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        let term = scope(
            &root,
            "app-gnome-org.gnome.Terminal-4242.scope",
            "4250\n4242\n",
        );
        if !set_xattr(&term, "-1") {
            eprintln!("skipped: this filesystem has no user xattrs");
            return;
        }
        let web = scope(&root, "app-firefox-5000.scope", "5000\n");
        assert!(set_xattr(&web, "1234567"));
        let (tx, rx) = mpsc::channel();
        spawn(root.clone(), tx).unwrap();
        let next = || match rx.recv_timeout(Duration::from_secs(3)).unwrap() {
            Event::Focus { source, pid } => {
                assert_eq!(source, SourceName::Mutter);
                pid
            }
            _ => panic!("unexpected event"),
        };
        let next_focus = || loop {
            if let Some(pid) = next() {
                return pid;
            }
        };
        assert_eq!(next(), Some(4242), "lowest pid of the focused scope");
        // Focus moves to Firefox: Mutter stamps the terminal and marks Firefox -1. Event-driven:
        // well under the 5 s rescan.
        assert!(set_xattr(&term, "1234999"));
        assert!(set_xattr(&web, "-1"));
        assert_eq!(next_focus(), 5000);
        // A new app appears focused.
        assert!(set_xattr(&web, "1235000"));
        let new = scope(&root, "app-org.gnome.Nautilus-6000.scope", "6000\n");
        assert!(set_xattr(&new, "-1"));
        assert_eq!(next_focus(), 6000);
    }
}
