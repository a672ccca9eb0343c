//! Real applications (issue 9): unmodified Debian programs on a virtual desktop (Xvfb + openbox,
//! `display.rs`), typed into through XTEST by a real-time measuring client (`client.rs`,
//! `input.rs`) that times each keystroke until the program's window reports damage
//! (`damage.rs`): keystroke → screen latency.
//!
//! - `xterm`: the keystroke travels X server → xterm → pty (a kernel worker flushes it) →
//!   `cat` in raw mode, which echoes it → pty → xterm → X server. The child is on the path.
//! - `xedit`: an Xaw text widget draws the keystroke itself: X server → xedit → X server.
//! - `chromium`: a `<textarea>` in Debian's Chromium, run as an unprivileged user with its own
//!   sandbox (`browser.rs`, `user.rs`): X server → browser → renderer → GPU process (software
//!   compositing) → X server. The browser's helpers are descendants of the app.
//!
//! - `launch`: not a keystroke but a program started cold from a terminal (`launch.rs`): the
//!   Return that runs `mousepad launch.txt &` in an xterm's shell → the new window mapped.
//!
//! Processes of one run: the desktop (two sessions of their own, like system services), the
//! program — the **app** modes act on — both as the unprivileged [`AppUser`] (as the load is,
//! `loads/`), the program started where the layout puts the models' apps (the
//! runner's session; in `units`, the app's cgroup, its child with it), and the measuring
//! client in a session of its own. [`XappProcs`] plays the runner's
//! side of the model protocol (`ready`, go, output JSON) through the client.

mod browser;
mod client;
mod damage;
mod display;
pub mod frame_path;
mod input;
mod launch;
mod mapped;
mod typing;
mod user;

pub use client::{run as client_main, Probe, CLIENT_RT_PRIORITY};
pub use display::Desktop;
pub use launch::run as launch_main;
pub use user::{AppUser, Scratch, USER as APP_USER};

