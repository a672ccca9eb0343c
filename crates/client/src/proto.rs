//! The wire format of protocol v1 (docs/api.md): one JSON object per line each way over the
//! daemon's Unix socket. The only definition of it — the daemon parses these types, the CLI and
//! every Rust client send them.
//!
//! Request: `{"v":1,"cmd":"realtime","tid":4242,"policy":"fifo","priority":10,"until":"close"}`
//! (`high_priority` takes `nice`, `latency` takes `slice_us`, `reset` nothing).
//! Reply: `{"v":1,"ok":true,"granted":{…}}` or `{"v":1,"ok":false,"refused":"rttime","error":"…"}`.

use serde::{Deserialize, Serialize};

/// The protocol version this crate speaks.
pub const VERSION: u32 = 1;

/// A real-time policy a client may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Fifo,
    Rr,
}

/// What a thread asks for. Asks replace each other: the latest one is what the thread has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// SCHED_FIFO or SCHED_RR at `priority` (1..=99, within the policy's maximum).
    Realtime { policy: Policy, priority: u32 },
    /// The fair class at this nice (-20..=19, not below the policy's minimum).
    HighPriority { nice: i32 },
    /// The fair class with this custom slice (EEVDF `sched_runtime`, 100..=100000 µs).
    Latency { slice_us: u64 },
    /// Back to what the thread had before any grant (its dependencies end too).
    Reset,
    /// This thread depends on process or thread `on` (a media server, say): while the thread
    /// holds a grant, `on`'s threads are raised with it (in the fair class), and lowered after.
    Depend { on: i32 },
    /// No longer depends on `on`.
    Undepend { on: i32 },
    /// A performance-hint session (ADPF) for this thread, aiming at `target_ns` per unit of
    /// work; the reply's `session` names it.
    HintCreate { target_ns: u64 },
    /// Add this thread to session `session` (one of the caller's).
    HintThread { session: u64 },
    /// The last unit of work of session `session` took `actual_ns`.
    HintReport { session: u64, actual_ns: u64 },
    /// Session `session` now aims at `target_ns`.
    HintTarget { session: u64, target_ns: u64 },
    /// Session `session` ends (its boost with it).
    HintClose { session: u64 },
    /// This thread is handling user input now (seed 000's framework-assisted path): boosted
    /// like the tracker's user-interactive thread until `interaction_end` or a bounded time.
    InteractionStart,
    /// This thread is done with the input.
    InteractionEnd,
}

/// How long a grant lasts (besides `reset`, the thread's exit and the daemon's stop).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Until {
    /// Until the connection that asked closes (the client died or let go).
    #[default]
    Close,
    /// Until the thread exits, even after the connection closes (`uxsched rt … -- CMD`).
    Exit,
}

/// One request: `ask` for thread `tid` of the caller's own process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Wire", into = "Wire")]
pub struct Request {
    pub tid: i32,
    pub ask: Ask,
    pub until: Until,
}

/// The flat JSON object on the wire; [`Request`] is its checked form.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    v: u32,
    cmd: String,
    tid: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<Policy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    priority: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nice: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    slice_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    on: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    actual_ns: Option<u64>,
    #[serde(default)]
    until: Until,
}

impl TryFrom<Wire> for Request {
    type Error = String;

    fn try_from(w: Wire) -> Result<Request, String> {
        if w.v != VERSION {
            return Err(format!(
                "protocol version {} is not spoken here; this daemon speaks v{VERSION}",
                w.v
            ));
        }
        let ask = w.ask()?;
        if w.tid <= 0 {
            return Err(format!("tid {} is not a thread id", w.tid));
        }
        Ok(Request {
            tid: w.tid,
            ask,
            until: w.until,
        })
    }
}

