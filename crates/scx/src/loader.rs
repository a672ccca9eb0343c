//! Loading, attaching and stopping the scheduler; its counters and the kernel's exit record.

use crate::abi::{self, BoostValue, Class, Conf, Policy};
use crate::boosts::Boosts;
use libbpf_rs::{Link, Map, MapCore, MapFlags, Object, ObjectBuilder, PrintLevel};
use std::path::{Path, PathBuf};
use std::time::Duration;

static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/scx_uxsched.bpf.o"));

/// sched_ext's state file: `disabled`, `enabling`, `enabled`, `disabling`.
pub const STATE_FILE: &str = "/sys/kernel/sched_ext/state";
/// The name of the running BPF scheduler.
pub const OPS_FILE: &str = "/sys/kernel/sched_ext/root/ops";

/// What to load.
#[derive(Debug, Clone)]
pub struct Options {
    pub policy: Policy,
    /// Every fair thread, not only `SCHED_EXT` ones (no `SCX_OPS_SWITCH_PARTIAL`).
    pub full: bool,
    /// MCFS's cut-rate c (seed 002: 16).
    pub cut_rate: u32,
    /// VT-CFS's preemption tick T (seed 000 §VI.B.2: 3 ms).
    pub tick: Duration,
    /// Eq. 6's C (the simulator's `boost.c` default: 4 ms).
    pub boost_c: Duration,
    /// Pin the boost map here (bpffs), for `uxsched scx boost` from other processes.
    pub pin: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            policy: Policy::Vtcfs,
            full: false,
            cut_rate: 16,
            tick: Duration::from_millis(3),
            boost_c: Duration::from_millis(4),
            pin: None,
        }
    }
}

/// Why the scheduler cannot run (or stopped).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("this kernel has no sched_ext ({STATE_FILE} is absent): it needs Linux >= 6.12 with CONFIG_SCHED_CLASS_EXT (tools/scx-kernel/build.sh builds one)")]
    NoSchedExt,
    #[error("another sched_ext scheduler ({0}) is running: stop it first")]
    Busy(String),
    #[error("invalid options: {0}")]
    Options(String),
    #[error("loading the sched_ext scheduler: {0}")]
    Load(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The kernel's record of why the scheduler stopped (`struct scx_exit_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitInfo {
    /// `enum scx_exit_kind`.
    pub kind: i32,
    pub code: i64,
    pub reason: String,
    pub msg: String,
}

impl ExitInfo {
    /// Unregistered by its loader (our own stop): the only clean ending.
    pub fn is_clean(&self) -> bool {
        self.kind == 64
    }

    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            0 => "none",
            1 => "done",
            64 => "unregistered",
            65 => "unregistered by BPF",
            66 => "unregistered by the kernel",
            67 => "SysRq-S",
            1024 => "error",
            1025 => "BPF error",
            1026 => "stall (watchdog)",
            _ => "unknown",
        }
    }
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (kind {}): {}",
            self.kind_name(),
            self.kind,
            self.reason
        )?;
        if !self.msg.is_empty() {
            write!(f, " ({})", self.msg)?;
        }
        if self.code != 0 {
            write!(f, " exit code {}", self.code)?;
        }
        Ok(())
    }
}

/// A loaded and attached scheduler; dropping it (or [`Scheduler::stop`]) gives the threads back
/// to the kernel's scheduler.
pub struct Scheduler {
    obj: Object,
    link: Option<Link>,
    pinned: Option<PathBuf>,
    pub options: Options,
}

/// libbpf's warnings of the current load (the verifier's log among them), for the error.
static LIBBPF_LOG: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn libbpf_log(level: PrintLevel, msg: String) {
    match level {
        PrintLevel::Warn => {
            tracing::warn!("libbpf: {}", msg.trim_end());
            let mut log = LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner());
            log.extend(msg.lines().map(str::to_owned));
            let excess = log.len().saturating_sub(40);
            log.drain(..excess);
        }
        _ => tracing::debug!("libbpf: {}", msg.trim_end()),
    }
}

