//! Seed 003 §5.2 on a stock kernel (issue 33): a critical thread's read served by a FUSE daemon
//! raises the daemon's thread that serves it, for the interaction it served, and restores it
//! after. A real FUSE file system (Debian's `bindfs`, multi-threaded: libfuse's pool takes
//! requests in turn) mounted by the test, and the tracker's relay chain with an app that reads a
//! file through it at each input (the fixture's `stage fuseapp`):
//! dispatcher → app ⇄ bindfs (through `/dev/fuse`) → app → compositor.
//!
//! - As the user's own mount (the app's user runs bindfs, through `fusermount3`): the serving
//!   thread is raised at each interaction, its main thread never, and every bindfs thread is
//!   back exactly as it was once the interactions stop — while the app is still in front (the
//!   tracker drops a FUSE daemon's thread when the episode it served resolves,
//!   `uxsched_tracker::fuse`) — and again after unfocus and the daemon's stop. Another bindfs
//!   of the user, busy serving a reader that no input leads to, is never changed.
//! - As root's mount serving the user's app: the tracker finds the serving thread (it learns it
//!   critical), and the daemon leaves it alone: another user's process is never raised because
//!   an app woke it (docs/mechanisms.md, "FUSE daemons").

mod common;

use common::*;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use uxsched_os::ioprio;
use uxsched_os::sched::{self, SCHED_FIFO};

/// The app's user, as in the other tests that run children as another user.
const USER: u32 = 65534;
/// The file the app reads at each input: several of FUSE's 128 KiB reads, some in parallel
/// (read-ahead), so the pool serves with more than one thread.
const FILE_BYTES: usize = 1 << 20;

/// `/dev/fuse` at 0666 while the test runs, as udev makes it on a desktop
/// (`KERNEL=="fuse", MODE="0666"`): libfuse opens it before it asks `fusermount3` to mount.
/// Its mode is put back after.
struct FuseDevice(u32);

impl FuseDevice {
    fn open_to_all() -> FuseDevice {
        let mode = std::fs::metadata("/dev/fuse")
            .expect("/dev/fuse: load the fuse module (modprobe fuse)")
            .permissions()
            .mode();
        let p = std::fs::Permissions::from_mode(0o666);
        std::fs::set_permissions("/dev/fuse", p).unwrap();
        FuseDevice(mode & 0o7777)
    }
}

impl Drop for FuseDevice {
    fn drop(&mut self) {
        let p = std::fs::Permissions::from_mode(self.0);
        let _ = std::fs::set_permissions("/dev/fuse", p);
    }
}

/// The FIFOs of the chain, a directory with the big file, and bindfs mounting it.
struct Setup {
    dir: PathBuf,
    bindfs: Child,
    stages: Vec<Child>,
    _device: Option<FuseDevice>,
}

