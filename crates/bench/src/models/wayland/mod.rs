//! The keystroke scenario on Wayland (issue 32, bench `foot`): Debian's sway 1.7 on wlroots'
//! headless backend (`compositor.rs`) with Debian's foot terminal, both run as the bench's
//! unprivileged user ([`AppUser`], `xapp/user.rs`) in one desktop session (one
//! `XDG_RUNTIME_DIR`), typed into through sway's virtual-keyboard protocol by a real-time
//! measuring client that times each keystroke until sway composites a changed frame
//! (wlr-screencopy `copy_with_damage`, `client.rs`), then times focus switches between two
//! terminals until the daemon's boost shows.
//!
//! Processes of one run: sway in a session of its own (a compositor started at login); two
//! foot terminals, **A** (the app modes act on, app id `uxsched-bench-app`) and **B**
//! (`uxsched-bench-other`, the window the focus moves to and back from), each running
//! `sh -c 'stty raw -echo && exec cat'` like xterm's scenario, started by the harness where
//! the layout puts the models' apps (the runner's session; in `units`, the app's cgroup) —
//! not by sway's `exec`, which would put them in sway's session, away from the layout; the
//! measuring client in a session of its own. [`WaylandProcs`] plays the runner's side of the
//! model protocol through the client.
//!
//! The daemon modes are **not told** the app (`Targets::compositor_focus`): they run with
//! `sources = ["auto"]` ([`with_auto_sources`]) and must find sway's session and follow its
//! focus themselves, as a desktop user's daemon does; the report shows whether they did
//! (`app_boosted`, `focus_boosted`).

mod client;
mod compositor;
pub mod ipc;

pub use client::{focus_app, measure_focus, run as client_main, Screen};
pub use compositor::{Compositor, OUTPUT, TERMINAL_COMMAND};
pub use ipc::{focused_pid, view_of, Ipc};

use crate::layout::ActiveLayout;
use crate::models::xapp::AppUser;
use crate::models::{self, ModelOutput};
use crate::modes::Targets;
use crate::runner::{self, Foreground, Plan};
use crate::sys;
use anyhow::{bail, Context, Result};
use std::io::{BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};

/// The programs the scenario runs and their Debian packages.
pub const PROGRAMS: [(&str, &str); 2] = [("sway", "sway"), ("foot", "foot")];
/// The app's and the other terminal's Wayland app ids.
pub const APP_ID: &str = "uxsched-bench-app";
pub const OTHER_APP_ID: &str = "uxsched-bench-other";
/// How the runner tells the measuring client where sway is and which the other terminal is.
pub(crate) const ENV_WAYLAND: &str = "UXSCHED_BENCH_WAYLAND_SOCKET";
pub(crate) const ENV_IPC: &str = "UXSCHED_BENCH_SWAY_IPC";
pub(crate) const ENV_OTHER_PID: &str = "UXSCHED_BENCH_OTHER_PID";

/// Refuse, naming the packages to install, when sway or foot is not on `path`.
pub fn require_programs(path: &std::ffi::OsStr) -> Result<()> {
    let missing: Vec<(&str, &str)> = PROGRAMS
        .into_iter()
        .filter(|(bin, _)| !find_program(bin, path))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let bins: Vec<&str> = missing.iter().map(|m| m.0).collect();
    let pkgs: Vec<&str> = missing.iter().map(|m| m.1).collect();
    bail!(
        "scenario 'foot' needs {} (not found on PATH): run `make setup` or `apt-get install {}`",
        bins.join(", "),
        pkgs.join(" ")
    )
}

/// Whether `bin` is on `path` (a `PATH` lookup).
fn find_program(bin: &str, path: &std::ffi::OsStr) -> bool {
    std::env::split_paths(path).any(|d| d.join(bin).is_file())
}

/// The run environment for a Wayland scenario: the daemon modes' configuration with
/// `sources = ["auto"]` unless the user's `--daemon-config` chose sources itself (then theirs,
/// as given). Other scenarios' environment is returned unchanged.
pub fn with_auto_sources(plan: &Plan, env: &runner::Env) -> Result<runner::Env> {
    let mut env = env.clone();
    if plan.scenario.is_wayland() {
        let mut table: toml::Table = env
            .modes
            .daemon_config
            .parse()
            .context("the extra daemon configuration is not TOML")?;
        table
            .entry("sources")
            .or_insert_with(|| toml::Value::Array(vec![toml::Value::String("auto".into())]));
        env.modes.daemon_config = toml::to_string(&table)?;
    }
    Ok(env)
}

/// One run's compositor, terminals and measuring client; all stopped when dropped.
pub struct WaylandProcs {
    client: Child,
    app: Child,
    other: Child,
    go: Option<ChildStdin>,
    out: PathBuf,
    /// Last: dropped after the terminals and the client.
    compositor: Compositor,
}

