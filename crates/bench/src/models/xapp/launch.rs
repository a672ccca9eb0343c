//! The `launch` scenario (issue 33): what a user waits on most under storage contention, a
//! program started cold. The focused app is an xterm running `bash` as the bench user; the
//! measuring client types [`COMMAND`] and Return into it through XTEST, so the program is a
//! child of the focused app's shell, as when a person starts it from a terminal (a daemon that
//! follows what the focused app starts can see it). One sample = the Return key's XTEST event
//! sent → the `MapNotify` of the program's top-level window read on the root (`mapped.rs`).
//!
//! Before each launch the page cache, dentries and inodes are dropped (`drop_caches`, below),
//! so the program's binary, libraries, icons and fonts come from the disk. After it, the
//! program and whatever it started are killed and the client waits until they are gone and
//! the window destroyed before the next launch.

use super::damage::DamageWatch;
use super::mapped::{Mapped, RootWatch};
use super::typing::Typist;
use super::user::AppUser;
use super::{client, input};
use crate::models::{ready_then_wait_for_go, ModelArgs, ModelOutput};
use crate::modes::process_tree;
use crate::sys;
use anyhow::{bail, Context, Result};
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::Window;
use x11rb::rust_connection::RustConnection;

/// The program launched, and its Debian package: GTK 3, so a launch reads tens of MiB of
/// libraries, icons, fonts and locale data (58 MiB cold, measured with `/proc/<pid>/io`).
pub const PROGRAM: (&str, &str) = ("mousepad", "mousepad");
/// The document it opens, in the user's home (the terminal's working directory).
const DOCUMENT: &str = "launch.txt";
/// What the user types: the program with a document, in the background so the shell stays
/// free, as one does from a terminal.
pub const COMMAND: &str = "mousepad launch.txt &";
/// A launch whose window is not mapped within this is lost (counted, reported). With the
/// close below it stays within the runner's 30 s grace past `--duration`; the slowest
/// launches under two writers took about 5 s.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(20);
/// Killed processes gone and the window destroyed within this, or the run fails.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// The typed command echoed by the terminal within this, or the run fails.
const ECHO_TIMEOUT: Duration = Duration::from_secs(10);
/// The terminal counts as done drawing once its window stays unchanged this long.
const QUIET: Duration = Duration::from_millis(100);
/// Between a launch's close and the next one's cache drop.
const PAUSE: Duration = Duration::from_millis(200);
/// The terminal and its prompt appear after the load started (client.rs's reason).
const WINDOW_TIMEOUT: Duration = Duration::from_secs(60);

/// Start the focused app: `xterm -e bash` as the bench user, in `dir/home` (its home and
/// working directory, holding [`DOCUMENT`]); the terminal's output is logged to
/// `dir/home/terminal.log` (the launched program's messages land there), xterm's own to
/// `dir/app.log`. `cgroup` (the layout's app unit) is joined as root before the uid is dropped.
pub fn start_terminal(display: &str, dir: &Path, cgroup: Option<RawFd>) -> Result<Child> {
    let user = AppUser::ensure()?;
    user.check_reachable(dir)?;
    let home = dir.join("home");
    user.own_dir(&home)?;
    let doc = home.join(DOCUMENT);
    std::fs::write(&doc, document_text()).with_context(|| format!("writing {}", doc.display()))?;
    std::os::unix::fs::chown(&doc, Some(user.uid), Some(user.gid))?;
    let log = std::fs::File::create(dir.join("app.log"))?;
    let mut cmd = Command::new("xterm");
    cmd.args(["-geometry", "80x24", "-l", "-lf"])
        .arg(terminal_log(dir))
        // No rc files: the same shell every run, whatever the machine's /etc/bash.bashrc.
        .args(["-e", "bash", "--norc", "--noprofile", "-i"]);
    // Registered first, so it runs as root, before run_as drops the uid.
    // SAFETY: join_cgroup_in_child only write(2)s to an open fd.
    unsafe {
        cmd.pre_exec(move || crate::layout::join_cgroup_in_child(cgroup));
    }
    user.run_as(&mut cmd, &home)?;
    cmd.env("DISPLAY", display)
        .current_dir(&home)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    crate::leftovers::spawn(&mut cmd).context("starting xterm as the focused app")
}

fn terminal_log(dir: &Path) -> PathBuf {
    dir.join("home/terminal.log")
}

/// A plain-text document of about 8 KiB.
fn document_text() -> String {
    "The quick brown fox jumps over the lazy dog.\n".repeat(180)
}

