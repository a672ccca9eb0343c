//! The daemon's TOML configuration: every key optional (defaults = `packaging/uxsched.toml`),
//! unknown keys and out-of-range values rejected during parsing, so that the error carries the
//! key's name and its line (`TOML parse error at line 5, column 12`).

use crate::types::SourceName;
use serde::{Deserialize, Deserializer, Serialize};
use std::path::{Path, PathBuf};

pub mod audio;
pub mod backend;
pub mod idle;
pub mod levers;
pub mod rtapi;
pub mod rtkit;
pub mod storage;

/// The documented default configuration file, shipped as `packaging/uxsched.toml` and printed
/// by `uxsched config default` (one source of truth).
pub const DEFAULT_TOML: &str = include_str!("../../../../packaging/uxsched.toml");

/// Where the daemon and its clients look when no `--config` is given.
pub const DEFAULT_PATH: &str = "/etc/uxsched/uxsched.toml";

/// The policies the daemon can run (one file each under `policy/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Eimos,
    Vtcfs,
    Mcfs,
    Facfs,
    Shuffledog,
    Uxsched,
}

impl Mode {
    pub const ALL: [Mode; 6] = [
        Mode::Eimos,
        Mode::Vtcfs,
        Mode::Mcfs,
        Mode::Facfs,
        Mode::Shuffledog,
        Mode::Uxsched,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Eimos => "eimos",
            Mode::Vtcfs => "vtcfs",
            Mode::Mcfs => "mcfs",
            Mode::Facfs => "facfs",
            Mode::Shuffledog => "shuffledog",
            Mode::Uxsched => "uxsched",
        }
    }

    /// Parse a mode name as given on the command line or over the socket.
    pub fn parse(s: &str) -> Result<Mode, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Mode::ALL.iter().map(|m| m.name()).collect();
                format!("unknown mode {s:?}; expected one of {}", names.join(", "))
            })
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Declares a deserializer that rejects values outside `lo..=hi` with the key's name, so toml
/// reports it with the line of the offending value.
macro_rules! ranged {
    ($fn:ident, $t:ty, $key:literal, $lo:expr, $hi:expr) => {
        fn $fn<'de, D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
            let v = <$t>::deserialize(d)?;
            if ($lo..=$hi).contains(&v) {
                Ok(v)
            } else {
                Err(serde::de::Error::custom(format!(
                    "`{}` = {} is out of range; expected {}..={}",
                    $key, v, $lo, $hi
                )))
            }
        }
    };
}

pub(crate) use ranged;

ranged!(min_nice, i32, "min_nice", -20, 0);
ranged!(shares, u64, "fg_shares/bg_shares", 2, 262_144);
ranged!(interval_ms, u64, "min_focus_interval_ms", 0, 10_000);
ranged!(rescan_ms, u64, "rescan_ms", 10, 60_000);
ranged!(boost_nice, i32, "nice", -20, 0);
ranged!(slice_us, u64, "slice_us", 100, 100_000);
ranged!(c_ms, u64, "c_ms", 1, 1_000);
ranged!(latency_ms, u64, "latency_ms", 1, 1_000);
ranged!(gran_us, u64, "min_granularity_us", 100, 100_000);
ranged!(budget_ms, u64, "budget_ms", 10, 600_000);
ranged!(cut_rate, u32, "cut_rate", 1, 1024);
ranged!(poll_ms, u64, "poll_ms", 10, 60_000);
ranged!(readahead_factor, u64, "readahead_factor", 1, 64);
ranged!(rt_continuous_ms, u64, "rt_continuous_ms", 1, 100);
ranged!(rt_episode_ms, u64, "rt_episode_ms", 1, 1_000);
ranged!(rt_cooldown_ms, u64, "rt_cooldown_ms", 10, 600_000);

