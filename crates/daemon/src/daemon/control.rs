//! What a control-socket request asks (status, focus, mode, restore) and the focus it sets:
//! each source's word, merged by precedence into the one app in front.

use super::Daemon;
use crate::config::Mode;
use crate::sources::explicit;
use crate::types::AppId;
use crate::types::SourceName;
use std::time::Instant;
use tracing::info;
use uxsched_client::control::{Request, Response};

impl Daemon {
    pub(super) fn handle(&mut self, request: Request, uid: u32) -> Response {
        match request {
            Request::Status => Response {
                status: Some(self.status()),
                ..Response::ok()
            },
            Request::Focus { pid } => match explicit::authorize(uid, pid) {
                Ok(app) => match self.set_focus(SourceName::Explicit, app) {
                    Ok(()) => Response::ok(),
                    Err(e) => Response::error(e),
                },
                Err(e) => Response::error(e),
            },
            Request::Mode { mode } => match Mode::parse(&mode) {
                Ok(m) => {
                    if m != self.mode {
                        info!(from = %self.mode, to = %m, "mode change");
                        self.mode = m;
                        self.rec.new_episode();
                        self.dirty = true;
                    }
                    Response::ok()
                }
                Err(e) => Response::error(e),
            },
            Request::Restore => {
                info!("restore requested: clearing the focus and undoing everything");
                self.focus_by_source.clear();
                self.update_focus();
                self.history.clear(); // after: the app just unfocused is not "background" either
                match self.apply() {
                    Ok(()) => Response::ok(),
                    Err(e) => Response::error(format!("{e:#}")),
                }
            }
        }
    }

    pub(super) fn set_focus(
        &mut self,
        source: SourceName,
        app: Option<AppId>,
    ) -> Result<(), String> {
        if !self.cfg.follows(source) {
            return Err(format!("source {source:?} is not enabled in `sources`"));
        }
        let before = self.focus;
        match app {
            Some(a) => self.focus_by_source.insert(source, a),
            None => self.focus_by_source.remove(&source),
        };
        self.update_focus();
        if app.is_some() && before == app && self.focus == app {
            // The app in front was named again: a new interaction (restarts vtcfs's budget).
            self.focus_since = Instant::now();
            self.dirty = true;
        }
        Ok(())
    }

    /// Recompute the effective focus from the sources by precedence (`"auto"` standing for the
    /// sources it covers, at its place).
    pub(super) fn update_focus(&mut self) {
        let winner = self
            .cfg
            .precedence()
            .iter()
            .find_map(|s| self.focus_by_source.get(s).map(|a| (*s, *a)));
        // None while the winner's session is idle (`idle.rs`).
        let new = self.idle.filter(winner);
        if new != self.focus {
            info!(from = ?self.focus.map(|a| a.pid), to = ?new.map(|a| a.pid), "focus change");
            if let Some(old) = self.focus.filter(|_| !self.idle.withdrawn()) {
                self.history.push(old);
            }
            self.focus = new;
            self.critical.clear();
            self.boost_pending.clear();
            if let Some(t) = &self.tracker {
                t.set_foreground(new.map(|a| a.pid));
            }
            self.prefetcher.retain_only(new.map(|a| a.pid));
            self.focus_since = Instant::now();
            self.launch_front_changed();
            self.rec.new_episode();
            self.dirty = true;
        }
    }
}
