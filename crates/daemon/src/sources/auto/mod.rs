//! `sources = ["auto"]`: the graphical sessions of the machine, found by the daemon itself, each
//! followed by the source that fits its desktop (issue 32; docs/desktops.md).
//!
//! Discovery ([`Discovery::run`], every [`RESCAN`]) reads:
//! - logind (`org.freedesktop.login1` on the system bus) where it runs: each session's type,
//!   display, user, activity and whether it is remote (`logind.rs`);
//! - the X sockets `/tmp/.X11-unix/X<n>` that a server listens on: the server's pid and uid
//!   (`SO_PEERCRED`), its `-auth` cookie and the session's user (`xdisplay.rs`);
//! - the users' runtime directories `/run/user/<uid>/`: the compositors' IPC sockets and the
//!   Wayland sockets (`runtime.rs`).
//!
//! Each session then gets a [`Follower`] — X11 for an X display, the sway, Hyprland or niri
//! source for those compositors, Mutter's for GNOME, the `toplevel` fallback (the compositor's
//! wlr-foreign-toplevel-management) for any other compositor — or the reason it gets none ([`Why`]):
//! a remote session, root's, a compositor with no source, a display whose user cannot be told.
//! The followers run under their own source names; the `auto` thread (`run.rs`) relays their
//! focus to the daemon, one session at a time (the active one, and of several active ones the
//! most recent focus change), and keeps what `uxsched status` and `uxsched doctor` show
//! (`report.rs`). `uxsched doctor` runs the same discovery when no daemon answers.

mod idle_relay;
pub mod logind;
pub mod procs;
pub mod report;
mod run;
pub mod runtime;
pub mod xdisplay;

pub use run::{spawn, Handle, Report, Settings};

use crate::types::SourceName;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often discovery looks again.
pub const RESCAN: Duration = Duration::from_secs(2);
/// How often a missing system bus or logind is asked for again.
const LOGIND_RETRY: Duration = Duration::from_secs(30);

/// Why a session is not followed, and what to do about it (empty: nothing to do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Why {
    pub why: String,
    pub todo: String,
}

impl Why {
    fn new(why: impl Into<String>, todo: impl Into<String>) -> Why {
        Why {
            why: why.into(),
            todo: todo.into(),
        }
    }
}

/// The source that follows a session.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Follower {
    /// Local X display `n` (`sources/x11.rs`).
    X11 { display: u32 },
    /// sway's (i3's) IPC socket.
    Sway(PathBuf),
    /// A Hyprland instance's directory.
    Hyprland(PathBuf),
    /// niri's IPC socket.
    Niri(PathBuf),
    /// GNOME: Mutter's marks on the app scopes (one source for every GNOME session).
    Mutter,
    /// KDE Plasma's KWin, of user `uid`.
    Kwin { uid: u32 },
    /// Any other compositor: its display socket, followed through wlr-foreign-toplevel-management
    /// where it offers it (`sources/wayland/toplevel.rs`).
    Toplevel(PathBuf),
}

impl Follower {
    pub fn source(&self) -> SourceName {
        match self {
            Follower::X11 { .. } => SourceName::X11,
            Follower::Sway(_) => SourceName::Sway,
            Follower::Hyprland(_) => SourceName::Hyprland,
            Follower::Niri(_) => SourceName::Niri,
            Follower::Mutter => SourceName::Mutter,
            Follower::Kwin { .. } => SourceName::Kwin,
            Follower::Toplevel(_) => SourceName::Toplevel,
        }
    }

    /// The source's name as the config spells it.
    pub fn name(&self) -> String {
        format!("{:?}", self.source()).to_lowercase()
    }
}

/// One graphical session found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// What runs it: `Xorg on :0`, `sway`, `GNOME Shell (Wayland)`.
    pub desktop: String,
    /// Where it was found: `/tmp/.X11-unix/X0`, `/run/user/1000/sway-ipc.1000.77.sock`, with
    /// logind's session id when logind knows it.
    pub found: String,
    /// The session's user, and how that was found.
    pub user: Option<(u32, String)>,
    /// logind's `Active`; `None` without logind (every session counts as active then).
    pub active: Option<bool>,
    /// How it is followed, or why not.
    pub plan: Result<Follower, Why>,
    /// logind's id of the session, where logind knows it (its idle hint: `sources/idle/`).
    pub logind: Option<String>,
    /// A Wayland session's display socket (its compositor's idle protocol: `sources/idle/`).
    pub wayland: Option<PathBuf>,
}

/// Where discovery looks (fixtures in tests).
#[derive(Debug, Clone)]
pub struct Roots {
    pub x11_dir: PathBuf,
    pub runtime: PathBuf,
    pub logind: LogindAt,
}

