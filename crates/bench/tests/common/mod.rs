//! Shared helpers for the harness's real-kernel smoke tests: one run at a time (they share the
//! CPUs and s76 flips a system-wide sysctl), a private scratch directory, and a check that the
//! machine is left as found (autogroup, cgroups, no leftover load process).

// Each test binary uses a subset of these helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use uxsched_bench::loads::{LoadKind, LoadSpec};
use uxsched_bench::models::ModelKind;
use uxsched_bench::modes::{ModeEnv, ModeName};
use uxsched_bench::report::Report;
use uxsched_bench::runner::{Env, Launcher, Plan};

static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The real-kernel tests need root (nice < 0, cgroups, sysctl). They are `#[ignore]`d so that a
/// plain `cargo test` lists them as ignored; `make test` runs them as root with
/// `--include-ignored`, and run without root they fail here instead of passing untested.
pub fn require_root() {
    assert!(
        uxsched_bench::sys::is_root(),
        "this test changes scheduling settings and needs root: run it as root (make test does)"
    );
}

pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        Scratch(
            Path::new("/var/tmp").join(format!("uxsched-bench-test-{}-{name}", std::process::id())),
        )
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn plan(
    model: ModelKind,
    modes: &[ModeName],
    ms: u64,
    load: LoadKind,
    scratch: &Scratch,
) -> Plan {
    Plan {
        scenario: model,
        modes: modes.to_vec(),
        reps: 1,
        duration: Duration::from_millis(ms),
        load: LoadSpec {
            kind: load,
            workers: load.default_workers(),
            scratch: scratch.0.clone(),
        },
        second_load: None,
        layout: uxsched_bench::layout::Layout::OtherSession,
        seed: 1,
        compute_ms: None,
        launches: None,
    }
}

pub fn env(scratch: &Scratch) -> Env {
    Env {
        launcher: Launcher {
            program: env!("CARGO_BIN_EXE_uxsched-bench-model").into(),
            prefix: Vec::new(),
        },
        modes: ModeEnv {
            uxsched_exe: None,
            scratch: scratch.0.clone(),
            daemon_config: String::new(),
        },
        progress: false,
    }
}

/// Run a plan and check the machine is as it was afterwards, whatever the outcome.
pub fn run_checked(plan: &Plan, scratch: &Scratch) -> anyhow::Result<Report> {
    let autogroup = uxsched_bench::sys::autogroup();
    let result = uxsched_bench::bench(plan, &env(scratch));
    assert_eq!(
        uxsched_bench::sys::autogroup(),
        autogroup,
        "autogroup sysctl not restored"
    );
    let leftover_groups: Vec<_> = std::fs::read_dir("/sys/fs/cgroup/cpu")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("uxsched-bench-bg-{}", std::process::id()))
        })
        .collect();
    assert!(
        leftover_groups.is_empty(),
        "cgroups left behind: {leftover_groups:?}"
    );
    let mut leftovers = processes_mentioning(&scratch.0);
    for _ in 0..50 {
        if leftovers.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        leftovers = processes_mentioning(&scratch.0);
    }
    assert!(
        leftovers.is_empty(),
        "load processes left running: {leftovers:?}"
    );
    result
}

/// Pids whose command line names `path` (stress-ng's --yaml and fio's --filename do).
fn processes_mentioning(path: &Path) -> Vec<i32> {
    let needle = path.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        })
        .collect()
}

pub fn row(report: &Report, mode: ModeName) -> &uxsched_bench::report::ModeRow {
    report
        .modes
        .iter()
        .find(|r| r.mode == mode)
        .unwrap_or_else(|| {
            panic!(
                "mode {} not in the report: {:?}",
                mode.name(),
                report.warnings
            )
        })
}