/// One launch's outcome.
enum Outcome {
    /// Mapped after `ms`; `read_bytes` from `/proc/<pid>/io` at that moment, if readable.
    Mapped {
        ms: f64,
        read_bytes: Option<u64>,
    },
    Lost,
}

/// The client's connection, the terminal's window and shell, and what it types.
struct Launcher {
    conn: RustConnection,
    root: Window,
    /// The terminal's top-level window.
    window: Window,
    terminal: DamageWatch,
    watch: RootWatch,
    typist: Typist,
    shell: i32,
    log: PathBuf,
}

impl Launcher {
    /// Find and activate the terminal's window, find its shell, and wait for the prompt.
    fn attach(display: &str, terminal: i32, log: PathBuf) -> Result<Launcher> {
        let (conn, screen) = x11rb::connect(Some(display))
            .with_context(|| format!("connecting to the X server on {display}"))?;
        let root = conn.setup().roots[screen].root;
        let window = input::find_window(&conn, root, terminal, WINDOW_TIMEOUT)?;
        input::activate(&conn, root, window, WINDOW_TIMEOUT)?;
        let shell = *sys::children(terminal).first().with_context(|| {
            format!(
                "xterm (pid {terminal}) has no shell: see its log app.log and {}",
                log.display()
            )
        })?;
        let launcher = Launcher {
            terminal: DamageWatch::new(&conn, window)?,
            watch: RootWatch::new(&conn, root)?,
            typist: Typist::new(&conn, root, COMMAND)?,
            conn,
            root,
            window,
            shell,
            log,
        };
        launcher.settle()?;
        Ok(launcher)
    }

    /// Wait until the terminal's window stays unchanged for [`QUIET`] (the prompt, an echo).
    fn settle(&self) -> Result<()> {
        let end = Instant::now() + ECHO_TIMEOUT;
        loop {
            self.terminal.reset(&self.conn)?;
            if self
                .terminal
                .wait(&self.conn, Instant::now() + QUIET)?
                .is_none()
            {
                return Ok(());
            }
            if Instant::now() > end {
                bail!(
                    "the terminal kept drawing for {} s without input; its output is in {}",
                    ECHO_TIMEOUT.as_secs(),
                    self.log.display()
                );
            }
        }
    }

    /// Drop the caches, type the command, wait for its echo, press Return and time the window.
    fn launch(&self) -> Result<Outcome> {
        drop_caches()?;
        // Back to the terminal, as the user clicks on it: typed keys go to the focused
        // window, and the window manager may have left the focus elsewhere after the close.
        input::activate(&self.conn, self.root, self.window, WINDOW_TIMEOUT)?;
        self.terminal.reset(&self.conn)?;
        self.typist.type_text(&self.conn)?;
        if self
            .terminal
            .wait(&self.conn, Instant::now() + ECHO_TIMEOUT)?
            .is_none()
        {
            bail!(
                "the terminal did not echo the typed command within {} s; its output is in {}",
                ECHO_TIMEOUT.as_secs(),
                self.log.display()
            );
        }
        self.settle()?;
        let sent = Instant::now();
        self.typist.press_enter(&self.conn)?;
        let started_here = |pid: u32| {
            let pid = pid as i32;
            pid != self.shell && process_tree(self.shell).contains(&pid)
        };
        let mapped = self
            .watch
            .wait_mapped(&self.conn, started_here, sent + LAUNCH_TIMEOUT)?;
        let outcome = match mapped {
            Some(Mapped { at, pid, .. }) => Outcome::Mapped {
                ms: (at - sent).as_secs_f64() * 1e3,
                read_bytes: read_bytes(pid as i32),
            },
            None if self.started().is_empty() => bail!(
                "the typed command `{COMMAND}` started no process within {} s; the terminal's output is in {}",
                LAUNCH_TIMEOUT.as_secs(),
                self.log.display()
            ),
            None => Outcome::Lost,
        };
        self.close(mapped)?;
        Ok(outcome)
    }

    /// The live processes started from the shell.
    fn started(&self) -> Vec<i32> {
        let mut tree = process_tree(self.shell);
        tree.retain(|&p| p != self.shell);
        tree
    }

