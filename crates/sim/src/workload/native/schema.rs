//! The native format's TOML shape, as serde types. `docs/workloads.md` is the reference.
//!
//! Every table rejects unknown keys; durations are strings (`"3ms"`) read by
//! [`uxsched_model::time::parse_duration`], so a bad one is reported at its own line.

use serde::{Deserialize, Deserializer};
use toml::Spanned;
use uxsched_model::Nanos;

/// A duration written as a string: `"3ms"`, `"250us"`, `"1.5s"`.
#[derive(Debug, Clone, Copy)]
pub struct Dur(pub Nanos);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "expected a duration string such as \"3ms\", \"250us\" or \"1.5s\"",
            )
        })?;
        uxsched_model::time::parse_duration(&text)
            .map(Dur)
            .map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub name: Option<String>,
    pub duration: Option<Dur>,
    /// Not `Spanned`: toml cannot span a table only made implicitly by `[[platform.domain]]`.
    pub platform: Option<PlatformDef>,
    #[serde(default)]
    pub group: Vec<Spanned<GroupDef>>,
    #[serde(default)]
    pub task: Vec<Spanned<TaskDef>>,
    #[serde(default)]
    pub file: Vec<Spanned<FileDef>>,
}

/// A size: an integer number of bytes or a string with a unit (`"30MiB"`, `"8KiB"`).
#[derive(Debug, Clone, Copy)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Text(String),
        }
        match Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "expected a size: a number of bytes or e.g. \"8KiB\", \"30MiB\"",
            )
        })? {
            Raw::Int(n) => Ok(Size(n)),
            Raw::Text(t) => uxsched_model::size::parse_bytes(&t)
                .map(Size)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// A file on the block device, for `read` events.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileDef {
    pub name: String,
    pub size: Size,
}

/// Either `cpus = N` (identical CPUs at 1 GHz) or a list of `[[platform.domain]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformDef {
    pub cpus: Option<usize>,
    #[serde(default)]
    pub domain: Vec<DomainDef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomainDef {
    pub name: String,
    pub cpus: usize,
    #[serde(default = "full_capacity")]
    pub capacity: u32,
    pub opps_khz: Vec<u32>,
    /// Defaults to the highest operating point.
    pub initial_khz: Option<u32>,
}

fn full_capacity() -> u32 {
    crate::platform::CAPACITY_SCALE
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupDef {
    pub path: String,
    #[serde(default = "default_shares")]
    pub shares: u64,
    pub quota: Option<Dur>,
    /// Defaults to 100ms (the kernel's `cpu.cfs_period_us` default) when `quota` is set.
    pub period: Option<Dur>,
}

fn default_shares() -> u64 {
    1024
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PolicyName {
    Normal,
    Batch,
    Idle,
    Fifo,
    Rr,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskDef {
    pub name: String,
    pub process: Option<String>,
    pub policy: Option<PolicyName>,
    pub nice: Option<Spanned<i64>>,
    pub prio: Option<Spanned<i64>>,
    pub slice: Option<Spanned<Dur>>,
    pub cpus: Option<Vec<usize>>,
    pub group: Option<Spanned<String>>,
    pub delay: Option<Dur>,
    pub loops: Option<u64>,
    pub instances: Option<u64>,
    /// Start instance `i` this much later than instance `i-1`.
    pub stagger: Option<Dur>,
    #[serde(default)]
    pub labels: Vec<String>,
    pub oom_adj: Option<i32>,
    /// `rt0`…`rt7`, `be0`…`be7` or `idle`.
    pub ioprio: Option<Spanned<String>>,
    /// Events of a task with a single phase; exclusive with `phase`.
    pub events: Option<Vec<Spanned<EventDef>>>,
    #[serde(default)]
    pub phase: Vec<Spanned<PhaseDef>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseDef {
    pub name: Option<String>,
    #[serde(default = "one")]
    pub loops: u64,
    pub cpus: Option<Vec<usize>>,
    pub events: Vec<Spanned<EventDef>>,
}

fn one() -> u64 {
    1
}

/// One event: exactly one kind key, plus the fields that kind takes
/// (`period`/`absolute` for `timer`, `mutex` for `wait`/`sync`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventDef {
    pub run: Option<Dur>,
    pub runtime: Option<Dur>,
    pub sleep: Option<Dur>,
    pub io: Option<Dur>,
    pub read: Option<String>,
    pub bytes: Option<Size>,
    pub timer: Option<String>,
    pub period: Option<Dur>,
    pub absolute: Option<bool>,
    pub lock: Option<String>,
    pub unlock: Option<String>,
    pub wait: Option<String>,
    pub sync: Option<String>,
    pub mutex: Option<String>,
    pub signal: Option<String>,
    pub broadcast: Option<String>,
    pub barrier: Option<String>,
    pub suspend: Option<String>,
    pub resume: Option<String>,
    pub send: Option<String>,
    pub recv: Option<String>,
    #[serde(rename = "yield")]
    pub yield_: Option<bool>,
    pub begin: Option<String>,
    pub end: Option<String>,
}