impl Setup {
    /// bindfs as `as_user` (the app's user's own mount) or as root (a system mount), in a
    /// directory named by `name`.
    fn mount(name: &str, as_user: bool) -> Setup {
        let dir =
            (std::env::temp_dir()).join(format!("uxsched-fuse-{name}-{}", std::process::id()));
        let (src, mnt) = (dir.join("src"), dir.join("mnt"));
        for d in [&dir, &src, &mnt] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let data: Vec<u8> = (0..FILE_BYTES).map(|i| (i % 251) as u8).collect();
        std::fs::write(src.join("big"), data).unwrap();
        std::os::unix::fs::chown(&mnt, Some(USER), Some(USER)).unwrap();
        for f in ["input", "frame"] {
            let path = std::ffi::CString::new(dir.join(f).to_str().unwrap()).unwrap();
            // SAFETY: mkfifo with a valid path.
            assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o666) }, 0);
            std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o666)).unwrap();
        }
        let device = as_user.then(FuseDevice::open_to_all);
        let mut cmd = Command::new("bindfs");
        cmd.args(["-f", "--multithreaded"]);
        if as_user {
            // Only the user may use a user's mount (no `user_allow_other` in /etc/fuse.conf).
            cmd.arg("--no-allow-other").uid(USER).gid(USER);
        }
        let bindfs = (cmd.arg(&src).arg(&mnt))
            .stdin(Stdio::null())
            .spawn()
            .expect("bindfs: install it (scripts/setup.sh: apt-get install bindfs fuse3)");
        let setup = Setup {
            dir,
            bindfs,
            stages: Vec::new(),
            _device: device,
        };
        wait_until("bindfs mounted", Duration::from_secs(10), || {
            let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
            (mounts.lines()).any(|l| l.split(' ').nth(1) == mnt.to_str())
        });
        // libfuse's pool grows while all its threads are busy: reads before the test let it
        // reach the size the app's reads need, so that the threads compared exist before.
        for _ in 0..3 {
            let read = Command::new("cat")
                .arg(mnt.join("big"))
                .uid(USER)
                .gid(USER)
                .stdout(Stdio::null())
                .status();
            assert!(
                read.is_ok_and(|s| s.success()),
                "cannot read through bindfs"
            );
        }
        setup
    }

    fn pid(&self) -> i32 {
        self.bindfs.id() as i32
    }

    /// The chain's processes: the display and the input dispatcher as root, the app as the
    /// user; returns the app's pid and its reading thread.
    fn start_chain(&mut self) -> (i32, i32) {
        for (stage, user) in [("compositor", None), ("fuseapp", Some(USER))] {
            let mut c = Command::new(any_user::exe_for_any_user());
            c.args(["stage", stage])
                .env("UXSCHED_TEST_FIFOS", &self.dir)
                .env("UXSCHED_TEST_FUSE_FILE", self.dir.join("mnt/big"))
                .stdout(Stdio::null());
            if let Some(u) = user {
                c.uid(u).gid(u);
            }
            self.stages.push(c.spawn().unwrap());
        }
        let app = self.stages[1].id() as i32;
        let mut reader = None;
        wait_until("the app's reading thread", Duration::from_secs(5), || {
            reader = tids(app).into_iter().find(|&t| comm(t) == "fuseapp");
            reader.is_some()
        });
        (app, reader.unwrap())
    }

    /// Inputs every 30 ms from now on (they stop when the dispatcher is killed).
    fn start_inputs(&mut self) {
        let c = Command::new(any_user::exe_for_any_user())
            .args(["stage", "dispatcher"])
            .env("UXSCHED_TEST_FIFOS", &self.dir)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        self.stages.push(c);
    }

    /// A process of the user that reads the mount over and over, not on any interaction's path.
    fn start_background_reader(&mut self) {
        let file = self.dir.join("mnt/big");
        let c = Command::new("sh")
            .args(["-c", "while cat \"$0\"; do sleep 0.005; done >/dev/null"])
            .arg(file)
            .uid(USER)
            .gid(USER)
            .spawn()
            .unwrap();
        self.stages.push(c);
    }

    /// Stop the dispatcher, keeping its FIFO open (the app exits when it closes).
    fn stop_inputs(&mut self) {
        let d = self.stages.last().expect("the dispatcher");
        // SAFETY: kill with the pid of our own child; Drop kills it.
        unsafe { libc::kill(d.id() as i32, libc::SIGSTOP) };
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        for c in &mut self.stages {
            let _ = c.kill();
            let _ = c.wait();
        }
        // SIGTERM: libfuse unmounts on its way out; a lazy unmount covers a daemon that did not.
        // SAFETY: kill with the pid of our own child.
        unsafe { libc::kill(self.bindfs.id() as i32, libc::SIGTERM) };
        let _ = self.bindfs.wait();
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.join("mnt"))
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether every thread of `pid` has what it had in `before`, and a thread the pool started
/// since what its main thread had.
fn as_before(pid: i32, before: &[(i32, sched::SchedAttr, String, u16)]) -> bool {
    let main = before.iter().find(|b| b.0 == pid).expect("the main thread");
    let now = snapshot(&tids(pid));
    (now.iter()).all(|n| {
        let was = before.iter().find(|b| b.0 == n.0).unwrap_or(main);
        (&n.1, &n.2, n.3) == (&was.1, &was.2, was.3)
    })
}