impl WaylandProcs {
    pub fn spawn(
        plan: &Plan,
        env: &runner::Env,
        layout: &ActiveLayout,
        dir: &Path,
        seed: u64,
    ) -> Result<WaylandProcs> {
        let user = AppUser::ensure()?;
        let compositor = Compositor::start(&dir.join("desktop"), &dir.join("home"), &user)?;
        let cgroup = layout.app_cgroup()?;
        let fd = cgroup.as_ref().map(|f| f.as_raw_fd());
        let app = compositor.start_terminal(APP_ID, &dir.join("foot-app.log"), fd)?;
        let other = compositor.start_terminal(OTHER_APP_ID, &dir.join("foot-other.log"), fd);
        let other = match other {
            Ok(o) => o,
            Err(e) => {
                let mut app = app;
                sys::kill_tree(app.id() as i32);
                let _ = app.wait();
                return Err(e);
            }
        };
        let mut client_cmd = runner::model_command(plan, env, dir, seed, "system");
        client_cmd
            .arg(format!("--app-pid={}", app.id()))
            .env(ENV_WAYLAND, compositor.wayland_socket())
            .env(ENV_IPC, compositor.ipc_socket())
            .env(ENV_OTHER_PID, other.id().to_string())
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
        let client = crate::leftovers::spawn(&mut client_cmd);
        let mut procs = WaylandProcs {
            client: match client {
                Ok(c) => c,
                Err(e) => {
                    for mut t in [app, other] {
                        sys::kill_tree(t.id() as i32);
                        let _ = t.wait();
                    }
                    return Err(e.context("starting the measuring client"));
                }
            },
            app,
            other,
            go: None,
            out: dir.join("system.json"),
            compositor,
        };
        let mut stdout = BufReader::new(procs.client.stdout.take().context("client stdout")?);
        models::expect_ready(&mut stdout).with_context(|| {
            format!(
                "the measuring client on sway {} (the logs are in {})",
                procs.compositor.wayland_socket().display(),
                dir.display()
            )
        })?;
        procs.go = procs.client.stdin.take();
        Ok(procs)
    }
}

impl Foreground for WaylandProcs {
    /// Terminal A is the app, its shell/`cat` child on the keystroke's path, sway the server
    /// it draws through (what `fifo` raises with it); the daemon modes find the app
    /// themselves.
    fn targets(&self, t: &mut Targets) {
        let app = self.app.id() as i32;
        t.app = Some(app);
        t.x_server = Some(self.compositor.pid());
        t.app_child = sys::children(app).first().copied();
        t.compositor_focus = true;
    }

    fn go(&mut self) -> Result<()> {
        let stdin = self.go.as_mut().context("go sent twice")?;
        stdin.write_all(b"g")?;
        stdin.flush()?;
        Ok(())
    }

    fn finished(&mut self) -> Result<bool> {
        for (t, log) in [
            (&mut self.app, "foot-app.log"),
            (&mut self.other, "foot-other.log"),
        ] {
            if let Some(s) = t.try_wait()? {
                bail!("a terminal (foot, pid {}) exited during the run: {s}; its log is {log} in the run's directory", t.id());
            }
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
        serde_json::from_slice(&text)
            .with_context(|| format!("parsing client output {}", self.out.display()))
    }
}

impl Drop for WaylandProcs {
    fn drop(&mut self) {
        for child in [&mut self.client, &mut self.app, &mut self.other] {
            if child.try_wait().ok().flatten().is_none() {
                sys::kill_tree(child.id() as i32);
            }
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::ModelKind;

    #[test]
    fn the_daemon_follows_the_compositor_unless_the_user_chose_sources() {
        let mut env = runner::Env {
            launcher: runner::Launcher {
                program: "x".into(),
                prefix: Vec::new(),
            },
            modes: crate::modes::ModeEnv {
                uxsched_exe: None,
                scratch: "/tmp".into(),
                daemon_config: "[uxsched]\nslice_us = 1500\n".into(),
            },
            progress: false,
        };
        let mut plan = Plan {
            scenario: ModelKind::Foot,
            modes: Vec::new(),
            reps: 1,
            duration: std::time::Duration::from_secs(1),
            load: crate::loads::LoadSpec {
                kind: crate::loads::LoadKind::Cpu,
                workers: 1,
                scratch: "/tmp".into(),
            },
            second_load: None,
            layout: crate::layout::Layout::SameSession,
            seed: 1,
            compute_ms: None,
            launches: None,
        };
        let t: toml::Table = with_auto_sources(&plan, &env)
            .unwrap()
            .modes
            .daemon_config
            .parse()
            .unwrap();
        assert_eq!(t["sources"], toml::Value::Array(vec!["auto".into()]));
        assert_eq!(t["uxsched"]["slice_us"], toml::Value::Integer(1500));
        env.modes.daemon_config = "sources = [\"explicit\"]\n".into();
        let t: toml::Table = with_auto_sources(&plan, &env)
            .unwrap()
            .modes
            .daemon_config
            .parse()
            .unwrap();
        assert_eq!(t["sources"], toml::Value::Array(vec!["explicit".into()]));
        plan.scenario = ModelKind::Xterm;
        let same = with_auto_sources(&plan, &env).unwrap();
        assert_eq!(same.modes.daemon_config, env.modes.daemon_config);
    }
}