fn cgroup_name<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && !s.starts_with('.');
    if ok {
        Ok(s)
    } else {
        Err(serde::de::Error::custom(format!(
            "`cgroup_name` = {s:?}: use 1-64 characters from [A-Za-z0-9._-], not starting with '.'"
        )))
    }
}

fn log_level<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    match s.as_str() {
        "error" | "warn" | "info" | "debug" | "trace" => Ok(s),
        _ => Err(serde::de::Error::custom(format!(
            "`log_level` = {s:?}: expected error, warn, info, debug or trace"
        ))),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub mode: Mode,
    pub socket: PathBuf,
    pub journal: PathBuf,
    #[serde(deserialize_with = "log_level")]
    pub log_level: String,
    pub control_uids: Vec<u32>,
    pub sources: Vec<SourceName>,
    /// Let desktop sources (x11, mutter) name any process, not only those of the user who owns
    /// the display or session (and never root's or a system service's).
    pub sources_any_owner: bool,
    #[serde(deserialize_with = "min_nice")]
    pub min_nice: i32,
    /// Every CPU lever of the modes (nice, custom slice, real-time class, autogroup nice,
    /// cgroup placement and weights); `false` keeps only the storage levers, for measuring
    /// them alone (`config/levers.rs`, `Desired::cpu_switch`).
    #[serde(deserialize_with = "levers::cpu_levers")]
    pub cpu_levers: bool,
    #[serde(deserialize_with = "shares")]
    pub fg_shares: u64,
    #[serde(deserialize_with = "shares")]
    pub bg_shares: u64,
    #[serde(deserialize_with = "interval_ms")]
    pub min_focus_interval_ms: u64,
    #[serde(deserialize_with = "rescan_ms")]
    pub rescan_ms: u64,
    #[serde(deserialize_with = "cgroup_name")]
    pub cgroup_name: String,
    pub render_threads: Vec<String>,
    pub eimos: Eimos,
    pub vtcfs: Vtcfs,
    pub mcfs: Mcfs,
    pub facfs: Facfs,
    pub shuffledog: Shuffledog,
    pub uxsched: Uxsched,
    pub android: Android,
    pub mutter: Mutter,
    pub x11: X11,
    pub tracker: Tracker,
    /// The real-time request API (docs/api.md): who may ask for what, and rtkit's limits.
    pub rtapi: rtapi::RtApi,
    /// rtkit's D-Bus interface, served with the real-time API's policy (`rtapi/rtkit.rs`).
    pub rtkit: rtkit::Rtkit,
    /// How the wishes reach the scheduler: the stock levers or the sched_ext scheduler.
    pub backend: backend::BackendConfig,
    /// Idle demotion: the boost withdrawn while the user gives no input (`config/idle.rs`).
    pub idle: idle::Idle,
    /// What the user waits on from the disk (`config/storage.rs`).
    pub storage: storage::Storage,
    /// `[audio]`: the processes playing sound (`sources/audio/`).
    pub audio: audio::Audio,
}

