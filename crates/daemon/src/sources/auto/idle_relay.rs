//! The idleness of the sessions `auto` follows (issue 32): a Wayland session's from its
//! compositor or logind (`sources/idle/`; an X display's follower reads its server itself),
//! and what the daemon is told as the session passed on changes — only the idleness of the
//! session whose focus `auto` relays counts.

use super::{Follower, LogindAt, Settings};
use crate::sources::idle::{self, Change};
use crate::types::{Event, SourceName};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

/// Where a session's idleness can be read.
#[derive(Debug, Clone, Default)]
pub(super) struct IdleFrom {
    /// logind's session id.
    pub logind: Option<String>,
    /// The Wayland display socket.
    pub wayland: Option<PathBuf>,
}

/// Start the idle reader of follower `f`'s session — its compositor's `ext-idle-notify-v1`
/// where it has a Wayland socket (logind's hint if the compositor does not offer it), else
/// logind's hint — sending its changes as [`Event::Idle`] through `send` until `stop`. Nothing
/// where idle demotion is off or the follower reads its own idleness (X11); said where nothing
/// can tell.
pub(super) fn read(
    settings: &Settings,
    f: &Follower,
    from: IdleFrom,
    stop: Arc<AtomicBool>,
    mut send: impl FnMut(Event) -> bool + Send + 'static,
) {
    let Some(limit) = settings.idle_after else {
        return;
    };
    if matches!(f, Follower::X11 { .. }) {
        return;
    }
    let source = f.source();
    let sent = move |c: Change| {
        send(Event::Idle {
            source,
            since: c.since(),
        })
    };
    let at = settings.roots.logind.clone();
    let logind = from.logind.filter(|_| at != LogindAt::Off);
    let started = match (from.wayland, logind) {
        (Some(socket), logind) => {
            idle::wayland::spawn(socket, logind.map(|id| (at, id)), limit, stop, sent)
        }
        (None, Some(id)) => idle::logind::spawn(at, id, limit, stop, sent),
        (None, None) => {
            tracing::info!(
                follower = ?f,
                "idle demotion is off for this session: no Wayland socket and no logind session \
                 was found for it (docs/desktops.md, \"Idle demotion\")"
            );
            return;
        }
    };
    if let Err(e) = started {
        tracing::warn!(follower = ?f, "idle demotion is off for this session: its reader's thread could not start ({e})");
    }
}

/// What the daemon is told when the idleness passed on goes from `sent` to `now`: a source
/// no longer passed on, or active again, is said active.
pub(super) fn tell(
    sent: Option<(SourceName, Instant)>,
    now: Option<(SourceName, Instant)>,
) -> Vec<Event> {
    let mut out = Vec::new();
    if sent == now {
        return out;
    }
    if let Some((old, _)) = sent {
        if now.is_none_or(|(new, _)| new != old) {
            out.push(Event::Idle {
                source: old,
                since: None,
            });
        }
    }
    if let Some((source, since)) = now {
        out.push(Event::Idle {
            source,
            since: Some(since),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn shown(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Event::Idle { source, since } => format!("{source:?} {}", since.is_some()),
                _ => "other".into(),
            })
            .collect()
    }

    #[test]
    fn only_the_relayed_sessions_idleness_is_told_and_a_source_let_go_is_active() {
        use SourceName::*;
        let t = Instant::now() - Duration::from_secs(400);
        assert!(tell(None, None).is_empty());
        assert!(tell(Some((X11, t)), Some((X11, t))).is_empty());
        assert_eq!(shown(&tell(None, Some((X11, t)))), ["X11 true"]);
        assert_eq!(shown(&tell(Some((X11, t)), None)), ["X11 false"]);
        assert_eq!(
            shown(&tell(Some((X11, t)), Some((Sway, t)))),
            ["X11 false", "Sway true"]
        );
    }
}