    /// Kill everything started from the shell; wait until it is gone and the window destroyed.
    fn close(&self, mapped: Option<Mapped>) -> Result<()> {
        let end = Instant::now() + CLOSE_TIMEOUT;
        for pid in self.started() {
            sys::kill_tree(pid);
        }
        while !self.started().is_empty() {
            if Instant::now() > end {
                bail!(
                    "processes started from the shell survived SIGKILL for {} s: {:?}",
                    CLOSE_TIMEOUT.as_secs(),
                    self.started()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(m) = mapped {
            if !self.watch.wait_destroyed(&self.conn, m.window, end)? {
                bail!(
                    "window {:#x} of the killed {} stayed for {} s",
                    m.window,
                    PROGRAM.0,
                    CLOSE_TIMEOUT.as_secs()
                );
            }
        }
        std::thread::sleep(PAUSE);
        Ok(())
    }
}

/// Drop the page cache and the reclaimable slab (dentries, inodes), as `echo 3 >
/// /proc/sys/vm/drop_caches` does: the program then starts as after a reboot. Without a
/// `sync` first: the program's files are not dirty, and a sync under the `write` load would
/// flush the writers' dirty pages, stall for seconds and change the load the launch meets.
///
/// The write runs in a thread of its own: the kernel walks every cached inode in it, hundreds
/// of ms of CPU, and a SCHED_FIFO thread doing that would hit the client's 200 ms
/// RLIMIT_RTTIME and be killed. The new thread is SCHED_OTHER (SCHED_RESET_ON_FORK); the
/// client sleeps in `join` meanwhile.
fn drop_caches() -> Result<()> {
    std::thread::spawn(|| std::fs::write("/proc/sys/vm/drop_caches", "3"))
        .join()
        .ok()
        .context("the thread dropping the caches panicked")?
        .context("writing /proc/sys/vm/drop_caches (the launch scenario needs root)")
}

/// Bytes the process caused to be read from the storage layer (`read_bytes` of
/// `/proc/<pid>/io`), `None` (said once on stderr) if the file cannot be read.
fn read_bytes(pid: i32) -> Option<u64> {
    let path = format!("/proc/{pid}/io");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("uxsched bench: warning: reading {path}: {e}; the launch's read_mib is not reported (a kernel without CONFIG_TASK_IO_ACCOUNTING?)");
            return None;
        }
    };
    text.lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Entry point of the client process for `launch` (`bench-model --model launch --role system
/// --app-pid <xterm>`, `DISPLAY` set by the runner).
pub fn run(args: &ModelArgs) -> Result<ModelOutput> {
    let terminal = args
        .app_pid
        .context("the launch client needs --app-pid (the terminal)")?;
    let display = std::env::var("DISPLAY").context("the launch client needs DISPLAY")?;
    let dir = args.out.parent().context("--out has no directory")?;
    client::enter_realtime()?;
    let launcher = Launcher::attach(&display, terminal, terminal_log(dir))?;
    // One launch that is not a sample: it proves the command starts a window that is found,
    // and the program's first run in a fresh home (its configuration files) is behind us.
    if let Outcome::Lost = launcher.launch()? {
        bail!(
            "the warm-up launch of {} mapped no window within {} s; the terminal's output is in {}",
            PROGRAM.0,
            LAUNCH_TIMEOUT.as_secs(),
            launcher.log.display()
        );
    }
    ready_then_wait_for_go()?;
    let switches_before = sys::context_switches(terminal);
    let end = Instant::now() + Duration::from_millis(args.duration_ms);
    let cap = args.launches.unwrap_or(u32::MAX);
    let (mut samples, mut lost, mut read) = (Vec::new(), 0u32, Vec::new());
    while samples.len() as u32 + lost < cap
        && (samples.is_empty() && lost == 0 || Instant::now() < end)
    {
        match launcher.launch()? {
            Outcome::Mapped { ms, read_bytes } => {
                samples.push(ms);
                read.extend(read_bytes);
            }
            Outcome::Lost => {
                lost += 1;
                eprintln!(
                    "uxsched bench: launch {} lost: no window of {} within {} s (counted in `lost`)",
                    samples.len() as u32 + lost,
                    PROGRAM.0,
                    LAUNCH_TIMEOUT.as_secs()
                );
            }
        }
    }
    let mut extras: std::collections::BTreeMap<String, f64> = [
        (
            "launches".to_owned(),
            f64::from(samples.len() as u32 + lost),
        ),
        ("lost".to_owned(), f64::from(lost)),
    ]
    .into_iter()
    .collect();
    if !read.is_empty() {
        let mean = read.iter().sum::<u64>() as f64 / read.len() as f64;
        extras.insert("read_mib".into(), mean / f64::from(1u32 << 20));
    }
    Ok(ModelOutput {
        samples_ms: samples,
        extras,
        context_switches: sys::context_switches(terminal).saturating_sub(switches_before),
    })
}
