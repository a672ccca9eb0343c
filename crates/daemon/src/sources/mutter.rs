//! The GNOME/Mutter source: Mutter marks each app's systemd scope cgroup (`app-*.scope`) with
//! the extended attribute `user.xdg.inactive-since`; the focused app's is `-1` (uresourced and
//! dmemcg-booster read the same). Event-driven: inotify IN_ATTRIB on the scopes (an xattr change
//! is an attribute change) and IN_CREATE on their parents for new apps, with a slow rescan as
//! a safety net. The cgroup root is configurable for fixtures.
//!
//! Any user can set the xattr on a cgroup it owns, naming any pid in it (in a fixture tree,
//! any pid at all): a pid is acted on only if it and the scope belong to the user of the
//! `user@<uid>.service` the scope is in (see [`super::admit`]). When inotify cannot watch the
//! tree (ENOSPC with thousands of scopes), the error is logged once and shown in `status`.

use crate::types::Event;

use super::{Owner, Reporter};
use crate::types::SourceName;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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

/// The focused app's scope and main pid: the lowest pid in the focused scope's `cgroup.procs`;
/// among several scopes marked `-1`, the most recently changed.
pub fn focused(scopes: &[PathBuf]) -> Option<(PathBuf, i32)> {
    scopes
        .iter()
        .filter(|s| xattr(s, XATTR).as_deref() == Some("-1"))
        .filter_map(|s| {
            let ctime = std::fs::metadata(s).ok()?;
            let pid = uxsched_os::procfs::read_to_string(s.join("cgroup.procs"))
                .ok()?
                .lines()
                .filter_map(|l| l.trim().parse::<i32>().ok())
                .min()?;
            Some(((ctime.ctime(), ctime.ctime_nsec()), s, pid))
        })
        .max()
        .map(|(_, s, pid)| (s.clone(), pid))
}

/// The user whose session `scope` is in: the `<uid>` of the `user@<uid>.service` it is under,
/// which must also own the scope's directory (systemd delegates that subtree to the user; the
/// user can set the xattr on nothing else).
pub fn session_owner(scope: &Path, any: bool) -> Result<Owner, String> {
    let uid = scope
        .iter()
        .filter_map(|c| c.to_str()?.strip_prefix("user@")?.strip_suffix(".service"))
        .find_map(|u| u.parse::<u32>().ok());
    let dir_uid = std::fs::metadata(scope).map(|m| m.uid());
    match (uid, dir_uid) {
        (Some(uid), Ok(d)) if d == uid => Ok(Owner { uid, any }),
        _ if any => Ok(Owner { uid: 0, any }),
        (Some(uid), Ok(d)) => Err(format!(
            "{} is owned by uid {d}, not by the session's user {uid}",
            scope.display()
        )),
        (None, _) => Err(format!(
            "{} is not in a user's session (no user@<uid>.service above it)",
            scope.display()
        )),
        (_, Err(e)) => Err(format!("{}: {e}", scope.display())),
    }
}

/// Watch `root` and send a focus event whenever the focused app changes.
/// `any_owner`: act on any process a scope names (`sources_any_owner`).
pub fn spawn(root: PathBuf, any_owner: bool, events: Sender<Event>) -> std::io::Result<()> {
    // SAFETY: no pointer arguments.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor returned by the kernel.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut reporter = Reporter::new(SourceName::Mutter, events);
    super::spawn_raised("uxsched-mutter".into(), move || {
        let mut logged = false;
        loop {
            let (dirs, scopes) = walk(&root);
            let error = add_watches(&fd, &dirs);
            if let Some(e) = &error {
                if !logged {
                    tracing::error!("mutter source: {e}");
                    logged = true;
                }
            }
            let now = focused(&scopes);
            let owner = now
                .as_ref()
                .map_or(Err(String::new()), |(s, _)| session_owner(s, any_owner));
            let sent = reporter
                .health(error)
                .and_then(|()| reporter.seen(now.map(|(_, p)| p), owner));
            if sent.is_err() {
                return;
            }
            wait_and_drain(&fd);
        }
    })?;
    Ok(())
}

