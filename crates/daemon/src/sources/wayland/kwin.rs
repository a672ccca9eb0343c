//! KDE KWin (Plasma 5.27 and 6): KWin has no focus socket, so the source loads a small KWin
//! script over D-Bus (`org.kde.KWin /Scripting loadScript(path, name)`, then `start()`) that, on
//! each activation (`workspace.clientActivated` in Plasma 5, `workspace.windowActivated` in
//! Plasma 6), sends the window's pid as a method call `org.uxsched.KWinFocus.Activated(string)`
//! addressed to the bus driver (which answers it with an error; nothing needs to own a name).
//! The source watches those calls with `dbus-monitor`.
//!
//! The user's session bus accepts only that user's connections (dbus-daemon refuses root), so
//! every D-Bus client here (`dbus-send` to load the script, `dbus-monitor` to watch) runs as
//! the bus's user: started with that uid and gid (no supplementary groups), it can do nothing the
//! user could not. A call counts only if its sender is the current owner of `org.kde.KWin`; when
//! KWin goes the focus is cleared, and when a new KWin takes the name the script is loaded into
//! it. The bus's user (its peer, SO_PEERCRED) is the owner whose processes may be named.

use super::{owner_of, Complaints, Follower, Lost};
use crate::sources::{Owner, Reporter};
use crate::types::{Event, SourceName};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

/// The script's plugin name in KWin.
pub const PLUGIN: &str = "uxsched-focus";
pub const INTERFACE: &str = "org.uxsched.KWinFocus";
const KWIN: &str = "org.kde.KWin";
/// KWin reports "nothing active" just before each activation: a "nothing" that is followed
/// within this time by a window is not reported.
const SETTLE: Duration = Duration::from_millis(50);

/// The KWin script: report the active window's pid now and on every activation.
pub fn script() -> String {
    format!(
        r#"// uxsched: report the active window's pid (see uxsched's docs/compositors.md).
function uxschedReport(w) {{
    callDBus("org.freedesktop.DBus", "/org/uxsched/KWin", "{INTERFACE}", "Activated",
             w && w.pid > 0 ? String(w.pid) : "");
}}
if (workspace.windowActivated) {{
    workspace.windowActivated.connect(uxschedReport);
    uxschedReport(workspace.activeWindow);
}} else {{
    workspace.clientActivated.connect(uxschedReport);
    uxschedReport(workspace.activeClient);
}}
"#
    )
}

/// What dbus-monitor printed, as far as the source cares.
#[derive(Debug, PartialEq, Eq)]
pub enum Seen {
    /// `Activated(pid)` sent by `sender` (`None`: nothing active, or not a pid).
    Activated { sender: String, pid: Option<i32> },
    /// `org.kde.KWin` has a new owner (`None`: KWin is gone).
    KWinOwner(Option<String>),
}

/// Reads dbus-monitor's text: a header line per message, then one line per argument.
#[derive(Default)]
pub struct Parser {
    head: Option<(String, bool)>,
    args: Vec<String>,
}

/// The value of `key=` in a dbus-monitor header line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    line[at..].split([' ', ';']).next()
}

/// A `string "..."` argument line's text.
fn string_arg(line: &str) -> Option<String> {
    let s = line.trim().strip_prefix("string \"")?.strip_suffix('"')?;
    Some(s.to_owned())
}

impl Parser {
    /// Feed one line; returns a message once its arguments are complete.
    pub fn line(&mut self, line: &str) -> Option<Seen> {
        if line.starts_with(' ') {
            if self.head.is_some() {
                self.args.push(string_arg(line).unwrap_or_default());
            }
            return self.done();
        }
        self.args.clear();
        let member = field(line, "member");
        let activated = line.starts_with("method call ")
            && field(line, "interface") == Some(INTERFACE)
            && member == Some("Activated");
        let owner_changed = line.starts_with("signal ")
            && field(line, "sender") == Some("org.freedesktop.DBus")
            && member == Some("NameOwnerChanged");
        self.head = (activated || owner_changed)
            .then(|| (field(line, "sender").unwrap_or("").to_owned(), activated));
        None
    }

    fn done(&mut self) -> Option<Seen> {
        let (sender, activated) = self.head.clone()?;
        if activated && self.args.len() == 1 {
            self.head = None;
            let pid = self.args[0].parse::<i32>().ok().filter(|&p| p > 0);
            return Some(Seen::Activated { sender, pid });
        }
        if !activated && self.args.len() == 3 {
            self.head = None;
            if self.args[0] != KWIN {
                return None;
            }
            let new = Some(self.args[2].clone()).filter(|s| !s.is_empty());
            return Some(Seen::KWinOwner(new));
        }
        None
    }
}

