//! The virtual desktop of the real-application scenarios: an Xvfb server and a window manager
//! (openbox, EWMH: it focuses new windows and publishes `_NET_ACTIVE_WINDOW`), each a system
//! service in a session of its own, like a display manager's. Xvfb picks a free display number
//! itself (`-displayfd`), so concurrent runs and tests never collide. Dropping a [`Desktop`]
//! kills both sessions. The scenarios run both as the app's unprivileged user
//! ([`Desktop::start_as`]), as a rootless desktop runs them; [`Desktop::start`] (as root, as a
//! display manager's Xorg runs) is left to tests.

use super::user::AppUser;
use crate::sys;
use anyhow::{bail, Context, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt, CreateWindowAux, WindowClass};

const START_TIMEOUT: Duration = Duration::from_secs(15);
/// Screen of the virtual display: room for an 80×24 terminal and an editor.
const SCREEN: &str = "1024x768x24";

/// A running Xvfb + window manager.
pub struct Desktop {
    display: String,
    server: Option<Child>,
    wm: Option<Child>,
}

impl Desktop {
    /// Start Xvfb, then openbox, and wait until the window manager manages windows. Logs go
    /// to `dir/{xvfb,wm}.log`.
    pub fn start(dir: &Path) -> Result<Desktop> {
        Desktop::start_with(dir, None)
    }

    /// [`Desktop::start`], both programs running as `user` (home: `dir/home`).
    pub fn start_as(dir: &Path, user: &AppUser) -> Result<Desktop> {
        Desktop::start_with(dir, Some(user))
    }

    fn start_with(dir: &Path, user: Option<&AppUser>) -> Result<Desktop> {
        std::fs::create_dir_all(dir)?;
        let as_user = |cmd: &mut Command| -> Result<()> {
            match user {
                Some(u) => u.run_as(cmd, &dir.join("home")),
                None => Ok(()),
            }
        };
        let (server, display) = start_server(dir, &as_user)?;
        let mut desktop = Desktop {
            display,
            server: Some(server),
            wm: None,
        };
        let wm_home = dir.join("wm");
        match user {
            Some(u) => u.own_dir(&wm_home)?,
            None => std::fs::create_dir_all(&wm_home)?,
        }
        let mut wm = Command::new("openbox");
        as_user(&mut wm)?;
        wm.arg("--sm-disable")
            .env("DISPLAY", &desktop.display)
            // An empty private config and cache: openbox falls back to /etc/xdg/openbox/rc.xml
            // and writes nothing into the user's home.
            .env("XDG_CONFIG_HOME", &wm_home)
            .env("XDG_CACHE_HOME", &wm_home);
        desktop.wm = Some(spawn_service(wm, &dir.join("wm.log"), "openbox")?);
        desktop.wait_for_wm(&dir.join("wm.log"))?;
        Ok(desktop)
    }

    /// The `DISPLAY` value, e.g. `:3`.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// The X server's pid (modes and the daemon's X11 source may act on it).
    pub fn server_pid(&self) -> i32 {
        self.server.as_ref().map_or(0, |c| c.id() as i32)
    }

