//! The unprivileged user the real programs, their desktop and every background load run as
//! (`loads/`). A desktop runs its apps and its user's builds as the person logged in, never as
//! root, and Chromium behaves differently as root (it refuses to start without `--no-sandbox`,
//! so its sandbox — part of what a keystroke passes through — would be off). The harness runs
//! as root, so it starts them as the system user [`USER`], created
//! once with `useradd` if missing (no login shell, no home of its own: each run gets a fresh
//! home in its run directory, owned by that user, so no state carries from run to run).

use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// The system user of the real programs and the loads (`userdel uxsched-bench` removes it).
pub const USER: &str = "uxsched-bench";

/// A user's ids, as the password database has them.
#[derive(Debug, Clone, Copy)]
pub struct AppUser {
    pub uid: u32,
    pub gid: u32,
}

impl AppUser {
    /// [`USER`], created first if it does not exist (a system user in its own group).
    pub fn ensure() -> Result<AppUser> {
        if let Some(user) = lookup(USER)? {
            return Ok(user);
        }
        let status = Command::new("useradd")
            .args(["--system", "--user-group", "--no-create-home"])
            .args(["--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin"])
            .args(["--comment", "uxsched bench, desktop apps run unprivileged"])
            .arg(USER)
            .status()
            .context("running useradd (Debian package passwd) to create the bench's user")?;
        // Another bench may have created it meanwhile (useradd then fails): look again.
        match lookup(USER)? {
            Some(user) => {
                if status.success() {
                    eprintln!(
                        "uxsched bench: created the system user {USER} (uid {}): the browser scenario runs as it; `userdel {USER}` removes it",
                        user.uid
                    );
                }
                Ok(user)
            }
            None => bail!(
                "useradd {USER} failed ({status}): create a system user {USER} (useradd --system --user-group {USER}) and rerun"
            ),
        }
    }

    /// `path` (created if missing) owned by this user, mode 0700: its home and the browser's
    /// profile.
    /// The session's runtime directory where logind (pam_systemd) makes it, `/run/user/<uid>`:
    /// where a compositor puts its sockets and where the daemon's `auto` source looks for them.
    /// Shared by the user's sessions (socket names are unique); left in place after a run, as
    /// logind leaves it while the user has sessions.
    pub fn runtime_dir(&self) -> std::path::PathBuf {
        Path::new("/run/user").join(self.uid.to_string())
    }

    pub fn own_dir(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid))
            .with_context(|| format!("chown {} to {USER}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("chmod 0700 {}", path.display()))
    }

    /// Run `cmd` as this user with the environment of a desktop session in `home` (made the
    /// user's): the harness's environment (root's `HOME`, sudo's variables) is not passed on;
    /// the caller adds `DISPLAY` and what else the program needs afterwards.
    /// The uid is dropped last in the child (supplementary groups, then gid, then uid), after
    /// any `pre_exec` registered before this call, which therefore still runs as root (joining
    /// the layout's cgroup).
    pub fn run_as(&self, cmd: &mut Command, home: &Path) -> Result<()> {
        self.own_dir(home)?;
        let runtime = self.runtime_dir();
        self.own_dir(&runtime)?;
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("USER", USER)
            .env("LOGNAME", USER)
            .env("LANG", "C.UTF-8")
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_RUNTIME_DIR", runtime);
        let (uid, gid) = (self.uid, self.gid);
        // SAFETY: setgroups/setgid/setuid are async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let groups = [gid];
                if libc::setgroups(1, groups.as_ptr()) < 0
                    || libc::setgid(gid) < 0
                    || libc::setuid(uid) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(())
    }

    /// Refuse a run directory the user cannot reach (a harness started with umask 077): the
    /// browser would fail later with a less clear error.
    pub fn check_reachable(&self, dir: &Path) -> Result<()> {
        for d in dir.ancestors() {
            let mode = std::fs::metadata(d)
                .with_context(|| format!("reading {}", d.display()))?
                .permissions()
                .mode();
            if mode & 0o001 == 0 {
                bail!(
                    "{} (mode {:o}) is not searchable by {USER}, who runs the browser: chmod o+x it, or run the bench with umask 022",
                    d.display(),
                    mode & 0o7777
                );
            }
        }
        Ok(())
    }
}

/// The user called `name`, if the password database knows it.
fn lookup(name: &str) -> Result<Option<AppUser>> {
    let cname = CString::new(name)?;
    // SAFETY: zeroed passwd is a valid out-value; getpwnam_r fills it, pointing into `buf`.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; `buf` outlives the read of `pwd` below.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc))
            .with_context(|| format!("looking up user {name} (getpwnam_r)"));
    }
    Ok((!found.is_null()).then_some(AppUser {
        uid: pwd.pw_uid,
        gid: pwd.pw_gid,
    }))
}

/// A short directory of the user's under `/tmp`, removed when dropped: the browser's `TMPDIR`.
/// Chromium makes its singleton socket's directory (`org.chromium.Chromium.XXXXXX`) there and
/// removes it only at a clean exit; a browser the harness kills left one in `/tmp` per run. Short,
/// because the socket's path must fit a `sockaddr_un` (108 bytes): one under the run's
/// directory did not, and Chromium aborted.
pub struct Scratch(std::path::PathBuf);

impl Scratch {
    pub fn new(user: &AppUser) -> Result<Scratch> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = Path::new("/tmp").join(format!("uxsched-tmp.{}.{n}", std::process::id()));
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("emptying {}", path.display()))?;
        }
        user.own_dir(&path)?;
        Ok(Scratch(path))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            eprintln!(
                "uxsched bench: warning: cannot remove {}: {e}",
                self.0.display()
            );
        }
    }
}
