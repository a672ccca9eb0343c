//! The kernel side of `sim validate`: run one workload with rt-app and read its per-thread logs.
//!
//! rt-app writes one log per thread, `<logdir>/<log_basename>-<thread>-<index>.log`, one line per
//! loop of the thread's phases with the columns `idx perf run period start end rel_st slack
//! c_duration c_period wu_lat` (µs; rt-app's `src/rt-app_utils.c`, `log_timing`). `wu_lat` is the
//! time from a timer's expiry to the thread running again (0 when the timer had already expired),
//! `slack` the time left before the timer's expiry when the thread reached it.

use crate::exit::bad_input;
use anyhow::Context;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What rt-app measured for one thread: one sample per loop, in ns.
#[derive(Debug, Default, Clone)]
pub struct ThreadLog {
    pub wu_lat: Vec<i64>,
    pub slack: Vec<i64>,
}

/// The rt-app binary: `--rt-app`, else `$UXSCHED_RTAPP`, else `rt-app` on `$PATH`.
pub fn binary(flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("UXSCHED_RTAPP").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("rt-app"))
}

/// A copy of `file` whose logs go to `dir` under a fixed base name (rt-app 1.0 writes no log
/// lines with `log_size` set to `file` or `auto`, so that key is dropped).
/// What validate must do beside rt-app for this workload.
struct Prepared {
    copy: PathBuf,
    wanted: Vec<super::slices::Wanted>,
    members: Vec<(String, String)>,
}

fn prepare(file: &Path, dir: &Path) -> anyhow::Result<Prepared> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| bad_input(format!("{}: cannot read: {e}", file.display())))?;
    let mut json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        bad_input(format!(
            "{}: validate needs strict JSON (to point rt-app's logdir at a private directory): {e}",
            file.display()
        ))
    })?;
    super::cgroups::strip(&mut json);
    let global = json
        .as_object_mut()
        .ok_or_else(|| bad_input(format!("{}: not a JSON object", file.display())))?
        .entry("global")
        .or_insert_with(|| serde_json::json!({}));
    let g = global
        .as_object_mut()
        .ok_or_else(|| bad_input(format!("{}: `global` is not an object", file.display())))?;
    g.insert("logdir".into(), dir.display().to_string().into());
    g.insert("log_basename".into(), "validate".into());
    g.remove("log_size");
    let copy = dir.join("workload.json");
    std::fs::write(&copy, serde_json::to_vec_pretty(&json)?)
        .with_context(|| format!("writing {}", copy.display()))?;
    Ok(Prepared {
        copy,
        wanted: super::slices::wanted(&json),
        members: super::cgroups::members(&json),
    })
}

/// Run rt-app on `file` (in `dir`, which receives the logs) for at most `limit`, and return
/// each thread's log by rt-app thread name, instances in index order, with how the custom
/// slices the workload asks for were set ([`super::slices`]).
///
/// With `timer_slack_ns`, rt-app starts with that timer slack (`PR_SET_TIMERSLACK` in the child
/// before `exec`; its threads inherit it) instead of this process's.
pub fn run(
    rtapp: &Path,
    file: &Path,
    dir: &Path,
    limit: Duration,
    timer_slack_ns: Option<u64>,
    weights: &BTreeMap<String, u64>,
) -> anyhow::Result<KernelRun> {
    use std::os::unix::process::CommandExt;
    let Prepared {
        copy,
        wanted,
        members,
    } = prepare(file, dir)?;
    // Made before rt-app starts, removed (dropped) after it has been reaped.
    let groups = if weights.is_empty() {
        None
    } else {
        let run = dir
            .file_name()
            .map_or("run".into(), |n| n.to_string_lossy().into_owned());
        Some(super::cgroups::Groups::make(weights, &run)?)
    };
    let placements: Vec<(String, PathBuf)> = match &groups {
        Some(g) => members
            .iter()
            .map(|(comm, path)| (comm.clone(), g.tasks_file(path)))
            .collect(),
        None => Vec::new(),
    };
    let mut cmd = Command::new(rtapp);
    if let Some(ns) = timer_slack_ns {
        // SAFETY: prctl is async-signal-safe and touches only the child's own thread.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd
        .arg(&copy)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            bad_input(format!(
                "{}: cannot run rt-app `{}`: {e} (install Debian's rt-app with scripts/setup.sh, \
                 or name it with --rt-app or UXSCHED_RTAPP)",
                file.display(),
                rtapp.display()
            ))
        })?;
    let enforcer = (!wanted.is_empty() || !placements.is_empty())
        .then(|| super::slices::Enforcer::start(child.id(), wanted, placements));
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if start.elapsed() > limit {
            // rt-app ignores SIGTERM while its threads are blocked: kill it.
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!(
                "{}: rt-app still running after {:.0} s (a thread blocked forever?); killed",
                file.display(),
                limit.as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = reader.join().unwrap_or_default();
    if !status.success() {
        let why: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("<crit>") || l.contains("<error>"))
            .collect();
        let why = if why.is_empty() {
            err.lines().last().unwrap_or("no message").to_string()
        } else {
            why.join("; ")
        };
        return Err(bad_input(format!(
            "{}: rt-app rejected the workload ({status}): {}",
            file.display(),
            why.trim()
        )));
    }
    let slices = enforcer.map(|e| e.finish()).unwrap_or_default();
    drop(groups);
    Ok(KernelRun {
        logs: read_logs(dir)?,
        slices,
    })
}