use crate::layout::ActiveLayout;
use crate::models::{self, ModelKind, ModelOutput};
use crate::modes::Targets;
use crate::runner::{self, Foreground, Plan};
use crate::sys;
use anyhow::{bail, Context, Result};
use std::ffi::OsStr;
use std::io::{BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

/// The desktop's programs and their Debian packages.
const DESKTOP: [(&str, &str); 2] = [("Xvfb", "xvfb"), ("openbox", "openbox")];

/// The program a real-application scenario runs, and its Debian package.
pub fn program(kind: ModelKind) -> Option<(&'static str, &'static str)> {
    match kind {
        // `launch`: the focused terminal; what it launches is [`launch::PROGRAM`].
        ModelKind::Xterm | ModelKind::Launch => Some(("xterm", "xterm")),
        ModelKind::Xedit => Some(("xedit", "x11-apps")),
        ModelKind::Chromium => Some(("chromium", "chromium")),
        _ => None,
    }
}

/// Refuse, naming the packages to install, when a program the scenario needs is not on `path`
/// (never a silent fallback to another program or display).
pub fn require_programs(kind: ModelKind, path: &OsStr) -> Result<()> {
    let app = program(kind)
        .with_context(|| format!("{} is not a real-application scenario", kind.name()))?;
    let missing: Vec<(&str, &str)> = DESKTOP
        .into_iter()
        .chain([app])
        .chain((kind == ModelKind::Launch).then_some(launch::PROGRAM))
        .filter(|(bin, _)| display::find_program(bin, path).is_none())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let bins: Vec<&str> = missing.iter().map(|m| m.0).collect();
    let pkgs: Vec<&str> = missing.iter().map(|m| m.1).collect();
    bail!(
        "scenario '{}' needs {} (not found on PATH): run `make setup` or `apt-get install {}`",
        kind.name(),
        bins.join(", "),
        pkgs.join(" ")
    )
}

/// The program's command line on `display`; `dir` holds its scratch files (xterm, xedit; the
/// browser's is `browser.rs`'s, with its user and sandbox).
pub fn app_command(kind: ModelKind, display: &str, dir: &Path) -> Result<Command> {
    let mut cmd = match kind {
        ModelKind::Xterm => {
            let mut c = Command::new("xterm");
            // Raw mode without echo: the line discipline passes each byte on at once and
            // `cat` (not the kernel) echoes it, so the child is on the keystroke's path.
            c.args([
                "-geometry",
                "80x24",
                "-e",
                "sh",
                "-c",
                "stty raw -echo && exec cat",
            ]);
            c
        }
        ModelKind::Xedit => {
            let file = dir.join("typed.txt");
            std::fs::write(&file, "")?;
            let mut c = Command::new("xedit");
            c.arg(file);
            c
        }
        ModelKind::Chromium | ModelKind::Launch => {
            bail!("{} is started by start_app, as the bench user", kind.name())
        }
        other => bail!("{} is not a real-application scenario", other.name()),
    };
    cmd.env("DISPLAY", display).current_dir(dir);
    Ok(cmd)
}

/// A started program: its process (the app), and for the browser whether its own sandbox runs.
pub struct App {
    pub child: Child,
    /// `Some(false)`: Chromium could not build its sandbox and runs with `--no-sandbox`.
    pub sandbox: Option<bool>,
    /// The browser's `TMPDIR`, removed after it.
    pub tmp: Option<Scratch>,
}

/// Start the program on `desktop`, its output in `dir/app.log`, in the caller's session and,
/// with `cgroup` (the layout's app unit, `cgroup.procs` opened for writing), in that cgroup.
pub fn start_app(
    kind: ModelKind,
    desktop: &Desktop,
    dir: &Path,
    cgroup: Option<&std::fs::File>,
) -> Result<App> {
    let cgroup_fd = cgroup.map(|f| f.as_raw_fd());
    if kind == ModelKind::Chromium {
        let b = browser::start(desktop.display(), dir, cgroup_fd)?;
        return Ok(App {
            child: b.child,
            sandbox: Some(b.sandbox),
            tmp: Some(b.tmp),
        });
    }
    if kind == ModelKind::Launch {
        return Ok(App {
            child: launch::start_terminal(desktop.display(), dir, cgroup_fd)?,
            sandbox: None,
            tmp: None,
        });
    }
    let log = std::fs::File::create(dir.join("app.log"))?;
    let (bin, _) = program(kind).context("not a real-application scenario")?;
    let mut cmd = app_command(kind, desktop.display(), dir)?;
    // SAFETY: join_cgroup_in_child only write(2)s to an open fd.
    unsafe {
        cmd.pre_exec(move || crate::layout::join_cgroup_in_child(cgroup_fd));
    }
    // As the desktop's user (registered after the cgroup join, which runs as root); the
    // file xedit edits is that user's.
    let user = AppUser::ensure()?;
    let typed = dir.join("typed.txt");
    if typed.exists() {
        std::os::unix::fs::chown(&typed, Some(user.uid), Some(user.gid))?;
    }
    user.run_as(&mut cmd, &dir.join("home"))?;
    cmd.env("DISPLAY", desktop.display());
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    let child = crate::leftovers::spawn(&mut cmd).with_context(|| format!("starting {bin}"))?;
    Ok(App {
        child,
        sandbox: None,
        tmp: None,
    })
}

/// One run's desktop, program and measuring client; all killed when dropped.
pub struct XappProcs {
    kind: ModelKind,
    client: Child,
    app: Child,
    /// The browser's sandbox (reported as the `sandbox` extra: 1 on, 0 `--no-sandbox`).
    sandbox: Option<bool>,
    /// The browser's `TMPDIR` (dropped after `drop` killed the program).
    _tmp: Option<Scratch>,
    go: Option<ChildStdin>,
    out: PathBuf,
    /// Last: dropped after the program and the client.
    desktop: Desktop,
}

impl XappProcs {
    pub fn spawn(
        plan: &Plan,
        env: &runner::Env,
        layout: &ActiveLayout,
        dir: &Path,
        seed: u64,
    ) -> Result<XappProcs> {
        // The desktop runs as the app's user, as a rootless desktop's does.
        let desktop = Desktop::start_as(&dir.join("desktop"), &AppUser::ensure()?)?;
        let App {
            child: app,
            sandbox,
            tmp,
        } = start_app(plan.scenario, &desktop, dir, layout.app_cgroup()?.as_ref())?;
        let app_pid = app.id() as i32;
        let mut client_cmd = runner::model_command(plan, env, dir, seed, "system");
        client_cmd
            .arg(format!("--app-pid={app_pid}"))
            .env("DISPLAY", desktop.display())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            client_cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut procs = XappProcs {
            kind: plan.scenario,
            client: crate::leftovers::spawn(&mut client_cmd)
                .context("starting the measuring client")?,
            app,
            sandbox,
            _tmp: tmp,
            go: None,
            out: dir.join("system.json"),
            desktop,
        };
        let mut stdout = BufReader::new(procs.client.stdout.take().context("client stdout")?);
        models::expect_ready(&mut stdout).with_context(|| {
            format!(
                "the measuring client on {} (the program's log is {})",
                procs.desktop.display(),
                dir.join("app.log").display()
            )
        })?;
        procs.go = procs.client.stdin.take();
        Ok(procs)
    }
}

impl Foreground for XappProcs {
    /// The program is the app; its X server and its child (xterm's `cat`) are named too, and
    /// modes reach the rest of its process tree through [`Targets::app_family`].
    fn targets(&self, t: &mut Targets) {
        let app = self.app.id() as i32;
        t.app = Some(app);
        t.x_server = Some(self.desktop.server_pid());
        // xterm's one child is `cat`, on the keystroke's path; a browser's children are
        // zygotes and utility processes, not one process on the path (its renderer is a
        // grandchild): they are in the app's family, not named here.
        // `launch`'s terminal's one child is the shell that starts the program.
        if matches!(self.kind, ModelKind::Xterm | ModelKind::Launch) {
            t.app_child = sys::children(app).first().copied();
        }
    }

    fn go(&mut self) -> Result<()> {
        let stdin = self.go.as_mut().context("go sent twice")?;
        stdin.write_all(b"g")?;
        stdin.flush()?;
        Ok(())
    }

    fn finished(&mut self) -> Result<bool> {
        if let Some(s) = self.app.try_wait()? {
            bail!("the program (pid {}) exited during the run: {s}; its log is app.log in the run's directory", self.app.id());
        }
        match self.client.try_wait()? {
            None => Ok(false),
            Some(s) if s.success() => Ok(true),
            Some(s) => {
                crate::cancel::check()?;
                bail!(
                    "the measuring client (pid {}) failed: {s}; its stderr is above",
                    self.client.id()
                )
            }
        }
    }

    fn collect(&self) -> Result<ModelOutput> {
        let text = std::fs::read(&self.out)
            .with_context(|| format!("client output {}", self.out.display()))?;
        let mut out: ModelOutput = serde_json::from_slice(&text)
            .with_context(|| format!("parsing client output {}", self.out.display()))?;
        if let Some(on) = self.sandbox {
            out.extras
                .insert("sandbox".into(), if on { 1.0 } else { 0.0 });
        }
        Ok(out)
    }
}

impl Drop for XappProcs {
    fn drop(&mut self) {
        for child in [&mut self.client, &mut self.app] {
            if child.try_wait().ok().flatten().is_none() {
                sys::kill_tree(child.id() as i32);
            }
            let _ = child.wait();
        }
    }
}
