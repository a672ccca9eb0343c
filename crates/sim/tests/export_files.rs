//! The Perfetto trace, the Gantt chart and atomic file writes on hand-built event logs.

mod synthetic;

use std::io::{self, Write};
use std::path::PathBuf;

use serde_json::Value;
use uxsched_sim::digest::Digest;
use uxsched_sim::export::{write_atomically, AtomicFile, GanttChart, PerfettoTrace};
use uxsched_sim::log::{Record, TaskId};

use synthetic::*;

fn perfetto_bytes(records: &[Record]) -> Vec<u8> {
    let mut trace = PerfettoTrace::new(Vec::new());
    let mut recs = records.to_vec();
    recs.push(Record::Freq {
        t: 4000,
        domain: 0,
        khz: 1_800_000,
    });
    recs.extend(tap(1, 50, 0, 4000, 2));
    recs.sort_by_key(Record::time);
    feed(&mut trace, &abc_meta(), &recs, 10_000);
    trace.finish().unwrap()
}

#[test]
fn perfetto_trace_parses_and_has_slices_counters_and_names() {
    let bytes = perfetto_bytes(&two_preemptions());
    let json: Value = serde_json::from_slice(&bytes).expect("valid JSON");
    let events = json["traceEvents"].as_array().unwrap();
    let slices: Vec<(String, u64, f64, f64)> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == 1)
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["tid"].as_u64().unwrap(),
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
            )
        })
        .collect();
    // CPU 0 is tid 1, CPU 1 tid 2; times in µs.
    assert_eq!(
        slices,
        vec![
            ("A".into(), 1, 0.1, 1.0),
            ("B".into(), 1, 1.1, 1.0),
            ("A".into(), 1, 2.1, 0.9),
            ("C".into(), 1, 3.0, 0.5),
            ("A".into(), 1, 3.5, 0.5),
            ("A".into(), 2, 5.2, 0.8),
            ("A".into(), 2, 6.3, 0.7),
        ]
    );
    // A's waits on its own track (tid = 2 CPUs + 1 + task 0): woken 0..0.1 µs, preempted
    // 1.1..2.1 and 3.0..3.5, woken 5.0..5.2, yielded 6.0..6.3.
    let waits: Vec<(f64, f64, &str)> = events
        .iter()
        .filter(|e| e["name"] == "runnable" && e["tid"] == 3)
        .map(|e| {
            let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
            (ts, dur, e["args"]["since"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        waits,
        vec![
            (0.0, 0.1, "woken"),
            (1.1, 1.0, "preempted"),
            (3.0, 0.5, "preempted"),
            (5.0, 0.2, "woken"),
            (6.0, 0.3, "yielded"),
        ]
    );
    let freq: Vec<(f64, u64)> = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "freq little")
        .map(|e| {
            (
                e["ts"].as_f64().unwrap(),
                e["args"]["kHz"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(freq, vec![(0.0, 1_000_000), (4.0, 1_800_000)]);
    let named = |kind: &str, name: &str| {
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["name"] == kind && e["args"]["name"] == name)
    };
    assert!(
        named("thread_name", "CPU 0 (little)")
            && named("thread_name", "C")
            && named("process_name", "daemon")
    );
    let wakeups = events
        .iter()
        .filter(|e| e["ph"] == "i" && e["name"] == "wakeup")
        .count();
    assert_eq!(wakeups, 4);
    let async_ids: Vec<(&str, u64)> = events
        .iter()
        .filter(|e| e["cat"] == "interaction")
        .map(|e| (e["ph"].as_str().unwrap(), e["id"].as_u64().unwrap()))
        .collect();
    assert_eq!(async_ids, vec![("b", 1), ("e", 1)]);
}

#[test]
fn identical_logs_give_identical_trace_bytes_and_digests() {
    assert_eq!(
        perfetto_bytes(&two_preemptions()),
        perfetto_bytes(&two_preemptions())
    );
    let digest = |recs: &[Record]| {
        let mut d = Digest::new();
        feed(&mut d, &abc_meta(), recs, 10_000);
        d.hex()
    };
    let mut other = two_preemptions();
    other[1] = sw(101, 0, None, Blocked, Some(0));
    assert_eq!(digest(&two_preemptions()), digest(&two_preemptions()));
    assert_ne!(digest(&two_preemptions()), digest(&other));
    let mut renamed = abc_meta();
    renamed.tasks[2].name = "D".into();
    let mut d = Digest::new();
    feed(&mut d, &renamed, &two_preemptions(), 10_000);
    assert_ne!(
        d.hex(),
        digest(&two_preemptions()),
        "metadata is part of the digest"
    );
}

#[derive(Debug)]
struct BrokenPipe;

impl Write for BrokenPipe {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::new(io::ErrorKind::BrokenPipe, "gone"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn trace_write_errors_surface_at_finish() {
    let mut trace = PerfettoTrace::new(BrokenPipe);
    feed(&mut trace, &abc_meta(), &two_preemptions(), 10_000);
    assert_eq!(
        trace.finish().unwrap_err().kind(),
        io::ErrorKind::BrokenPipe
    );
}

#[test]
fn gantt_draws_only_what_is_inside_the_window() {
    let mut g = GanttChart::new(2000, 3500).unwrap();
    feed(&mut g, &abc_meta(), &two_preemptions(), 10_000);
    let got: Vec<(TaskId, u64, u64)> = g
        .slices()
        .iter()
        .map(|s| (s.task, s.start, s.end))
        .collect();
    // B (1100..2100) clipped, A whole, C whole; A from 3500 starts at the excluded end.
    assert_eq!(got, vec![(1, 2000, 2100), (0, 2100, 3000), (2, 3000, 3500)]);
    let svg = g.to_svg();
    assert_eq!(svg.matches(r#"class="slice""#).count(), 3);
    assert_eq!(
        svg.matches(r#"class="wakeup""#).count(),
        1,
        "only C's wake-up at 2900"
    );
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("time (ms)") && svg.contains("CPU 0"));
    let mut again = GanttChart::new(2000, 3500).unwrap();
    feed(&mut again, &abc_meta(), &two_preemptions(), 10_000);
    assert_eq!(svg, again.to_svg());
}

#[test]
fn gantt_marks_interactions_in_the_window() {
    let recs = tap(7, 1000, 0, 4500, 1);
    let mut g = GanttChart::new(0, 2000).unwrap();
    feed(&mut g, &abc_meta(), &recs, 10_000);
    let svg = g.to_svg();
    assert_eq!(svg.matches("interaction-begin").count(), 1);
    assert_eq!(svg.matches("interaction-end").count(), 0);
    assert!(svg.contains("tap #7 begins on A"));
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("uxsched-sim-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn atomic_write_leaves_no_file_on_error_and_keeps_the_old_one() {
    let dir = scratch("atomic");
    let path = dir.join("trace.json");
    let err = write_atomically(&path, |w| {
        w.write_all(b"partial")?;
        Err::<(), _>(io::Error::other("boom"))
    })
    .unwrap_err();
    assert_eq!(err.to_string(), "boom");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "neither the file nor .tmp"
    );

    write_atomically(&path, |w| w.write_all(b"old")).unwrap();
    let _ = write_atomically(&path, |w| {
        w.write_all(b"new, half")?;
        Err::<(), _>(io::Error::other("boom"))
    });
    assert_eq!(std::fs::read(&path).unwrap(), b"old");

    {
        let mut f = AtomicFile::create(dir.join("gantt.svg")).unwrap();
        f.write_all(b"<svg").unwrap();
        // Dropped without commit, as when the run fails midway.
    }
    assert!(!dir.join("gantt.svg").exists() && !dir.join("gantt.svg.tmp").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failed_rename_cleans_up_and_errors_name_the_file() {
    let dir = scratch("rename");
    let target = dir.join("out.svg");
    std::fs::create_dir_all(target.join("occupied")).unwrap();
    let err = write_atomically(&target, |w| w.write_all(b"<svg/>")).unwrap_err();
    assert!(err.to_string().contains("out.svg"), "{err}");
    assert!(!dir.join("out.svg.tmp").exists());
    let missing = dir.join("no/such/dir/t.json");
    let err = AtomicFile::create(&missing).err().expect("cannot create");
    assert!(err.to_string().contains("no/such/dir/t.json.tmp"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn streamed_trace_into_an_atomic_file_appears_complete() {
    let dir = scratch("stream");
    let path = dir.join("t.json");
    let mut trace = PerfettoTrace::new(AtomicFile::create(&path).unwrap());
    feed(&mut trace, &abc_meta(), &two_preemptions(), 10_000);
    assert!(!path.exists(), "nothing at the path before commit");
    trace.finish().unwrap().commit().unwrap();
    let json: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert!(json["traceEvents"].as_array().unwrap().len() > 10);
    std::fs::remove_dir_all(&dir).unwrap();
}
