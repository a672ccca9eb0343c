//! Helpers for the real-kernel tests: a daemon child process, test "app" processes, polling.
//!
//! The children are the fixture binary built with the tests (`src/bin/uxsched-daemon-fixture.rs`,
//! the role as its argument), so the tests need nothing but this crate. Every child is killed by
//! a Drop guard, and the daemon guard removes its cgroups if it could not — the machine is left
//! as found even when an assertion fails.

#![allow(dead_code)]

pub mod any_user;
pub mod bus;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use uxsched_client::control::{self, Request, Status};
use uxsched_daemon::actuators::cgroup::Hierarchy;
use uxsched_os::ioprio;
use uxsched_os::sched::{self, SchedAttr};

pub use any_user::FIXTURE;

/// The daemon's config file (role `daemon`), or the socket a client role talks to.
pub const CONFIG_ENV: &str = "UXSCHED_TEST_CONFIG";

/// Tests measure and change scheduling of real processes on a 2-CPU machine: one at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The fixture playing `role` (its stdin and stdout closed).
pub fn child(role: &str) -> Command {
    let mut c = Command::new(FIXTURE);
    c.arg(role).stdin(Stdio::null()).stdout(Stdio::null());
    c
}

/// A uxsched daemon child with its own socket, journal and cgroup name.
pub struct Daemon {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub socket: PathBuf,
    pub cgroup_name: String,
    child: Option<Child>,
    spawns: u32,
}