/// Which bus logind is asked on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogindAt {
    System,
    /// A bus address (a test's private bus).
    Address(String),
    /// Not asked (a fixture tree).
    Off,
}

impl Default for Roots {
    fn default() -> Roots {
        Roots {
            x11_dir: xdisplay::X11_DIR.into(),
            runtime: runtime::RUNTIME_ROOT.into(),
            logind: LogindAt::System,
        }
    }
}

/// What the configuration says beyond the roots.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `sources_any_owner`: follow sessions whose user cannot be told, or root's.
    pub any_owner: bool,
    /// The other sources configured (`sources`): auto leaves their desktops to them.
    pub configured: BTreeSet<SourceName>,
}

impl Options {
    /// The options of a daemon whose `sources` are `sources`: the desktops of a desktop source
    /// listed by itself are left to it (`x11` follows its configured display, `mutter` the
    /// cgroup tree, the compositors' sources the socket the daemon's environment names), so
    /// that no desktop has two followers reporting under one name.
    pub fn of(sources: &[SourceName], any_owner: bool) -> Options {
        use SourceName::*;
        Options {
            any_owner,
            configured: sources
                .iter()
                .copied()
                .filter(|s| matches!(s, X11 | Mutter | Sway | Hyprland | Niri | Kwin | Toplevel))
                .collect(),
        }
    }
}

/// One round of discovery.
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// How sessions were found: logind, or the sockets and why not logind.
    pub how: String,
    pub sessions: Vec<Session>,
    /// What was seen and left aside (stale sockets), one line each.
    pub notes: Vec<String>,
}

/// Discovery, with its logind connection kept between rounds.
pub struct Discovery {
    roots: Roots,
    logind: Option<logind::Logind>,
    /// Why logind is not used, and when it was last tried.
    no_logind: Option<(String, Instant)>,
}

impl Discovery {
    pub fn new(roots: Roots) -> Discovery {
        Discovery {
            roots,
            logind: None,
            no_logind: None,
        }
    }

    /// logind's sessions, or why there are none to be had.
    fn logind_sessions(&mut self) -> Result<Vec<logind::LogindSession>, String> {
        if self.logind.is_none() {
            let retry = self
                .no_logind
                .as_ref()
                .is_none_or(|(_, at)| at.elapsed() >= LOGIND_RETRY);
            if !retry {
                return Err(self
                    .no_logind
                    .as_ref()
                    .map(|(w, _)| w.clone())
                    .unwrap_or_default());
            }
            let connected = match &self.roots.logind {
                LogindAt::System => logind::Logind::system(),
                LogindAt::Address(a) => logind::Logind::at(a),
                LogindAt::Off => Err("not asked (a fixture tree)".into()),
            };
            match connected {
                Ok(l) => self.logind = Some(l),
                Err(e) => {
                    self.no_logind = Some((e.clone(), Instant::now()));
                    return Err(e);
                }
            }
        }
        let listed = self.logind.as_ref().map(|l| l.sessions());
        match listed {
            Some(Ok(s)) => {
                self.no_logind = None;
                Ok(s)
            }
            Some(Err(e)) => {
                self.logind = None;
                self.no_logind = Some((e.clone(), Instant::now()));
                Err(e)
            }
            None => Err(String::new()),
        }
    }

    /// Find the sessions of the machine now.
    pub fn run(&mut self, opts: &Options) -> Found {
        let logind = self.logind_sessions();
        let how = match &logind {
            Ok(_) => "logind, and the X and Wayland sockets it names".to_owned(),
            Err(e) => format!(
                "the X and Wayland sockets (/tmp/.X11-unix, /run/user/<uid>): logind is not \
                 used — {e}"
            ),
        };
        let logind = logind.unwrap_or_default();
        let logind: Vec<_> = logind.into_iter().filter(|s| s.graphical()).collect();
        let listening = procs::listening();
        let mut notes = Vec::new();
        let (compositors, more) = runtime::scan(&self.roots.runtime, &listening);
        notes.extend(more);
        let runtime = &self.roots.runtime;
        let mut sessions = wayland_sessions(&compositors, &logind, runtime, opts);
        let xs = x_sessions(&self.roots.x11_dir, &listening, &logind, opts, &mut notes);
        // Xwayland serves a Wayland session's X clients: that session's source follows them
        // where it has one.
        for (server, mut s) in xs {
            let followed = sessions
                .iter()
                .any(|w| w.plan.is_ok() && w.user.as_ref().map(|u| u.0) == Some(server.uid));
            if server.is_xwayland() && followed && s.plan.is_ok() {
                s.plan = Err(Why::new(
                    "the Xwayland of a Wayland session: the compositor's source follows its X \
                     windows too",
                    "",
                ));
            }
            sessions.push(s);
        }
        // logind's graphical sessions that nothing on the machine answers for.
        for l in &logind {
            let seen = sessions.iter().any(|s| s.found.ends_with(&logind_tag(l)));
            if !seen {
                sessions.push(unanswered(l, &self.roots));
            }
        }
        Found {
            how,
            sessions,
            notes,
        }
    }
}

