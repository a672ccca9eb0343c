//! The apps the reliability benchmark focuses: real processes of this binary
//! (`uxsched reliability-app KIND`), each in a session of its own, with a UI thread, a
//! `RenderThread` and a worker that wake up every 20 ms. `forker` forks a long-lived child each
//! time it sees itself boosted (a child born boosted must not stay so); `shared` starts a CPU
//! hog in its own session (a session autogroup raised for the app raises the hog too).

use super::settings::{self, Leftover, Thread};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AppKind {
    Plain,
    Forker,
    Shared,
}

/// The 8 apps of one round: 3 plain, 3 that fork once boosted, 2 sharing a session with a hog.
pub const ROUND: [AppKind; 8] = [
    AppKind::Plain,
    AppKind::Forker,
    AppKind::Shared,
    AppKind::Plain,
    AppKind::Forker,
    AppKind::Shared,
    AppKind::Plain,
    AppKind::Forker,
];

const MAX_CHILDREN: usize = 4;

/// The body of `uxsched reliability-app KIND`: runs until killed (or its parent dies).
pub fn app_main(kind: AppKind) -> Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let mut hog = None;
    if kind == AppKind::Shared {
        hog = Some(
            Command::new("stress-ng")
                .args([
                    "--cpu",
                    "1",
                    "--cpu-load",
                    "20",
                    "--quiet",
                    "--timeout",
                    "1h",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .context("starting stress-ng (Debian package stress-ng)")?,
        );
    }
    for name in ["RenderThread", "worker"] {
        std::thread::Builder::new()
            .name(name.into())
            .spawn(|| loop {
                tick();
            })?;
    }
    let me = std::process::id() as i32;
    let born = Thread::read(me).context("reading this process's own settings")?;
    let mut children: Vec<Child> = Vec::new();
    let mut last_fork = Instant::now();
    loop {
        tick();
        let boosted = Thread::read(me).is_some_and(|now| now != born);
        if kind == AppKind::Forker
            && boosted
            && children.len() < MAX_CHILDREN
            && last_fork.elapsed() > Duration::from_millis(200)
        {
            children.push(Command::new("sleep").arg("86400").spawn()?);
            last_fork = Instant::now();
        }
        let _ = &hog;
    }
}

/// 0.2 ms of work, then 20 ms asleep: threads that run, at ~1 % of a CPU each (24 of them).
fn tick() {
    let end = Instant::now() + Duration::from_micros(200);
    let mut x = 0u64;
    while Instant::now() < end {
        x = std::hint::black_box(x.wrapping_add(1));
    }
    std::thread::sleep(Duration::from_millis(20));
}

/// One running app, its session, and what every task in that session looked like before the
/// daemon ever ran.
pub struct App {
    pub kind: AppKind,
    child: Child,
    pub pid: i32,
    baseline: BTreeMap<i32, Thread>,
}

impl App {
    /// One app of each kind in [`ROUND`], each with its baseline recorded.
    pub fn spawn_round(exe: &Path) -> Result<Vec<App>> {
        let mut apps = ROUND
            .iter()
            .map(|&k| App::spawn(exe, k))
            .collect::<Result<Vec<_>>>()?;
        for a in &mut apps {
            a.record_baseline()?;
        }
        Ok(apps)
    }

    pub fn spawn(exe: &Path, kind: AppKind) -> Result<App> {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(exe);
        cmd.arg("reliability-app")
            .arg(format!("{kind:?}").to_lowercase())
            .stdin(Stdio::null());
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let child = cmd.spawn().context("starting a reliability app")?;
        let pid = child.id() as i32;
        Ok(App {
            kind,
            child,
            pid,
            baseline: BTreeMap::new(),
        })
    }

    /// Wait until the app's threads (and hog) run, then record every task of its session.
    pub fn record_baseline(&mut self) -> Result<()> {
        let want_procs = if self.kind == AppKind::Shared { 2 } else { 1 };
        let end = Instant::now() + Duration::from_secs(10);
        while settings::threads(self.pid).len() < 3 || self.processes().len() < want_procs {
            anyhow::ensure!(
                Instant::now() < end,
                "app {} did not start its threads",
                self.pid
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(100)); // stress-ng forks its worker
        self.baseline = self
            .tasks()
            .filter_map(|(_, t)| Some((t, Thread::read(t)?)))
            .collect();
        Ok(())
    }

    /// SIGKILL the app's own process (not its session): its children live on in the session,
    /// which must not stay boosted on the dead app's behalf.
    pub fn kill_main(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Processes of the app's session: the app, its children, the hog.
    pub fn processes(&self) -> Vec<i32> {
        crate::sys::session_members(self.pid)
    }

    /// (process, thread) of every task in the session now.
    fn tasks(&self) -> impl Iterator<Item = (i32, i32)> {
        self.processes()
            .into_iter()
            .flat_map(|p| settings::threads(p).into_iter().map(move |t| (p, t)))
    }

    /// Settings of any task in the session that differ from before the daemon ran; a task
    /// born since (a forked child, a new thread) must look like the app's main thread did.
    pub fn leftovers(&self) -> Vec<Leftover> {
        let main = &self.baseline[&self.pid];
        let mut out = Vec::new();
        for (p, t) in self.tasks() {
            let Some(now) = Thread::read(t) else { continue };
            let want = self.baseline.get(&t).unwrap_or(main);
            let changes = now.diff(want);
            if !changes.is_empty() {
                let comm = crate::sys::thread_name(p, t).unwrap_or_default();
                let role = if p == self.pid { "app" } else { "child/hog" };
                out.push(Leftover {
                    what: format!(
                        "{:?} app {} {role} pid {p} tid {t} ({comm})",
                        self.kind, self.pid
                    ),
                    changes,
                });
            }
        }
        out
    }

    /// The CPU weights of the cgroups the app's session sat in before the daemon ran.
    pub fn cgroup_weights(&self) -> std::io::Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        for t in self.baseline.values() {
            out.extend(settings::cgroup_weights(&t.cgroups)?);
        }
        Ok(out)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        crate::sys::kill_session(self.pid);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
