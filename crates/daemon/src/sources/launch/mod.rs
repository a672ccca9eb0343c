//! Launches: a program started from the app in front is what the user waits on next — a cold
//! start reads tens of megabytes before its window maps, and under a copy or an update that
//! wait grows 5–8× (issue 33's measurements; BFQ's weight-raising of new "interactive" queues
//! and FastTrack (USENIX ATC'18) act on the same moment). This source watches every `exec` on
//! the machine through the kernel's process events connector (netlink, `CN_IDX_PROC`: the event
//! arrives as the new program starts, before its first read; a `/proc` rescan would see it up to
//! `rescan_ms` later) and sends the daemon each one that descends from the app in front within
//! two generations — a child of the app (a launcher, a file manager opening a file) or of the
//! app's shell (a terminal's `mousepad &`) — and belongs to the app's user ([`super::admit`]).
//! Deeper descendants (the compilers of a `make` typed into the terminal) are not launches.
//!
//! A desktop launches most programs from elsewhere: the compositor (sway's `exec`, a key
//! binding, GNOME Shell's dash and overview, which fork the app themselves), a launcher, or the
//! user's service manager, which KDE asks to start apps as `app-*.service` units. So three
//! **launchers** of the app in front launch too, within two generations of them, each only when
//! it is the app's user's own process and not init:
//! - its parent (a launcher, a dock, a terminal's shell);
//! - the compositor serving its Wayland display: the process listening on
//!   `$XDG_RUNTIME_DIR/$WAYLAND_DISPLAY` of the app's environment (`SO_PEERCRED`, as discovery
//!   finds compositors) — whatever started the app in front;
//! - the user's `systemd --user` (`user@<uid>.service/init.scope`), whose children count only
//!   in an `app-*` unit (its other children are the user's services).
//!
//! Generations are counted by the fork events (`lineage.rs`): a compositor's double fork
//! (fork, `setsid`, fork again, the middle process exiting at once) leaves the program's
//! `/proc` parent init or a subreaper, and its middle process is not a generation.
//!
//! A helper a launcher starts while an app is in front (a status bar's command, Xwayland) is
//! taken for a launch too, for its budget. An X11 window manager or panel is none of these:
//! its launches are seen only when it is the app in front's parent.
//!
//! The same events tell the loop when a program starts in the app's session outside its tree
//! (`Event::SessionExec`): raising the session's autogroup would then raise that program too,
//! so the loop checks the app's placement again at once instead of at its next recheck.
//!
//! What it costs: a wake-up per task created, threads included (about 15 µs each;
//! docs/storage.md, "The levers"), and a map insert per process fork (the last 5 s, at most
//! 65,536); up to two `/proc/<pid>/stat` reads per exec while something is in front (parents the
//! fork events did not name; one more for the session), on this thread; the launchers (the
//! app's environment, a connection to its compositor's socket once per socket, the manager's
//! `cgroup.procs`) and the session are read once per app in front; the loop hears only of the
//! launches and of programs joining the app's session.

mod lineage;

use super::{admit, Owner};
use crate::types::{AppId, Event};
use lineage::Lineage;
use proc_connector::{EventMask, ProcConnector, ProcEvent};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::warn;
use uxsched_os::process_tree;

/// How many generations below the app in front an exec counts as a launch.
const DEPTH: usize = 2;

/// At most one `Event::SessionExec` this often.
const SESSION_NEWS: Duration = Duration::from_millis(250);

/// The app in front and its user, as the loop last set them; the watcher reads it per exec.
#[derive(Clone, Default)]
pub struct Front(Arc<Mutex<Option<(AppId, u32)>>>);

impl Front {
    /// The loop's focus changed (`None`: nothing in front, or launches are off).
    pub fn set(&self, front: Option<(AppId, u32)>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = front;
    }

    fn get(&self) -> Option<(AppId, u32)> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Start the watcher thread; it opens the connector itself, since subscribing can block: with
/// an event filter the kernel's acknowledgement is filtered out too (its event type is 0), so
/// the crate's ack check returns at the first exec or fork on the machine, which on a quiet machine
/// may be seconds away (measured: a daemon start held 20 s in a test). An error (no
/// `CAP_NET_ADMIN`, a kernel without `CONFIG_PROC_EVENTS`) is logged with what is lost; the
/// daemon runs on without launches.
pub fn start(front: Front, tx: Sender<Event>) -> anyhow::Result<()> {
    super::spawn_raised("uxsched-launch".into(), move || match subscribe() {
        Ok(conn) => watch(conn, front, tx),
        Err(e) => warn!("{e:#}"),
    })?;
    Ok(())
}

/// The connector, subscribed to exec and fork events.
fn subscribe() -> anyhow::Result<ProcConnector> {
    let conn = ProcConnector::new().map_err(|e| {
        anyhow::anyhow!("cannot open the process events connector ({e}): launches are not followed; the daemon needs CAP_NET_ADMIN and a kernel with CONFIG_PROC_EVENTS")
    })?;
    // A build's exec storm must not overflow the socket before this thread reads it.
    if let Err(e) = conn.set_recv_buf_size(1 << 20) {
        warn!(
            "launch watcher: cannot enlarge its socket buffer ({e}); exec storms may drop events"
        );
    }
    conn.subscribe_filtered(EventMask::EXEC | EventMask::FORK)
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot subscribe to exec and fork events ({e}): launches are not followed"
            )
        })?;
    Ok(conn)
}