impl Daemon {
    /// Write a config (`mode` plus `extra` TOML lines) in a fresh directory.
    pub fn configure(mode: &str, extra: &str) -> Daemon {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("uxsched-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cgroup_name = format!("uxsched-test-{}-{n}", std::process::id());
        let socket = dir.join("uxsched.sock");
        let config = dir.join("uxsched.toml");
        // The tracker's store stays in the test's directory unless the test configures it, and
        // the uxsched mode's fair lever is what these tests check unless they name a lever
        // (the rt lever, the default, has tests of its own: `real_kernel.rs`, `rt_guard.rs`,
        // `tracker_chain.rs`).
        let extra = if extra.contains("[tracker]") {
            extra.to_owned()
        } else {
            format!(
                "{extra}\n[tracker]\nstore = \"{}\"\nlever = \"fair\"\n",
                dir.join("tracker.sqlite").display()
            )
        };
        // Only the socket's focus, unless the test names sources: `auto` (the default) would
        // follow whatever desktop sessions the machine has.
        let extra = if extra.contains("sources") {
            extra
        } else {
            format!("sources = [\"explicit\"]\n{extra}")
        };
        // Fast passes and no rate limit, unless the test sets them itself.
        let timing: String = [("rescan_ms", "50"), ("min_focus_interval_ms", "0")]
            .iter()
            .filter(|(key, _)| !extra.contains(key))
            .map(|(key, value)| format!("{key} = {value}\n"))
            .collect();
        std::fs::write(
            &config,
            format!(
                "mode = \"{mode}\"\nsocket = \"{}\"\njournal = \"{}\"\ncgroup_name = \"{cgroup_name}\"\n\
                 {timing}log_level = \"debug\"\n{extra}\n",
                socket.display(),
                dir.join("journal.sqlite").display()
            ),
        )
        .unwrap();
        Daemon {
            dir,
            config,
            socket,
            cgroup_name,
            child: None,
            spawns: 0,
        }
    }

    pub fn start(mode: &str, extra: &str) -> Daemon {
        let mut d = Daemon::configure(mode, extra);
        d.spawn();
        d
    }

    /// (Re)start the daemon process with this config and wait until it answers.
    pub fn spawn(&mut self) {
        self.spawns += 1;
        let log =
            std::fs::File::create(self.dir.join(format!("daemon-{}.log", self.spawns))).unwrap();
        let child = child("daemon")
            .env(CONFIG_ENV, &self.config)
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let socket = self.socket.clone();
        wait_until("daemon status", Duration::from_secs(20), || {
            control::call(&socket, &Request::Status).is_ok()
        });
    }

    /// Run a second daemon with the same config to completion (it must refuse to start).
    pub fn run_second(&self) -> (std::process::ExitStatus, String) {
        let out = child("daemon")
            .env(CONFIG_ENV, &self.config)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub fn status(&self) -> Status {
        control::call(&self.socket, &Request::Status)
            .unwrap()
            .status
            .unwrap()
    }

    pub fn send(&self, req: Request) -> Result<control::Response, control::ClientError> {
        control::call(&self.socket, &req)
    }

    pub fn focus(&self, pid: Option<i32>) {
        self.send(Request::Focus { pid }).unwrap();
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// Stop with a signal; `SIGTERM` must restore everything, `SIGKILL` restores nothing.
    pub fn stop(&mut self, signal: i32) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: signalling our own child process.
            unsafe { libc::kill(c.id() as i32, signal) };
            let status = c.wait().unwrap();
            if signal == libc::SIGTERM {
                assert!(status.success(), "daemon exited with {status}");
            }
        }
    }

    /// `fg` or `bg` group directory.
    pub fn group_dir(&self, group: &str) -> PathBuf {
        Hierarchy::detect()
            .unwrap()
            .mount()
            .join(format!("{}-{group}", self.cgroup_name))
    }

    /// A group's weight as its file reads, in the hierarchy's own unit (`cpu.shares` on v1,
    /// `cpu.weight` on v2: compare with [`native_weight`]).
    pub fn weight(&self, group: &str) -> String {
        let file = match Hierarchy::detect().unwrap() {
            Hierarchy::V1 { .. } => "cpu.shares",
            Hierarchy::V2 { .. } => "cpu.weight",
        };
        let now = std::fs::read_to_string(self.group_dir(group).join(file)).unwrap();
        now.trim().to_owned()
    }

    /// What a group holds: its threads on v1 (`tasks`), its processes on v2 (`cgroup.procs`).
    pub fn members(&self, group: &str) -> String {
        let file = match Hierarchy::detect().unwrap() {
            Hierarchy::V1 { .. } => "tasks",
            Hierarchy::V2 { .. } => "cgroup.procs",
        };
        std::fs::read_to_string(self.group_dir(group).join(file)).unwrap_or_default()
    }

    /// A group's path as /proc/<tid>/cgroup shows it.
    pub fn group_rel(&self, group: &str) -> String {
        format!("/{}-{group}", self.cgroup_name)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop(libc::SIGTERM);
        if std::thread::panicking() {
            for i in 1..=self.spawns {
                let log = std::fs::read_to_string(self.dir.join(format!("daemon-{i}.log")));
                eprintln!("--- daemon log {i} ---\n{}", log.unwrap_or_default());
            }
        }
        // Safety net: if a failing test left the groups, empty and remove them.
        let h = Hierarchy::detect().unwrap();
        for g in ["fg", "bg"] {
            for tid in self.members(g).lines().filter_map(|l| l.parse().ok()) {
                let _ = h.move_to(tid, "/");
            }
            let _ = std::fs::remove_dir(self.group_dir(g));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A test "app", the fixture's `app SPEC` role: a child process whose threads are named by
/// `spec` (comma-separated names; `spin…` threads busy-loop, `churn` keeps starting threads that
/// live ~1 ms, others sleep; `late:NAME` starts 300 ms later; `reader=PATH` reads a file slowly).
pub struct App {
    child: Child,
}

impl App {
    pub fn spawn(spec: &str) -> App {
        App::spawn_with(spec, |_| {})
    }

    pub fn spawn_with(spec: &str, adjust: impl FnOnce(&mut Command)) -> App {
        let mut c = child("app");
        c.arg(spec).stderr(Stdio::null());
        // Each test app is its own session (own autogroup), like a launched app: what the
        // daemon does to an app's autogroup never reaches the test runner's session.
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut c, || {
                libc::setsid();
                Ok(())
            });
        }
        adjust(&mut c);
        let app = App {
            child: c.spawn().unwrap(),
        };
        let want = spec
            .split(',')
            .filter(|s| !s.is_empty() && !s.starts_with("late:") && !s.starts_with("reader="))
            .count()
            + 1;
        let pid = app.pid();
        wait_until("app threads", Duration::from_secs(5), || {
            tids(pid).len() >= want
        });
        app
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn tids(&self) -> Vec<i32> {
        tids(self.pid())
    }

    /// The tid of the thread named `name`.
    pub fn tid(&self, name: &str) -> i32 {
        let pid = self.pid();
        let mut found = None;
        wait_until(&format!("thread {name}"), Duration::from_secs(5), || {
            found = tids(pid).into_iter().find(|&t| comm(t) == name);
            found.is_some()
        });
        found.unwrap()
    }

    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn tids(pid: i32) -> Vec<i32> {
    uxsched_os::identity::threads(pid)
}

pub fn comm(tid: i32) -> String {
    uxsched_os::identity::stat(tid)
        .map(|s| s.comm)
        .unwrap_or_default()
}

pub fn attr(tid: i32) -> SchedAttr {
    sched::get(tid).unwrap()
}

pub fn nice(tid: i32) -> i32 {
    attr(tid).nice
}

/// `shares` in this machine's cgroup weight unit, as [`Daemon::weight`] reads it.
pub fn native_weight(shares: u64) -> String {
    Hierarchy::detect()
        .unwrap()
        .native_weight(shares)
        .to_string()
}

pub fn cgroup(tid: i32) -> String {
    Hierarchy::detect().unwrap().current(tid).unwrap()
}

/// The real-kernel tests are `#[ignore]`d so that a plain `cargo test` lists them as ignored;
/// `make test` runs them as root with `--include-ignored`, and run without root they fail here
/// instead of passing untested.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(root, "this test changes other processes' scheduling settings and needs root: run it as root (make test does)");
}

/// Everything that must come back exactly: sched attributes, cgroup, ioprio of each thread.
pub fn snapshot(tids: &[i32]) -> Vec<(i32, sched::SchedAttr, String, u16)> {
    tids.iter()
        .map(|&t| (t, attr(t), cgroup(t), ioprio::get(t).unwrap()))
        .collect()
}

pub fn all_restored(before: &[(i32, sched::SchedAttr, String, u16)]) -> bool {
    snapshot(&before.iter().map(|b| b.0).collect::<Vec<_>>()) == before
}

/// Wait until every thread is back to `before`; on timeout show what differs.
pub fn assert_restored(what: &str, before: &[(i32, sched::SchedAttr, String, u16)]) {
    let end = Instant::now() + Duration::from_secs(5);
    while !all_restored(before) {
        if Instant::now() > end {
            let now = snapshot(&before.iter().map(|b| b.0).collect::<Vec<_>>());
            panic!("{what}: not restored\n before {before:?}\n now    {now:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn set_nice(tid: i32, nice: i32) {
    let mut a = attr(tid);
    a.nice = nice;
    a.runtime = 0;
    sched::set(tid, &a).unwrap();
}

/// The calling thread at SCHED_OTHER nice 0 (the tests may run under `chrt -i 0`; uxsched
/// changes only fair-class threads, and children inherit this).
pub fn ordinary() {
    let a = uxsched_os::sched::SchedAttr::ordinary();
    uxsched_os::sched::set(0, &a).unwrap();
}