/// The delay-critical thread tracker (BPF): who follows the interaction and what they get.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tracker {
    /// Follow each interaction through the threads it wakes (needs root and BPF; without them
    /// the daemon says so once and keeps name-based roles).
    pub enabled: bool,
    /// Boost threads of other processes on the path (a shell, a service, the X server) — only
    /// the app user's own processes and the display server.
    pub partners: bool,
    /// Boost kernel workers on the path (pty flush, softirq), bounded like app threads.
    pub kernel_workers: bool,
    /// Where learned ⟨context, decision⟩ pairs are kept.
    pub store: PathBuf,
    /// Input dispatcher threads (by name) whose wake-up of the app starts an interaction, on
    /// top of the built-in ones (X servers, compositors, Android's InputDispatcher, the
    /// harness's `dispatcher`).
    pub input_threads: Vec<String>,
    /// Display threads (by name) whose wake-up by the app ends an interaction, on top of the
    /// built-in ones.
    pub display_threads: Vec<String>,
    /// How the critical set (UI/render/critical threads and the chain) is raised.
    pub lever: Lever,
    /// The `rt` lever's bound: a thread seen on CPU this long without a break is demoted —
    /// WALT's MVP limit, `WALT_MVP_LIMIT` = 12 ms of run time since the task last slept (its 3 ms
    /// `WALT_MVP_SLICE` is a round-robin slice among MVP tasks, which one FIFO priority has no
    /// counterpart of; docs/mechanisms.md, "The `rt` lever").
    #[serde(deserialize_with = "rt_continuous_ms")]
    pub rt_continuous_ms: u64,
    /// The `rt` lever's bound: CPU time a thread may use at real-time priority in one busy
    /// period (WALT's MVP rule: 12 ms per episode).
    #[serde(deserialize_with = "rt_episode_ms")]
    pub rt_episode_ms: u64,
    /// How long a demoted thread stays on the fair lever before it may be real-time again.
    #[serde(deserialize_with = "rt_cooldown_ms")]
    pub rt_cooldown_ms: u64,
}

