//! `uxsched reliability` with tiny numbers, every mode: the real daemon SIGKILLed during focus
//! churn and restarted, a small pid-recycling storm, a socket flood, a second of churn — and
//! nothing left changed, nothing done to a recycled pid, no crash. The full run is a benchmark
//! (`make reliability`, figures in the README), not a test.

use std::process::Command;

#[test]
#[ignore = "needs root: make test runs it as root"]
fn smoke_run_leaves_nothing_changed_and_never_touches_a_recycled_pid() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "this test starts the root daemon: run it as root (make test does)"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .args([
            "reliability",
            "--kills",
            "2",
            "--storm",
            "60",
            "--messages",
            "3000",
        ])
        .args(["--churn-secs", "1", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}); stderr:\n{err}"));
    let kills = r["kills"].as_array().unwrap();
    assert_eq!(kills.len(), 6, "every mode");
    for k in kills {
        assert_eq!(k["kills"], 2);
        assert!(k["focus_requests"].as_u64().unwrap() > 0);
        for key in ["leftovers", "cgroup_leftovers"] {
            assert_eq!(
                k[key].as_array().unwrap().len(),
                0,
                "{}: {key} {:#}",
                k["mode"],
                k[key]
            );
        }
        assert_eq!(k["journal_rows"], 0, "{}", k["mode"]);
        assert_eq!(k["daemon_crashes"], 0, "{}", k["mode"]);
    }
    let storm = r["storm"].as_array().unwrap();
    let recycled: u64 = storm.iter().map(|s| s["recycled"].as_u64().unwrap()).sum();
    let inspected: u64 = storm.iter().map(|s| s["inspected"].as_u64().unwrap()).sum();
    assert!(
        recycled > 0 && inspected > 0,
        "the storm inspected no recycled pid: it tested nothing"
    );
    for s in storm {
        let landed = s["landed_on_recycled"].as_array().unwrap();
        assert!(landed.is_empty(), "{}: {landed:#?}", s["mode"]);
        assert_eq!(s["daemon_crashes"], 0);
    }
    let f = &r["flood"];
    assert!(f["messages"].as_u64().unwrap() >= 3000);
    assert_eq!(f["daemon_crashes"], 0);
    assert_eq!(f["accepted"], 0, "a malformed request was answered ok");
    assert_eq!(f["still_works"], true);
    let c = &r["churn"];
    assert!(c["focus_requests"].as_u64().unwrap() >= 50);
    assert_eq!(c["daemon_crashes"], 0);
    assert_eq!(c["leftovers"], 0);
    assert!(out.status.success(), "failures reported:\n{err}");
}