fn assert_as_before(what: &str, pid: i32, before: &[(i32, sched::SchedAttr, String, u16)]) {
    let end = Instant::now() + Duration::from_secs(5);
    while !as_before(pid, before) {
        let now = snapshot(&tids(pid));
        assert!(
            Instant::now() < end,
            "{what}: not restored\n before {before:?}\n now    {now:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The bindfs threads raised to the critical set's SCHED_FIFO priority, seen by sampling every
/// millisecond for `span`; how often one went back to the fair class while the app stayed in
/// front (the end of the episode it served); and how often a raised one had the I/O priority
/// of the app's reading thread (`requester`), when that is not the default.
#[derive(Debug, Default)]
struct Seen {
    raised: BTreeSet<i32>,
    restored_between: usize,
    samples: usize,
    samples_raised: usize,
    requester_io_class: usize,
}

fn watch(pid: i32, requester: i32, span: Duration) -> Seen {
    let rt = |t: i32| {
        sched::get(t).is_ok_and(|a| {
            a.policy == SCHED_FIFO && a.priority == uxsched_daemon::policy::RT_PRIORITY
        })
    };
    let mut seen = Seen::default();
    let mut now_raised = BTreeSet::new();
    let end = Instant::now() + span;
    while Instant::now() < end {
        let raised: BTreeSet<i32> = tids(pid).into_iter().filter(|&t| rt(t)).collect();
        seen.restored_between += now_raised.difference(&raised).count();
        seen.samples += 1;
        seen.samples_raised += usize::from(!raised.is_empty());
        seen.raised.extend(&raised);
        let io = ioprio::get(requester).unwrap_or(0);
        seen.requester_io_class +=
            usize::from(io != 0 && (raised.iter()).any(|&t| ioprio::get(t).is_ok_and(|v| v == io)));
        now_raised = raised;
        std::thread::sleep(Duration::from_millis(1));
    }
    seen
}

fn daemon(store: &Path) -> Daemon {
    let d = Daemon::start(
        "uxsched",
        &format!("[tracker]\nstore = \"{}\"\n", store.display()),
    );
    assert_eq!(d.status().tracker, "running", "{:?}", d.status());
    d
}

#[test]
#[ignore = "needs root, BPF and bindfs (scripts/setup.sh): make test runs it as root"]
fn a_users_fuse_daemon_thread_is_raised_while_it_serves_a_critical_read_and_restored_after() {
    require_root();
    let _s = serial();
    ordinary();
    let mut s = Setup::mount("app", true);
    let bindfs = s.pid();
    let before = snapshot(&tids(bindfs));
    // Another FUSE daemon of the user, busy serving a reader that no input leads to.
    let mut busy = Setup::mount("busy", true);
    let busy_before = snapshot(&tids(busy.pid()));
    busy.start_background_reader();
    let store = s.dir.join("tracker.sqlite");
    let mut d = daemon(&store);
    let (app, reader) = s.start_chain();
    d.focus(Some(app));
    s.start_inputs();
    wait_until("the app raised", Duration::from_secs(5), || {
        sched::get(reader).is_ok_and(|a| a.policy == SCHED_FIFO)
    });
    let seen = watch(bindfs, reader, Duration::from_secs(3));
    eprintln!("bindfs {bindfs} threads {:?}: {seen:?}", tids(bindfs));
    assert!(
        !seen.raised.is_empty(),
        "no bindfs thread was raised while serving the critical reads"
    );
    assert!(
        !seen.raised.contains(&bindfs),
        "bindfs's main thread serves no request (libfuse's loop waits there) and was raised"
    );
    assert!(
        as_before(busy.pid(), &busy_before),
        "the FUSE daemon off the path was changed"
    );
    assert!(
        seen.restored_between >= 3,
        "the serving threads were not restored between interactions: {seen:?}"
    );
    // The requester's I/O class too (the front's class, `[storage] front_class`), written by
    // the pass after the fast path's CPU boost: seen in some of the samples.
    assert!(
        seen.requester_io_class > 0,
        "no serving thread had the app's I/O class: {seen:?}"
    );
    // Once the interactions stop, with the app still in front, everything is as it was: each
    // thread at the fair class, nice 0, no slice, its own I/O priority and cgroup.
    s.stop_inputs();
    assert_as_before(
        "bindfs after the last interaction (app in front)",
        bindfs,
        &before,
    );
    assert!(
        sched::get(reader).is_ok_and(|a| a.policy == SCHED_FIFO),
        "the app's reading thread stays critical while in front"
    );
    // How late the boosts came (every new member: the app's reader at the focus, bindfs's
    // threads at each interaction), with --nocapture.
    eprintln!("critical → boosted: {:?}", d.status().boost_latency);
    d.focus(None);
    d.stop(libc::SIGTERM);
    assert_as_before("bindfs after unfocus and stop", bindfs, &before);
}

#[test]
#[ignore = "needs root, BPF and bindfs (scripts/setup.sh): make test runs it as root"]
fn a_root_fuse_daemon_serving_the_users_critical_read_is_found_and_left_alone() {
    require_root();
    let _s = serial();
    ordinary();
    let mut s = Setup::mount("root", false);
    let bindfs = s.pid();
    let before = snapshot(&tids(bindfs));
    let store = s.dir.join("tracker.sqlite");
    let mut d = daemon(&store);
    let (app, reader) = s.start_chain();
    d.focus(Some(app));
    s.start_inputs();
    wait_until("the app raised", Duration::from_secs(5), || {
        sched::get(reader).is_ok_and(|a| a.policy == SCHED_FIFO)
    });
    let seen = watch(bindfs, reader, Duration::from_secs(2));
    s.stop_inputs();
    d.stop(libc::SIGTERM); // the store writes what it held back
    assert!(seen.raised.is_empty(), "root's bindfs was raised: {seen:?}");
    let found = uxsched_tracker::store::list(&store, None).unwrap();
    assert!(
        (found.iter()).any(|p| p.context.thread == "bindfs" && p.decision.critical),
        "the tracker did not find root's bindfs on the critical read's path: {found:?}"
    );
    assert!(as_before(bindfs, &before), "root's bindfs changed");
}
