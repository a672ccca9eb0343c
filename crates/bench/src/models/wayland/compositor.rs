//! The Wayland desktop of the `foot` scenario: sway 1.7 with wlroots' headless backend (no
//! display, no input device; the pixman renderer, there is no GPU here), run as the bench's
//! unprivileged user in a session of its own like a compositor started at login, with the
//! session's `XDG_RUNTIME_DIR` (`/run/user/<uid>`, the user's, 0700, as logind makes it) where it creates
//! its Wayland socket and its IPC socket. Dropping a [`Compositor`] stops sway (SIGTERM, so it
//! removes its sockets, then its whole session).

use super::ipc::{self, Ipc};
use crate::models::xapp::AppUser;
use crate::sys;
use anyhow::{bail, Context, Result};
use std::os::fd::RawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The headless output's name and mode: two terminals side by side, 45 columns each.
pub const OUTPUT: &str = "HEADLESS-1";
const RESOLUTION: &str = "640x480";
/// As for Xvfb (`xapp/display.rs`): it starts after the load, so allow for a slow start.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// sway's configuration: one headless output, no bar (none is configured), no borders, no
/// Xwayland, no background client (no `output … bg`), nothing started (`exec`): the harness
/// starts the terminals itself, where the layout puts the app.
fn sway_config() -> String {
    format!(
        "# uxsched bench, scenario foot (crates/bench/src/models/wayland)
xwayland disable
output {OUTPUT} resolution {RESOLUTION} position 0 0
default_border none
default_floating_border none
focus_follows_mouse no
focus_on_window_activation none
"
    )
}

/// foot's configuration: its defaults, the caret steady (a blinking caret would draw without
/// input) and no bell or URL hints.
const FOOT_CONFIG: &str = "\
[cursor]
blink=no
[bell]
urgent=no
notify=no
visual=no
";

/// The terminal's command: raw mode without echo, so each byte goes to `cat` at once and
/// `cat` — not the kernel — echoes it (as xterm's scenario does).
pub const TERMINAL_COMMAND: [&str; 3] = ["sh", "-c", "stty raw -echo && exec cat"];

/// A running sway.
pub struct Compositor {
    sway: Option<Child>,
    /// The Wayland socket (`$XDG_RUNTIME_DIR/wayland-N`) and sway's IPC socket.
    wayland: PathBuf,
    ipc: PathBuf,
    home: PathBuf,
    user: AppUser,
    foot_config: PathBuf,
}

impl Compositor {
    /// Start sway as `user` with the session's home `home` (its runtime directory inside),
    /// files and log in `dir` (`sway.config`, `sway.log`, `foot.ini`); returns once its
    /// output is up and both sockets answer.
    pub fn start(dir: &Path, home: &Path, user: &AppUser) -> Result<Compositor> {
        std::fs::create_dir_all(dir)?;
        user.check_reachable(dir)?;
        let config = dir.join("sway.config");
        write_public(&config, &sway_config())?;
        let foot_config = dir.join("foot.ini");
        write_public(&foot_config, FOOT_CONFIG)?;
        let log = dir.join("sway.log");
        let out = std::fs::File::create(&log)?;
        let mut cmd = Command::new("sway");
        user.run_as(&mut cmd, home)?;
        cmd.arg("--config")
            .arg(&config)
            .env("WLR_BACKENDS", "headless")
            .env("WLR_LIBINPUT_NO_DEVICES", "1")
            .env("WLR_RENDERER", "pixman")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let sway = crate::leftovers::spawn(&mut cmd).context("starting sway")?;
        let mut c = Compositor {
            sway: Some(sway),
            wayland: PathBuf::new(),
            ipc: PathBuf::new(),
            home: home.to_owned(),
            user: *user,
            foot_config,
        };
        c.wait_ready(&log)?;
        Ok(c)
    }

    pub fn pid(&self) -> i32 {
        self.sway.as_ref().map_or(0, |c| c.id() as i32)
    }

    pub fn wayland_socket(&self) -> &Path {
        &self.wayland
    }

    pub fn ipc_socket(&self) -> &Path {
        &self.ipc
    }

    fn runtime(&self) -> PathBuf {
        self.user.runtime_dir()
    }

