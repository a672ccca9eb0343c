//! `uxsched sim` end to end: real files in, real files out, exit codes.

use std::path::Path;
use std::process::Command;

fn uxsched(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .args(args)
        .output()
        .expect("uxsched runs")
}

/// A scratch directory, removed when the test ends (kept by nothing else).
fn tmpdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("uxsched-sim-cli-{name}-"))
        .tempdir()
        .unwrap()
}

#[test]
fn debian_rt_app_example_runs_end_to_end() {
    let ex = Path::new("/usr/share/doc/rt-app/examples/tutorial/example7.json");
    assert!(
        ex.exists(),
        "rt-app examples not installed: scripts/setup.sh installs them (make test runs it)"
    );
    let out = uxsched(&[
        "sim",
        "run",
        ex.to_str().unwrap(),
        "--cpus",
        "2",
        "--duration",
        "1s",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let text = report.to_string();
    assert!(text.contains("task0") && text.contains("task1"), "{text}");
}

#[test]
fn trace_gantt_and_determinism_check() {
    let dir = tmpdir("outputs");
    let d = dir.path();
    let trace = d.join("t.json");
    let gantt = d.join("g.svg");
    let out = uxsched(&[
        "sim",
        "run",
        "showcase",
        "--duration",
        "500ms",
        "--determinism-check",
        "--trace",
        trace.to_str().unwrap(),
        "--gantt",
        gantt.to_str().unwrap(),
        "--window",
        "100ms..150ms",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("two runs identical"));
    let t: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&trace).unwrap()).expect("trace is JSON");
    assert!(t.to_string().contains("\"ph\""));
    assert!(std::fs::read_to_string(&gantt).unwrap().starts_with("<svg"));
    // Same seed, same trace bytes.
    let trace2 = d.join("t2.json");
    let out = uxsched(&[
        "sim",
        "run",
        "showcase",
        "--duration",
        "500ms",
        "--trace",
        trace2.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert_eq!(
        std::fs::read(&trace).unwrap(),
        std::fs::read(&trace2).unwrap()
    );
}

#[test]
fn malformed_workload_exits_2_with_location_and_writes_nothing() {
    let dir = tmpdir("bad");
    let d = dir.path();
    let bad = d.join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\n[[task]]\nname = \"a\"\nnice = 99\n").unwrap();
    let trace = d.join("trace.json");
    let out = uxsched(&[
        "sim",
        "run",
        bad.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml"), "{err}");
    assert!(!trace.exists() && !d.join("trace.json.tmp").exists());
}

#[test]
fn unknown_option_values_list_the_valid_ones() {
    let out = uxsched(&["sim", "run", "showcase", "--sched", "bogus"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cfs") && err.contains("eevdf"), "{err}");
}

#[test]
fn reproduce_writes_figures_and_refuses_unknown_seeds() {
    let dir = tmpdir("reproduce");
    let d = dir.path();
    let out = uxsched(&[
        "sim",
        "reproduce",
        "001",
        "--quick",
        "--out",
        d.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.contains("| Fig. 5 (10 copies) |"), "{md}");
    assert!(d.join("reproduction/seed001-fig5.svg").exists());
    assert!(
        !d.join("reproduction.md").exists(),
        "only `all` writes the document"
    );
    let out = uxsched(&["sim", "reproduce", "999"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("known: 000"));
    let out = uxsched(&[
        "sim",
        "run",
        "example1",
        "--mech",
        "nope",
        "--duration",
        "10ms",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bench_reports_every_policy_with_medians() {
    let out = uxsched(&[
        "sim",
        "bench",
        "--duration",
        "500ms",
        "--reps",
        "3",
        "--workload",
        "phone",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = rows.as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["sched"].as_str().unwrap()).collect();
    assert_eq!(names, ["cfs", "eevdf", "vtcfs", "mcfs"]);
    for r in rows {
        assert_eq!(r["reps"], 3);
        assert_eq!(r["workload"], "phone");
        assert_eq!(r["threads"], 200);
        assert!(r["events"].as_u64().unwrap() > 1000, "{r}");
        let (median, best) = (
            r["events_per_s_median"].as_f64().unwrap(),
            r["events_per_s_best"].as_f64().unwrap(),
        );
        assert!(median > 0.0 && best >= median, "{r}");
    }
    let bad = uxsched(&["sim", "bench", "--reps", "0"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn bench_has_the_64_cpu_2000_thread_server_workload() {
    let out = uxsched(&[
        "sim",
        "bench",
        "--workload",
        "server64",
        "--sched",
        "eevdf",
        "--duration",
        "100ms",
        "--reps",
        "1",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let r = &rows.as_array().unwrap()[..];
    assert_eq!(r.len(), 1, "{rows}");
    assert_eq!(r[0]["workload"], "server64");
    assert_eq!(r[0]["sched"], "eevdf");
    assert_eq!(r[0]["cpus"], 64);
    assert_eq!(r[0]["threads"], 2000);
    assert!(r[0]["events"].as_u64().unwrap() > 1000, "{rows}");
}