/// A libbpf error with the last lines libbpf printed (why the kernel refused).
fn load_error(e: libbpf_rs::Error) -> Error {
    let log = std::mem::take(&mut *LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner()));
    if e.kind() == libbpf_rs::ErrorKind::PermissionDenied {
        Error::Load(format!("{e} (needs root: CAP_SYS_ADMIN and CAP_BPF)"))
    } else if log.is_empty() {
        Error::Load(e.to_string())
    } else {
        Error::Load(format!("{e}; libbpf said:\n{}", log.join("\n")))
    }
}

/// sched_ext's state, if this kernel has it.
pub fn state() -> Option<String> {
    std::fs::read_to_string(STATE_FILE)
        .ok()
        .map(|s| s.trim().to_owned())
}

impl Scheduler {
    /// Load the BPF program with `opts` and attach it: from now on the kernel runs it.
    pub fn load(opts: &Options) -> Result<Scheduler, Error> {
        if opts.cut_rate == 0 || opts.tick.is_zero() {
            return Err(Error::Options(
                "the cut-rate must be >= 1 and the tick > 0".into(),
            ));
        }
        match state().as_deref() {
            None => return Err(Error::NoSchedExt),
            Some("disabled") => {}
            Some(other) => {
                let ops = std::fs::read_to_string(OPS_FILE).unwrap_or_default();
                return Err(Error::Busy(format!("{} ({other})", ops.trim())));
            }
        }
        libbpf_rs::set_print(Some((PrintLevel::Warn, libbpf_log)));
        LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let load = load_error;
        let mut open = ObjectBuilder::default().open_memory(OBJECT).map_err(load)?;
        let mut flags_offset = None;
        for mut m in open.maps_mut() {
            let name = m.name().to_string_lossy().into_owned();
            if name.ends_with(".rodata.conf") {
                let v = m.initial_value_mut().ok_or_else(|| {
                    Error::Load("the .rodata.conf section has no initial value".into())
                })?;
                flags_offset = Some(write_conf(v, opts)?);
            }
        }
        let off = flags_offset.ok_or_else(|| Error::Load("no .rodata.conf map".into()))?;
        for mut m in open.maps_mut() {
            if m.name() == "uxsched_ops" {
                let v = m
                    .initial_value_mut()
                    .ok_or_else(|| Error::Load("the struct_ops map has no value".into()))?;
                let flags = if opts.full {
                    0
                } else {
                    abi::SCX_OPS_SWITCH_PARTIAL
                };
                let at = v.get_mut(off..off + 8).ok_or_else(|| {
                    Error::Load(format!("ops flags offset {off} is out of the struct"))
                })?;
                at.copy_from_slice(&flags.to_ne_bytes());
            }
        }
        let mut obj = open.load().map_err(load)?;
        let mut pinned = None;
        if let Some(dir) = &opts.pin {
            pinned = Some(pin_boosts(&mut obj, dir)?);
        }
        let link = {
            let mut ops = obj
                .maps_mut()
                .find(|m| m.name() == "uxsched_ops")
                .ok_or_else(|| Error::Load("no uxsched_ops map".into()))?;
            ops.attach_struct_ops().map_err(load)?
        };
        Ok(Scheduler {
            obj,
            link: Some(link),
            pinned,
            options: opts.clone(),
        })
    }

