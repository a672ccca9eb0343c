//! The Wayland compositors of the machine, found in their users' runtime directories
//! (`/run/user/<uid>/`): a compositor's IPC socket says which one it is and where to ask —
//! `sway-ipc.<uid>.<pid>.sock` (sway and other i3-IPC compositors), `hypr/<instance>/.socket2.sock`
//! (Hyprland), `niri.<display>.<pid>.sock` (niri) — and a `wayland-<n>` socket names the
//! compositor listening on it (GNOME Shell, KWin and the rest, which have no such socket).
//! Only sockets somebody listens on count (a crashed compositor leaves its files behind).

use super::procs;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the users' runtime directories are.
pub const RUNTIME_ROOT: &str = "/run/user";
/// The most entries read of one runtime directory.
const MAX_ENTRIES: usize = 4096;

/// How a compositor is asked what has focus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ipc {
    /// sway's (i3's) IPC socket.
    Sway(PathBuf),
    /// A Hyprland instance's directory (`.socket.sock`, `.socket2.sock`).
    Hyprland(PathBuf),
    /// niri's IPC socket.
    Niri(PathBuf),
    /// Only a Wayland socket: the compositor is told by its process name.
    None,
}

/// One compositor found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compositor {
    /// The owner of the runtime directory it was found in.
    pub uid: u32,
    pub pid: Option<i32>,
    /// Its process name (`sway`, `Hyprland`, `niri`, `gnome-shell`, `kwin_wayland`, …).
    pub comm: String,
    pub ipc: Ipc,
    /// The socket it was found by.
    pub found: PathBuf,
    /// The Wayland displays it serves (`wayland-1`).
    pub displays: Vec<String>,
    /// Something about it that does not add up (its process is another user's): not followed.
    pub mismatch: Option<String>,
}

/// The compositors under `root` (`/run/user`), and notes on what was skipped.
pub fn scan(root: &Path, listening: &BTreeMap<String, u64>) -> (Vec<Compositor>, Vec<String>) {
    let mut found = Vec::new();
    let mut notes = Vec::new();
    let Ok(dirs) = std::fs::read_dir(root) else {
        return (found, notes);
    };
    for e in dirs.flatten().take(MAX_ENTRIES) {
        let Some(uid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let dir = e.path();
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() && m.uid() == uid => {}
            Ok(m) => {
                notes.push(format!(
                    "{} is not a directory of uid {uid} (owner uid {}): skipped",
                    dir.display(),
                    m.uid()
                ));
                continue;
            }
            Err(_) => continue,
        }
        found.extend(scan_user(&dir, uid, listening));
    }
    (found, notes)
}

/// The compositors in one user's runtime directory.
pub fn scan_user(dir: &Path, uid: u32, listening: &BTreeMap<String, u64>) -> Vec<Compositor> {
    let mut out: Vec<Compositor> = Vec::new();
    let mut waylands = Vec::new();
    let names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .take(MAX_ENTRIES)
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    let live = |p: &Path| procs::is_listened(listening, p);
    for name in &names {
        let path = dir.join(name);
        if let Some(pid) = sway_pid(name, uid) {
            if live(&path) {
                out.push(named(uid, pid, Ipc::Sway(path.clone()), &path));
            }
        } else if let Some(pid) = niri_pid(name) {
            if live(&path) {
                out.push(named(uid, pid, Ipc::Niri(path.clone()), &path));
            }
        } else if is_wayland_socket(name) && live(&path) {
            waylands.push((name.clone(), path));
        }
    }
    // Hyprland: one directory per instance.
    for e in std::fs::read_dir(dir.join("hypr"))
        .into_iter()
        .flatten()
        .flatten()
        .take(64)
    {
        let socket2 = e.path().join(".socket2.sock");
        if !live(&socket2) {
            continue;
        }
        let mut c = probed(uid, &socket2, Ipc::Hyprland(e.path()), listening);
        c.found = socket2;
        out.push(c);
    }
    // Each Wayland socket joins the compositor listening on it, else stands for one.
    for (name, path) in waylands {
        let probe = probed(uid, &path, Ipc::None, listening);
        match out
            .iter_mut()
            .find(|c| c.pid.is_some() && c.pid == probe.pid)
        {
            Some(c) => c.displays.push(name),
            None => {
                let mut c = probe;
                c.displays.push(name);
                out.push(c);
            }
        }
    }
    out
}

