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
    /// `sysctl_sched_base_slice` (already scaled by the CPU count), and where it was read: the
    /// simulator's `eevdf.base_slice` is set to it. 6.6–6.14 default to 0.75 ms × (1 + log2
    /// ncpus), 6.15+ to 0.70 ms × the same ("sched: Reduce the default slice to avoid tasks
    /// getting an extra tick"): 1.4 ms on the 2-CPU 6.18 machine, where the simulator's own
    /// default is 1.5 ms.
    pub base_slice_ns: Option<u64>,
    pub base_slice_from: String,
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
    let (base_slice_ns, base_slice_from) = match read("base_slice_ns") {
        Ok(s) => (s.parse().ok(), format!("{DEBUG_SCHED}/base_slice_ns")),
        Err(_) => own_slice(),
    };
    SchedInfo {
        features,
        differs,
        base_slice_ns,
        base_slice_from,
        // e.g. "none (voluntary) full lazy": the chosen model is in parentheses.
        preempt: read("preempt").ok(),
    }
}

/// The base slice as this thread's `se.slice` in `/proc/thread-self/sched` (6.12+ prints it):
/// a SCHED_OTHER thread without a custom slice requests `sysctl_sched_base_slice`.
fn own_slice() -> (Option<u64>, String) {
    const FROM: &str = "/proc/thread-self/sched se.slice";
    // SAFETY: sched_getscheduler(0) takes no pointer and reads this thread's policy.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy != libc::SCHED_OTHER {
        return (None, format!("{FROM}: this thread is not SCHED_OTHER"));
    }
    match std::fs::read_to_string("/proc/thread-self/sched") {
        Ok(text) => (parse_slice(&text), FROM.to_string()),
        Err(e) => (None, format!("{FROM}: {e}")),
    }
}

pub fn parse_slice(sched: &str) -> Option<u64> {
    sched.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "se.slice").then(|| v.trim().parse().ok())?
    })
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
            "sched features: {features}{differs}\nbase slice {} (from {}; the simulator's \
             eevdf.base_slice), preempt {}",
            self.base_slice_ns
                .map_or("unknown".to_string(), |n| format!("{n} ns")),
            self.base_slice_from,
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

    #[test]
    fn the_base_slice_is_read_from_a_threads_sched_file() {
        let text = "rt-app (123, #threads: 2)\n------\nse.exec_start  :  1.5\n\
                    se.slice                                     :              1400000\n\
                    policy  :  0\n";
        assert_eq!(parse_slice(text), Some(1_400_000));
        assert_eq!(parse_slice("policy : 0\n"), None);
    }
}