    /// Openbox announces itself (`_NET_SUPPORTING_WM_CHECK`) before it has finished starting,
    /// and a window mapped in between is never managed; so it is ready only once it has
    /// managed a window of ours (listed in `_NET_CLIENT_LIST`), which is then destroyed.
    fn wait_for_wm(&mut self, log: &Path) -> Result<()> {
        let (conn, screen) = x11rb::connect(Some(&self.display))
            .with_context(|| format!("connecting to Xvfb on {}", self.display))?;
        let s = &conn.setup().roots[screen];
        let root = s.root;
        let clients = conn.intern_atom(false, b"_NET_CLIENT_LIST")?.reply()?.atom;
        let win = conn.generate_id()?;
        conn.create_window(
            s.root_depth,
            win,
            root,
            0,
            0,
            1,
            1,
            0,
            WindowClass::INPUT_OUTPUT,
            s.root_visual,
            &CreateWindowAux::new(),
        )?;
        let end = Instant::now() + START_TIMEOUT;
        loop {
            // Mapping again is harmless once managed, and re-asks if the request was missed.
            conn.map_window(win)?;
            let prop = conn
                .get_property(false, root, clients, AtomEnum::WINDOW, 0, 1024)?
                .reply()?;
            if prop.value32().is_some_and(|mut v| v.any(|w| w == win)) {
                return unmanaged_after_destroy(&conn, root, clients, win, end);
            }
            if let Some(wm) = self.wm.as_mut() {
                if let Some(status) = wm.try_wait()? {
                    bail!(
                        "openbox exited ({status}) before managing the display; its log is {}",
                        log.display()
                    );
                }
            }
            if Instant::now() > end {
                bail!(
                    "openbox did not manage a window on {} within {} s; its log is {}",
                    self.display,
                    START_TIMEOUT.as_secs(),
                    log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Destroy our window and wait until openbox has dropped it from `_NET_CLIENT_LIST`: the X
/// server reuses our client's id range for the next client (the program), so a stale entry
/// would later look like one of the program's windows.
fn unmanaged_after_destroy(
    conn: &impl Connection,
    root: u32,
    clients: u32,
    win: u32,
    end: Instant,
) -> Result<()> {
    conn.destroy_window(win)?;
    loop {
        let prop = conn
            .get_property(false, root, clients, AtomEnum::WINDOW, 0, 1024)?
            .reply()?;
        if !prop.value32().is_some_and(|mut v| v.any(|w| w == win)) {
            return Ok(());
        }
        if Instant::now() > end {
            bail!("openbox did not drop a destroyed window from _NET_CLIENT_LIST");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Desktop {
    fn drop(&mut self) {
        // The window manager first, so it does not see its server die.
        if let Some(wm) = self.wm.take() {
            stop_session(wm);
        }
        if let Some(server) = self.server.take() {
            stop_server(server);
        }
        // Dropped last of a run's X processes: forget those that are gone.
        if let Err(e) = crate::leftovers::settle() {
            eprintln!("uxsched bench: warning: {e:#}");
        }
    }
}

/// SIGTERM first, so Xvfb removes its socket (`/tmp/.X11-unix/X<n>`) as it exits — a SIGKILLed
/// server leaves it behind — then, after at most a second, the session. The server is waited
/// for without being reaped (`WNOWAIT`), so its pid, the session's id, cannot be reused before
/// the session is killed.
fn stop_server(child: Child) {
    let pid = child.id() as i32;
    // SAFETY: a plain syscall; ESRCH (already gone) is fine.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let end = Instant::now() + Duration::from_secs(1);
    while Instant::now() < end && !exited(pid) {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop_session(child);
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

fn stop_session(mut child: Child) {
    sys::kill_session(child.id() as i32);
    let _ = child.wait();
}

/// Start `cmd` as the leader of a new session, its output in `log`.
fn spawn_service(mut cmd: Command, log: &Path, what: &str) -> Result<Child> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    cmd.stdin(Stdio::null())
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
    crate::leftovers::spawn(&mut cmd).with_context(|| format!("starting {what}"))
}

/// Xvfb with `-displayfd`: it writes the display number it chose, once it accepts clients.
fn start_server(
    dir: &Path,
    as_user: &dyn Fn(&mut Command) -> Result<()>,
) -> Result<(Child, String)> {
    let (read_end, write_end) = pipe()?;
    let log = dir.join("xvfb.log");
    let mut cmd = Command::new("Xvfb");
    as_user(&mut cmd)?;
    // -noreset: without it the server resets (dropping windows and root properties) whenever
    // its last client disconnects.
    cmd.args(["-noreset", "-nolisten", "tcp", "-screen", "0", SCREEN])
        .args(["-displayfd", "3"]);
    let fd = write_end.as_raw_fd();
    // SAFETY: dup2/fcntl are async-signal-safe; fd 3 is the pipe's write end in the child.
    unsafe {
        cmd.pre_exec(move || {
            if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0);
            } else if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut server = spawn_service(cmd, &log, "Xvfb")?;
    drop(write_end);
    match read_display(&read_end) {
        Ok(n) => Ok((server, format!(":{n}"))),
        Err(e) => {
            let pid = server.id() as i32;
            sys::kill_session(pid);
            let _ = server.wait();
            Err(e.context(format!("Xvfb did not start; its log is {}", log.display())))
        }
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error()).context("pipe2");
    }
    // SAFETY: pipe2 just returned these two fds; we own them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Read the display number line, bounded by [`START_TIMEOUT`].
fn read_display(fd: &OwnedFd) -> Result<u32> {
    let end = Instant::now() + START_TIMEOUT;
    let mut text = Vec::new();
    while !text.ends_with(b"\n") {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("no display number within {} s", START_TIMEOUT.as_secs());
        }
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, left.as_millis() as i32) } <= 0 {
            continue;
        }
        let mut buf = [0u8; 16];
        // SAFETY: reading into a stack buffer of the given length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            bail!("Xvfb closed -displayfd without a display number (it exited?)");
        }
        text.extend_from_slice(&buf[..n as usize]);
    }
    let s = String::from_utf8_lossy(&text);
    s.trim()
        .parse()
        .with_context(|| format!("Xvfb wrote {s:?} as its display number"))
}

/// Where a program would be run from, if it is installed (`PATH` lookup).
pub fn find_program(bin: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
}
