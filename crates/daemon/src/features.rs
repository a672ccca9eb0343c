//! Kernel feature detection at start, reported in `status` and the log. Every missing feature
//! degrades one mechanism with a clear message; none is fatal.

use crate::actuators::cgroup::{find_mounts, Hierarchy};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use tracing::{info, warn};
use uxsched_os::sched;

#[derive(Debug, Clone, Serialize)]
pub struct Features {
    pub kernel: String,
    /// Custom EEVDF slices through `sched_attr.sched_runtime` (Linux ≥ 6.12).
    pub custom_slice: bool,
    /// The fair class's default slice, ns (what a thread without a custom slice reports).
    pub default_slice_ns: u64,
    pub cgroup_v1_cpu: Option<String>,
    pub cgroup_v2: Option<String>,
    pub cgroup_v2_controllers: Vec<String>,
    /// The hierarchy uxsched's groups live in.
    pub cgroup_used: Option<String>,
    pub autogroup: bool,
    pub cpufreq: bool,
    /// Block device → active I/O scheduler.
    pub io_schedulers: BTreeMap<String, String>,
    /// Whether any device's scheduler honours ioprio (bfq, mq-deadline).
    pub ioprio_effective: bool,
    /// `pidfd_getfd(2)` (Linux ≥ 5.6), needed by the prefetch actuator.
    pub pidfd_getfd: bool,
    /// BTF present, the prerequisite of the (separate) BPF tracker.
    pub bpf_btf: bool,
    /// Utilisation clamping (CONFIG_UCLAMP_TASK), probed with `sched_setattr`: hint sessions
    /// raise `uclamp.min` where it is present.
    pub uclamp: bool,
    /// Why there is no uclamp, when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uclamp_absent: Option<String>,
}

/// (major, minor) of a release string such as "6.18.44-fc".
pub fn version(release: &str) -> (u32, u32) {
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse().ok());
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// Whether any disk's elevator orders requests by I/O class (BFQ, mq-deadline).
fn honours_classes(elevators: &BTreeMap<String, String>) -> bool {
    elevators.values().any(|s| s == "bfq" || s == "mq-deadline")
}

fn io_schedulers() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/sys/block") else {
        return out;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Ok(s) = uxsched_os::procfs::read_to_string(e.path().join("queue/scheduler")) {
            // The active one is in brackets: "none [mq-deadline] bfq".
            if let Some(active) = s.split_whitespace().find(|w| w.starts_with('[')) {
                out.insert(name, active.trim_matches(['[', ']']).to_owned());
            }
        }
    }
    out
}

impl Features {
    pub fn detect(cpufreq_root: &Path) -> Features {
        let kernel = uxsched_os::procfs::kernel_release();
        let v = version(&kernel);
        let (v1, v2) = uxsched_os::procfs::read_to_string("/proc/self/mountinfo")
            .map(|t| find_mounts(&t))
            .unwrap_or((None, None));
        let v2_controllers = v2
            .as_ref()
            .and_then(|m| uxsched_os::procfs::read_to_string(m.join("cgroup.controllers")).ok())
            .map(|s| s.split_whitespace().map(String::from).collect())
            .unwrap_or_default();
        let io = io_schedulers();
        let uclamp = sched::uclamp_support();
        Features {
            custom_slice: v >= (6, 12),
            default_slice_ns: sched::get(0).map(|a| a.runtime).unwrap_or(0),
            cgroup_v1_cpu: v1.map(|p| p.display().to_string()),
            cgroup_v2: v2.map(|p| p.display().to_string()),
            cgroup_v2_controllers: v2_controllers,
            cgroup_used: Hierarchy::detect().map(|h| h.describe()),
            autogroup: uxsched_os::procfs::read_to_string(
                "/proc/sys/kernel/sched_autogroup_enabled",
            )
            .is_ok_and(|s| s.trim() == "1"),
            cpufreq: cpufreq_root.join("cpu0/cpufreq").is_dir(),
            ioprio_effective: honours_classes(&io),
            io_schedulers: io,
            pidfd_getfd: v >= (5, 6),
            bpf_btf: Path::new("/sys/kernel/btf/vmlinux").exists(),
            uclamp: uclamp.is_ok(),
            uclamp_absent: uclamp.err().map(String::from),
            kernel,
        }
    }

    /// Log what was found and what each absence costs.
    pub fn log(&self) {
        info!(
            kernel = %self.kernel,
            custom_slice = self.custom_slice,
            cgroup = self.cgroup_used.as_deref().unwrap_or("none"),
            autogroup = self.autogroup,
            cpufreq = self.cpufreq,
            bpf_btf = self.bpf_btf,
            uclamp = self.uclamp,
            "kernel features"
        );
        if let Some(why) = &self.uclamp_absent {
            info!("{why}: hint sessions give nice and slice, no uclamp.min");
        }
        if !self.custom_slice {
            info!("kernel < 6.12: no custom slices for fair threads; a boost there is a nice level, and a latency request is refused");
        }
        if self.cgroup_used.is_none() {
            warn!("no cgroup hierarchy with cpu: group placement disabled");
        }
        if self.autogroup && self.cgroup_used.is_none() {
            warn!("autogroup is on and no cpu cgroup: nice only works inside one session");
        }
        if !self.cpufreq {
            info!("no cpufreq: facfs scaling is a no-op (ratio 1)");
        }
    }

    /// Read the disks' elevators again — after the daemon put back the ones a killed
    /// predecessor switched and made its own switches, which change them — and log them.
    pub fn refresh_io(&mut self) {
        self.io_schedulers = io_schedulers();
        self.ioprio_effective = honours_classes(&self.io_schedulers);
        info!(elevators = ?self.io_schedulers, "block devices");
        if !self.ioprio_effective {
            warn!("no block device uses bfq or mq-deadline: ioprio settings have no effect");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse() {
        assert_eq!(version("6.18.44-fc-v657"), (6, 18));
        assert_eq!(version("5.4.0"), (5, 4));
        assert_eq!(version(""), (0, 0));
    }

    #[test]
    fn detects_this_machine_without_failing() {
        let f = Features::detect(Path::new("/sys/devices/system/cpu"));
        assert!(!f.kernel.is_empty());
        assert!(f.default_slice_ns > 0);
        assert_eq!(f.uclamp, f.uclamp_absent.is_none());
    }
}