fn watch(conn: ProcConnector, front: Front, tx: Sender<Event>) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut last_error: Option<Instant> = None;
    // The launchers and the session of the app last in front, read once per app.
    let mut launcher: Option<(AppId, Vec<Launcher>, Option<i32>)> = None;
    // A build in the app's session execs hundreds of programs a second: the loop hears of
    // them at most every SESSION_NEWS.
    let mut session_told: Option<Instant> = None;
    let mut lineage = Lineage::default();
    loop {
        let tgid = match conn.recv(&mut buf) {
            Ok(ProcEvent::Exec { tgid, .. }) => {
                lineage.execed(tgid as i32);
                tgid as i32
            }
            Ok(ProcEvent::Fork {
                parent_tgid,
                child_pid,
                child_tgid,
                ..
            }) => {
                if child_pid == child_tgid {
                    // A process, not a thread.
                    lineage.forked(child_tgid as i32, parent_tgid as i32, Instant::now());
                }
                continue;
            }
            Ok(_) => continue,
            Err(e) => {
                // ENOBUFS after a storm, mostly: events were lost, the next ones still come.
                if last_error.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
                    warn!("launch watcher: {e}; launches in this burst may be missed");
                    last_error = Some(Instant::now());
                }
                continue;
            }
        };
        let now_front = front.get();
        let fresh = match (now_front, &launcher) {
            (Some((app, _)), Some((seen, ..))) => *seen != app,
            (front, _) => front.is_some(),
        };
        if let (true, Some((app, uid))) = (fresh, now_front) {
            let sid = process_tree::session(app.pid).ok();
            launcher = Some((app, launchers_of(app.pid, uid), sid));
        }
        let (via, sid): (&[Launcher], _) = match (now_front, &launcher) {
            (Some(_), Some((_, l, sid))) => (l, *sid),
            _ => (&[], None),
        };
        let event = match launched_from(tgid, now_front, via, &lineage) {
            Some(app) => Event::Launch { app },
            None if session_told.is_none_or(|t| t.elapsed() >= SESSION_NEWS)
                && joins_session(tgid, now_front, sid) =>
            {
                session_told = Some(Instant::now());
                Event::SessionExec
            }
            None => continue,
        };
        if tx.send(event).is_err() {
            return; // the daemon stopped
        }
    }
}

/// Whether `pid` runs in `front`'s session `sid` but outside the app's own process tree: the
/// session's autogroup then holds more than the app (`Event::SessionExec`).
fn joins_session(pid: i32, front: Option<(AppId, u32)>, sid: Option<i32>) -> bool {
    let (Some((app, _)), Some(sid)) = (front, sid) else {
        return false;
    };
    pid != app.pid
        && process_tree::session(pid).ok() == Some(sid)
        && !process_tree::descends_from(pid, app.pid, 64)
}

/// A process that may start programs while an app is in front (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Launcher {
    pid: i32,
    /// The user's service manager (`systemd --user`): only its `app-*` units are launches.
    manager: bool,
}

/// `app`'s launchers (module doc): its parent, the compositor of its Wayland display and the
/// user's service manager, each only when it is `uid`'s own process (all four uids), not init
/// and not root's.
fn launchers_of(app: i32, uid: u32) -> Vec<Launcher> {
    if uid == 0 {
        return Vec::new();
    }
    let parent = process_tree::parent(app).ok();
    let mut found: Vec<Launcher> = [parent, compositor_of(app), manager_of(uid)]
        .into_iter()
        .flatten()
        .filter(|&pid| pid > 1 && pid != app && owned_by(pid, uid))
        .map(|pid| Launcher {
            pid,
            manager: super::auto::procs::comm(pid) == "systemd",
        })
        .collect();
    found.sort_by_key(|l| l.pid);
    found.dedup_by_key(|l| l.pid);
    tracing::debug!(app, launchers = ?found, "the app in front's launchers");
    found
}

fn owned_by(pid: i32, uid: u32) -> bool {
    uxsched_os::identity::observe(pid).is_ok_and(|(p, _pidfd)| p.owned_by(uid))
}

