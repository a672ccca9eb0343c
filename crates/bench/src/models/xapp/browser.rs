//! The browser scenario (issue 30): Debian's Chromium showing a local page whose `<textarea>`
//! has the focus, run as the unprivileged [`USER`] with its own sandbox, as on a desktop.
//!
//! `--app=file://…` opens one window without tabs or toolbar, created by the browser process
//! (the **app**); the page is drawn by a renderer process and composited in software by the
//! GPU process (`--disable-gpu`: there is no GPU here), both descendants of the browser. A
//! keystroke travels X server → browser → renderer (layout, paint) → GPU process (raster,
//! composite) → X server, which the window's DAMAGE reports.
//!
//! The sandbox is checked, not assumed: the run starts only once a renderer runs in a user
//! namespace of its own under seccomp-bpf (Chromium's namespace sandbox). Where Chromium
//! cannot build its sandbox it exits ("No usable sandbox"); the harness then restarts it with
//! `--no-sandbox`, warns, and the run's report carries `sandbox=0` — never silently.

use super::user::{AppUser, Scratch, USER};
use crate::sys;
use anyhow::{Context, Result};
use std::os::fd::RawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The page: one `<textarea>` filling the window, focused as soon as it exists (`autofocus`,
/// and again by script), with nothing that draws without input: no spell-check underlines
/// (drawn later, asynchronously), no focus ring, no scrollbar, a caret that does not blink
/// (see [`GTK_SETTINGS`]).
const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>uxsched bench</title></head>
<body style="margin:0;overflow:hidden">
<textarea id="t" autofocus spellcheck="false" autocomplete="off"
 style="box-sizing:border-box;width:100vw;height:100vh;border:0;outline:none;resize:none;overflow:hidden;font:16px monospace"></textarea>
<script>document.getElementById("t").focus()</script>
</body></html>
"#;

/// Chromium takes the caret's blink from the desktop's GTK settings: without this its caret
/// blinks (7 damage notifications in 4 s without input, measured), and a sample could be a
/// blink, not a key.
const GTK_SETTINGS: &str = "[Settings]\ngtk-cursor-blink = false\n";

/// Quiet and deterministic: no first-run UI, no network or component traffic, no keyring, a
/// fixed window; no GPU here, so raster and compositing are Chromium's software paths.
const FLAGS: &[&str] = &[
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-gpu",
    "--ozone-platform=x11",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-features=Translate",
    "--password-store=basic",
    "--noerrdialogs",
    "--window-position=0,0",
    "--window-size=800,600",
];

/// How long the browser may take to show a sandboxed renderer: it starts after the load (12
/// hogs on 2 CPUs: seconds), like the window the client waits for (`client.rs`).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The browser process, and whether Chromium's sandbox runs (`false`: `--no-sandbox`).
pub struct Browser {
    pub child: Child,
    pub sandbox: bool,
    /// Its `TMPDIR`; dropped after the browser's tree is killed.
    pub tmp: Scratch,
}

/// Start Chromium on `display` as [`USER`], its home in `dir/home`, its page and profile in
/// [`install_dir`], its log in `dir/app.log`; `cgroup` (the layout's app unit) is joined as
/// root before the uid is dropped. Returns once a sandboxed renderer runs, or after the
/// fallback.
pub fn start(display: &str, dir: &Path, cgroup: Option<RawFd>) -> Result<Browser> {
    let user = AppUser::ensure()?;
    user.check_reachable(dir)?;
    let install = install_dir(dir);
    if install.exists() {
        std::fs::remove_dir_all(&install)
            .with_context(|| format!("emptying {}", install.display()))?;
    }
    user.own_dir(&install)?;
    let page = install.join("page.html");
    std::fs::write(&page, PAGE).with_context(|| format!("writing {}", page.display()))?;
    std::fs::set_permissions(&page, std::fs::Permissions::from_mode(0o644))?;
    let home = dir.join("home");
    prepare_home(&user, &home)?;
    user.own_dir(&install.join("profile"))?;
    let log = dir.join("app.log");
    let tmp = Scratch::new(&user)?;
    let first = spawn(&user, display, dir, tmp.path(), cgroup, true)?;
    let why = match await_sandbox(first, &log)? {
        Started::Sandboxed(child) => {
            return Ok(Browser {
                child,
                sandbox: true,
                tmp,
            })
        }
        Started::NoUsableSandbox(why) => why,
    };
    let kept = dir.join("app-sandboxed.log");
    std::fs::rename(&log, &kept)?;
    eprintln!(
        "uxsched bench: warning: Chromium could not start its sandbox here ({why}; log {}): running it with --no-sandbox, and the report says sandbox=0",
        kept.display()
    );
    Ok(Browser {
        child: spawn(&user, display, dir, tmp.path(), cgroup, false)?,
        sandbox: false,
        tmp,
    })
}

/// The user's fresh home: XDG directories it owns, and GTK settings without a caret blink.
fn prepare_home(user: &AppUser, home: &Path) -> Result<()> {
    user.own_dir(home)?;
    for sub in [".config", ".cache", ".local", ".local/share"] {
        user.own_dir(&home.join(sub))?;
    }
    for gtk in ["gtk-3.0", "gtk-4.0"] {
        let d = home.join(".config").join(gtk);
        user.own_dir(&d)?;
        let f = d.join("settings.ini");
        std::fs::write(&f, GTK_SETTINGS).with_context(|| format!("writing {}", f.display()))?;
        std::os::unix::fs::chown(&f, Some(user.uid), Some(user.gid))?;
    }
    Ok(())
}

/// Where the page and the profile live: one place for every start in a bench run
/// (`runs/browser`, beside the run's own directory `dir`, emptied before each start, so each
/// start is cold — a caller's `dir` must be a directory of its own, not a shared one's child
/// like `/var/tmp/x`), so every start has the same
/// command line, as a user's browser has. The daemon knows an app by its executable and
/// arguments (the learning store's key): with the run's own directory in them, every
/// repetition was a new app to it, and nothing it learned reached the next start.
fn install_dir(dir: &Path) -> PathBuf {
    dir.parent().unwrap_or(dir).join("browser")
}

/// The browser's command line (`chromium` on `PATH`: Debian's launcher, which execs the
/// browser, so the child's pid is the browser's).
fn command(dir: &Path, sandbox: bool) -> Command {
    let install = install_dir(dir);
    let mut cmd = Command::new("chromium");
    cmd.args(FLAGS)
        .arg(format!(
            "--user-data-dir={}",
            install.join("profile").display()
        ))
        .arg(format!(
            "--app=file://{}",
            install.join("page.html").display()
        ));
    if !sandbox {
        cmd.arg("--no-sandbox");
    }
    cmd.current_dir(dir);
    cmd
}

fn spawn(
    user: &AppUser,
    display: &str,
    dir: &Path,
    tmp: &Path,
    cgroup: Option<RawFd>,
    sandbox: bool,
) -> Result<Child> {
    let log = std::fs::File::create(dir.join("app.log"))?;
    let mut cmd = command(dir, sandbox);
    // Registered first, so it runs as root, before run_as drops the uid.
    // SAFETY: join_cgroup_in_child only write(2)s to an open fd.
    unsafe {
        cmd.pre_exec(move || crate::layout::join_cgroup_in_child(cgroup));
    }
    user.run_as(&mut cmd, &dir.join("home"))?;
    cmd.env("DISPLAY", display).env("TMPDIR", tmp);
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    crate::leftovers::spawn(&mut cmd).context("starting chromium")
}

enum Started {
    Sandboxed(Child),
    /// The browser exited saying it has no usable sandbox: the log line.
    NoUsableSandbox(String),
}

/// Wait until a descendant of the browser runs sandboxed (a user namespace other than the
/// browser's, and a seccomp filter: a renderer), or the browser exits; on any error the
/// browser's whole tree is killed.
fn await_sandbox(mut child: Child, log: &Path) -> Result<Started> {
    let pid = child.id() as i32;
    let end = Instant::now() + START_TIMEOUT;
    let result = loop {
        if let Some(status) = child.try_wait()? {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            // "No usable sandbox!", or the namespace sandbox's "Failed to move to new
            // namespace" where user namespaces are refused.
            let why = text.lines().find(|l| {
                let l = l.to_lowercase();
                l.contains("sandbox") || l.contains("namespace")
            });
            match why {
                Some(line) => break Ok(Started::NoUsableSandbox(line.trim().to_owned())),
                None => break Err(anyhow::anyhow!(
                    "chromium (pid {pid}, as {USER}) exited while starting ({status}); its log is {}",
                    log.display()
                )),
            }
        }
        if sandboxed_descendant(pid).is_some() {
            return Ok(Started::Sandboxed(child));
        }
        if Instant::now() > end {
            break Err(anyhow::anyhow!(
                "chromium (pid {pid}, as {USER}) showed no sandboxed renderer within {} s; its log is {}",
                START_TIMEOUT.as_secs(),
                log.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    sys::kill_tree(pid);
    let _ = child.wait();
    result
}

/// A descendant of `browser` in a user namespace other than the browser's, under a seccomp
/// filter (`Seccomp: 2` in its status): Chromium's namespace sandbox at work.
fn sandboxed_descendant(browser: i32) -> Option<i32> {
    let ns = |pid: i32| std::fs::read_link(format!("/proc/{pid}/ns/user")).ok();
    let own = ns(browser)?;
    crate::modes::process_tree(browser).into_iter().find(|&p| {
        let filtered = std::fs::read_to_string(format!("/proc/{p}/status")).is_ok_and(|s| {
            s.lines()
                .any(|l| l.split_whitespace().eq(["Seccomp:", "2"]))
        });
        filtered && ns(p).is_some_and(|n| n != own)
    })
}
