//! What `uxsched status` and `uxsched doctor` say of the sessions: each session as the client
//! protocol carries it ([`status`]), and the plain-words text of both commands ([`render`],
//! [`doctor`]) — one text whether the sessions come from the daemon or from a discovery run by
//! `doctor` itself.

use super::{Found, Session};
use uxsched_client::control::{SessionStatus, Status};

/// How a session's follower is doing, as the `auto` thread knows it.
#[derive(Debug, Clone, Default)]
pub struct RunState {
    /// Its source runs.
    pub running: bool,
    /// What its source names in front (admitted).
    pub focus: Option<i32>,
    /// What is wrong with it (could not start, runs degraded, names nobody).
    pub problem: Option<String>,
}

/// A session as `status` carries it; `run`: its follower's state in a daemon (`None`: found
/// by `doctor` without one).
pub fn status(s: &Session, run: Option<&RunState>) -> SessionStatus {
    let (uid, user, user_how) = match &s.user {
        Some((uid, how)) => (
            Some(*uid),
            Some(super::procs::describe_user(*uid)),
            Some(how.clone()),
        ),
        None => (None, None, None),
    };
    let mut out = SessionStatus {
        desktop: s.desktop.clone(),
        found: s.found.clone(),
        user,
        uid,
        user_how,
        active: s.active,
        ..Default::default()
    };
    match (&s.plan, run) {
        (Err(w), _) => {
            out.problem = Some(w.why.clone());
            out.todo = (!w.todo.is_empty()).then(|| w.todo.clone());
        }
        (Ok(f), Some(r)) => {
            out.source = Some(f.name());
            out.followed = r.running && r.problem.is_none();
            out.focus = r.focus;
            out.problem = r.problem.clone();
        }
        (Ok(f), None) => out.source = Some(f.name()),
    }
    out
}

/// Append one formatted line.
macro_rules! line {
    ($o:expr, $($arg:tt)*) => {{
        $o.push_str(&format!($($arg)*));
        $o.push('\n');
    }};
}

/// The sessions in plain words, numbered; `live`: they come from a running daemon (else from
/// `doctor`'s own look: "would be followed").
pub fn render(sessions: &[SessionStatus], live: bool) -> String {
    let mut o = String::new();
    if sessions.is_empty() {
        line!(
            o,
            "  no graphical session found: no X server listens in /tmp/.X11-unix and no \
             compositor socket is in /run/user/<uid>"
        );
    }
    for (i, s) in sessions.iter().enumerate() {
        line!(o, "  {}. {} — {}", i + 1, s.desktop, s.found);
        let active = match s.active {
            Some(true) => ", the active session",
            Some(false) => ", not the active session (its focus counts once it is)",
            None => "",
        };
        match (&s.user, &s.user_how) {
            (Some(u), Some(how)) => line!(o, "     user: {u}, who {how}{active}"),
            (Some(u), None) => line!(o, "     user: {u}{active}"),
            _ => line!(o, "     user: none found{active}"),
        }
        match (&s.source, s.followed, &s.problem) {
            (Some(src), true, _) => {
                let focus = match s.focus {
                    Some(pid) => format!("; it names pid {pid} in front"),
                    None => "; nothing of its user's in front".into(),
                };
                line!(o, "     followed by the {src} source{focus}")
            }
            (Some(src), false, None) if !live => {
                line!(o, "     would be followed by the {src} source")
            }
            (Some(src), false, Some(p)) => {
                line!(o, "     NOT followed by the {src} source: {p}")
            }
            (Some(src), false, None) => line!(o, "     the {src} source is starting"),
            (None, _, Some(p)) => line!(o, "     NOT followed: {p}"),
            (None, _, None) => line!(o, "     NOT followed"),
        }
        if let Some(t) = &s.todo {
            line!(o, "     what to do: {t}");
        }
    }
    o
}