    /// Wait for sway's IPC socket, then for its headless output to be active, then for its
    /// Wayland socket; an error naming the log if sway exits or takes too long.
    fn wait_ready(&mut self, log: &Path) -> Result<()> {
        let end = Instant::now() + START_TIMEOUT;
        let pid = self.pid();
        loop {
            if let Some(sway) = self.sway.as_mut() {
                if let Some(status) = sway.try_wait()? {
                    bail!(
                        "sway exited while starting ({status}); its log is {}",
                        log.display()
                    );
                }
            }
            if let Some((wayland, ipc)) = self.sockets(pid) {
                if output_active(&ipc) {
                    (self.wayland, self.ipc) = (wayland, ipc);
                    return Ok(());
                }
            }
            if Instant::now() > end {
                bail!(
                    "sway (pid {pid}) did not bring up {OUTPUT} within {} s; its log is {}",
                    START_TIMEOUT.as_secs(),
                    log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The Wayland socket and this sway's IPC socket (`sway-ipc.<uid>.<pid>.sock`), once both
    /// exist in the runtime directory.
    fn sockets(&self, pid: i32) -> Option<(PathBuf, PathBuf)> {
        let runtime = self.runtime();
        let ipc = runtime.join(format!("sway-ipc.{}.{pid}.sock", self.user.uid));
        let wayland = std::fs::read_dir(&runtime)
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with("wayland-") && !n.ends_with(".lock"))?;
        ipc.exists().then(|| (runtime.join(wayland), ipc))
    }

    /// Start a terminal (foot, app id `app_id`) running [`TERMINAL_COMMAND`] on this compositor
    /// as the session's user, in the caller's session and, with `cgroup` (the layout's app
    /// unit), in that cgroup — joined as root before the uid is dropped. Its log is `log`.
    pub fn start_terminal(&self, app_id: &str, log: &Path, cgroup: Option<RawFd>) -> Result<Child> {
        self.start_terminal_running(app_id, log, cgroup, &TERMINAL_COMMAND)
    }

    /// [`Compositor::start_terminal`] with another command in the terminal (tests: one that
    /// does not echo).
    pub fn start_terminal_running(
        &self,
        app_id: &str,
        log: &Path,
        cgroup: Option<RawFd>,
        command: &[&str],
    ) -> Result<Child> {
        let out = std::fs::File::create(log)?;
        let mut cmd = Command::new("foot");
        // Registered first, so it runs as root, before run_as drops the uid.
        // SAFETY: join_cgroup_in_child only write(2)s to an open fd.
        unsafe {
            cmd.pre_exec(move || crate::layout::join_cgroup_in_child(cgroup));
        }
        self.user.run_as(&mut cmd, &self.home)?;
        let name = self
            .wayland
            .file_name()
            .context("the Wayland socket has no name")?;
        cmd.env("WAYLAND_DISPLAY", name)
            .arg(format!("--config={}", self.foot_config.display()))
            .arg(format!("--app-id={app_id}"))
            .args(command)
            .current_dir(&self.home)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        crate::leftovers::spawn(&mut cmd).context("starting foot")
    }
}

/// Whether sway at `ipc` reports its headless output active.
fn output_active(ipc: &Path) -> bool {
    let Ok(mut c) = Ipc::connect(ipc) else {
        return false;
    };
    c.request(ipc::GET_OUTPUTS, "")
        .ok()
        .and_then(|v| v.as_array().cloned())
        .is_some_and(|outs| {
            outs.iter()
                .any(|o| o["name"] == OUTPUT && o["active"] == serde_json::Value::Bool(true))
        })
}

/// A file every user may read (the user's programs read the harness's configuration).
fn write_public(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))?;
    Ok(())
}

impl Drop for Compositor {
    fn drop(&mut self) {
        let Some(mut sway) = self.sway.take() else {
            return;
        };
        let pid = sway.id() as i32;
        // SIGTERM first: sway removes its sockets as it exits. Waited for without reaping
        // (its pid is the session's id, which must not be reused before the session is killed).
        sys::signal(pid, libc::SIGTERM);
        let end = Instant::now() + Duration::from_secs(1);
        while Instant::now() < end && !exited(pid) {
            std::thread::sleep(Duration::from_millis(10));
        }
        sys::kill_session(pid);
        let _ = sway.wait();
        if let Err(e) = crate::leftovers::settle() {
            eprintln!("uxsched bench: warning: {e:#}");
        }
    }
}

/// Whether our child `pid` has exited, leaving it a zombie (not reaped).
fn exited(pid: i32) -> bool {
    // SAFETY: zeroed siginfo is a valid out-value for waitid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: valid pointer; WNOWAIT leaves the child waitable.
    let r = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
    // SAFETY: si_pid is set by waitid when a child was found (0 with WNOHANG otherwise).
    r < 0 || unsafe { info.si_pid() } != 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_config_names_the_output_and_mode_it_waits_for() {
        assert!(super::sway_config().contains(&format!(
            "output {} resolution {}",
            super::OUTPUT,
            super::RESOLUTION
        )));
    }
}
