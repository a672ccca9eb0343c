//! One event of the daemon's loop ([`Daemon::on_event`]): what each source, client and
//! watchdog asks, and what the loop does about it before its next pass.

use super::Daemon;
use crate::types::{AppId, Critical, Event, SourceName};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tracing::{info, warn};
use uxsched_client::control::{Request, Response};

/// Whether the loop goes on.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Flow {
    Go,
    Stop,
}

/// What an event can change in the loop's turn.
pub(super) struct Turn {
    /// When the next periodic pass is due.
    pub next_scan: Instant,
    /// A change request's answer, sent after the pass that applies it.
    pub answer: Option<(mpsc::Sender<Response>, Response)>,
    pub rescan: Duration,
    pub min_interval: Duration,
}

impl Daemon {
    /// Handle one event; a pass, if one is due, follows in the loop.
    pub(super) fn on_event(
        &mut self,
        event: Event,
        turn: &mut Turn,
        rx: &mpsc::Receiver<Event>,
        stash: &mut Option<Event>,
    ) -> anyhow::Result<Flow> {
        match event {
            Event::Shutdown => return Ok(Flow::Stop),
            Event::Client {
                request,
                uid,
                reply,
            } => self.client(request, uid, reply, turn),
            Event::Focus { source, app } => self.focus_seen(source, app),
            Event::Thread {
                request,
                peer,
                conn,
                reply,
            } => {
                let _ = reply.send(self.thread_request(&request, &peer, conn)?);
                turn.next_scan = Instant::now() + turn.rescan;
            }
            Event::Closed { conn } => {
                if self.grants.closed(conn) {
                    self.apply()?;
                }
            }
            Event::Canary => {
                self.grants.suspend_rt();
                let refuse = Duration::from_millis(self.cfg.rtapi.canary_refuse_ms);
                self.rt_suspended_until = Some(Instant::now() + refuse);
                self.apply()?;
            }
            Event::Moved => {
                // A thread now in a group that takes real time can be made real-time: a
                // pass soon, at most one per `min_focus_interval_ms` for this reason (a
                // pass can queue moves of its own).
                let at = (self.moved_pass + turn.min_interval).max(Instant::now());
                if at < turn.next_scan {
                    turn.next_scan = at;
                    self.moved_pass = at;
                }
            }
            Event::RtOver => {
                // The guard demoted threads: give them the fair boost now.
                self.dirty = true;
                self.last_apply = Instant::now() - turn.min_interval;
            }
            Event::Critical { app, set } => self.critical_seen(app, set, turn, rx, stash)?,
            Event::Episode {
                app,
                held,
                resolved,
            } => self.episode_seen(app, &held, resolved),
            Event::Idle { source, since } => self.idle_seen(source, since, turn),
            Event::Launch { app } => self.launch_seen(app, turn.min_interval),
            // Only a session found to hold the app alone can change by it: a build's every
            // compiler in a session already shared must not redo the every-process check.
            Event::SessionExec => {
                if self.placement_seen.is_some_and(|(_, _, p)| p.autogroup) {
                    self.placement_seen = None;
                    self.dirty = true;
                }
            }
            Event::Audible { apps } => self.audible_seen(apps),
            Event::Health { source, error } => match error {
                Some(e) => {
                    self.source_errors.insert(source, e);
                }
                None => {
                    self.source_errors.remove(&source);
                }
            },
        }
        Ok(Flow::Go)
    }

    /// A control-socket request: a status is answered at once, a change after the pass that
    /// applies it.
    fn client(
        &mut self,
        request: Request,
        uid: u32,
        reply: mpsc::Sender<Response>,
        turn: &mut Turn,
    ) {
        let change = !matches!(request, Request::Status);
        let resp = self.handle(request, uid);
        if change {
            turn.answer = Some((reply, resp));
        } else {
            let _ = reply.send(resp);
        }
    }

    /// A source names what is in front. Identity was captured where the source saw the pid: a
    /// process that is gone by now (its pid perhaps reused) is not focused.
    fn focus_seen(&mut self, source: SourceName, app: Option<AppId>) {
        let app = app.filter(|a| {
            let alive = a.alive();
            if !alive {
                info!(
                    ?source,
                    pid = a.pid,
                    "focus dropped: the process has exited"
                );
            }
            alive
        });
        if let Err(e) = self.set_focus(source, app) {
            warn!("{e}");
        }
    }

    /// The tracker's new critical set (the newest of those already queued), for the app in
    /// front; a set found before the focus moved is dropped (the tracker follows the new one).
    fn critical_seen(
        &mut self,
        app: Option<i32>,
        set: Vec<Critical>,
        turn: &Turn,
        rx: &mpsc::Receiver<Event>,
        stash: &mut Option<Event>,
    ) -> anyhow::Result<()> {
        self.loan.received();
        let mut episodes = Vec::new();
        let (app, set) = self.newest_critical(rx, (app, set), stash, &mut episodes);
        if app == self.focus.map(|a| a.pid) {
            self.critical_changed(set, turn.min_interval)?;
        } else {
            tracing::debug!(?app, "critical set for a former foreground ignored");
        }
        // Recorded after the boosts: a new member's process kind is read from /proc.
        for e in episodes {
            if let Event::Episode {
                app,
                held,
                resolved,
            } = e
            {
                self.episode_seen(app, &held, resolved);
            }
        }
        Ok(())
    }
}
