//! Routing of the requests beyond a thread's own grant — dependencies, hint sessions and
//! interaction hints — with the same approval (a `[[rtapi.allow]]` rule for the caller) and
//! limits (the user's rate for the requests that create something; per-user caps in each).

use super::{Grants, Refused};
use std::time::Instant;
use tracing::info;
use uxsched_client::proto::{Ask, Refusal, Reply, Request};
use uxsched_os::identity::TaskId;
use uxsched_os::peer::Caller;

impl Grants {
    /// Handle `req` if it is not a thread's own grant (`None`: it is; the caller goes on).
    pub(super) fn more(
        &mut self,
        caller: &Caller,
        conn: u64,
        req: &Request,
    ) -> Option<Result<(), Refused>> {
        let max_user = self.cfg.max_threads_per_user;
        let result = match req.ask {
            Ask::Depend { on } => self.rule_of(caller).and_then(|rule| {
                self.rate(caller.uid)?;
                self.deps
                    .add(caller, conn, req.until, on, &rule, max_user)?;
                self.counted(caller.uid);
                Ok(())
            }),
            Ask::Undepend { on } => {
                self.deps.remove(&caller.task, on);
                Ok(())
            }
            Ask::HintCreate { target_ns } => self.rule_of(caller).and_then(|rule| {
                self.rate(caller.uid)?;
                let id = self.hints.create(
                    caller,
                    conn,
                    req.until,
                    target_ns,
                    rule.min_nice,
                    max_user,
                )?;
                info!(tid = caller.task.tid, id, target_ns, "hint session created");
                self.counted(caller.uid);
                Ok(())
            }),
            Ask::HintThread { session } => self.hints.add(caller, conn, session),
            Ask::HintReport { session, actual_ns } => {
                let changed = self.hints.report(conn, session, actual_ns);
                changed.map(|c| self.quiet = !c)
            }
            Ask::HintTarget { session, target_ns } => {
                let changed = self.hints.retarget(conn, session, target_ns);
                changed.map(|c| self.quiet = !c)
            }
            Ask::HintClose { session } => self.hints.close(conn, session),
            Ask::InteractionStart => self.rule_of(caller).and_then(|rule| {
                self.interactions
                    .start(caller, conn, rule.min_nice, max_user)
            }),
            Ask::InteractionEnd => {
                self.quiet = !self.interactions.end(&caller.task);
                Ok(())
            }
            Ask::Realtime { .. } | Ask::HighPriority { .. } | Ask::Latency { .. } | Ask::Reset => {
                return None
            }
        };
        Some(result)
    }

    /// The caller's approval rule, or the refusal.
    fn rule_of(&self, c: &Caller) -> Result<crate::config::rtapi::Allow, Refused> {
        self.cfg
            .rule(c.uid, c.exe.as_deref())
            .cloned()
            .ok_or_else(|| {
                (
                    Refusal::NotAllowed,
                    format!(
                        "no `[[rtapi.allow]]` rule matches uid {} running {}; the administrator \
                     can add one",
                        c.uid,
                        c.exe
                            .as_ref()
                            .map_or("(unknown executable)".into(), |e| e.display().to_string())
                    ),
                )
            })
    }

    /// One more granted request in `uid`'s rate window.
    fn counted(&mut self, uid: u32) {
        self.recent
            .entry(uid)
            .or_default()
            .push_back(Instant::now());
    }

    /// Whether the last request changed nothing the kernel holds, so no pass is needed (a hint
    /// report within the same level, an interaction end without a start). Reading clears it.
    pub fn take_quiet(&mut self) -> bool {
        std::mem::take(&mut self.quiet)
    }

    /// When the loop must pass next for a hint session going stale or an interaction lapsing.
    pub fn next_wake(&self) -> Option<Instant> {
        match (self.hints.next_wake(), self.interactions.next_wake()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Add what the reply to `req` carries beyond the thread's settings: the session of a hint
    /// request, the threads a dependency raised.
    pub fn annotate(&self, req: &Request, task: &TaskId, reply: &mut Reply) {
        let session = match req.ask {
            Ask::HintCreate { .. } => self.hints.last_created,
            Ask::HintThread { session }
            | Ask::HintReport { session, .. }
            | Ask::HintTarget { session, .. } => Some(session),
            _ => None,
        };
        reply.session = session.and_then(|id| self.hints.info(id));
        if let Ask::Depend { on } = req.ask {
            reply.raised = Some(self.deps.raised(task, on));
        }
    }
}
