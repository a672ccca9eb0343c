//! The control socket's messages (one JSON object per line each way) and a small blocking
//! client for them, used by the `uxsched status|focus|mode|restore` commands.
//!
//! Requests: `{"cmd":"status"}`, `{"cmd":"focus","pid":123}`, `{"cmd":"focus","pid":null}`,
//! `{"cmd":"mode","mode":"eimos"}`, `{"cmd":"restore"}`.
//! Replies: `{"ok":true}` plus `"status":{…}` for status, or `{"ok":false,"error":"…"}`.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Longest reply line a client accepts.
pub const MAX_LINE: u64 = 1 << 20;
/// Longest request line the daemon accepts (bounds what a client can make it hold).
pub const MAX_REQUEST: usize = 4096;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    Status,
    /// Focus a process (all its threads, current and future); `null` clears the focus.
    Focus {
        pid: Option<i32>,
    },
    Mode {
        mode: String,
    },
    /// Undo everything now and clear the focus.
    Restore,
}

impl Request {
    /// Whether the request changes anything (needs root or a `control_uids` entry).
    pub fn is_control(&self) -> bool {
        !matches!(self, Request::Status)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
}

impl Response {
    pub fn ok() -> Response {
        Response {
            ok: true,
            error: None,
            status: None,
        }
    }

    pub fn error(msg: impl Into<String>) -> Response {
        Response {
            ok: false,
            error: Some(msg.into()),
            status: None,
        }
    }
}

/// One thread's settings as shown by `status` (only the kinds uxsched changed are present).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_ns: Option<u64>,
    /// `uclamp.min` (0..=1024), where the kernel has utilisation clamping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uclamp_min: Option<u32>,
    /// SCHED_FIFO/RR priority (real-time grants only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt_priority: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ioprio: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autogroup_nice: Option<i32>,
    /// The systemd unit's `CPUWeight` (u64::MAX = not set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_weight: Option<u64>,
    /// The systemd unit's `IOWeight` (u64::MAX = not set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_io_weight: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Boosted {
    pub tid: i32,
    pub pid: i32,
    pub comm: String,
    pub role: String,
    /// The objects changed for this thread beyond itself (`autogroup-12`, `process 100`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<String>,
    pub original: Settings,
    pub current: Settings,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceStatus {
    pub name: String,
    pub alive: bool,
    pub focus: Option<i32>,
    /// What is wrong with the source while it runs degraded (and what to do), if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One graphical session the daemon found (`sources = ["auto"]`): what it is, whose, and how it
/// is followed or why not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionStatus {
    /// What runs it: `Xorg on :0`, `sway (Wayland wayland-1)`.
    pub desktop: String,
    /// Where it was found: a socket, and logind's session id when logind knows it.
    pub found: String,
    /// The session's user (`alice (uid 1000)`), and how that was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_how: Option<String>,
    /// logind's word on whether it is the active session (absent without logind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
    /// The source that follows it (or would: see `followed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Its source runs and is well.
    pub followed: bool,
    /// The process its source names in front (admitted), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<i32>,
    /// Why it is not followed, or what is wrong with its source now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// What to do about the problem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todo: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub mode: String,
    pub focus: Option<i32>,
    pub focus_comm: Option<String>,
    pub boosted: Vec<Boosted>,
    pub sources: Vec<SourceStatus>,
    pub features: serde_json::Value,
    pub daemon_pid: u32,
    /// What uxsched could not do or cannot see (a restore that keeps failing, an unreadable
    /// journal or setting), each with what to do. Empty when all is well.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// The delay-critical thread tracker: `running`, `off (…)` or `unavailable: why`.
    #[serde(default)]
    pub tracker: String,
    /// How apps are placed here: threads or processes into uxsched's groups, or systemd units'
    /// weights.
    #[serde(default)]
    pub placement: String,
    /// From the kernel event that made a thread critical to its boost written (the tracker's
    /// new members only; the latest 4096), when there were any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boost_latency: Option<LatencySummary>,
    /// The backend (stock levers or sched_ext), its state and counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendStatus>,
    /// How `auto` finds sessions (logind, or the sockets and why not logind); absent when
    /// `auto` is not in `sources`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<String>,
    /// The graphical sessions `auto` found, each with how it is followed or why not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<SessionStatus>,
    /// What discovery saw and left aside (stale sockets), one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discovery_notes: Vec<String>,
    /// Idle demotion (`[idle] after_s`): since when the focused app's session has had no input,
    /// its boost withdrawn until the next; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<String>,
    /// Storage (issue 33): each disk's elevator and what it honours, the cgroup io controller,
    /// the devices switched to BFQ and the launches in front, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage: Vec<String>,
    /// The processes playing sound (`[audio]`), each with the audio thread protected: one line
    /// each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audible: Vec<String>,
    /// What the tracker's critical set held per keystroke (issue 30), once an episode was
    /// resolved for the app in front; absent before (and from older daemons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical_sets: Option<CriticalSets>,
}

/// The tracker's critical set per episode (one keystroke's interaction, docs/tracker.md "What
/// the set holds per keystroke"): the threads it held while the episode ran, of how many
/// processes, and whose — over the latest episodes (`episodes` of them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CriticalSets {
    /// Episodes summarised here (the latest 4096).
    pub episodes: u64,
    /// Episodes recorded since the daemon started.
    pub episodes_total: u64,
    pub threads_p50: u64,
    pub threads_p95: u64,
    pub threads_max: u64,
    /// Processes (distinct tgids; kernel workers are threads of none).
    pub procs_p50: u64,
    pub procs_max: u64,
    /// Each kind of process with threads in the sets, in the most episodes first.
    #[serde(default)]
    pub kinds: Vec<KindStat>,
}