/// The bus's user: who runs the session bus at `bus` (its peer), with the socket's group.
struct BusUser {
    bus: PathBuf,
    uid: u32,
    gid: u32,
}

impl BusUser {
    /// A D-Bus client of this bus, run as its user.
    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env(
                "DBUS_SESSION_BUS_ADDRESS",
                format!("unix:path={}", self.bus.display()),
            )
            .current_dir("/")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .uid(self.uid)
            .gid(self.gid);
        c
    }

    /// Call KWin's scripting interface (or the bus) with `dbus-send`; its printed reply.
    fn call(&self, dest: &str, path: &str, method: &str, args: &[&str]) -> Result<String, String> {
        let out = self
            .command("dbus-send")
            .args(["--session", "--print-reply", "--reply-timeout=5000"])
            .arg(format!("--dest={dest}"))
            .args([path, method])
            .args(args)
            .output()
            .map_err(|e| format!("dbus-send (Debian package dbus-bin): {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        out.status
            .success()
            .then_some(text)
            .ok_or_else(|| format!("{method} failed ({})", out.status))
    }

    /// The unique name that owns `org.kde.KWin` now.
    fn kwin_owner(&self) -> Option<String> {
        let r = self.call(
            "org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus.GetNameOwner",
            &[&format!("string:{KWIN}")],
        );
        r.ok()?.lines().find_map(string_arg)
    }

    /// Load the script into the KWin that runs now (replacing an earlier copy) and run it.
    fn load(&self, script: &Path) -> Result<(), String> {
        let scripting = "org.kde.kwin.Scripting";
        let name = format!("string:{PLUGIN}");
        let _ = self.call(
            KWIN,
            "/Scripting",
            &format!("{scripting}.unloadScript"),
            &[&name],
        );
        let path = format!("string:{}", script.display());
        let id = self.call(
            KWIN,
            "/Scripting",
            &format!("{scripting}.loadScript"),
            &[&path, &name],
        )?;
        if id.contains("int32 -1") {
            return Err(format!("KWin refused the script {}", script.display()));
        }
        self.call(KWIN, "/Scripting", &format!("{scripting}.start"), &[])?;
        Ok(())
    }
}

/// `dbus-monitor` as the bus's user, its lines sent on a channel (closed when it exits).
fn monitor(user: &BusUser) -> Result<(Child, Receiver<String>), Lost> {
    let activated = format!("type='method_call',interface='{INTERFACE}',member='Activated'");
    let owner = format!(
        "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='{KWIN}'"
    );
    let mut child = user
        .command("dbus-monitor")
        .arg("--session")
        .args([activated, owner])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Lost::Conn(format!("dbus-monitor (Debian package dbus-bin): {e}")))?;
    let out = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("uxsched-kwin-mon".into())
        .spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        })
        .map_err(Lost::from)?;
    Ok((child, rx))
}

