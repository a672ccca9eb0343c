//! `[storage]`: what the user waits on from the disk comes first (docs/storage.md,
//! docs/mechanisms.md "Storage"). The levers, in the order the measurements justify them: the
//! interaction's critical set and a launch in a high I/O class, a launch treated as in front
//! until its window maps, and — opt-in — the devices switched to BFQ while the daemon runs.

use super::ranged;
use serde::{Deserialize, Deserializer, Serialize};

/// `[storage]` of the daemon's config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Storage {
    /// The I/O class of the critical set, its chain and a launch (`uxsched` mode).
    pub front_class: FrontClass,
    /// How long a program started from the app in front counts as in front itself, ms, unless
    /// its window maps first (it then is the focus); 0 turns launches off.
    #[serde(deserialize_with = "launch_budget_ms")]
    pub launch_budget_ms: u64,
    /// At most this many launches in front at once: a fork storm (a build started from the
    /// terminal) raises its first few, not all of them.
    #[serde(deserialize_with = "launch_max")]
    pub launch_max: usize,
    /// Switch each disk whose kernel offers BFQ to it while the daemon runs, and back at stop
    /// (journalled: a killed daemon's successor puts the original back). Off by default: BFQ
    /// costs throughput on fast devices, and the device is the whole machine's, not the user's.
    pub switch_to_bfq: bool,
    /// The disks `switch_to_bfq` switches, by kernel name (`vda`, `nvme0n1`); empty: every
    /// whole disk with an elevator.
    pub bfq_devices: Vec<String>,
    /// Enable blk-iocost on each chosen disk while the daemon runs, and disable it again at
    /// stop (journalled like the BFQ switch; `devices/iocost.rs`): with it `io.weight`, hence
    /// the units' `IOWeight` (`*_unit_io_weight`), acts under any elevator, `none` included.
    /// Off by default: with the kernel's default cost model it held a guest's disk to a
    /// quarter of its throughput (docs/storage.md), and the setting is the whole machine's.
    pub switch_to_iocost: bool,
    /// The disks `switch_to_iocost` acts on, by kernel name; empty: every whole disk with an
    /// elevator.
    pub iocost_devices: Vec<String>,
    /// The `io.prio.class` of uxsched's own background group (cgroup v2 without systemd,
    /// `actuators/io_class.rs`): reaches the group's page-cache writeback too, where the kernel
    /// charges writeback to cgroups. Off by default: unmeasured, and the idle class can starve.
    pub background_io_class: BackgroundClass,
    /// The `io.prio.class` of uxsched's own foreground group: `rt` → `promote-to-rt` (RT 4, as
    /// `front_class = "rt"`), `be` → `restrict-to-be` (BE 0). It covers every thread of the apps
    /// in the group, not only the critical set; off by default for that reason.
    pub front_group_class: FrontClass,
    /// On a systemd machine, the `IOWeight` (1..=10000, systemd's default 100) the unit of the
    /// interaction's critical set and of a launch is raised to while it is in front, at runtime
    /// through systemd (`actuators/unit.rs`); 0 leaves it. Acts under BFQ (`io.bfq.weight`) and
    /// blk-iocost, between the unit and its sibling units only. Off by default: unmeasured.
    #[serde(deserialize_with = "front_io_weight")]
    pub front_unit_io_weight: u64,
    /// The `IOWeight` the unit of an app that was in front before (a file manager left copying)
    /// is lowered to while another app is in front; 0 leaves it. Off by default: unmeasured.
    #[serde(deserialize_with = "bg_io_weight")]
    pub background_unit_io_weight: u64,
}

ranged!(launch_budget_ms, u64, "storage.launch_budget_ms", 0, 60_000);
ranged!(launch_max, usize, "storage.launch_max", 1, 64);
ranged!(
    front_io_weight,
    u64,
    "storage.front_unit_io_weight",
    0,
    10_000
);
ranged!(
    bg_io_weight,
    u64,
    "storage.background_unit_io_weight",
    0,
    10_000
);

/// The I/O class the front gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FrontClass {
    /// `IOPRIO_CLASS_RT`, level 4: served before every best-effort request by BFQ and
    /// mq-deadline (which ages a starved lower class after `prio_aging_expire`, 10 s); seed
    /// 003's choice for delay-critical threads.
    Rt,
    /// `IOPRIO_CLASS_BE`, level 0: the highest weight BFQ gives, nothing under mq-deadline.
    Be,
    /// Leave I/O priorities alone.
    Off,
}