/// The process listening on the Wayland socket `app`'s environment names
/// (`$XDG_RUNTIME_DIR/$WAYLAND_DISPLAY`, or `$WAYLAND_DISPLAY` when it is a path); `None` for an
/// app without one (an X11 client) or a socket nobody serves. Who listens is the kernel's word
/// (`SO_PEERCRED`), so an environment naming another user's socket names no launcher of this
/// user ([`launchers_of`] checks the owner).
fn compositor_of(app: i32) -> Option<i32> {
    use super::auto::procs;
    let env = procs::environ(app, &["WAYLAND_DISPLAY", "XDG_RUNTIME_DIR"]);
    let display = std::path::Path::new(env.get("WAYLAND_DISPLAY")?);
    let socket = if display.is_absolute() {
        display.to_owned()
    } else {
        let dir = std::path::Path::new(env.get("XDG_RUNTIME_DIR")?);
        (dir.is_absolute() && display.components().count() == 1).then(|| dir.join(display))?
    };
    match procs::listener_in(&socket, &procs::listening()) {
        Ok((pid, _uid)) => Some(pid),
        Err(e) => {
            tracing::debug!(app, socket = %socket.display(), "no compositor: {e}");
            None
        }
    }
}

/// `uid`'s service manager: the process of its `user@<uid>.service/init.scope` (cgroup v2, or
/// the v1 `name=systemd` hierarchy); `None` where systemd does not run the user's session.
fn manager_of(uid: u32) -> Option<i32> {
    let roots = [
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/systemd",
        "/sys/fs/cgroup/unified",
    ];
    manager_in(&roots.map(std::path::Path::new), uid)
}

/// [`manager_of`] under the cgroup mounts `roots`, the first that has the unit.
fn manager_in(roots: &[&std::path::Path], uid: u32) -> Option<i32> {
    let unit = format!("user.slice/user-{uid}.slice/user@{uid}.service/init.scope/cgroup.procs");
    roots
        .iter()
        .find_map(|root| uxsched_os::procfs::read_to_string(root.join(&unit)).ok())?
        .lines()
        .find_map(|l| l.trim().parse().ok())
}

/// Whether a cgroup path names a desktop app's unit: `app-*.scope` or `app-*.service`, the
/// names the XDG/systemd desktop conventions give launched apps (`app-gnome-org.gnome.…-123.scope`,
/// `app-org.kde.dolphin@….service`).
fn in_app_unit(cgroup: &str) -> bool {
    let unit = cgroup.rsplit('/').next().unwrap_or("");
    unit.starts_with("app-") && (unit.ends_with(".scope") || unit.ends_with(".service"))
}

/// `pid`'s identity if it is a launch from `front` (within [`DEPTH`] generations of it, or of
/// one of its launchers `via`, by `lineage`; the front app's user's, not the front app itself).
fn launched_from(
    pid: i32,
    front: Option<(AppId, u32)>,
    via: &[Launcher],
    lineage: &Lineage,
) -> Option<AppId> {
    let (app, uid) = front?;
    if pid == app.pid {
        return None;
    }
    let line = lineage.ancestors(pid, DEPTH);
    let from = if line.contains(&app.pid) {
        app.pid
    } else {
        let l = via.iter().find(|l| line.contains(&l.pid))?;
        if l.manager {
            let (p, _pidfd) = uxsched_os::identity::observe(pid).ok()?;
            if !p.cgroup.as_deref().is_some_and(in_app_unit) {
                return None;
            }
        }
        l.pid
    };
    match admit(pid, Owner { uid, any: false }) {
        Ok(id) => {
            // Debug: a shell loop in the app in front execs many a second.
            tracing::debug!(
                pid,
                from,
                front = app.pid,
                "launch while the app is in front"
            );
            Some(id)
        }
        Err(why) => {
            tracing::debug!(pid, "not a launch: {why}");
            None
        }
    }
}

