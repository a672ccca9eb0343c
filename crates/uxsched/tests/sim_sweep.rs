//! `uxsched sim sweep` end to end (issue 35): the real binary on real specs; per-point digests
//! independent of `--jobs`, a driver killed with SIGKILL then `--resume`d, bad specs refused
//! with their line before anything runs.

mod sweep_common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use sweep_common::*;

#[test]
fn sixteen_points_give_the_same_digests_and_table_with_one_or_two_jobs() {
    let d = tmpdir("sim-sweep", "jobs");
    let spec = d.join("sixteen.toml");
    std::fs::write(&spec, SIXTEEN).unwrap();
    let one = sweep(&spec, &d.join("j1"), &["--jobs", "1"]);
    let two = sweep(&spec, &d.join("j2"), &["--jobs", "2"]);
    assert_eq!(one["points"], 16);
    assert_eq!(
        (one["jobs"].as_u64(), two["jobs"].as_u64()),
        (Some(1), Some(2))
    );
    let digests = one["digests"].as_array().unwrap();
    assert_eq!(digests.len(), 16);
    assert_eq!(
        one["digests"], two["digests"],
        "per-point digests differ between --jobs 1 and 2"
    );
    // Different seeds and settings really give different runs (the digest is not a constant).
    let distinct: std::collections::BTreeSet<&str> = digests
        .iter()
        .map(|p| p["digest"].as_str().unwrap())
        .collect();
    assert!(distinct.len() > 8, "{distinct:?}");
    for f in ["results.csv", "results.parquet"] {
        let (a, b) = (
            std::fs::read(d.join("j1").join(f)).unwrap(),
            std::fs::read(d.join("j2").join(f)).unwrap(),
        );
        assert!(a == b, "{f} differs between --jobs 1 and 2");
    }
    // A point's digest is `sim run --determinism-check`'s for the same settings (point 15: the
    // last of the expansion order, mcfs on 4 CPUs, seed 4).
    let run = uxsched(&[
        "sim",
        "run",
        "showcase",
        "--sched",
        "mcfs",
        "--param",
        "mcfs.cut_rate=16",
        "--cpus",
        "4",
        "--seed",
        "4",
        "--duration",
        "300ms",
        "--determinism-check",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    let last = digests[15]["digest"].as_str().unwrap();
    assert!(
        stderr.contains(&format!("digest {last}")),
        "sim run said: {stderr}; sweep: {last}"
    );
    check_parquet_matches_csv(&d.join("j1"));
    std::fs::remove_dir_all(&d).unwrap();
}

/// The Parquet file holds the CSV's rows: same count, same values in the same order.
fn check_parquet_matches_csv(dir: &Path) {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::RowAccessor;
    let reader =
        SerializedFileReader::new(std::fs::File::open(dir.join("results.parquet")).unwrap())
            .unwrap();
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let csv_rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(
        reader.metadata().file_metadata().num_rows() as usize,
        csv_rows.len()
    );
    let schema = reader.metadata().file_metadata().schema_descr();
    let names: Vec<&str> = schema.columns().iter().map(|c| c.name()).collect();
    assert_eq!(names, header);
    let (value, digest) = (
        header.len() - 1,
        header.iter().position(|&c| c == "digest").unwrap(),
    );
    for (i, row) in reader.get_row_iter(None).unwrap().enumerate().step_by(97) {
        let row = row.unwrap();
        assert_eq!(
            row.get_double(value).unwrap(),
            csv_rows[i][value].parse::<f64>().unwrap(),
            "row {i}"
        );
        assert_eq!(
            row.get_string(digest).unwrap(),
            csv_rows[i][digest],
            "row {i}"
        );
    }
}

/// 12 points of the 64-CPU, 2,000-thread server for 1 s each: long enough to kill mid-way.
const SERVER: &str = r#"
workloads = ["server64"]
scheds = ["eevdf", "cfs"]
seeds = { from = 1, count = 6 }
duration = "1s"

[output]
tasks = ["ui", "render"]
metrics = ["wakeup_latency.p99", "wakeup_latency.max", "cpu_share"]
"#;

#[test]
fn a_killed_driver_is_resumed_into_the_uninterrupted_table() {
    let d = tmpdir("sim-sweep", "resume");
    let spec = d.join("server.toml");
    std::fs::write(&spec, SERVER).unwrap();
    let whole = sweep(&spec, &d.join("whole"), &["--jobs", "1"]);
    assert_eq!(whole["points"], 12);

    let killed = d.join("killed");
    let mut child = Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .args(["sim", "sweep", s(&spec), "--out", s(&killed), "--jobs", "1"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let journal = killed.join("journal.jsonl");
    let lines = |p: &Path| std::fs::read_to_string(p).map_or(0, |t| t.lines().count());
    let t0 = Instant::now();
    // Header + 3 finished points, then SIGKILL.
    while lines(&journal) < 4 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the sweep made no progress"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the sweep ended before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let before = lines(&journal) - 1;
    assert!(
        before < 12,
        "all points finished before the kill ({before})"
    );
    assert!(!killed.join("results.csv").exists());
    // A torn last line, as a kill in the middle of a write leaves.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .unwrap();
    std::io::Write::write_all(&mut f, br#"{"index":11,"id":"torn"#).unwrap();
    drop(f);

    let resumed = sweep(&spec, &killed, &["--jobs", "2", "--resume"]);
    assert_eq!(resumed["resumed"].as_u64(), Some(before as u64));
    assert_eq!(resumed["ran"].as_u64(), Some(12 - before as u64));
    assert_eq!(resumed["digests"], whole["digests"]);
    let (a, b) = (
        std::fs::read(d.join("whole/results.csv")).unwrap(),
        std::fs::read(killed.join("results.csv")).unwrap(),
    );
    assert!(
        a == b,
        "the resumed table differs from the uninterrupted one"
    );
    // Every point exactly once in the journal.
    let text = std::fs::read_to_string(&journal).unwrap();
    let mut idx: Vec<u64> = text
        .lines()
        .skip(1)
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["index"]
                .as_u64()
                .unwrap()
        })
        .collect();
    idx.sort_unstable();
    assert_eq!(idx, (0..12).collect::<Vec<u64>>());
    // A second --resume has nothing left to run; a plain run refuses to overwrite.
    assert_eq!(sweep(&spec, &killed, &["--resume"])["ran"], 0);
    let o = uxsched(&["sim", "sweep", s(&spec), "--out", s(&killed)]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--resume"));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn bad_specs_are_refused_with_key_and_line_before_anything_runs() {
    let d = tmpdir("sim-sweep", "errors");
    let cases: &[(&str, &str, &[&str])] = &[
        ("unknown key", "workloads = [\"example1\"]\nseeds = [1]\nbogus = 3\n", &["line 3", "unknown field `bogus`"]),
        ("empty grid", "workloads = [\"example1\"]\nseeds = [1]\ncpus = []\n", &[".toml:3:", "`cpus` is empty"]),
        ("empty seeds", "workloads = [\"example1\"]\nseeds = { from = 1, count = 0 }\n", &[".toml:2:", "`seeds` is empty"]),
        (
            "tunable the policy lacks",
            "workloads = [\"example1\"]\nscheds = [\"mcfs\"]\nseeds = [1]\n\n[params]\n\"mcfs.bogus\" = [1]\n",
            &[".toml:6:", "mcfs.bogus is not a tunable of `mcfs`"],
        ),
        (
            "tunable of a policy no point runs",
            "workloads = [\"example1\"]\nscheds = [\"cfs\"]\nseeds = [1]\n[params]\n\"vtcfs.tick\" = [\"3ms\"]\n",
            &[".toml:5:", "param `vtcfs.tick`: no point of this sweep runs `vtcfs`"],
        ),
        (
            "bad value",
            "workloads = [\"example1\"]\nscheds = [\"mcfs\"]\nseeds = [1]\n[params]\n\"mcfs.cut_rate\" = [4, 0]\n",
            &[".toml:5:", "mcfs.cut_rate must be at least 1"],
        ),
        ("unknown workload", "seeds = [1]\nworkloads = [\"nosuch\"]\n", &[".toml:2:", "no built-in workload `nosuch`"]),
        (
            "unknown metric",
            "workloads = [\"example1\"]\nseeds = [1]\n[output]\nmetrics = [\"wakeup_latency.p98\"]\n",
            &[".toml:4:", "unknown metric `wakeup_latency.p98`"],
        ),
        (
            "plot of a column that is not one",
            "workloads = [\"example1\"]\nseeds = [1]\n\n[[plot]]\nmetric = \"cpu_share\"\ntask = \"interactive\"\nx = \"cut_rate\"\n",
            &[".toml:4:", "`x = \"cut_rate\"` is not a numeric column"],
        ),
    ];
    for (i, (what, text, expected)) in cases.iter().enumerate() {
        let spec = d.join(format!("bad{i}.toml"));
        std::fs::write(&spec, text).unwrap();
        let out = d.join(format!("out{i}"));
        let o = uxsched(&["sim", "sweep", s(&spec), "--out", s(&out)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        for e in *expected {
            assert!(err.contains(e), "{what}: expected `{e}` in: {err}");
        }
        assert!(
            !out.exists(),
            "{what}: the sweep started ({} exists)",
            out.display()
        );
    }
    // --resume with a changed spec refuses the other sweep's journal.
    let spec = d.join("ok.toml");
    std::fs::write(
        &spec,
        "workloads = [\"example1\"]\nseeds = [1]\nduration = \"100ms\"\n",
    )
    .unwrap();
    sweep(&spec, &d.join("ok"), &[]);
    std::fs::write(
        &spec,
        "workloads = [\"example1\"]\nseeds = [2]\nduration = \"100ms\"\n",
    )
    .unwrap();
    let o = uxsched(&[
        "sim",
        "sweep",
        s(&spec),
        "--out",
        s(&d.join("ok")),
        "--resume",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("belongs to another sweep"));
    assert!(!o.status.success());
    std::fs::remove_dir_all(&d).unwrap();
}
