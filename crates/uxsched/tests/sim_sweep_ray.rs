//! `uxsched sim sweep --ray auto` end to end (issue 35): the real binary, a real local Ray with 2
//! workers and the uxsched_sweep wheel that scripts/setup.sh builds and installs. Per-point
//! digests equal the sequential run's (and `--resume` on Ray completes a local journal); a worker
//! SIGKILLed mid-point is retried by Ray and every
//! point is in the journal exactly once. Without Ray or the wheel these tests fail, saying so.

mod sweep_common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use sweep_common::*;

/// One local Ray at a time: two would share this machine's few cores.
static RAY: Mutex<()> = Mutex::new(());

/// Fails (never skips) when this machine cannot run Ray points.
fn require_ray() {
    let o = Command::new("python3")
        .args(["-c", "import ray, uxsched_sweep"])
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "Ray or the uxsched_sweep wheel is missing for python3: run scripts/setup.sh ({})",
        String::from_utf8_lossy(&o.stderr).trim()
    );
}

#[test]
fn sixteen_points_on_a_local_ray_give_the_sequential_digests() {
    let _one = RAY.lock().unwrap_or_else(|e| e.into_inner());
    require_ray();
    let d = tmpdir("sweep-ray", "sixteen");
    let spec = d.join("sixteen.toml");
    std::fs::write(&spec, SIXTEEN).unwrap();
    let seq = sweep(&spec, &d.join("seq"), &["--jobs", "1"]);
    let jobs2 = sweep(&spec, &d.join("jobs2"), &["--jobs", "2"]);
    let ray = sweep(&spec, &d.join("ray"), &["--ray", "auto"]);
    assert_eq!(ray["runner"], "ray auto");
    assert_eq!(ray["jobs"], 2, "the local Ray has 2 workers");
    assert_eq!(ray["ran"], 16);
    assert_eq!(seq["digests"].as_array().unwrap().len(), 16);
    assert_eq!(seq["digests"], jobs2["digests"], "--jobs 2 differs");
    assert_eq!(seq["digests"], ray["digests"], "Ray's digests differ");
    for f in ["results.csv", "results.parquet"] {
        let a = std::fs::read(d.join("seq").join(f)).unwrap();
        assert!(
            a == std::fs::read(d.join("ray").join(f)).unwrap(),
            "{f} differs on Ray"
        );
    }
    // `--resume` on Ray finishes a local sweep's journal cut after 8 points into the same table.
    let half = d.join("half");
    std::fs::create_dir_all(&half).unwrap();
    let journal = std::fs::read_to_string(d.join("seq/journal.jsonl")).unwrap();
    let first: Vec<&str> = journal.split_inclusive('\n').take(1 + 8).collect();
    std::fs::write(half.join("journal.jsonl"), first.concat()).unwrap();
    let resumed = sweep(&spec, &half, &["--ray", "auto", "--resume"]);
    assert_eq!(
        (resumed["resumed"].as_u64(), resumed["ran"].as_u64()),
        (Some(8), Some(8))
    );
    assert_eq!(resumed["digests"], seq["digests"]);
    let a = std::fs::read(d.join("seq/results.csv")).unwrap();
    assert!(
        a == std::fs::read(half.join("results.csv")).unwrap(),
        "resumed on Ray: CSV differs"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// 8 points of the 2,000-thread server, ~1 s each here: long enough to kill a worker mid-point.
const SERVER: &str = r#"
workloads = ["server64"]
scheds = ["eevdf", "cfs"]
seeds = { from = 1, count = 4 }
duration = "50s"

[output]
tasks = ["ui"]
metrics = ["wakeup_latency.p99", "cpu_share"]
"#;

#[test]
fn a_worker_killed_mid_sweep_loses_no_point_and_counts_none_twice() {
    let _one = RAY.lock().unwrap_or_else(|e| e.into_inner());
    require_ray();
    let d = tmpdir("sweep-ray", "kill");
    let spec = d.join("server.toml");
    std::fs::write(&spec, SERVER).unwrap();
    let local = sweep(&spec, &d.join("local"), &["--jobs", "2"]);
    assert_eq!(local["points"], 8);

    let out = d.join("ray");
    let mut child = Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .args([
            "sim",
            "sweep",
            s(&spec),
            "--out",
            s(&out),
            "--ray",
            "auto",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let root = child.id() as i32;
    let t0 = Instant::now();
    let mut seen = BTreeMap::new();
    // A worker busy with a point (Ray titles it `ray::run_point`) under our sweep, once one point
    // is in the journal (Ray is up and its workers warm).
    let victim = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no busy Ray worker found"
        );
        if child.try_wait().unwrap().is_some() {
            let o = child.wait_with_output().unwrap();
            panic!(
                "the sweep ended before a worker could be killed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        seen.extend(descendants(root));
        let busy = seen
            .iter()
            .find(|(&p, c)| c.starts_with("ray::run_point") && cmdline(p).as_deref() == Some(c));
        if let (Some((&pid, _)), true) = (busy, !journal_points(&out).is_empty()) {
            break pid;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    unsafe { libc::kill(victim, libc::SIGKILL) };
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    // Ray's own word that the point was running on the killed worker and is re-run.
    assert!(
        stderr.contains("will be retried"),
        "no retry reported: {stderr}"
    );
    let ray: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let idx = journal_points(&out);
    assert_eq!(
        idx,
        (0..8).collect::<Vec<_>>(),
        "each point once in the journal"
    );
    assert_eq!(ray["digests"], local["digests"]);
    let (a, b) = (
        std::fs::read(d.join("local/results.csv")).unwrap(),
        std::fs::read(out.join("results.csv")).unwrap(),
    );
    assert!(
        a == b,
        "the table after a worker's death differs from the local one"
    );
    // Ray's processes (raylet, GCS, workers) are gone with the sweep.
    std::thread::sleep(Duration::from_millis(500));
    let left: Vec<_> = seen
        .iter()
        .filter(|(&p, c)| cmdline(p).as_deref() == Some(c.as_str()))
        .collect();
    assert!(left.is_empty(), "left running: {left:?}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// The point indices in OUT's journal, sorted, duplicates kept.
fn journal_points(out: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(out.join("journal.jsonl")).unwrap_or_default();
    let mut idx: Vec<u64> = text
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["index"].as_u64().unwrap())
        .collect();
    idx.sort_unstable();
    idx
}

fn cmdline(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        String::from_utf8_lossy(&raw)
            .replace('\0', " ")
            .trim()
            .to_string(),
    )
}

/// Every process under `root` now, with its command line.
fn descendants(root: i32) -> BTreeMap<i32, String> {
    let mut parent = BTreeMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
        let after = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
        if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            parent.insert(pid, ppid);
        }
    }
    let mut under = BTreeSet::from([root]);
    let mut grew = true;
    while grew {
        grew = false;
        for (&p, pp) in &parent {
            if under.contains(pp) && under.insert(p) {
                grew = true;
            }
        }
    }
    under.remove(&root);
    under
        .into_iter()
        .filter_map(|p| cmdline(p).map(|c| (p, c)))
        .collect()
}