/// Kills the monitor when a session ends.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Serve one monitor session until dbus-monitor ends.
fn serve(
    probe: UnixStream,
    user: &BusUser,
    script: &Path,
    any: bool,
    reporter: &mut Reporter,
    complaints: &mut Complaints,
) -> Result<(), Lost> {
    let owner: Result<Owner, String> = owner_of(&probe, any);
    drop(probe);
    let (child, lines) = monitor(user)?;
    let _reap = Reap(child);
    // The monitor is up once it prints (its own NameAcquired); then nothing KWin says is missed.
    lines
        .recv_timeout(super::REQUEST_TIMEOUT)
        .map_err(|_| Lost::Conn("dbus-monitor did not start".into()))?;
    let mut kwin = user.kwin_owner();
    if kwin.is_some() {
        if let Err(e) = user.load(script) {
            complaints.say("load", &format!("kwin source: {e}"));
        }
    }
    tracing::info!(bus = %user.bus.display(), owner = user.uid, kwin = ?kwin, "kwin source connected");
    let mut parser = Parser::default();
    // KWin said "nothing active" and that is not reported yet (see [`SETTLE`]).
    let mut settling = false;
    let gone = || Lost::Conn("dbus-monitor ended (the session bus is gone?)".into());
    loop {
        let line = if settling {
            match lines.recv_timeout(SETTLE) {
                Ok(l) => l,
                Err(RecvTimeoutError::Timeout) => {
                    settling = false;
                    reporter.seen(None, owner.clone())?;
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return Err(gone()),
            }
        } else {
            lines.recv().map_err(|_| gone())?
        };
        match parser.line(&line) {
            Some(Seen::Activated { sender, pid }) if Some(&sender) == kwin.as_ref() => {
                settling = pid.is_none();
                if pid.is_some() {
                    reporter.seen(pid, owner.clone())?;
                }
            }
            Some(Seen::Activated { sender, .. }) => complaints.say(
                "sender",
                &format!(
                    "kwin source: an Activated call from {sender}, which is not KWin ({kwin:?})"
                ),
            ),
            Some(Seen::KWinOwner(new)) => {
                tracing::info!(kwin = ?new, "kwin source: org.kde.KWin changed hands");
                settling = false;
                reporter.seen(None, owner.clone())?;
                kwin = new;
                if kwin.is_some() {
                    if let Err(e) = user.load(script) {
                        complaints.say("load", &format!("kwin source: {e}"));
                    }
                }
            }
            None => {}
        }
    }
}

/// Write the script where the bus's user can read it but not change it: a new root-owned
/// 0644 file (never an existing path) in the system's temporary directory.
fn write_script() -> std::io::Result<PathBuf> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("uxsched-kwin.{}.{n}.js", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&path)?;
    f.write_all(script().as_bytes())?;
    Ok(path)
}

/// Removes the script file when the source ends.
struct Remove(PathBuf);

impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Follow KWin's focus on the session bus whose socket is `bus` (`/run/user/<uid>/bus`), on a
/// thread that ends when the bus is gone for good. `any_owner`: act on any process it names
/// (`sources_any_owner`). Fails at once if the bus cannot be reached.
pub fn spawn(
    bus: PathBuf,
    any_owner: bool,
    events: Sender<Event>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let first = super::connect(&bus)?;
    let uid = uxsched_os::peer::peer_uid(&first)?;
    let gid = std::fs::metadata(&bus)?.gid();
    let user = BusUser {
        bus: bus.clone(),
        uid,
        gid,
    };
    let script = Remove(write_script()?);
    let follower = Follower {
        thread: "uxsched-kwin",
        source: SourceName::Kwin,
        connect: move || super::connect(&bus),
        serve: move |c, r: &mut Reporter, k: &mut Complaints| {
            serve(c, &user, &script.0, any_owner, r, k)
        },
    };
    super::run(follower, first, events)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MONITOR: &str = r#"signal time=1.2 sender=org.freedesktop.DBus -> destination=:1.1 serial=2 path=/org/freedesktop/DBus; interface=org.freedesktop.DBus; member=NameAcquired
   string ":1.1"
method call time=1.5 sender=:1.0 -> destination=org.freedesktop.DBus serial=82 path=/org/uxsched/KWin; interface=org.uxsched.KWinFocus; member=Activated
   string ""
method call time=1.6 sender=:1.0 -> destination=org.freedesktop.DBus serial=83 path=/org/uxsched/KWin; interface=org.uxsched.KWinFocus; member=Activated
   string "1459"
method call time=1.7 sender=:1.9 -> destination=org.freedesktop.DBus serial=3 path=/x; interface=org.uxsched.KWinFocus; member=Activated
   string "garbage"
signal time=1.8 sender=org.freedesktop.DBus -> destination=(null destination) serial=9 path=/org/freedesktop/DBus; interface=org.freedesktop.DBus; member=NameOwnerChanged
   string "org.kde.KWin"
   string ":1.0"
   string ""
"#;

    #[test]
    fn dbus_monitors_text_is_read_for_activations_and_kwins_owner() {
        let mut p = Parser::default();
        let seen: Vec<Seen> = MONITOR.lines().filter_map(|l| p.line(l)).collect();
        let act = |s: &str, pid| Seen::Activated {
            sender: s.into(),
            pid,
        };
        assert_eq!(
            seen,
            [
                act(":1.0", None),
                act(":1.0", Some(1459)),
                act(":1.9", None),
                Seen::KWinOwner(None)
            ]
        );
    }

    #[test]
    fn the_script_reports_on_both_plasma_versions() {
        let s = script();
        for want in [
            "workspace.windowActivated",
            "workspace.clientActivated",
            INTERFACE,
            "w.pid",
        ] {
            assert!(s.contains(want), "{want}");
        }
    }
}