/// The I/O class of the background group (`io.prio.class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackgroundClass {
    /// `idle`: every request of the group in the idle class — served by mq-deadline only when
    /// no higher class is queued (or after `prio_aging_expire`, 10 s), by BFQ when the disk is
    /// otherwise idle.
    Idle,
    /// `restrict-to-be`: the group's real-time requests demoted to best-effort 0. Requests of
    /// no class become BE 0 as well, which BFQ weighs above the nice-derived default (BE 4).
    Be,
    /// Leave the group's `io.prio.class` alone.
    Off,
}

impl Default for Storage {
    fn default() -> Self {
        Storage {
            front_class: FrontClass::Rt,
            launch_budget_ms: 5_000,
            launch_max: 4,
            switch_to_bfq: false,
            bfq_devices: Vec::new(),
            switch_to_iocost: false,
            iocost_devices: Vec::new(),
            background_io_class: BackgroundClass::Off,
            front_group_class: FrontClass::Off,
            front_unit_io_weight: 0,
            background_unit_io_weight: 0,
        }
    }
}

impl Storage {
    /// The encoded I/O priority the front gets, if any.
    pub fn front_ioprio(&self) -> Option<u16> {
        use uxsched_os::ioprio::{encode, CLASS_BE, CLASS_RT};
        match self.front_class {
            FrontClass::Rt => Some(encode(CLASS_RT, 4)),
            FrontClass::Be => Some(encode(CLASS_BE, 0)),
            FrontClass::Off => None,
        }
    }

    /// `(front_unit_io_weight, background_unit_io_weight)`; `None` while both are 0 (off).
    pub fn unit_io_weights(&self) -> Option<(u64, u64)> {
        let w = (self.front_unit_io_weight, self.background_unit_io_weight);
        (w != (0, 0)).then_some(w)
    }

    /// The `io.prio.class` policy (the kernel's word) of uxsched's foreground and background
    /// groups, where one is asked for (Documentation/admin-guide/cgroup-v2.rst, "IO Priority").
    pub fn group_prio_classes(&self) -> (Option<&'static str>, Option<&'static str>) {
        let fg = match self.front_group_class {
            FrontClass::Rt => Some("promote-to-rt"),
            FrontClass::Be => Some("restrict-to-be"),
            FrontClass::Off => None,
        };
        let bg = match self.background_io_class {
            BackgroundClass::Idle => Some("idle"),
            BackgroundClass::Be => Some("restrict-to-be"),
            BackgroundClass::Off => None,
        };
        (fg, bg)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    fn parse(s: &str) -> Result<Config, String> {
        Config::parse(s, Path::new("test.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn the_group_classes_are_off_unless_asked_and_map_to_the_kernels_words() {
        let d = parse("").unwrap().storage;
        assert_eq!(d.group_prio_classes(), (None, None));
        let c = parse("[storage]\nbackground_io_class = \"idle\"\nfront_group_class = \"rt\"\n")
            .unwrap()
            .storage;
        assert_eq!(
            c.group_prio_classes(),
            (Some("promote-to-rt"), Some("idle"))
        );
        let c = parse("[storage]\nbackground_io_class = \"be\"\nfront_group_class = \"be\"\n")
            .unwrap()
            .storage;
        assert_eq!(
            c.group_prio_classes(),
            (Some("restrict-to-be"), Some("restrict-to-be"))
        );
        let c = parse("[storage]\nbackground_io_class = \"off\"\n").unwrap();
        assert_eq!(c.storage.group_prio_classes(), (None, None));
    }

    #[test]
    fn unit_io_weights_are_off_by_default_and_bounded_by_systemds_range() {
        let d = parse("").unwrap().storage;
        assert_eq!(
            (d.front_unit_io_weight, d.background_unit_io_weight),
            (0, 0)
        );
        let c = parse("[storage]\nfront_unit_io_weight = 1000\nbackground_unit_io_weight = 10\n")
            .unwrap()
            .storage;
        assert_eq!(
            (c.front_unit_io_weight, c.background_unit_io_weight),
            (1000, 10)
        );
        let e = parse("[storage]\nbackground_unit_io_weight = 10001\n").unwrap_err();
        assert!(
            e.contains("storage.background_unit_io_weight") && e.contains("0..=10000"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_group_class_is_named_with_its_file_line_and_the_choices() {
        let e = parse("[storage]\nfront_class = \"rt\"\nbackground_io_class = \"lowest\"\n")
            .unwrap_err();
        assert!(e.contains("test.toml") && e.contains("line 3"), "{e}");
        assert!(
            e.contains("background_io_class") || e.contains("lowest"),
            "{e}"
        );
        assert!(
            e.contains("idle") && e.contains("be") && e.contains("off"),
            "{e}"
        );
        let e = parse("[storage]\nfront_group_class = \"idle\"\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("`rt`"), "{e}");
        let e = parse("[storage]\nbackground_io_class = 3\n").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
    }
}