/// `logind session 3`.
fn logind_tag(l: &logind::LogindSession) -> String {
    format!("logind session {}", l.id)
}

/// A logind session with no server or compositor found for it.
fn unanswered(l: &logind::LogindSession, roots: &Roots) -> Session {
    let why = if l.kind == "x11" {
        format!(
            "logind names display {} but no X server answers on {}",
            l.display,
            roots.x11_dir.display()
        )
    } else {
        format!(
            "logind has a {} session but no compositor socket was found in {}/{}",
            l.kind,
            roots.runtime.display(),
            l.uid
        )
    };
    Session {
        desktop: format!("{} ({})", nonempty(&l.desktop, "unknown desktop"), l.kind),
        found: logind_tag(l),
        user: Some((l.uid, "logind's session".into())),
        active: Some(l.active),
        plan: Err(Why::new(
            why,
            "a compositor without an IPC socket uxsched reads is not followed; \
             `uxsched focus PID` still works",
        )),
        logind: Some(l.id.clone()),
        wayland: None,
    }
}

fn nonempty<'a>(s: &'a str, or: &'a str) -> &'a str {
    if s.is_empty() {
        or
    } else {
        s
    }
}

/// Refusals that hold for any session: remote, a login screen, root's.
fn refused(
    remote: bool,
    class: Option<&str>,
    uid: Option<u32>,
    desktop: &str,
    opts: &Options,
) -> Option<Why> {
    if remote {
        return Some(Why::new(
            format!(
                "{desktop} is a remote session (VNC, RDP, a forwarded display): its user is not \
                 in front of this machine, and boosting it would take the CPU from whoever is"
            ),
            "nothing to do; `uxsched focus PID` can still name an app by hand",
        ));
    }
    if class == Some("greeter") {
        return Some(Why::new(
            "the login screen (a greeter session): followed once a user logs in",
            "",
        ));
    }
    if uid == Some(0) && !opts.any_owner {
        return Some(Why::new(
            format!(
                "{desktop} is root's session: uxsched never boosts root's processes on a \
                 desktop's word (any window could name any root process)"
            ),
            "log in as an ordinary user; `sources_any_owner = true` lifts this (a \
             single-user machine only)",
        ));
    }
    None
}

/// The X displays of the machine, each with its server.
fn x_sessions(
    dir: &Path,
    listening: &std::collections::BTreeMap<String, u64>,
    logind: &[logind::LogindSession],
    opts: &Options,
    notes: &mut Vec<String>,
) -> Vec<(xdisplay::XServer, Session)> {
    let mut displays = BTreeSet::new();
    for e in std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .take(4096)
    {
        if let Some(n) = e.file_name().to_str().and_then(xdisplay::socket_display) {
            displays.insert(n);
        }
    }
    let prefix = format!("{}/X", dir.display());
    for path in listening.keys() {
        let p = path.strip_prefix('@').unwrap_or(path);
        if let Some(n) = p.strip_prefix(&prefix).and_then(|n| n.parse::<u32>().ok()) {
            displays.insert(n);
        }
    }
    let mut out = Vec::new();
    for n in displays {
        let socket = xdisplay::socket_of(dir, n);
        if !procs::is_listened(listening, &socket) {
            notes.push(format!(
                "{}: no X server listens on it (left by one that exited): ignored",
                socket.display()
            ));
            continue;
        }
        let server = match xdisplay::XServer::at_in(&socket, n, listening) {
            Ok(s) => s,
            Err(e) => {
                notes.push(e);
                continue;
            }
        };
        let l = logind
            .iter()
            .find(|l| l.kind == "x11" && xdisplay::parse_display(&l.display) == Some(n));
        let desktop = match l.map(|l| l.desktop.as_str()).filter(|d| !d.is_empty()) {
            Some(d) => format!("{} ({d})", server.describe()),
            None => server.describe(),
        };
        let found = match l {
            Some(l) => format!("{}, {}", socket.display(), logind_tag(l)),
            None => socket.display().to_string(),
        };
        let user = xdisplay::session_user(&server, l.map(|l| l.uid));
        let plan = match (
            refused(
                l.is_some_and(|l| l.remote) || server.is_remote(),
                l.map(|l| l.class.as_str()),
                user.as_ref().ok().map(|u| u.0),
                &desktop,
                opts,
            ),
            &user,
        ) {
            (Some(why), _) => Err(why),
            _ if opts.configured.contains(&SourceName::X11) => Err(Why::new(
                "left to the `x11` source configured in `sources`",
                "",
            )),
            (None, Ok(_)) => Ok(Follower::X11 { display: n }),
            (None, Err(_)) if opts.any_owner => Ok(Follower::X11 { display: n }),
            (None, Err(w)) => Err(w.clone()),
        };
        let session = Session {
            desktop,
            found,
            user: user.ok(),
            active: l.map(|l| l.active),
            plan,
            logind: l.map(|l| l.id.clone()),
            wayland: None,
        };
        out.push((server, session));
    }
    out
}

