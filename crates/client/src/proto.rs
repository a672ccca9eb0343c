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
    /// Back to what the thread had before any grant.
    Reset,
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
        let extra = |allowed: &[&str]| {
            let given = [
                ("policy", w.policy.is_some()),
                ("priority", w.priority.is_some()),
                ("nice", w.nice.is_some()),
                ("slice_us", w.slice_us.is_some()),
            ];
            match given.iter().find(|(k, set)| *set && !allowed.contains(k)) {
                Some((k, _)) => Err(format!("`{}` takes no `{k}`", w.cmd)),
                None => Ok(()),
            }
        };
        let need = |what: &str| format!("`{}` needs `{what}`", w.cmd);
        let ask = match w.cmd.as_str() {
            "realtime" => {
                extra(&["policy", "priority"])?;
                Ask::Realtime {
                    policy: w.policy.unwrap_or(Policy::Fifo),
                    priority: w.priority.ok_or_else(|| need("priority"))?,
                }
            }
            "high_priority" => {
                extra(&["nice"])?;
                Ask::HighPriority {
                    nice: w.nice.ok_or_else(|| need("nice"))?,
                }
            }
            "latency" => {
                extra(&["slice_us"])?;
                Ask::Latency {
                    slice_us: w.slice_us.ok_or_else(|| need("slice_us"))?,
                }
            }
            "reset" => {
                extra(&[])?;
                Ask::Reset
            }
            other => {
                return Err(format!(
                    "unknown cmd {other:?}; v1 has realtime, high_priority, latency, reset"
                ))
            }
        };
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

/// The reply to one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub v: u32,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted: Option<Granted>,
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
            refused: None,
            error: None,
        }
    }

    pub fn refused(why: Refusal, msg: impl Into<String>) -> Reply {
        Reply {
            v: VERSION,
            ok: false,
            granted: None,
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
