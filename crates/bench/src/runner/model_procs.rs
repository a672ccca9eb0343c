//! The model scenarios' own processes (`uxsched-bench-model` as `app` and `system`): started
//! in the layout's place with their end of the app↔system socket, told to go, collected.

use super::{Env, Foreground, Plan};
use crate::cancel;
use crate::layout::ActiveLayout;
use crate::models::{self, ModelOutput};
use crate::modes::Targets;
use anyhow::{bail, Context, Result};
use std::io::{BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

/// The model's processes; killed if still alive when dropped.
pub(super) struct ModelProcs {
    app: Child,
    system: Option<Child>,
    go: Vec<ChildStdin>,
    outs: Vec<PathBuf>,
}

impl ModelProcs {
    pub(super) fn spawn(
        plan: &Plan,
        env: &Env,
        layout: &ActiveLayout,
        dir: &Path,
        seed: u64,
        rt_socket: Option<&Path>,
    ) -> Result<ModelProcs> {
        let (app_end, system_end) = if plan.scenario.has_system_side() {
            let (a, b) = UnixStream::pair()?;
            (Some(a), Some(b))
        } else {
            (None, None)
        };
        let app_cgroup = layout.app_cgroup()?;
        // The app has a session (autogroup) of its own, as a launched desktop app does —
        // except in `same-session`, where it shares the harness's with the load (the harness
        // plays the terminal both were started from).
        let app = Role {
            name: "app",
            socket: app_end.as_ref(),
            own_session: plan.layout.load_own_session(),
            cgroup_fd: app_cgroup.as_ref().map(AsRawFd::as_raw_fd),
            rt_socket,
        };
        let mut procs = ModelProcs {
            app: spawn_role(plan, env, dir, seed, &app)?,
            system: None,
            go: Vec::new(),
            outs: vec![dir.join("app.json")],
        };
        if let Some(end) = system_end.as_ref() {
            // The system side (input dispatcher + compositor) stays in a session of its own
            // in every layout: it is not the app's, and not in the app's unit.
            let system = Role {
                name: "system",
                socket: Some(end),
                own_session: true,
                cgroup_fd: None,
                rt_socket: None,
            };
            procs.system = Some(spawn_role(plan, env, dir, seed, &system)?);
            procs.outs.push(dir.join("system.json"));
        }
        // Our copies of the socket ends must close, or the peers never see EOF.
        drop((app_end, system_end));
        for child in std::iter::once(&mut procs.app).chain(procs.system.as_mut()) {
            let mut stdout = BufReader::new(child.stdout.take().context("model stdout")?);
            models::expect_ready(&mut stdout)?;
            procs.go.push(child.stdin.take().context("model stdin")?);
        }
        Ok(procs)
    }
}

impl Foreground for ModelProcs {
    fn targets(&self, t: &mut Targets) {
        t.app = Some(self.app.id() as i32);
    }

    fn go(&mut self) -> Result<()> {
        for stdin in &mut self.go {
            stdin.write_all(b"g")?;
            stdin.flush()?;
        }
        Ok(())
    }

    fn finished(&mut self) -> Result<bool> {
        let mut all = true;
        for (role, child) in [
            ("app", Some(&mut self.app)),
            ("system", self.system.as_mut()),
        ] {
            let Some(child) = child else { continue };
            match child.try_wait()? {
                None => all = false,
                Some(s) if s.success() => {}
                Some(s) => {
                    cancel::check()?;
                    bail!(
                        "the model's {role} process (pid {}) failed: {s}; its stderr is above",
                        child.id()
                    )
                }
            }
        }
        Ok(all)
    }

    /// Samples come from whichever process measured them; context switches from the app.
    fn collect(&self) -> Result<ModelOutput> {
        let mut merged = ModelOutput::default();
        for (i, path) in self.outs.iter().enumerate() {
            let text =
                std::fs::read(path).with_context(|| format!("model output {}", path.display()))?;
            let out: ModelOutput = serde_json::from_slice(&text)
                .with_context(|| format!("parsing model output {}", path.display()))?;
            merged.samples_ms.extend(out.samples_ms);
            merged.extras.extend(out.extras);
            if i == 0 {
                merged.context_switches = out.context_switches;
            }
        }
        Ok(merged)
    }
}

impl Drop for ModelProcs {
    fn drop(&mut self) {
        for child in std::iter::once(&mut self.app).chain(self.system.as_mut()) {
            if child.try_wait().ok().flatten().is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// One model process to start: its role, its end of the app↔system socket, and where it sits.
struct Role<'a> {
    name: &'static str,
    socket: Option<&'a UnixStream>,
    own_session: bool,
    /// `cgroup.procs` of the layout's app unit, joined before exec.
    cgroup_fd: Option<std::os::fd::RawFd>,
    /// The `rtapi` mode's daemon socket: the model asks for real time itself (`--rt-socket`).
    rt_socket: Option<&'a Path>,
}

/// The command line of a model process in `role` (`app`, `system`), writing `dir/<role>.json`.
pub(crate) fn model_command(plan: &Plan, env: &Env, dir: &Path, seed: u64, role: &str) -> Command {
    let mut cmd = Command::new(&env.launcher.program);
    cmd.args(&env.launcher.prefix)
        .args(["--model", plan.scenario.name(), "--role", role])
        .arg(format!("--duration-ms={}", plan.duration.as_millis()))
        .arg("--out")
        .arg(dir.join(format!("{role}.json")))
        .arg("--scratch")
        .arg(&env.modes.scratch)
        .arg(format!("--seed={seed}"));
    if let Some(ms) = plan.compute_ms {
        cmd.arg(format!("--compute-ms={ms}"));
    }
    if let Some(n) = plan.launches {
        cmd.arg(format!("--launches={n}"));
    }
    cmd
}

fn spawn_role(plan: &Plan, env: &Env, dir: &Path, seed: u64, r: &Role) -> Result<Child> {
    let role = r.name;
    let mut cmd = model_command(plan, env, dir, seed, role);
    if let Some(socket) = r.rt_socket {
        cmd.arg("--rt-socket").arg(socket);
    }
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    let fd = r.socket.map(|s| s.as_raw_fd());
    let (own_session, cgroup_fd) = (r.own_session, r.cgroup_fd);
    // SAFETY: only async-signal-safe calls (dup2, fcntl, setsid, write) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(fd) = fd {
                if fd == 3 {
                    libc::fcntl(3, libc::F_SETFD, 0);
                } else if libc::dup2(fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            crate::layout::join_cgroup_in_child(cgroup_fd)?;
            if own_session && libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    crate::leftovers::spawn(&mut cmd).with_context(|| {
        format!(
            "starting the {role} process of model {} with {}",
            plan.scenario.name(),
            env.launcher.program.display()
        )
    })
}
