//! Two loads at once (`--load cpu+write`, seed 003's Table 8 on the real kernel): a run
//! starts both as the bench's user, stops both with their throughputs reported and leaves
//! nothing running; a bad pair is refused naming the value, and so is a mode told one load's
//! processes. Short smoke runs: they check the harness, never that a mode wins.

mod common;

use common::{plan, require_root, row, run_checked, serial, Scratch};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use uxsched_bench::layout::Layout;
use uxsched_bench::loads::{LoadChoice, LoadKind, LoadSpec};
use uxsched_bench::models::xapp::AppUser;
use uxsched_bench::models::ModelKind;
use uxsched_bench::modes::ModeName;

/// Every (command name, uid) of a load process — stress-ng or fio — whose command line names
/// `needle`, sampled every 20 ms until `stop` is set: stress-ng names its `--yaml` report and
/// fio its `--directory`, both under the scratch directory (the model names it too).
fn watch(
    needle: String,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<BTreeSet<(String, u32)>> {
    std::thread::spawn(move || {
        let mut seen = BTreeSet::new();
        while !stop.load(Ordering::Relaxed) {
            for pid in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                let dir = pid.path();
                let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
                    continue;
                };
                if !String::from_utf8_lossy(&cmdline).contains(&needle) {
                    continue;
                }
                let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
                if !(comm.starts_with("stress-ng") || comm.trim() == "fio") {
                    continue;
                }
                if let Ok(meta) = std::fs::metadata(&dir) {
                    let uid = std::os::unix::fs::MetadataExt::uid(&meta);
                    seen.insert((comm.trim().to_owned(), uid));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        seen
    })
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn two_loads_run_as_the_bench_user_and_both_stop_with_their_throughputs() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("two-loads");
    let mut p = plan(
        ModelKind::Painting,
        &[ModeName::Idle, ModeName::Stock],
        1500,
        LoadKind::Cpu,
        &scratch,
    );
    p.load.workers = 2;
    p.layout = Layout::SameSession;
    p.second_load = Some(LoadSpec {
        kind: LoadKind::Write,
        workers: 1,
        scratch: scratch.0.clone(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch(scratch.0.display().to_string(), stop.clone());
    let report = run_checked(&p, &scratch);
    stop.store(true, Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    let report = report.unwrap();
    assert_eq!(report.load, "cpu+write");
    assert_eq!(report.second_load_workers, Some(1));
    let stock = row(&report, ModeName::Stock);
    assert!(
        stock.background.is_some_and(|v| v > 0.0),
        "the cpu load's throughput: {:?}",
        stock.background
    );
    let written = stock.extras.get("write_load").copied().unwrap_or(0.0);
    assert!(
        written > 1e6,
        "the write load's bytes/s: {:?}",
        stock.extras
    );
    assert_eq!(stock.extras.get("write_load/stock"), Some(&1.0));
    let idle = row(&report, ModeName::Idle);
    assert!(
        idle.background.is_none() && !idle.extras.contains_key("write_load"),
        "idle runs no load: {:?}",
        idle.extras
    );
    let user = AppUser::ensure().unwrap();
    let names: BTreeSet<&str> = seen.iter().map(|(c, _)| c.as_str()).collect();
    assert!(
        names.iter().any(|c| c.starts_with("stress-ng")) && names.contains("fio"),
        "both loads seen running: {seen:?}"
    );
    assert!(
        seen.iter().all(|(_, uid)| *uid == user.uid),
        "every load process runs as the bench's user (uid {}): {seen:?}",
        user.uid
    );
    assert!(
        !scratch.0.join("write-load").exists(),
        "the write load's files were left behind"
    );
}

#[test]
fn a_bad_pair_is_refused_naming_the_value() {
    for (bad, says) in [
        ("cpu+cpu", "names load 'cpu' twice"),
        ("cpu+disk", "unknown load 'disk'"),
    ] {
        let err = LoadChoice::parse(bad).unwrap_err().to_string();
        assert!(
            err.contains(&format!("'{bad}'")) && err.contains(says),
            "{err}"
        );
    }
}

#[test]
fn a_mode_told_one_loads_processes_is_refused_with_two_loads() {
    let scratch = Scratch::new("two-loads-android");
    let mut p = plan(
        ModelKind::Painting,
        &[ModeName::Idle, ModeName::Android],
        1000,
        LoadKind::Cpu,
        &scratch,
    );
    p.second_load = Some(LoadSpec {
        kind: LoadKind::Write,
        workers: 1,
        scratch: scratch.0.clone(),
    });
    // Refused before anything runs (no root needed, nothing started).
    let err = uxsched_bench::bench(&p, &common::env(&scratch))
        .expect_err("android with two loads must be refused");
    let text = format!("{err:#}");
    assert!(
        text.contains("mode android") && text.contains("cpu+write"),
        "{text}"
    );
}