/// `uxsched doctor`'s text. `daemon`: the daemon's status, or why none answered at `socket`;
/// `local`: discovery run by doctor itself (when no daemon answered); `sources`: the configured
/// `sources` (`None`: the configuration could not be read, and why in `config_note`).
pub fn doctor(
    socket: &std::path::Path,
    daemon: Result<&Status, String>,
    local: Option<&Found>,
    sources: &[String],
    config_note: Option<&str>,
    root: bool,
) -> String {
    let mut o = String::new();
    let auto_on = sources.iter().any(|s| s == "auto");
    match daemon {
        Ok(st) => {
            line!(
                o,
                "The daemon runs (pid {}), answering on {}; mode {}; sources: {}.",
                st.daemon_pid,
                socket.display(),
                st.mode,
                st.sources
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            match &st.discovery {
                Some(how) => {
                    line!(o, "It finds sessions through {how}.");
                    line!(o, "Sessions:");
                    o.push_str(&render(&st.sessions, true));
                    for n in &st.discovery_notes {
                        line!(o, "Left aside: {n}");
                    }
                }
                None => line!(
                    o,
                    "\"auto\" is not in its `sources`: it finds no session by itself and \
                     follows only the sources listed. Add \"auto\" (the default) to `sources` \
                     in its configuration and restart it."
                ),
            }
            match (st.focus, &st.focus_comm) {
                (Some(pid), Some(comm)) => line!(o, "In front now: pid {pid} ({comm})."),
                (Some(pid), None) => line!(o, "In front now: pid {pid}."),
                _ => line!(o, "In front now: nothing the daemon acts on."),
            }
        }
        Err(why) => {
            line!(o, "No daemon answers on {}: {why}.", socket.display());
            line!(
                o,
                "Start it: `systemctl enable --now uxsched` (the package's unit) or \
                 `sudo uxsched daemon`."
            );
            if let Some(f) = local {
                line!(
                    o,
                    "What it would find now (the daemon's own discovery, run here) through {}:",
                    f.how
                );
                let sessions: Vec<SessionStatus> =
                    f.sessions.iter().map(|s| status(s, None)).collect();
                o.push_str(&render(&sessions, false));
                for n in &f.notes {
                    line!(o, "Left aside: {n}");
                }
            }
            if !auto_on && config_note.is_none() {
                line!(
                    o,
                    "Its configuration's `sources` ({}) has no \"auto\": it would follow none \
                     of these by itself. Add \"auto\" (the default).",
                    sources.join(", ")
                );
            }
        }
    }
    if let Some(n) = config_note {
        line!(o, "Configuration: {n}");
    }
    if !root {
        line!(
            o,
            "Note: not run as root, doctor cannot read other users' processes and cookies; \
             `sudo uxsched doctor` sees what the daemon sees."
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::super::{Follower, Why};
    use super::*;

    fn session(plan: Result<Follower, Why>) -> Session {
        Session {
            desktop: "Xorg on :0".into(),
            found: "/tmp/.X11-unix/X0".into(),
            user: None,
            active: None,
            plan,
            logind: None,
            wayland: None,
        }
    }

    #[test]
    fn a_session_not_followed_says_why_and_what_to_do() {
        let s = session(Err(Why::new("Xorg on :0 runs as root and …", "log in")));
        let text = render(&[status(&s, None)], false);
        assert!(text.contains("1. Xorg on :0 — /tmp/.X11-unix/X0"), "{text}");
        assert!(
            text.contains("NOT followed: Xorg on :0 runs as root"),
            "{text}"
        );
        assert!(text.contains("what to do: log in"), "{text}");
        assert!(text.contains("user: none found"), "{text}");
    }

    #[test]
    fn a_followed_session_names_its_source_and_focus() {
        let mut s = session(Ok(Follower::X11 { display: 0 }));
        s.user = Some((65534, "runs Xorg on :0".into()));
        let run = RunState {
            running: true,
            focus: Some(42),
            problem: None,
        };
        let text = render(&[status(&s, Some(&run))], true);
        assert!(
            text.contains("followed by the x11 source; it names pid 42"),
            "{text}"
        );
        assert!(text.contains("who runs Xorg on :0"), "{text}");
        let text = render(&[status(&s, None)], false);
        assert!(
            text.contains("would be followed by the x11 source"),
            "{text}"
        );
        let down = RunState {
            running: false,
            focus: None,
            problem: Some("the sway source is not in this build".into()),
        };
        let text = render(&[status(&s, Some(&down))], true);
        assert!(
            text.contains("NOT followed by the x11 source: the sway"),
            "{text}"
        );
    }
}