/// A compositor whose pid the socket's name gives: checked against the directory's user.
fn named(uid: u32, pid: i32, ipc: Ipc, found: &Path) -> Compositor {
    let owner = procs::uid_of(pid);
    let mismatch = match owner {
        Some(o) if o == uid => None,
        Some(o) => Some(format!(
            "{} names pid {pid}, a process of uid {o}, not of the directory's user (uid {uid})",
            found.display()
        )),
        None => Some(format!(
            "{} names pid {pid}, which is gone or not one user's",
            found.display()
        )),
    };
    Compositor {
        uid,
        pid: Some(pid),
        comm: procs::comm(pid),
        ipc,
        found: found.to_owned(),
        displays: Vec::new(),
        mismatch,
    }
}

/// A compositor found by the socket it listens on (`SO_PEERCRED`).
fn probed(uid: u32, socket: &Path, ipc: Ipc, listening: &BTreeMap<String, u64>) -> Compositor {
    let (pid, comm, mismatch) = match procs::listener_in(socket, listening) {
        Ok((pid, peer)) if peer == uid => (Some(pid), procs::comm(pid), None),
        Ok((pid, peer)) => (
            Some(pid),
            procs::comm(pid),
            Some(format!(
                "{} is served by pid {pid} of uid {peer}, not by the directory's user (uid {uid})",
                socket.display()
            )),
        ),
        Err(e) => (
            None,
            "?".into(),
            Some(format!("cannot reach {}: {e}", socket.display())),
        ),
    };
    Compositor {
        uid,
        pid,
        comm,
        ipc,
        found: socket.to_owned(),
        displays: Vec::new(),
        mismatch,
    }
}

/// `sway-ipc.<uid>.<pid>.sock` of this user → pid.
pub fn sway_pid(name: &str, uid: u32) -> Option<i32> {
    let rest = name.strip_prefix("sway-ipc.")?.strip_suffix(".sock")?;
    let (u, pid) = rest.split_once('.')?;
    (u.parse::<u32>().ok()? == uid).then_some(())?;
    pid.parse().ok().filter(|&p| p > 0)
}

/// `niri.<wayland display>.<pid>.sock` → pid.
pub fn niri_pid(name: &str) -> Option<i32> {
    let rest = name.strip_prefix("niri.")?.strip_suffix(".sock")?;
    let (_, pid) = rest.rsplit_once('.')?;
    pid.parse().ok().filter(|&p| p > 0)
}

/// `wayland-<n>` (not its `.lock`).
pub fn is_wayland_socket(name: &str) -> bool {
    name.strip_prefix("wayland-")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_names() {
        assert_eq!(sway_pid("sway-ipc.1000.4242.sock", 1000), Some(4242));
        assert_eq!(sway_pid("sway-ipc.1001.4242.sock", 1000), None);
        assert_eq!(sway_pid("sway-ipc.1000.x.sock", 1000), None);
        assert_eq!(sway_pid("sway-ipc.1000.0.sock", 1000), None);
        assert_eq!(niri_pid("niri.wayland-1.777.sock"), Some(777));
        assert_eq!(niri_pid("niri.sock"), None);
        assert!(is_wayland_socket("wayland-0"));
        assert!(is_wayland_socket("wayland-12"));
        assert!(!is_wayland_socket("wayland-0.lock"));
        assert!(!is_wayland_socket("wayland-"));
    }
}