/// The Wayland sessions: one per compositor found.
fn wayland_sessions(
    compositors: &[runtime::Compositor],
    logind: &[logind::LogindSession],
    runtime: &Path,
    opts: &Options,
) -> Vec<Session> {
    let mut out = Vec::new();
    let mut mutter = false;
    for c in compositors {
        let l = logind
            .iter()
            .find(|l| l.uid == c.uid && l.kind == "wayland");
        let desktop = desktop_name(c);
        let mut found = c.found.display().to_string();
        if let Some(l) = l {
            found = format!("{found}, {}", logind_tag(l));
        }
        let plan = if let Some(m) = &c.mismatch {
            Err(Why::new(
                m.clone(),
                "nothing is followed there until the socket and its server agree",
            ))
        } else if let Some(why) = refused(
            l.is_some_and(|l| l.remote),
            l.map(|l| l.class.as_str()),
            Some(c.uid),
            &desktop,
            opts,
        ) {
            Err(why)
        } else {
            match &c.ipc {
                runtime::Ipc::Sway(p) => Ok(Follower::Sway(p.clone())),
                runtime::Ipc::Hyprland(d) => Ok(Follower::Hyprland(d.clone())),
                runtime::Ipc::Niri(p) => Ok(Follower::Niri(p.clone())),
                runtime::Ipc::None => match c.comm.as_str() {
                    "gnome-shell" => Ok(Follower::Mutter),
                    "kwin_wayland" => Ok(Follower::Kwin { uid: c.uid }),
                    // The fallback: the compositor's window list, if it offers one.
                    _ if !c.displays.is_empty() => Ok(Follower::Toplevel(
                        runtime.join(c.uid.to_string()).join(&c.displays[0]),
                    )),
                    other => Err(Why::new(
                        format!(
                            "no focus source for {other}: it has no IPC uxsched reads (sway, \
                             Hyprland, niri, GNOME and KDE have)"
                        ),
                        "`uxsched focus PID` names an app by hand; the real-time API \
                         (docs/api.md) lets an app ask for itself",
                    )),
                },
            }
        };
        let plan = match plan {
            Ok(f) if opts.configured.contains(&f.source()) => Err(Why::new(
                format!("left to the `{}` source configured in `sources`", f.name()),
                "",
            )),
            // One Mutter source watches every GNOME session's scopes.
            Ok(Follower::Mutter) if mutter => Err(Why::new(
                "GNOME: the one Mutter source already follows every GNOME session",
                "",
            )),
            p => p,
        };
        mutter |= plan == Ok(Follower::Mutter);
        out.push(Session {
            desktop,
            found,
            user: Some((
                c.uid,
                "owns the runtime directory and the compositor".into(),
            )),
            active: l.map(|l| l.active),
            plan,
            logind: l.map(|l| l.id.clone()),
            wayland: c
                .displays
                .first()
                .map(|d| runtime.join(c.uid.to_string()).join(d)),
        });
    }
    out
}

/// `sway`, `Hyprland`, `GNOME Shell (Wayland)`, or the compositor's process name.
fn desktop_name(c: &runtime::Compositor) -> String {
    let name = match (&c.ipc, c.comm.as_str()) {
        (runtime::Ipc::Sway(_), "sway") => "sway".to_owned(),
        (runtime::Ipc::Sway(_), other) => format!("{other} (i3 IPC)"),
        (runtime::Ipc::Hyprland(_), _) => "Hyprland".into(),
        (runtime::Ipc::Niri(_), _) => "niri".into(),
        (_, "gnome-shell") => "GNOME Shell".into(),
        (_, "kwin_wayland") => "KDE Plasma (KWin)".into(),
        (_, other) => other.to_owned(),
    };
    match c.displays.as_slice() {
        [] => format!("{name} (Wayland)"),
        d => format!("{name} (Wayland {})", d.join(", ")),
    }
}
