//! What the running kernel's scheduler is set to, for `sim validate`'s header: the feature flags
//! (`/sys/kernel/debug/sched/features`: RUN_TO_PARITY, PREEMPT_SHORT, PLACE_LAG, DELAY_DEQUEUE…),
//! the base slice and the preemption model. EEVDF's behaviour changed materially between 6.12,
//! 6.18 and 7.0, and a flag turned off changes the schedule: a result without them cannot be
//! compared with another. The simulator models the 6.18 defaults (docs/mechanisms.md, `eevdf`).

use serde::Serialize;

const DEBUG_SCHED: &str = "/sys/kernel/debug/sched";

/// The flags the simulator's `eevdf` models, each on in 6.12–6.18's defaults.
pub const MODELLED_ON: &[&str] = &[
    "PLACE_LAG",
    "PLACE_DEADLINE_INITIAL",
    "RUN_TO_PARITY",
    "PREEMPT_SHORT",
    "WAKEUP_PREEMPTION",
    "DELAY_DEQUEUE",
    "DELAY_ZERO",
];

/// The flags the simulator does not model, off in the kernel's defaults.
pub const MODELLED_OFF: &[&str] = &["NEXT_BUDDY", "HRTICK"];

#[derive(Debug, Serialize)]
pub struct SchedInfo {
    /// The feature flags as the kernel prints them (`NO_X` when off), or why they are unknown.
    pub features: Result<Vec<String>, String>,
    /// Modelled flags that this kernel has set otherwise than the simulator assumes.
    pub differs: Vec<String>,
    pub base_slice_ns: Option<u64>,
    pub preempt: Option<String>,
}

fn read(name: &str) -> Result<String, String> {
    let path = format!("{DEBUG_SCHED}/{name}");
    std::fs::read_to_string(&path)
        .map(|s| s.trim().to_string())
        .map_err(|e| {
            format!(
                "{path}: {e} (as root, with debugfs mounted: mount -t debugfs none \
                 /sys/kernel/debug)"
            )
        })
}

pub fn probe() -> SchedInfo {
    let features: Result<Vec<String>, String> =
        read("features").map(|s| s.split_whitespace().map(String::from).collect());
    let differs = match &features {
        Ok(f) => differs(f),
        Err(_) => Vec::new(),
    };
    SchedInfo {
        features,
        differs,
        base_slice_ns: read("base_slice_ns").ok().and_then(|s| s.parse().ok()),
        // e.g. "none (voluntary) full lazy": the chosen model is in parentheses.
        preempt: read("preempt").ok(),
    }
}

/// The modelled flags this kernel sets otherwise (a flag it does not list is not compared: it
/// does not exist in that version).
fn differs(features: &[String]) -> Vec<String> {
    let has = |f: &str| features.iter().any(|x| x == f);
    let mut out = Vec::new();
    for f in MODELLED_ON {
        if has(&format!("NO_{f}")) {
            out.push(format!("NO_{f}"));
        }
    }
    for f in MODELLED_OFF {
        if has(f) {
            out.push(f.to_string());
        }
    }
    out
}

impl SchedInfo {
    /// One header line.
    pub fn line(&self) -> String {
        let features = match &self.features {
            Ok(f) => f.join(" "),
            Err(why) => format!("unknown: {why}"),
        };
        let differs = if self.differs.is_empty() {
            String::new()
        } else {
            format!(
                "; NOT AS MODELLED: {} (the simulator assumes 6.18's defaults)",
                self.differs.join(" ")
            )
        };
        format!(
            "sched features: {features}{differs}\nbase_slice_ns {}, preempt {}",
            self.base_slice_ns
                .map_or("unknown".to_string(), |n| n.to_string()),
            self.preempt.as_deref().unwrap_or("unknown")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modelled_flag_turned_off_is_named() {
        let f: Vec<String> = "GENTLE_FAIR_SLEEPERS NO_RUN_TO_PARITY PREEMPT_SHORT NEXT_BUDDY"
            .split(' ')
            .map(String::from)
            .collect();
        assert_eq!(differs(&f), vec!["NO_RUN_TO_PARITY", "NEXT_BUDDY"]);
        let defaults: Vec<String> = MODELLED_ON.iter().map(|s| s.to_string()).collect();
        assert!(differs(&defaults).is_empty());
    }
}