/// What one rt-app run left.
pub struct KernelRun {
    pub logs: BTreeMap<String, Vec<ThreadLog>>,
    pub slices: Vec<super::slices::Applied>,
}

/// Every `validate-<thread>-<index>.log` in `dir`, grouped by thread name.
pub fn read_logs(dir: &Path) -> anyhow::Result<BTreeMap<String, Vec<ThreadLog>>> {
    let mut by_name: BTreeMap<String, Vec<(u32, ThreadLog)>> = BTreeMap::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let Some(stem) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("validate-"))
            .and_then(|n| n.strip_suffix(".log"))
        else {
            continue;
        };
        let Some((name, idx)) = stem.rsplit_once('-') else {
            continue;
        };
        let Ok(idx) = idx.parse::<u32>() else {
            continue;
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading rt-app log {}", path.display()))?;
        let log = parse_log(&text).with_context(|| format!("rt-app log {}", path.display()))?;
        by_name
            .entry(name.to_string())
            .or_default()
            .push((idx, log));
    }
    Ok(by_name
        .into_iter()
        .map(|(n, mut v)| {
            v.sort_by_key(|(i, _)| *i);
            (n, v.into_iter().map(|(_, l)| l).collect())
        })
        .collect())
}

/// The `slack` (8th) and `wu_lat` (11th) columns of an rt-app log, µs → ns.
pub fn parse_log(text: &str) -> anyhow::Result<ThreadLog> {
    let mut log = ThreadLog::default();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> anyhow::Result<i64> {
            cols.get(i)
                .and_then(|c| c.parse::<i64>().ok())
                .map(|us| us * 1000)
                .ok_or_else(|| anyhow::anyhow!("line {}: expected 11 numeric columns", n + 1))
        };
        log.slack.push(num(7)?);
        log.wu_lat.push(num(10)?);
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rt-app runs a task's events in the order its object lists them: the copy rt-app reads
    /// must keep that order (a sorted map put `timer` before `unlock`, so the kernel's task
    /// slept holding the mutex while the simulator's released it first).
    #[test]
    fn the_copy_keeps_each_tasks_events_in_file_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mutex.json");
        let text = r#"{"global": {"duration": 1, "log_size": 4},
            "tasks": {"slow": {"loop": -1, "lock": "m", "runtime": 3000, "unlock": "m",
                               "timer": {"ref": "slow", "period": 15000}},
                      "middle": {"suspend": "middle", "runtime": 1000, "resume": "tail"}}}"#;
        std::fs::write(&file, text).unwrap();
        let copy = std::fs::read_to_string(prepare(&file, dir.path()).unwrap().copy).unwrap();
        let at = |key: &str| copy.find(&format!("\"{key}\"")).unwrap();
        assert!(at("lock") < at("runtime") && at("runtime") < at("unlock"));
        assert!(at("unlock") < at("timer"), "{copy}");
        assert!(at("suspend") < at("resume"), "{copy}");
        assert!(
            at("slow") < at("middle"),
            "tasks keep their order too: {copy}"
        );
        assert!(copy.contains("\"logdir\"") && !copy.contains("log_size"));
    }

    #[test]
    fn reads_slack_and_wakeup_latency_columns() {
        let text = "# Policy : SCHED_OTHER priority : 0\n\
#idx     perf      run   period           start             end          rel_st      slack c_duration   c_period     wu_lat\n\
   0    16320      202   100073     10707325647     10707425720             112      99783        200     100000         84\n\
   0    20160      200    99986     10707425734     10707525720          100199     -12        200     100000         4085\n";
        let log = parse_log(text).unwrap();
        assert_eq!(log.slack, vec![99_783_000, -12_000]);
        assert_eq!(log.wu_lat, vec![84_000, 4_085_000]);
        assert!(parse_log("1 2 3\n").is_err());
    }
}
