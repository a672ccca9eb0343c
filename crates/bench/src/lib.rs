//! The real-kernel harness of uxsched (`uxsched bench`, `uxsched demo`).
//!
//! Foreground models (`models/`) run as real processes under real background loads
//! (`loads/`), once per mode (`modes/`), repetitions interleaved (`runner`); the report gives
//! percentiles, ratios to `idle` with bootstrap intervals (`stats`, `report`) and plots
//! (`plots`). See docs/bench.md for the definitions and how to read the output.

pub mod cancel;
pub mod cgroup;
pub mod layout;
pub mod leftovers;
pub mod loads;
pub mod models;
pub mod modes;
pub mod plots;
pub mod reliability;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod stats;
pub mod sys;

use anyhow::Result;
use modes::ModeName;
use std::fmt::Write;
use std::path::Path;

/// `uxsched bench list`: scenarios, loads and modes, with which modes this build can run.
pub fn list_text(uxsched_exe: Option<&Path>) -> String {
    let daemon = modes::daemon_available(uxsched_exe);
    let mut s = String::from("scenarios (default load; metric):\n");
    for m in scenario::ALL {
        let sc = scenario::scenario(m);
        let _ = writeln!(
            s,
            "  {:<9} ({}, {}) {}",
            m.name(),
            sc.default_load.name(),
            sc.source,
            sc.metric
        );
    }
    s.push_str("loads (--load): cpu (stress-ng, 3x CPUs), hackbench (nice 10), io (fio randread), memory (stress-ng --vm), kbuild (make -j of the kernel), write (fio sequential writers, fsync every 256 MiB)\nlayouts (--layout; default other-session):\n");
    for l in layout::Layout::ALL {
        let _ = writeln!(s, "  {:<13} {}", l.name(), l.description());
    }
    s.push_str("modes:\n");
    for m in ModeName::ALL {
        let note = if m.needs_daemon() && !daemon {
            "  [needs the daemon: not in this build]"
        } else {
            ""
        };
        let _ = writeln!(s, "  {:<13} {}{note}", m.name(), m.description());
    }
    s
}

/// Scratch directory on disk (not tmpfs: cold-cache reads and O_DIRECT need a real device).
pub fn scratch_dir() -> std::path::PathBuf {
    Path::new("/var/tmp").join(format!("uxsched-bench-{}", std::process::id()))
}

/// Where [`runtime_dir`] looks for a tmpfs, in order.
const RUNTIME_BASES: [&str; 2] = ["/run", "/dev/shm"];

/// The run's directory on tmpfs beside its scratch directory (`/run/<its name>`): a daemon
/// mode's journal lives there, as the installed daemon's does in `/run/uxsched` — its commit
/// is on the path from a keystroke to its boost. Removed with the scratch directory. Where
/// `/run` is not a tmpfs (a container or VM without systemd's mount: the development VM's
/// `/run` is on its root disk), `/dev/shm` is used, so the journal's commits and its start-up
/// fsync stay off the disk under test, as the installed daemon's do.
pub fn runtime_dir(scratch: &Path) -> std::path::PathBuf {
    let base = RUNTIME_BASES
        .into_iter()
        .map(Path::new)
        .find(|p| uxsched_os::block::on_tmpfs(p))
        .unwrap_or(Path::new("/run"));
    base.join(scratch.file_name().unwrap_or_default())
}

/// Remove a scratch directory and its runtime directory; with `keep_logs`, remove only the
/// data files next to `runs/` (they can be hundreds of MiB) and keep the per-run logs for
/// diagnosis.
pub fn cleanup_scratch(dir: &Path, keep_logs: bool) {
    let _ = std::fs::remove_dir_all(runtime_dir(dir));
    if !keep_logs {
        let _ = std::fs::remove_dir_all(dir);
        return;
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().is_file() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Run a plan and build its report; modes dropped after a failed run are named in its warnings.
pub fn bench(plan: &runner::Plan, env: &runner::Env) -> Result<report::Report> {
    let runs = runner::run(plan, env)?;
    let mut kept = plan.clone();
    kept.modes
        .retain(|m| !runs.dropped.iter().any(|(d, _)| d == m));
    let mut report = report::Report::build(&kept, runs.records);
    report.layout_note = runs.layout_note;
    for (mode, why) in runs.dropped {
        report.warnings.push(format!(
            "mode {} was dropped after a failed run: {why}",
            mode.name()
        ));
    }
    Ok(report)
}

/// Tests: `runtime` is the runtime directory named `name` under one of the bases
/// [`runtime_dir`] chooses from.
#[cfg(test)]
pub(crate) fn assert_runtime_dir(runtime: &Path, name: &str) {
    assert_eq!(runtime.file_name().unwrap(), name, "{}", runtime.display());
    let base = runtime.parent().unwrap();
    assert!(
        RUNTIME_BASES.map(Path::new).contains(&base),
        "{}",
        runtime.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A daemon mode's journal is on a tmpfs: `/run` where it is one, else `/dev/shm` (a tmpfs
    /// on every Linux with POSIX shared memory; the test fails, saying so, where it is not).
    #[test]
    fn the_runtime_directory_is_on_a_tmpfs() {
        use uxsched_os::block::on_tmpfs;
        assert!(
            on_tmpfs(Path::new("/dev/shm")),
            "/dev/shm is not a tmpfs here: the bench has no tmpfs for its daemons' journal"
        );
        assert!(!on_tmpfs(Path::new("/proc")), "procfs is not a tmpfs");
        let dir = runtime_dir(Path::new("/var/tmp/uxsched-bench-7"));
        assert_runtime_dir(&dir, "uxsched-bench-7");
        assert!(on_tmpfs(dir.parent().unwrap()), "{}", dir.display());
    }
}