    fn map(&self, name: &str) -> Map<'_> {
        self.obj
            .maps()
            .find(|m| m.name() == name)
            .unwrap_or_else(|| panic!("bpf/scx_uxsched.bpf.c defines no map {name}"))
    }

    /// The daemon's handle on the boost map.
    pub fn boosts(&self) -> Boosts<Map<'_>> {
        Boosts::new(self.map("boosts"))
    }

    /// The counters, summed over CPUs, by name (`abi::STAT_NAMES`).
    pub fn stats(&self) -> Result<Vec<(&'static str, u64)>, Error> {
        let map = self.map("stats");
        let mut out = Vec::new();
        for (i, name) in abi::STAT_NAMES.iter().enumerate() {
            let per_cpu = map
                .lookup_percpu(&(i as u32).to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| Error::Load(format!("reading the counters: {e}")))?
                .unwrap_or_default();
            let sum = per_cpu
                .iter()
                .filter_map(|v| v.get(..8))
                .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
                .sum();
            out.push((*name, sum));
        }
        Ok(out)
    }

    /// The kernel's exit record once it has stopped the scheduler (error, watchdog, SysRq).
    pub fn exited(&self) -> Option<ExitInfo> {
        let v = self
            .map("exit_info")
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .ok()??;
        parse_exit(&v).filter(|e| e.kind != 0)
    }

    /// Detach (the kernel gives every thread back to its own scheduler) and say how it ended.
    pub fn stop(mut self) -> ExitInfo {
        self.detach();
        self.exited().unwrap_or(ExitInfo {
            kind: 0,
            code: 0,
            reason: "the kernel recorded no exit".into(),
            msg: String::new(),
        })
    }

    fn detach(&mut self) {
        // Unregistering waits for the kernel's disable work, so the exit record is written.
        drop(self.link.take());
        if let Some(p) = self.pinned.take() {
            let _ = std::fs::remove_file(&p);
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.detach();
    }
}

/// Fill `struct uxs_conf` from `opts`, keeping the compiler's ops flags offset; returns it.
fn write_conf(v: &mut [u8], opts: &Options) -> Result<usize, Error> {
    let size = std::mem::size_of::<Conf>();
    if v.len() != size {
        return Err(Error::Load(format!(
            ".rodata.conf is {} bytes, the loader expects {size}: bpf/scx_uxsched.h and \
             crates/scx/src/abi.rs disagree",
            v.len()
        )));
    }
    let off = u64::from_ne_bytes(v[..8].try_into().unwrap()) as usize;
    let conf = Conf {
        ops_flags_offset: off as u64,
        policy: opts.policy.code(),
        cut_rate: opts.cut_rate,
        tick_ns: opts.tick.as_nanos() as u64,
        sched_tick_ns: 1_000_000_000 / kernel_hz(),
        latency_ns: 5_000_000,
        min_gran_ns: 1_000_000,
        wakeup_gran_ns: 1_000_000,
        boost_c_ns: opts.boost_c.as_nanos() as u64,
        // SAFETY: sysconf has no preconditions.
        user_hz: unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.clamp(1, 10_000) as u32,
        min_perf: min_perf(Path::new(CPUFREQ)),
    };
    v.copy_from_slice(abi::bytes_of(&conf));
    Ok(off)
}

/// Where cpufreq shows each CPU's frequency range.
const CPUFREQ: &str = "/sys/devices/system/cpu";

/// FA-CFS's floor on the performance level (1024 = full speed): the slowest CPU's
/// `cpuinfo_min_freq / cpuinfo_max_freq`, the lowest level a frequency change can reach. Without
/// cpufreq nothing changes the frequency, so the floor is full speed: a lower reading of
/// `scx_bpf_cpuperf_cur` there (a guest's made-up APERF/MPERF ratio) is not a slower CPU, and
/// eq. 16 would stretch slices by it without bound (docs/mechanisms.md, "sched_ext").
fn min_perf(cpu_root: &Path) -> u32 {
    let read = |p: PathBuf| -> Option<u64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    let Ok(dir) = std::fs::read_dir(cpu_root) else {
        return 1024;
    };
    let mut floor = 1024u64;
    for entry in dir.flatten() {
        let f = entry.path().join("cpufreq");
        if let (Some(lo), Some(hi)) = (
            read(f.join("cpuinfo_min_freq")),
            read(f.join("cpuinfo_max_freq")),
        ) {
            if let Some(level) = (lo * 1024).checked_div(hi) {
                floor = floor.min(level.max(1));
            }
        }
    }
    floor as u32
}

/// The kernel's HZ (for eq. 7's scheduler tick): CONFIG_HZ from /proc/config.gz is not always
/// there; the test kernel and Debian's use 1000 and 250. We take 1000 unless told otherwise by
/// `UXSCHED_SCX_HZ`.
fn kernel_hz() -> u64 {
    std::env::var("UXSCHED_SCX_HZ")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&h: &u64| h > 0)
        .unwrap_or(1000)
}