impl Wire {
    /// The ask `cmd` names, from the fields it takes (an error for any other field given, or
    /// one it needs missing).
    fn ask(&self) -> Result<Ask, String> {
        Ok(match self.cmd.as_str() {
            "realtime" => {
                self.takes_only(&["policy", "priority"])?;
                Ask::Realtime {
                    policy: self.policy.unwrap_or(Policy::Fifo),
                    priority: self.need(self.priority, "priority")?,
                }
            }
            "high_priority" => {
                self.takes_only(&["nice"])?;
                Ask::HighPriority {
                    nice: self.need(self.nice, "nice")?,
                }
            }
            "latency" => {
                self.takes_only(&["slice_us"])?;
                Ask::Latency {
                    slice_us: self.need(self.slice_us, "slice_us")?,
                }
            }
            "reset" => {
                self.takes_only(&[])?;
                Ask::Reset
            }
            "depend" | "undepend" => self.dependency()?,
            "hint_create" => {
                self.takes_only(&["target_ns"])?;
                Ask::HintCreate {
                    target_ns: self.need(self.target_ns, "target_ns")?,
                }
            }
            "hint_thread" | "hint_close" => {
                self.takes_only(&["session"])?;
                let session = self.need(self.session, "session")?;
                if self.cmd == "hint_thread" {
                    Ask::HintThread { session }
                } else {
                    Ask::HintClose { session }
                }
            }
            "hint_report" => {
                self.takes_only(&["session", "actual_ns"])?;
                Ask::HintReport {
                    session: self.need(self.session, "session")?,
                    actual_ns: self.need(self.actual_ns, "actual_ns")?,
                }
            }
            "hint_target" => {
                self.takes_only(&["session", "target_ns"])?;
                Ask::HintTarget {
                    session: self.need(self.session, "session")?,
                    target_ns: self.need(self.target_ns, "target_ns")?,
                }
            }
            "interaction_start" | "interaction_end" => {
                self.takes_only(&[])?;
                if self.cmd == "interaction_start" {
                    Ask::InteractionStart
                } else {
                    Ask::InteractionEnd
                }
            }
            other => {
                return Err(format!(
                    "unknown cmd {other:?}; v1 has realtime, high_priority, latency, reset, \
                     depend, undepend, hint_create, hint_thread, hint_report, hint_target, \
                     hint_close, interaction_start, interaction_end"
                ))
            }
        })
    }

    /// `depend` or `undepend`, whose `on` must be a process or thread id.
    fn dependency(&self) -> Result<Ask, String> {
        self.takes_only(&["on"])?;
        let on = self.need(self.on, "on")?;
        if on <= 0 {
            return Err(format!("`on` {on} is not a process or thread id"));
        }
        Ok(if self.cmd == "depend" {
            Ask::Depend { on }
        } else {
            Ask::Undepend { on }
        })
    }

    /// An error naming the first optional field given that `cmd` does not take (not in `allowed`).
    fn takes_only(&self, allowed: &[&str]) -> Result<(), String> {
        let given = [
            ("policy", self.policy.is_some()),
            ("priority", self.priority.is_some()),
            ("nice", self.nice.is_some()),
            ("slice_us", self.slice_us.is_some()),
            ("on", self.on.is_some()),
            ("session", self.session.is_some()),
            ("target_ns", self.target_ns.is_some()),
            ("actual_ns", self.actual_ns.is_some()),
        ];
        match given.iter().find(|(k, set)| *set && !allowed.contains(k)) {
            Some((k, _)) => Err(format!("`{}` takes no `{k}`", self.cmd)),
            None => Ok(()),
        }
    }

    /// Field `what`'s `value`, or an error saying `cmd` needs it.
    fn need<T>(&self, value: Option<T>, what: &str) -> Result<T, String> {
        value.ok_or_else(|| format!("`{}` needs `{what}`", self.cmd))
    }
}

