//! The Wayland side of the auto tests: the user's runtime directory, foot, swaymsg, and the
//! compositor's and terminals' logs shown when a test fails.

use super::*;

/// `/run/user/<uid>` for the test, made (the user's, 0700) if the machine has none, and removed
/// again then.
pub(super) struct RuntimeDir {
    pub(super) path: PathBuf,
    made: bool,
}

impl RuntimeDir {
    pub(super) fn of(uid: u32) -> RuntimeDir {
        let path = Path::new(auto::runtime::RUNTIME_ROOT).join(uid.to_string());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let made = std::fs::create_dir(&path).is_ok();
        if made {
            std::os::unix::fs::chown(&path, Some(uid), Some(uid)).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        RuntimeDir { path, made }
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        if self.made {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// `foot` running `sleep` on the compositor at `display` (a socket path), as `uid` (`None`:
/// root, from a runtime directory of its own).
/// Its output goes to a log of its own, shown if the test fails ([`ShowLogsIfFailed`]).
pub(super) fn foot(display: &Path, runtime: &Path, uid: Option<u32>) -> Kill {
    let log = tempfile::Builder::new()
        .prefix("uxsched-test-foot-")
        .suffix(".log")
        .tempfile()
        .unwrap()
        .keep()
        .unwrap()
        .1;
    LOGS.lock().unwrap().push(log.clone());
    let out = std::fs::File::create(&log).unwrap();
    let mut c = Command::new("foot");
    // Its own working directory: cargo runs tests in the crate's directory, which a clone
    // under /root leaves unreachable to the user the terminal runs as (it then exits at once).
    c.args(["sleep", "600"])
        .current_dir("/")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", runtime)
        .env("XDG_RUNTIME_DIR", runtime)
        .env("WAYLAND_DISPLAY", display)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
    if let Some(uid) = uid {
        c.uid(uid).gid(uid);
    }
    Kill(c.spawn().expect("foot (Debian package foot)"))
}

/// The compositor's and the terminals' logs of the running test: printed if it fails (a
/// terminal that exits at once leaves nothing in front, and only its log says why), removed.
pub(super) static LOGS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

pub(super) struct ShowLogsIfFailed;

impl Drop for ShowLogsIfFailed {
    fn drop(&mut self) {
        for log in LOGS.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            if std::thread::panicking() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                eprintln!("--- {}:\n{text}", log.display());
            }
            let _ = std::fs::remove_file(&log);
        }
    }
}

pub(super) fn swaymsg(socket: &Path, cmd: &str) {
    let out = Command::new("swaymsg")
        .arg("-s")
        .arg(socket)
        .arg(cmd)
        .output()
        .expect("swaymsg (Debian package sway)");
    assert!(out.status.success(), "swaymsg {cmd}: {out:?}");
}
