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
}

ranged!(launch_budget_ms, u64, "storage.launch_budget_ms", 0, 60_000);
ranged!(launch_max, usize, "storage.launch_max", 1, 64);

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

impl Default for Storage {
    fn default() -> Self {
        Storage {
            front_class: FrontClass::Rt,
            launch_budget_ms: 5_000,
            launch_max: 4,
            switch_to_bfq: false,
            bfq_devices: Vec::new(),
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
}