/// One kind of process in the critical sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KindStat {
    /// What the process is: its executable's name with the `--type=` (Chromium's and Electron's
    /// helpers) and `--utility-sub-type=` it was started with; `kernel` for kernel workers.
    pub kind: String,
    /// How the tracker names its threads: `app` (the focused process), `partner`,
    /// `kernel-worker`.
    pub whose: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helper_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_type: Option<String>,
    /// Episodes whose set held at least one of its threads.
    pub episodes: u64,
    /// Its threads in the sets, summed over the episodes.
    pub members: u64,
    /// Its threads' names, each with its share of `members`, most first.
    #[serde(default)]
    pub threads: Vec<(String, u64)>,
    /// Its processes, each with its episodes and members.
    #[serde(default)]
    pub processes: Vec<ProcessStat>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessStat {
    pub pid: i32,
    pub episodes: u64,
    pub members: u64,
}

/// Percentiles of a latency, µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub samples: usize,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl LatencySummary {
    /// The summary of latencies in ns (`None` for none).
    pub fn of_ns(ns: impl IntoIterator<Item = u64>) -> Option<LatencySummary> {
        let mut v: Vec<u64> = ns.into_iter().collect();
        v.sort_unstable();
        let us = |x: u64| x / 1000;
        let max = *v.last()?;
        Some(LatencySummary {
            samples: v.len(),
            p50_us: us(uxsched_model::stats::nearest_rank(&v, 500)),
            p99_us: us(uxsched_model::stats::nearest_rank(&v, 990)),
            max_us: us(max),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "cannot connect to the daemon at {path}: {source} (is `uxsched daemon` running? --socket?)"
    )]
    Connect {
        path: String,
        source: std::io::Error,
    },
    #[error("talking to the daemon: {0}")]
    Io(#[from] std::io::Error),
    #[error("the daemon's reply is not valid: {0}")]
    Reply(#[from] serde_json::Error),
    #[error("the daemon refused: {0}")]
    Refused(String),
}

/// What `uxsched status` shows of the backend.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BackendStatus {
    /// `stock` or `scx`.
    pub kind: String,
    /// The scheduler's policy and mode (`vtcfs, partial`); empty for stock.
    #[serde(default)]
    pub detail: String,
    /// `running`, or why the daemon fell back to the stock levers.
    pub state: String,
    /// Threads in SCHED_EXT with a class in the boost map, by class name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<(String, u64)>,
    /// The scheduler's counters (`uxsched_scx::STAT_NAMES`), summed over CPUs; after a
    /// fallback, their last reading.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<(String, u64)>,
}

#[cfg(test)]
mod latency_tests {
    use super::LatencySummary;

    #[test]
    fn latencies_are_summarised_in_microseconds_and_none_is_none() {
        assert_eq!(LatencySummary::of_ns([]), None);
        let l = LatencySummary::of_ns((1..=100).map(|i| i * 1000)).unwrap();
        assert_eq!(
            (l.samples, l.p50_us, l.p99_us, l.max_us),
            (100, 50, 99, 100)
        );
    }
}

/// Send one request and wait for its reply (10 s at most).
pub fn call(socket: &Path, req: &Request) -> Result<Response, ClientError> {
    let stream = UnixStream::connect(socket).map_err(|source| ClientError::Connect {
        path: socket.display().to_string(),
        source,
    })?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut line = serde_json::to_string(req)?;
    line.push('\n');
    // A daemon that refuses the connection ("busy") answers without reading the request and
    // closes: the write can fail then, but the answer is still there to read.
    let written = (&stream).write_all(line.as_bytes());
    let mut reply = String::new();
    let read = BufReader::new((&stream).take_limit()).read_line(&mut reply);
    if reply.is_empty() {
        written?;
        read?;
    }
    let resp: Response = serde_json::from_str(&reply)?;
    if !resp.ok {
        return Err(ClientError::Refused(resp.error.unwrap_or_default()));
    }
    Ok(resp)
}

trait TakeLimit: std::io::Read + Sized {
    fn take_limit(self) -> std::io::Take<Self> {
        self.take(MAX_LINE)
    }
}

impl<R: std::io::Read> TakeLimit for R {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_is_stable() {
        let r: Request = serde_json::from_str(r#"{"cmd":"focus","pid":42}"#).unwrap();
        assert_eq!(r, Request::Focus { pid: Some(42) });
        let r: Request = serde_json::from_str(r#"{"cmd":"focus","pid":null}"#).unwrap();
        assert_eq!(r, Request::Focus { pid: None });
        assert_eq!(
            serde_json::to_string(&Request::Mode {
                mode: "eimos".into()
            })
            .unwrap(),
            r#"{"cmd":"mode","mode":"eimos"}"#
        );
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"reboot"}"#).is_err());
        assert_eq!(
            serde_json::to_string(&Response::ok()).unwrap(),
            r#"{"ok":true}"#
        );
    }

    /// A status from a daemon without the critical sets' summary still parses (the field is
    /// optional), and one with it carries it through.
    #[test]
    fn critical_sets_are_optional_in_status() {
        let old = r#"{"mode":"uxsched","focus":null,"focus_comm":null,"boosted":[],
            "sources":[],"features":{},"daemon_pid":1,"tracker":"running"}"#;
        let s: Status = serde_json::from_str(old).unwrap();
        assert_eq!(s.critical_sets, None);
        let mut with = s.clone();
        with.critical_sets = Some(CriticalSets {
            episodes: 2,
            episodes_total: 2,
            threads_p50: 3,
            kinds: vec![KindStat {
                kind: "chromium --type=renderer".into(),
                whose: "partner".into(),
                helper_type: Some("renderer".into()),
                threads: vec![("Compositor".into(), 2)],
                processes: vec![ProcessStat {
                    pid: 7,
                    episodes: 2,
                    members: 2,
                }],
                ..KindStat::default()
            }],
            ..CriticalSets::default()
        });
        let text = serde_json::to_string(&with).unwrap();
        assert!(text.contains(r#""critical_sets":{"episodes":2"#), "{text}");
        assert_eq!(serde_json::from_str::<Status>(&text).unwrap(), with);
        assert!(!serde_json::to_string(&s).unwrap().contains("critical_sets"));
    }
}