fn pin_boosts(obj: &mut Object, dir: &Path) -> Result<PathBuf, Error> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("boosts");
    let _ = std::fs::remove_file(&path);
    let mut m = obj
        .maps_mut()
        .find(|m| m.name() == "boosts")
        .ok_or_else(|| Error::Load("no boosts map".into()))?;
    m.pin(&path).map_err(|e| {
        Error::Load(format!(
            "pinning the boost map at {} (is bpffs mounted at its parent?): {e}",
            path.display()
        ))
    })?;
    Ok(path)
}

fn parse_exit(v: &[u8]) -> Option<ExitInfo> {
    if v.len() < abi::EXIT_SIZE {
        return None;
    }
    let cstr = |b: &[u8]| {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    let reason_end = 16 + abi::EXIT_REASON_LEN;
    Some(ExitInfo {
        kind: i32::from_ne_bytes(v[..4].try_into().ok()?),
        code: i64::from_ne_bytes(v[8..16].try_into().ok()?),
        reason: cstr(&v[16..reason_end]),
        msg: cstr(&v[reason_end..reason_end + abi::EXIT_MSG_LEN]),
    })
}

/// The value the boost map holds for `class` on a thread started at `start_ticks`.
pub(crate) fn boost_value(class: Class, start_ticks: u64) -> BoostValue {
    BoostValue {
        class: class as u32,
        pad: 0,
        start_ticks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_record_parses_and_only_unreg_is_clean() {
        let mut v = vec![0u8; abi::EXIT_SIZE];
        v[..4].copy_from_slice(&1026i32.to_ne_bytes());
        v[16..16 + 5].copy_from_slice(b"stall");
        v[144..144 + 3].copy_from_slice(b"cpu");
        let e = parse_exit(&v).unwrap();
        assert_eq!(
            (e.kind, e.reason.as_str(), e.msg.as_str()),
            (1026, "stall", "cpu")
        );
        assert!(!e.is_clean());
        assert!(e.to_string().contains("watchdog"), "{e}");
        assert!(parse_exit(&v[..10]).is_none());
    }

    #[test]
    fn facfs_floor_is_the_slowest_cpus_range_and_full_speed_without_cpufreq() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(min_perf(root.path()), 1024, "no cpufreq");
        assert_eq!(min_perf(&root.path().join("absent")), 1024);
        for (cpu, lo, hi) in [("cpu0", 300_000, 2_400_000), ("cpu1", 600_000, 1_800_000)] {
            let f = root.path().join(cpu).join("cpufreq");
            std::fs::create_dir_all(&f).unwrap();
            std::fs::write(f.join("cpuinfo_min_freq"), format!("{lo}\n")).unwrap();
            std::fs::write(f.join("cpuinfo_max_freq"), format!("{hi}\n")).unwrap();
        }
        // cpu0 reaches 1/8 of its top speed: 128.
        assert_eq!(min_perf(root.path()), 128);
    }

    #[test]
    fn the_conf_keeps_the_compilers_offset_and_takes_the_options() {
        let mut v = vec![0u8; std::mem::size_of::<Conf>()];
        v[..8].copy_from_slice(&1234u64.to_ne_bytes());
        let opts = Options {
            policy: Policy::Mcfs,
            cut_rate: 32,
            ..Options::default()
        };
        assert_eq!(write_conf(&mut v, &opts).unwrap(), 1234);
        assert_eq!(u32::from_ne_bytes(v[8..12].try_into().unwrap()), 1);
        assert_eq!(u32::from_ne_bytes(v[12..16].try_into().unwrap()), 32);
        assert!(write_conf(&mut [0u8; 8], &opts).is_err());
    }

    #[test]
    fn a_kernel_without_sched_ext_is_named_with_the_fix() {
        let e = Error::NoSchedExt.to_string();
        assert!(
            e.contains("6.12") && e.contains("tools/scx-kernel/build.sh"),
            "{e}"
        );
    }
}