/// The boost lever of the critical set (issue 10): the fair class (nice `min_nice` and the
/// short custom slice) or SCHED_FIFO 2 under a per-thread CPU budget (docs/mechanisms.md).
/// `rt` is the default: it is the lever that reached the idle machine's latency where stock
/// fails (docs/results/HISTORY.md, "The tracker's effect, and which lever"); without its guard or canary the
/// daemon falls back to `fair` by itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lever {
    Fair,
    #[default]
    Rt,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            enabled: true,
            partners: true,
            kernel_workers: true,
            store: "/var/lib/uxsched/tracker.sqlite".into(),
            input_threads: Vec::new(),
            display_threads: Vec::new(),
            lever: Lever::Rt,
            rt_continuous_ms: 12,
            rt_episode_ms: 12,
            rt_cooldown_ms: 1000,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct X11 {
    /// X display to follow (e.g. ":0"); unset = $DISPLAY.
    pub display: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Android {
    pub proc_root: PathBuf,
    pub cpuset_root: PathBuf,
    #[serde(deserialize_with = "poll_ms")]
    pub poll_ms: u64,
}

impl Default for Android {
    fn default() -> Self {
        Android {
            proc_root: "/proc".into(),
            cpuset_root: "/dev/cpuset".into(),
            poll_ms: 250,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Mutter {
    pub cgroup_root: PathBuf,
}

impl Default for Mutter {
    fn default() -> Self {
        Mutter {
            cgroup_root: "/sys/fs/cgroup".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Eimos {
    #[serde(deserialize_with = "boost_nice")]
    pub nice: i32,
    pub prefetch: bool,
    #[serde(deserialize_with = "readahead_factor")]
    pub readahead_factor: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Vtcfs {
    #[serde(deserialize_with = "c_ms")]
    pub c_ms: u64,
    #[serde(deserialize_with = "latency_ms")]
    pub latency_ms: u64,
    #[serde(deserialize_with = "gran_us")]
    pub min_granularity_us: u64,
    #[serde(deserialize_with = "slice_us")]
    pub slice_us: u64,
    #[serde(deserialize_with = "budget_ms")]
    pub budget_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Mcfs {
    #[serde(deserialize_with = "cut_rate")]
    pub cut_rate: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Facfs {
    pub sysfs_root: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Shuffledog {
    pub critical_threads: Vec<String>,
    pub io_realtime: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Uxsched {
    #[serde(deserialize_with = "slice_us")]
    pub slice_us: u64,
    #[serde(deserialize_with = "boost_nice")]
    pub others_nice: i32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Uxsched,
            socket: "/run/uxsched/uxsched.sock".into(),
            journal: crate::journal::DEFAULT_PATH.into(),
            log_level: "info".into(),
            control_uids: Vec::new(),
            sources: vec![SourceName::Auto, SourceName::Gamemode],
            sources_any_owner: false,
            min_nice: -19,
            cpu_levers: true,
            fg_shares: 71755,
            bg_shares: 128,
            min_focus_interval_ms: 100,
            rescan_ms: 200,
            cgroup_name: "uxsched".into(),
            render_threads: [
                "RenderThread",
                "GLThread",
                "hwuiTask0",
                "hwuiTask1",
                "Compositor",
            ]
            .map(String::from)
            .to_vec(),
            eimos: Eimos::default(),
            vtcfs: Vtcfs::default(),
            mcfs: Mcfs::default(),
            facfs: Facfs::default(),
            shuffledog: Shuffledog::default(),
            uxsched: Uxsched::default(),
            android: Android::default(),
            mutter: Mutter::default(),
            x11: X11::default(),
            tracker: Tracker::default(),
            rtapi: Default::default(),
            rtkit: Default::default(),
            backend: Default::default(),
            idle: Default::default(),
            storage: Default::default(),
            audio: Default::default(),
        }
    }
}

impl Default for Eimos {
    fn default() -> Self {
        Eimos {
            nice: -19,
            prefetch: true,
            readahead_factor: 8,
        }
    }
}

impl Default for Vtcfs {
    fn default() -> Self {
        Vtcfs {
            c_ms: 100,
            latency_ms: 6,
            min_granularity_us: 750,
            slice_us: 100,
            budget_ms: 2000,
        }
    }
}

impl Default for Mcfs {
    fn default() -> Self {
        Mcfs { cut_rate: 16 }
    }
}

impl Default for Facfs {
    fn default() -> Self {
        Facfs {
            sysfs_root: "/sys/devices/system/cpu".into(),
        }
    }
}

impl Default for Shuffledog {
    fn default() -> Self {
        Shuffledog {
            critical_threads: Vec::new(),
            io_realtime: true,
        }
    }
}

impl Default for Uxsched {
    fn default() -> Self {
        Uxsched {
            slice_us: 100,
            others_nice: -5,
        }
    }
}

/// A configuration error; the message names the file, line and key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// What `"auto"` stands for at its place in `sources`, less the sources listed by themselves:
/// explicit requests (`uxsched focus`, from root or `control_uids`) first, then the followers
/// of the sessions it finds — each session's focus is relayed one at a time
/// (`sources/auto/run.rs`), so their order among themselves does not matter.
pub const AUTO_COVERS: [SourceName; 8] = [
    SourceName::Explicit,
    SourceName::X11,
    SourceName::Sway,
    SourceName::Hyprland,
    SourceName::Niri,
    SourceName::Kwin,
    SourceName::Mutter,
    SourceName::Toplevel,
];

impl Config {
    /// The sources whose word counts, highest precedence first: `sources` with `"auto"`
    /// replaced by what it covers ([`AUTO_COVERS`]).
    pub fn precedence(&self) -> Vec<SourceName> {
        let mut out = Vec::new();
        for &s in &self.sources {
            let covered: &[SourceName] = if s == SourceName::Auto {
                &AUTO_COVERS
            } else {
                std::slice::from_ref(&s)
            };
            for &c in covered {
                let listed = s == SourceName::Auto && self.sources.contains(&c);
                if !listed && !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        out
    }

    /// Whether `source`'s word counts (listed, or covered by `"auto"`).
    pub fn follows(&self, source: SourceName) -> bool {
        self.precedence().contains(&source)
    }

    /// Parse TOML text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Config, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: origin.to_owned(),
            message,
        };
        let cfg: Config =
            toml::from_str(text).map_err(|e| invalid(e.to_string().trim_end().to_owned()))?;
        levers::check(&cfg).map_err(invalid)?;
        Ok(cfg)
    }

    /// Load a file; `None` loads [`DEFAULT_PATH`] if it exists, else the built-in defaults.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let (path, required) = match path {
            Some(p) => (p, true),
            None => (Path::new(DEFAULT_PATH), false),
        };
        match std::fs::read_to_string(path) {
            Ok(text) => Config::parse(&text, path),
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => {
                Ok(Config::default())
            }
            Err(source) => Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Config, String> {
        Config::parse(s, Path::new("test.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn shipped_file_equals_the_built_in_defaults() {
        assert_eq!(parse(DEFAULT_TOML).unwrap(), Config::default());
        assert_eq!(parse("").unwrap(), Config::default());
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let e = parse("mode = \"eimos\"\n\nmin_nise = -3\n").unwrap_err();
        assert!(e.contains("line 3"), "{e}");
        assert!(e.contains("min_nise"), "{e}");
        let e = parse("[vtcfs]\nc_ms = 5\nbudjet_ms = 1\n").unwrap_err();
        assert!(e.contains("line 3") && e.contains("budjet_ms"), "{e}");
    }

    #[test]
    fn bad_values_are_named_with_their_line() {
        let e = parse("socket = \"/tmp/x\"\nmin_nice = -40\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("min_nice"), "{e}");
        let e = parse("[uxsched]\nslice_us = 5\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("slice_us"), "{e}");
        let e = parse("mode = \"fastest\"\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("fastest"), "{e}");
        let e = parse("cgroup_name = \"../etc\"\n").unwrap_err();
        assert!(e.contains("cgroup_name"), "{e}");
    }

    #[test]
    fn the_lever_and_its_bounds_are_checked_with_their_line() {
        let c = parse("[tracker]\nlever = \"rt\"\nrt_cooldown_ms = 500\n").unwrap();
        assert_eq!(
            (c.tracker.lever, c.tracker.rt_cooldown_ms),
            (Lever::Rt, 500)
        );
        assert_eq!(c.tracker.rt_continuous_ms, 12);
        let e = parse("[tracker]\nenabled = true\nlever = \"deadline\"\n").unwrap_err();
        assert!(
            e.contains("line 3") && e.contains("lever") && e.contains("rt"),
            "{e}"
        );
        let e = parse("[tracker]\nrt_episode_ms = 0\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("rt_episode_ms"), "{e}");
    }

    #[test]
    fn partial_files_keep_other_defaults() {
        let c = parse("mode = \"mcfs\"\n[mcfs]\ncut_rate = 8\n").unwrap();
        assert_eq!(c.mode, Mode::Mcfs);
        assert_eq!(c.mcfs.cut_rate, 8);
        assert_eq!(c.vtcfs, Vtcfs::default());
    }

    #[test]
    fn auto_is_the_default_and_stands_for_what_it_covers_at_its_place() {
        use SourceName::*;
        let c = Config::default();
        assert_eq!(c.sources, [Auto, Gamemode]);
        assert_eq!(c.precedence()[..AUTO_COVERS.len()], AUTO_COVERS);
        assert_eq!(c.precedence()[AUTO_COVERS.len()..], [Gamemode]);
        assert!(c.follows(Explicit) && c.follows(X11) && c.follows(Sway));
        assert!(!c.follows(Android) && !c.follows(Auto));
        // Listed by themselves: in their own place, not in auto's.
        let c = parse("sources = [\"android\", \"auto\", \"explicit\"]").unwrap();
        let p = c.precedence();
        assert_eq!(p[0], Android);
        assert_eq!(p[1], X11);
        assert_eq!(*p.last().unwrap(), Explicit);
        let c = parse("sources = [\"explicit\"]").unwrap();
        assert_eq!(c.precedence(), [Explicit]);
        assert!(!c.follows(X11));
    }

    #[test]
    fn mode_names_round_trip() {
        for m in Mode::ALL {
            assert_eq!(Mode::parse(m.name()), Ok(m));
        }
        assert!(Mode::parse("cfs").is_err());
    }
}
