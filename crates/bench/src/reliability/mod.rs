//! `uxsched reliability`: the daemon's safety measured on the real kernel with the real daemon
//! (issue 8) — random SIGKILLs during focus churn in every mode (settings left changed), a
//! pid-recycling storm (changes that landed on a recycled task), a socket flood (crashes, RSS)
//! and sustained focus churn (RSS). A benchmark, not a test: the figures go in the README; a
//! smoke run with tiny numbers is a test (crates/uxsched/tests/reliability_cli.rs).

pub mod apps;
pub mod churn;
pub mod daemon;
pub mod flood;
pub mod kills;
pub mod settings;
pub mod storm;

use anyhow::Result;
use rand::SeedableRng;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The daemon's modes, all measured by default.
pub const MODES: [&str; 6] = ["eimos", "vtcfs", "mcfs", "facfs", "shuffledog", "uxsched"];

#[derive(Debug, Clone)]
pub struct Options {
    pub modes: Vec<String>,
    /// SIGKILLs per mode.
    pub kills: u32,
    /// Short-lived processes in the storm, split across the modes.
    pub storm: u32,
    pub messages: u64,
    pub churn_secs: u64,
    pub seed: u64,
    /// The uxsched binary (the daemon and the apps).
    pub exe: PathBuf,
    pub scratch: PathBuf,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub kills: Vec<kills::KillsResult>,
    pub storm: Vec<storm::StormResult>,
    pub flood: Option<flood::FloodResult>,
    pub churn: Option<churn::ChurnResult>,
}

impl Report {
    /// Everything that must be 0: settings left changed, changes on recycled tasks, journal
    /// rows left, daemon crashes, malformed requests accepted, a daemon that stopped working.
    pub fn failures(&self) -> u64 {
        let k: u64 = self
            .kills
            .iter()
            .map(|k| {
                (k.leftovers.len() + k.cgroup_leftovers.len() + k.journal_rows) as u64
                    + u64::from(k.daemon_crashes)
            })
            .sum();
        let s: u64 = self
            .storm
            .iter()
            .map(|s| {
                (s.landed_on_recycled.len() + s.journal_rows) as u64 + u64::from(s.daemon_crashes)
            })
            .sum();
        let f = self.flood.as_ref().map_or(0, |f| {
            u64::from(f.daemon_crashes) + f.accepted + u64::from(!f.still_works)
        });
        let c = self
            .churn
            .as_ref()
            .map_or(0, |c| u64::from(c.daemon_crashes) + c.leftovers as u64);
        k + s + f + c
    }

    pub fn table(&self) -> String {
        let mut t = String::new();
        if !self.kills.is_empty() {
            self.kills_table(&mut t);
        }
        if !self.storm.is_empty() {
            self.storm_table(&mut t);
        }
        if let Some(f) = &self.flood {
            let _ = writeln!(t, "socket flood: {} messages on {} connections ({} refused, {} accepted), crashes {}, RSS {} → {} KiB, still works: {}", f.messages, f.connections, f.refused, f.accepted, f.daemon_crashes, f.rss_kib_before, f.rss_kib_after, f.still_works);
        }
        if let Some(c) = &self.churn {
            let _ = writeln!(t, "focus churn ({}): {} focus changes in {:.1} s, RSS start {} / peak {} / end {} KiB, crashes {}, leftovers {}", c.mode, c.focus_requests, c.elapsed_s, c.rss_kib_start, c.rss_kib_peak, c.rss_kib_end, c.daemon_crashes, c.leftovers);
        }
        let _ = writeln!(t, "failures (must be 0): {}", self.failures());
        t
    }

    fn kills_table(&self, t: &mut String) {
        let _ = writeln!(t, "SIGKILLs during focus churn (8 apps: 3 plain, 3 forking once boosted, 2 sharing a session with a CPU hog):");
        let _ = writeln!(
            t,
            "  {:<11} {:>6} {:>7} {:>9} {:>10} {:>8} {:>8}",
            "mode", "kills", "focus", "children", "leftovers", "journal", "crashes"
        );
        for k in &self.kills {
            let left = k.leftovers.len() + k.cgroup_leftovers.len();
            let _ = writeln!(
                t,
                "  {:<11} {:>6} {:>7} {:>9} {:>10} {:>8} {:>8}",
                k.mode,
                k.kills,
                k.focus_requests,
                k.children_forked,
                left,
                k.journal_rows,
                k.daemon_crashes
            );
            for l in &k.leftovers {
                let _ = writeln!(t, "      {l}");
            }
            for l in &k.cgroup_leftovers {
                let _ = writeln!(t, "      {l}");
            }
        }
    }

    fn storm_table(&self, t: &mut String) {
        let _ = writeln!(
            t,
            "pid-recycling storm (short-lived processes focused, each freed pid taken at once):"
        );
        let _ = writeln!(
            t,
            "  {:<11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>18} {:>8}",
            "mode",
            "processes",
            "accepted",
            "recycled",
            "same_tick",
            "inspected",
            "landed_on_recycled",
            "crashes"
        );
        for s in &self.storm {
            let _ = writeln!(
                t,
                "  {:<11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>18} {:>8}",
                s.mode,
                s.processes,
                s.focus_accepted,
                s.recycled,
                s.same_tick,
                s.inspected,
                s.landed_on_recycled.len(),
                s.daemon_crashes
            );
            for l in &s.landed_on_recycled {
                let _ = writeln!(t, "      {l}");
            }
        }
    }
}

/// Run every part (a part whose count is 0 is left out), printing progress on stderr.
pub fn run(o: &Options) -> Result<Report> {
    anyhow::ensure!(
        crate::sys::is_root(),
        "the reliability benchmark starts the root daemon and writes ns_last_pid: run it as root"
    );
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(o.seed);
    let mut report = Report {
        kills: Vec::new(),
        storm: Vec::new(),
        flood: None,
        churn: None,
    };
    std::fs::create_dir_all(&o.scratch)?;
    if o.kills > 0 {
        for mode in &o.modes {
            eprintln!("reliability: {} SIGKILLs in {mode}", o.kills);
            report
                .kills
                .push(kills::run(&o.exe, &o.scratch, mode, o.kills, &mut rng)?);
        }
    }
    if o.storm > 0 {
        let per_mode = o.storm.div_ceil(o.modes.len() as u32);
        for mode in &o.modes {
            eprintln!("reliability: pid-recycling storm of {per_mode} processes in {mode}");
            report
                .storm
                .push(storm::run(&o.exe, &o.scratch, mode, per_mode, &mut rng)?);
        }
    }
    if o.messages > 0 {
        eprintln!(
            "reliability: {} malformed/oversized/flooding socket messages",
            o.messages
        );
        report.flood = Some(flood::run(&o.exe, &o.scratch, o.messages)?);
    }
    if o.churn_secs > 0 {
        eprintln!("reliability: 100 focus changes/s for {} s", o.churn_secs);
        let mode = o.modes.last().map_or("uxsched", |m| m.as_str());
        report.churn = Some(churn::run(
            &o.exe,
            &o.scratch,
            mode,
            o.churn_secs,
            &mut rng,
        )?);
    }
    Ok(report)
}

/// A scratch directory of its own under /var/tmp.
pub fn scratch_dir() -> PathBuf {
    Path::new("/var/tmp").join(format!("uxsched-reliability-{}", std::process::id()))
}
