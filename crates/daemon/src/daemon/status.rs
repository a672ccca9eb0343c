//! `uxsched status`: what the daemon reports — focus, boosted threads with their original and
//! current settings read from the kernel, sources, problems — kept apart from the loop that acts.

use super::Daemon;
use crate::state;
use crate::types::CriticalKind;
use crate::types::Value;
use std::collections::BTreeMap;
use uxsched_client::control::{Boosted, Settings, SourceStatus, Status};
use uxsched_os::{ioprio, sched};

impl Daemon {
    pub(super) fn status(&self) -> Status {
        let focus_app = self.scan_focus();
        let mut problems: Vec<String> = self
            .rec
            .failures
            .iter()
            .map(|((kind, key), why)| format!("{} of {}: {why}", kind.name(), key.describe()))
            .collect();
        let entries = self.rec.journal.entries().unwrap_or_else(|e| {
            problems.push(format!(
                "{e}: cannot show what is boosted; restart the daemon, and if it persists move \
                 the journal aside (its rows are restored by hand then)"
            ));
            Vec::new()
        });
        let boosted = self.boosted(entries, focus_app.as_ref(), &mut problems);
        let auto = self.auto.as_ref().map(|a| a.report());
        Status {
            mode: self.mode.name().to_owned(),
            focus: self.focus.map(|a| a.pid),
            focus_comm: focus_app.and_then(|a| {
                a.threads
                    .iter()
                    .find(|t| t.task.tid == a.id.pid)
                    .map(|t| t.comm.clone())
            }),
            boosted,
            sources: self.sources_status(),
            features: serde_json::to_value(&self.features).unwrap_or_default(),
            daemon_pid: std::process::id(),
            problems,
            tracker: self.tracker_state.clone(),
            placement: self.placement.clone(),
            boost_latency: uxsched_client::control::LatencySummary::of_ns(
                self.boost_latency.iter().copied(),
            ),
            backend: Some(self.backend.status()),
            discovery: auto.as_ref().map(|a| a.how.clone()),
            discovery_notes: auto.as_ref().map(|a| a.notes.clone()).unwrap_or_default(),
            sessions: auto.map(|a| a.sessions).unwrap_or_default(),
            idle: self.idle.status(),
            storage: self.storage_status(),
            audible: self.audible_status(),
            critical_sets: self.critical_sets.summary(),
        }
    }

    /// Every thread the journal holds a change for: its role, the objects changed, its
    /// original settings and the kernel's now (a value that cannot be read is a problem).
    fn boosted(
        &self,
        entries: Vec<crate::journal::Entry>,
        focus_app: Option<&state::App>,
        problems: &mut Vec<String>,
    ) -> Vec<Boosted> {
        let mut boosted: BTreeMap<i32, Boosted> = BTreeMap::new();
        for e in entries {
            let tid = e.via.tid;
            let b = boosted.entry(tid).or_insert_with(|| {
                let info = focus_app
                    .into_iter()
                    .flat_map(|a| a.threads.iter())
                    .find(|t| t.task == e.via);
                Boosted {
                    tid,
                    pid: e.via.pid,
                    comm: uxsched_os::identity::stat(tid)
                        .map(|s| s.comm)
                        .unwrap_or_else(|_| "(exited)".into()),
                    role: info
                        .map(|t| role_name(t.role))
                        .or_else(|| {
                            let c = self.critical.iter().find(|c| c.task == e.via)?;
                            Some(match c.kind {
                                CriticalKind::KernelWorker => "kernel-worker",
                                _ => "partner",
                            })
                        })
                        .unwrap_or("background")
                        .to_owned(),
                    objects: Vec::new(),
                    original: Settings::default(),
                    current: Settings::default(),
                }
            });
            if e.key != crate::types::Key::Thread(e.via) {
                b.objects.push(e.key.describe());
            }
            fill(&mut b.original, &e.original);
            match self.current(tid, &e.original) {
                Ok(v) => fill(&mut b.current, &v),
                Err(err) => problems.push(format!(
                    "cannot read the {} of {} now: {err}",
                    e.kind().name(),
                    e.key.describe()
                )),
            }
        }
        boosted.into_values().collect()
    }