impl From<Request> for Wire {
    fn from(r: Request) -> Wire {
        let mut w = Wire {
            v: VERSION,
            tid: r.tid,
            until: r.until,
            ..Wire::default()
        };
        w.cmd = match r.ask {
            Ask::Realtime { policy, priority } => {
                (w.policy, w.priority) = (Some(policy), Some(priority));
                "realtime"
            }
            Ask::HighPriority { nice } => {
                w.nice = Some(nice);
                "high_priority"
            }
            Ask::Latency { slice_us } => {
                w.slice_us = Some(slice_us);
                "latency"
            }
            Ask::Reset => "reset",
            Ask::Depend { on } => {
                w.on = Some(on);
                "depend"
            }
            Ask::Undepend { on } => {
                w.on = Some(on);
                "undepend"
            }
            Ask::HintCreate { target_ns } => {
                w.target_ns = Some(target_ns);
                "hint_create"
            }
            Ask::HintThread { session } => {
                w.session = Some(session);
                "hint_thread"
            }
            Ask::HintReport { session, actual_ns } => {
                (w.session, w.actual_ns) = (Some(session), Some(actual_ns));
                "hint_report"
            }
            Ask::HintTarget { session, target_ns } => {
                (w.session, w.target_ns) = (Some(session), Some(target_ns));
                "hint_target"
            }
            Ask::HintClose { session } => {
                w.session = Some(session);
                "hint_close"
            }
            Ask::InteractionStart => "interaction_start",
            Ask::InteractionEnd => "interaction_end",
        }
        .into();
        w
    }
}

/// Why a request was refused (machine-readable; `error` says it in words, with what to do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// The line is not a valid v1 request.
    BadRequest,
    /// The real-time API is off (`[rtapi] enabled = false`).
    Disabled,
    /// No `[[rtapi.allow]]` rule lets this uid/executable ask for that.
    NotAllowed,
    /// The tid is not a live thread of the caller's own process (or it changed while checked).
    Identity,
    /// RT asked without a hard RLIMIT_RTTIME within `rttime_max_us` (rtkit's rule).
    Rttime,
    /// The user's threads or processes with grants are at their cap.
    UserCap,
    /// Too many grants from this user in the rate window.
    RateLimit,
    /// The machine-wide bound on simultaneous real-time grants is reached.
    RtBound,
    /// The canary found ordinary threads starved: RT is refused for a while.
    Canary,
    /// The kernel does not hold what was asked (e.g. the thread is already someone else's RT).
    NotApplied,
    /// The hint session named is not one of this connection's (closed, or never created).
    NoSession,
}

/// What the thread has now, read back from the kernel after the grant was applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Granted {
    pub tid: i32,
    /// `fifo`, `rr`, `other`, `batch` or `idle`.
    pub policy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_us: Option<u64>,
    /// Whether SCHED_RESET_ON_FORK is set (always, while a grant holds).
    pub reset_on_fork: bool,
    pub until: Until,
}

/// A performance-hint session as the daemon holds it after a hint request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub id: u64,
    pub target_ns: u64,
    /// The session's threads.
    pub tids: Vec<i32>,
    /// The boost its threads have now: a nice level (0 = none) …
    pub nice: i32,
    /// … and, while boosted, a custom slice (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_us: Option<u64>,
    /// `uclamp.min` (0..=1024) given to its threads, where this kernel has utilisation clamping
    /// (0 while unboosted): proportional to the boost, at most `[rtapi] hint_uclamp_max` and
    /// the system's `sched_util_clamp_min` (docs/mechanisms.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uclamp_min: Option<u32>,
    /// Why there is no `uclamp_min`, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uclamp: Option<String>,
}

/// The reply to one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub v: u32,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted: Option<Granted>,
    /// Hint requests: the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Session>,
    /// `depend`: the dependency's threads raised now (empty while the thread holds no grant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raised: Option<Vec<i32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Reply {
    pub fn granted(g: Granted) -> Reply {
        Reply {
            v: VERSION,
            ok: true,
            granted: Some(g),
            session: None,
            raised: None,
            refused: None,
            error: None,
        }
    }

    pub fn refused(why: Refusal, msg: impl Into<String>) -> Reply {
        Reply {
            v: VERSION,
            ok: false,
            granted: None,
            session: None,
            raised: None,
            refused: Some(why),
            error: Some(msg.into()),
        }
    }
}