/// Watch every directory in `dirs` for xattr changes and new or removed children. A failure
/// other than a directory that vanished meanwhile is returned, with what to do: without its
/// watches the source still sees changes, but only on the slow rescan.
fn add_watches(fd: &OwnedFd, dirs: &[PathBuf]) -> Option<String> {
    let mut failed: Option<(std::io::Error, &PathBuf)> = None;
    for d in dirs {
        let Ok(p) = CString::new(d.as_os_str().as_bytes()) else {
            continue;
        };
        let mask = libc::IN_ATTRIB | libc::IN_CREATE | libc::IN_DELETE;
        // SAFETY: valid fd and C string; re-adding a watch is idempotent.
        if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), p.as_ptr(), mask) } < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::NotFound && failed.is_none() {
                failed = Some((e, d));
            }
        }
    }
    let (e, d) = failed?;
    let hint = if e.raw_os_error() == Some(libc::ENOSPC) {
        "raise the limit (sysctl fs.inotify.max_user_watches, e.g. to 524288)"
    } else {
        "check that the daemon may read the cgroup tree"
    };
    Some(format!(
        "degraded: cannot watch {} ({e}); focus changes are seen only every {} s; {hint}",
        d.display(),
        RESCAN_MS / 1000
    ))
}

/// Block until inotify reports something (or the rescan period passes), then drain it.
fn wait_and_drain(fd: &OwnedFd) {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, RESCAN_MS) };
    let mut buf = [0u8; 4096];
    // SAFETY: writable buffer of the length given; non-blocking fd.
    while unsafe {
        libc::read(
            fd.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
        )
    } > 0
    {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};
    use std::sync::mpsc;
    use std::time::Duration;

    fn set_xattr(path: &Path, value: &str) {
        let p = CString::new(path.as_os_str().as_bytes()).unwrap();
        let n = CString::new(XATTR).unwrap();
        // SAFETY: valid C strings and buffer.
        let r = unsafe {
            libc::setxattr(
                p.as_ptr(),
                n.as_ptr(),
                value.as_ptr() as *const libc::c_void,
                value.len(),
                0,
            )
        };
        assert_eq!(r, 0, "setxattr: {}", std::io::Error::last_os_error());
    }

    /// A scope of uid `uid`'s session, its directory owned by `dir_uid`, holding `pids`.
    fn scope(root: &Path, uid: u32, dir_uid: u32, name: &str, pids: &[u32]) -> PathBuf {
        let d = root
            .join(format!(
                "user.slice/user-{uid}.slice/user@{uid}.service/app.slice"
            ))
            .join(name);
        std::fs::create_dir_all(&d).unwrap();
        let procs: String = pids.iter().map(|p| format!("{p}\n")).collect();
        std::fs::write(d.join("cgroup.procs"), procs).unwrap();
        std::os::unix::fs::chown(&d, Some(dir_uid), None).unwrap();
        d
    }

    /// A real process running as `uid`, killed on drop.
    struct Proc(Child);

    impl Proc {
        fn of(uid: u32) -> Proc {
            Proc(
                Command::new("sleep")
                    .arg("60")
                    .uid(uid)
                    .gid(uid)
                    .spawn()
                    .unwrap(),
            )
        }
        fn pid(&self) -> u32 {
            self.0.id()
        }
    }

    impl Drop for Proc {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// A tmpfs (user xattrs since Linux 6.6), unmounted on drop.
    struct Tmpfs(tempfile::TempDir);

    impl Tmpfs {
        fn mount() -> Tmpfs {
            let dir = tempfile::tempdir().unwrap();
            let p = CString::new(dir.path().as_os_str().as_bytes()).unwrap();
            // SAFETY: valid C strings; mounting on a fresh private directory.
            let r = unsafe {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    p.as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    c"size=4m".as_ptr() as *const libc::c_void,
                )
            };
            assert_eq!(r, 0, "mount tmpfs: {}", std::io::Error::last_os_error());
            Tmpfs(dir)
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let p = CString::new(self.0.path().as_os_str().as_bytes()).unwrap();
            // SAFETY: valid C string.
            unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) };
        }
    }

    #[test]
    #[ignore = "needs root: make test runs it"]
    fn scopes_xattrs_drive_focus_events_and_only_the_sessions_own_processes_count() {
        const USER: u32 = 65534;
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            root,
            "mounts a tmpfs and runs processes as uid 65534: needs root"
        );
        let fs = Tmpfs::mount();
        let root = fs.0.path().to_owned();
        let (term, web, other_user) = (Proc::of(USER), Proc::of(USER), Proc::of(65533));
        let t = scope(
            &root,
            USER,
            USER,
            "app-gnome-Terminal-1.scope",
            &[term.pid()],
        );
        set_xattr(&t, "-1");
        let w = scope(&root, USER, USER, "app-firefox-2.scope", &[web.pid()]);
        set_xattr(&w, "1234567");
        let (tx, rx) = mpsc::channel();
        spawn(root.clone(), false, tx).unwrap();
        let next = || match rx.recv_timeout(Duration::from_secs(3)).unwrap() {
            Event::Focus { source, app } => {
                assert_eq!(source, SourceName::Mutter);
                app.map(|a| a.pid as u32)
            }
            Event::Health { error, .. } => panic!("degraded: {error:?}"),
            _ => panic!("unexpected event"),
        };
        assert_eq!(next(), Some(term.pid()));
        // Focus moves to Firefox: Mutter stamps the terminal and marks Firefox -1.
        // Event-driven: well under the 5 s rescan.
        // (Firefox marked first: no state between names nothing in front.)
        set_xattr(&w, "-1");
        set_xattr(&t, "1234999");
        assert_eq!(next(), Some(web.pid()));
        // The user marks scopes naming pid 1, another user's process, and a scope it does not
        // own: none of them is acted on (each counts as "nothing in front").
        let hostile = [
            scope(&root, USER, USER, "app-evil-3.scope", &[1]),
            scope(&root, USER, USER, "app-evil-4.scope", &[other_user.pid()]),
            scope(&root, USER, 0, "app-evil-5.scope", &[term.pid()]),
        ];
        // The hostile scope is marked first, so every state that names nothing acceptable has
        // it in front: the None seen is its refusal, not Firefox's unmarking.
        for h in &hostile {
            set_xattr(h, "-1");
            set_xattr(&w, "1235000");
            assert_eq!(next(), None, "{}", h.display());
            set_xattr(h, "1235001");
            set_xattr(&w, "-1");
            assert_eq!(next(), Some(web.pid()));
        }
    }

    #[test]
    fn a_session_scope_belongs_to_its_user_only_if_it_owns_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        let d = dir
            .path()
            .join(format!("user@{me}.service/app.slice/app-x-1.scope"));
        std::fs::create_dir_all(&d).unwrap();
        assert_eq!(
            session_owner(&d, false),
            Ok(Owner {
                uid: me,
                any: false
            })
        );
        let other = dir
            .path()
            .join(format!("user@{}.service/app-x.scope", me + 1));
        std::fs::create_dir_all(&other).unwrap();
        assert!(session_owner(&other, false)
            .unwrap_err()
            .contains("owned by uid"));
        let loose = dir.path().join("app-y.scope");
        std::fs::create_dir_all(&loose).unwrap();
        assert!(session_owner(&loose, false)
            .unwrap_err()
            .contains("not in a user's session"));
        assert!(session_owner(&loose, true).is_ok_and(|o| o.any));
    }

    #[test]
    fn a_watch_that_fails_is_reported_with_what_to_do() {
        // SAFETY: no pointer arguments.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: fresh descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        assert_eq!(add_watches(&fd, &[dir.path().to_owned(), gone]), None);
        // A path the kernel refuses (ENAMETOOLONG): the source runs degraded and says so.
        let long = dir.path().join("x".repeat(5000));
        let e = add_watches(&fd, &[long]).unwrap();
        assert!(e.starts_with("degraded") && e.contains("every 5 s"), "{e}");
    }
}