    /// The configured sources; `auto`'s focus is that of the follower it relays (at most one
    /// of the sources it covers holds one, `sources/auto/run.rs`), and its error says when it
    /// finds nothing to follow.
    fn sources_status(&self) -> Vec<SourceStatus> {
        self.cfg
            .sources
            .iter()
            .map(|s| {
                let (focus, error) = match s {
                    crate::types::SourceName::Auto => self.auto_status(),
                    s => (
                        self.focus_by_source.get(s).map(|a| a.pid),
                        self.source_errors.get(s).cloned(),
                    ),
                };
                SourceStatus {
                    name: format!("{s:?}").to_lowercase(),
                    alive: self.sources_alive.get(s).copied().unwrap_or(false),
                    focus,
                    error,
                }
            })
            .collect()
    }

    /// `auto`'s focus (its followers', not the explicit one it also stands for), and an error
    /// when it found sessions but follows none of them.
    fn auto_status(&self) -> (Option<i32>, Option<String>) {
        let focus = crate::config::AUTO_COVERS
            .iter()
            .filter(|s| **s != crate::types::SourceName::Explicit && !self.cfg.sources.contains(s))
            .find_map(|s| self.focus_by_source.get(s))
            .map(|a| a.pid);
        let report = self.auto.as_ref().map(|a| a.report());
        let error = report.and_then(|r| {
            let none = !r.sessions.is_empty() && !r.sessions.iter().any(|s| s.followed);
            none.then(|| {
                format!(
                    "no session followed ({} found): `uxsched doctor` says why",
                    r.sessions.len()
                )
            })
        });
        (focus, error)
    }

    /// The kernel's value now for the kind of `like`.
    fn current(&self, tid: i32, like: &Value) -> std::io::Result<Value> {
        use uxsched_os::autogroup;
        Ok(match like {
            Value::Sched(_) => Value::Sched(sched::get(tid)?),
            Value::Ioprio(_) => Value::Ioprio(ioprio::get(tid)?),
            Value::Autogroup(_) => Value::Autogroup(autogroup::get(tid)?),
            Value::Unit(_) | Value::UnitIo(_) => {
                use crate::actuators::unit::{self, Property};
                let (prop, _) = Property::of(like).expect("a unit's weight");
                let pid = uxsched_os::identity::tgid(tid)?;
                let u = unit::unit_of(pid)?.ok_or(std::io::ErrorKind::NotFound)?;
                prop.value(unit::weight(&u, prop)?)
            }
            Value::Cgroup(_) => match &self.rec.groups {
                Some(g) => Value::Cgroup(g.hierarchy.current(tid)?),
                None => return Err(std::io::ErrorKind::Unsupported.into()),
            },
        })
    }
}

fn role_name(r: state::Role) -> &'static str {
    match r {
        state::Role::Ui => "ui",
        state::Role::Render => "render",
        state::Role::Critical => "critical",
        state::Role::Other => "other",
        state::Role::Background => "background",
    }
}

fn fill(s: &mut Settings, v: &Value) {
    match v {
        Value::Sched(a) => {
            s.policy = Some(a.policy);
            s.nice = Some(a.nice);
            s.slice_ns = Some(a.runtime);
            s.uclamp_min = a.uclamp.map(|u| u.min);
            s.rt_priority = (a.priority > 0).then_some(a.priority);
        }
        Value::Cgroup(p) => s.cgroup = Some(p.clone()),
        Value::Ioprio(v) => s.ioprio = Some(*v),
        Value::Autogroup(n) => s.autogroup_nice = Some(*n),
        Value::Unit(w) => s.unit_weight = Some(*w),
        Value::UnitIo(w) => s.unit_io_weight = Some(*w),
    }
}