/// Whether a request line is a v1 request (has a `"v"` key) rather than a control request.
pub fn is_versioned(line: &str) -> bool {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line)
        .is_ok_and(|m| m.contains_key("v"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_is_stable_and_checked() {
        let r = Request {
            tid: 42,
            ask: Ask::Realtime {
                policy: Policy::Rr,
                priority: 10,
            },
            until: Until::Close,
        };
        let s = serde_json::to_string(&r).unwrap();
        assert_eq!(
            s,
            r#"{"v":1,"cmd":"realtime","tid":42,"policy":"rr","priority":10,"until":"close"}"#
        );
        assert_eq!(serde_json::from_str::<Request>(&s).unwrap(), r);
        let r: Request =
            serde_json::from_str(r#"{"v":1,"cmd":"high_priority","tid":7,"nice":-5}"#).unwrap();
        assert_eq!(r.ask, Ask::HighPriority { nice: -5 });
        assert_eq!(r.until, Until::Close);
        let bad = [
            (r#"{"v":2,"cmd":"reset","tid":1}"#, "version 2"),
            (
                r#"{"v":1,"cmd":"reset","tid":1,"nice":3}"#,
                "takes no `nice`",
            ),
            (r#"{"v":1,"cmd":"realtime","tid":1}"#, "needs `priority`"),
            (r#"{"v":1,"cmd":"reboot","tid":1}"#, "unknown cmd"),
            (r#"{"v":1,"cmd":"reset","tid":0}"#, "not a thread id"),
            (r#"{"v":1,"cmd":"reset","tid":1,"x":1}"#, "unknown field"),
            (r#"{"v":1,"cmd":"reset"}"#, "missing field `tid`"),
        ];
        for (line, want) in bad {
            let e = serde_json::from_str::<Request>(line)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{line}: {e}");
        }
        let new = [
            (
                Ask::Depend { on: 99 },
                r#"{"v":1,"cmd":"depend","tid":7,"on":99,"until":"close"}"#,
            ),
            (
                Ask::HintCreate {
                    target_ns: 16_000_000,
                },
                r#"{"v":1,"cmd":"hint_create","tid":7,"target_ns":16000000,"until":"close"}"#,
            ),
            (
                Ask::HintReport {
                    session: 3,
                    actual_ns: 5,
                },
                r#"{"v":1,"cmd":"hint_report","tid":7,"session":3,"actual_ns":5,"until":"close"}"#,
            ),
            (
                Ask::InteractionStart,
                r#"{"v":1,"cmd":"interaction_start","tid":7,"until":"close"}"#,
            ),
        ];
        for (ask, want) in new {
            let r = Request {
                tid: 7,
                ask,
                until: Until::Close,
            };
            assert_eq!(serde_json::to_string(&r).unwrap(), want);
            assert_eq!(serde_json::from_str::<Request>(want).unwrap(), r);
        }
        for (line, want) in [
            (r#"{"v":1,"cmd":"depend","tid":1}"#, "needs `on`"),
            (r#"{"v":1,"cmd":"depend","tid":1,"on":-4}"#, "not a process"),
            (
                r#"{"v":1,"cmd":"hint_report","tid":1,"session":1}"#,
                "needs `actual_ns`",
            ),
            (
                r#"{"v":1,"cmd":"hint_close","tid":1,"session":1,"target_ns":1}"#,
                "takes no `target_ns`",
            ),
        ] {
            let e = serde_json::from_str::<Request>(line)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{line}: {e}");
        }
        assert!(is_versioned(r#"{"v":1}"#));
        assert!(!is_versioned(r#"{"cmd":"status"}"#));
    }

    #[test]
    fn replies_round_trip() {
        let r = Reply::refused(Refusal::Rttime, "set RLIMIT_RTTIME");
        let s = serde_json::to_string(&r).unwrap();
        assert_eq!(
            s,
            r#"{"v":1,"ok":false,"refused":"rttime","error":"set RLIMIT_RTTIME"}"#
        );
        assert_eq!(serde_json::from_str::<Reply>(&s).unwrap(), r);
    }
}