/// Whether `pid` is a child or grandchild of `app`.
#[cfg(test)]
fn below(pid: i32, app: i32) -> bool {
    pid != app && process_tree::descends_from(pid, app, DEPTH)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process of the app's session outside its tree (an orphan re-parented to init, as a
    /// double fork leaves it) joins the session; the app's own children and another session's
    /// processes do not.
    #[test]
    fn an_orphan_in_the_apps_session_joins_it_a_child_or_another_session_does_not() {
        use std::os::unix::process::CommandExt;
        let mut app = std::process::Command::new("sh");
        app.args(["-c", "sleep 30 & (sleep 31 & exit) & wait"]);
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            app.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut app = app.spawn().unwrap();
        let pid = app.id() as i32;
        let find = |arg: &str| {
            process_tree::all_processes()
                .unwrap()
                .into_iter()
                .find(|&p| {
                    std::fs::read(format!("/proc/{p}/cmdline"))
                        .is_ok_and(|c| c.split(|b| *b == 0).any(|w| w == arg.as_bytes()))
                        && process_tree::session(p).ok() == Some(pid)
                })
        };
        let end = Instant::now() + Duration::from_secs(3);
        let (mut child, mut orphan) = (None, None);
        // The orphan counts once its parent shell has exited (it is re-parented then).
        let orphaned = |o: Option<i32>| o.is_some_and(|o| !process_tree::descends_from(o, pid, 64));
        while (child.is_none() || !orphaned(orphan)) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
            (child, orphan) = (find("30"), find("31"));
        }
        let front = Some((AppId { pid, start: 0 }, 0));
        let sid = process_tree::session(pid).ok();
        let got = (
            child.map(|c| joins_session(c, front, sid)),
            orphan.map(|o| joins_session(o, front, sid)),
            joins_session(std::process::id() as i32, front, sid),
            joins_session(pid, front, sid),
        );
        for p in [child, orphan].into_iter().flatten() {
            // SAFETY: kill has no memory preconditions; these are this test's processes.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        app.kill().unwrap();
        app.wait().unwrap();
        assert_eq!(
            got,
            (Some(false), Some(true), false, false),
            "{child:?} {orphan:?}"
        );
    }

    /// The user's manager is the process of its `init.scope`, under whichever mount has it.
    #[test]
    fn the_users_manager_is_its_init_scope_process() {
        let v1 = tempfile::tempdir().unwrap();
        let v2 = tempfile::tempdir().unwrap();
        let unit = v1
            .path()
            .join("user.slice/user-1000.slice/user@1000.service/init.scope");
        std::fs::create_dir_all(&unit).unwrap();
        std::fs::write(unit.join("cgroup.procs"), "1234\n").unwrap();
        let roots = [v2.path(), v1.path()];
        assert_eq!(manager_in(&roots, 1000), Some(1234));
        assert_eq!(manager_in(&roots, 1001), None, "another user's");
        std::fs::write(unit.join("cgroup.procs"), "").unwrap();
        assert_eq!(manager_in(&roots, 1000), None, "a manager that exited");
    }

    #[test]
    fn desktop_app_units_are_app_scopes_and_services() {
        let user = "/user.slice/user-1000.slice/user@1000.service/app.slice";
        for unit in [
            "app-gnome-org.gnome.TextEditor-4242.scope",
            "app-org.kde.dolphin@3a1b.service",
            "app-flatpak-org.mozilla.firefox-77.scope",
        ] {
            assert!(in_app_unit(&format!("{user}/{unit}")), "{unit}");
        }
        for other in [
            format!("{user}/pipewire.service"),
            format!("{user}/app-foo.slice"),
            "/user.slice/user-1000.slice/session-2.scope".to_owned(),
            "/".to_owned(),
        ] {
            assert!(!in_app_unit(&other), "{other}");
        }
    }

    /// A child and a grandchild of the front process are within reach, a great-grandchild,
    /// the front itself and an unrelated process are not. (The ownership half is `admit`'s,
    /// tested with the sources; as root, which runs this, every process here is root's.)
    #[test]
    fn launches_are_the_front_apps_children_and_grandchildren() {
        let me = std::process::id() as i32;
        // sh → sh → sh → sleep: depths 1, 2, 3, 4 below this test.
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sh -c 'sh -c \"sleep 5; :\"; :'; :"])
            .spawn()
            .unwrap();
        let top = sh.id() as i32;
        let end = Instant::now() + Duration::from_secs(3);
        let mut chain = vec![top];
        while chain.len() < 4 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
            chain = process_tree::with_descendants(top).into_iter().collect();
        }
        let reached: Vec<_> = chain.iter().filter(|&&p| below(p, me)).copied().collect();
        let depth2 = chain
            .iter()
            .filter(|&&p| process_tree::parent(p).ok() == Some(top))
            .count();
        let others = [below(me, me), below(1, me)];
        let nothing_in_front = launched_from(top, None, &[], &Lineage::default());
        for p in chain.iter().rev() {
            // SAFETY: kill has no memory preconditions; these are our own children.
            unsafe { libc::kill(*p, libc::SIGKILL) };
        }
        sh.wait().unwrap();
        assert_eq!(chain.len(), 4, "{chain:?}");
        assert_eq!(depth2, 1);
        assert_eq!(
            reached.len(),
            2,
            "the child and the grandchild only: {reached:?} of {chain:?}"
        );
        assert!(reached.contains(&top));
        assert_eq!(others, [false, false]);
        assert!(nothing_in_front.is_none());
    }
}
