//! Idle demotion in the loop (issue 32): while the session of the source that names the focus
//! has had no input for `[idle] after_s` (its idle reader says so: `sources/idle/`), the daemon
//! behaves as if nothing were focused — the app's boost is restored, the real-time API's grants
//! (which apps asked for) stay — and the first input brings the focus back at once, past the
//! focus rate limit.

use super::events::Turn;
use super::Daemon;
use crate::types::{AppId, SourceName};
use std::collections::BTreeMap;
use std::time::Instant;
use tracing::info;

/// What the loop knows of the sessions' idleness.
#[derive(Debug, Default)]
pub(super) struct Idleness {
    /// The sources whose session is idle past the limit, each with its last input.
    since: BTreeMap<SourceName, Instant>,
    /// The focus withheld now: its source, its app, the session's last input.
    withdrawn: Option<(SourceName, AppId, Instant)>,
}

impl Idleness {
    /// Source `source`'s session is idle since `since` (`Some`) or active (`None`).
    pub(super) fn set(&mut self, source: SourceName, since: Option<Instant>) {
        match since {
            Some(t) => self.since.insert(source, t),
            None => self.since.remove(&source),
        };
    }

    /// The focus to apply when the sources' word, by precedence, is `winner` (its source and
    /// app): none while that source's session is idle. Said once at info level each way.
    pub(super) fn filter(&mut self, winner: Option<(SourceName, AppId)>) -> Option<AppId> {
        let held = winner.and_then(|(s, a)| Some((s, a, *self.since.get(&s)?)));
        match (self.withdrawn, held) {
            (None, Some((source, app, since))) => info!(
                ?source,
                pid = app.pid,
                idle_s = since.elapsed().as_secs(),
                "idle: no input in the focused app's session: boost withdrawn until the next input"
            ),
            (Some((source, app, _)), None) => info!(
                ?source,
                pid = app.pid,
                "input again: the focus is applied again"
            ),
            _ => {}
        }
        self.withdrawn = held;
        match held {
            Some(_) => None,
            None => winner.map(|(_, a)| a),
        }
    }

    /// Whether the focus is withheld now (the app is then not "background": it is not
    /// demoted as an app the user left, it only loses its boost).
    pub(super) fn withdrawn(&self) -> bool {
        self.withdrawn.is_some()
    }

    /// `status`'s line: `idle since 312 s (x11): boost withdrawn from pid 4242`.
    pub(super) fn status(&self) -> Option<String> {
        let (source, app, since) = self.withdrawn?;
        Some(format!(
            "idle since {} s ({}): boost withdrawn from pid {} until the next input",
            since.elapsed().as_secs(),
            format!("{source:?}").to_lowercase(),
            app.pid
        ))
    }
}

impl Daemon {
    /// A source's session went idle or saw input again: the focus is worked out anew and, if it
    /// changed, applied at once (not held back by `min_focus_interval_ms`: the first keystroke
    /// after a pause is the one that must not wait).
    pub(super) fn idle_seen(&mut self, source: SourceName, since: Option<Instant>, turn: &Turn) {
        self.idle.set(source, since);
        self.update_focus();
        if self.dirty {
            self.last_apply = Instant::now()
                .checked_sub(turn.min_interval)
                .unwrap_or(self.last_apply);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const APP: AppId = AppId { pid: 42, start: 7 };

    #[test]
    fn an_idle_session_withholds_its_sources_focus_until_input() {
        let mut i = Idleness::default();
        let x = Some((SourceName::X11, APP));
        assert_eq!(i.filter(x), Some(APP));
        assert_eq!(i.status(), None);
        let since = Instant::now() - Duration::from_secs(301);
        i.set(SourceName::X11, Some(since));
        assert_eq!(i.filter(x), None);
        assert!(i.withdrawn());
        let s = i.status().unwrap();
        assert!(
            s.starts_with("idle since 301 s (x11): boost withdrawn from pid 42"),
            "{s}"
        );
        // Nothing in front: nothing withheld, the idleness kept for when something is.
        assert_eq!(i.filter(None), None);
        assert!(!i.withdrawn());
        assert_eq!(i.filter(x), None);
        i.set(SourceName::X11, None);
        assert_eq!(i.filter(x), Some(APP));
        assert!(!i.withdrawn() && i.status().is_none());
    }

    #[test]
    fn another_sources_idleness_or_none_at_all_withholds_nothing() {
        let mut i = Idleness::default();
        // Off (no reader ever reports) or a reader that failed (it reports active): no entry.
        assert_eq!(i.filter(Some((SourceName::X11, APP))), Some(APP));
        i.set(SourceName::Sway, Some(Instant::now()));
        assert_eq!(i.filter(Some((SourceName::X11, APP))), Some(APP));
        assert_eq!(i.filter(Some((SourceName::Explicit, APP))), Some(APP));
        assert_eq!(i.filter(Some((SourceName::Sway, APP))), None);
    }
}
