//! Storage pieces of issue 33 on the real kernel: the `write` load writes, reports bytes/s,
//! stops and removes its files; `reader`, `fsync`, `gallery` and `launch` produce samples in
//! short runs; and every report names the scratch directory's disk with its idle throughput. Short smoke
//! runs: they check the harness measures, never that any mode wins.

mod common;

use common::{plan, require_root, row, run_checked, serial, Scratch};
use std::time::Duration;
use uxsched_bench::layout::Placement;
use uxsched_bench::loads::{self, LoadKind, LoadSpec};
use uxsched_bench::models::ModelKind;
use uxsched_bench::modes::ModeName;

#[test]
#[ignore = "needs root: make test runs it as root"]
fn write_load_writes_reports_and_cleans_up() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("write-load");
    let spec = LoadSpec {
        kind: LoadKind::Write,
        workers: LoadKind::Write.default_workers(),
        scratch: scratch.0.clone(),
    };
    loads::prepare(&spec).unwrap();
    let load = loads::start(&spec, &scratch.0.join("out"), &Placement::own_session()).unwrap();
    let files = loads::write::data_dir(&spec);
    let mut written = 0;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(50));
        written = dir_bytes(&files);
        if written > 0 {
            break;
        }
    }
    assert!(written > 0, "no bytes appeared in {}", files.display());
    std::thread::sleep(Duration::from_millis(1500));
    let t = load.stop().unwrap();
    eprintln!(
        "write load: {:.0} {} ({:.1} MiB/s), cpu {:?} %",
        t.value,
        t.unit,
        t.value / 1048576.0,
        t.cpu_pct
    );
    assert_eq!(t.unit, "written bytes/s");
    assert!(t.value > 1e6, "under 1 MB/s written: {}", t.value);
    assert!(
        !files.exists(),
        "the write load left {} behind",
        files.display()
    );
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn write_load_files_are_removed_when_it_is_killed() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("write-kill");
    let spec = LoadSpec {
        kind: LoadKind::Write,
        workers: 1,
        scratch: scratch.0.clone(),
    };
    let load = loads::start(&spec, &scratch.0.join("out"), &Placement::own_session()).unwrap();
    let files = loads::write::data_dir(&spec);
    std::thread::sleep(Duration::from_millis(700));
    assert!(dir_bytes(&files) > 0, "nothing written yet");
    drop(load); // the error path: SIGKILL of the whole session
    assert!(
        !files.exists(),
        "the killed write load left {} behind",
        files.display()
    );
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn reader_is_storage_bound_and_names_the_device() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("reader");
    let p = plan(
        ModelKind::Reader,
        &[ModeName::Idle],
        1500,
        LoadKind::Io,
        &scratch,
    );
    let report = run_checked(&p, &scratch).unwrap();
    eprintln!("{}", report.table());
    let idle = row(&report, ModeName::Idle);
    assert!(idle.summary.n > 10, "only {} samples", idle.summary.n);
    let cpu = idle.extras["reader_cpu_pct"];
    assert!(
        cpu < 60.0,
        "the reader thread took {cpu:.1} % of a CPU: CPU-bound, not storage-bound"
    );
    assert!(idle.extras["read_mib_s"] > 0.0);
    let dev = &report.device;
    assert!(dev.device.is_some(), "no disk named: {}", dev.text());
    assert!(
        dev.idle_read_mib_s.unwrap() > 0.0 && dev.idle_write_mib_s.unwrap() > 0.0,
        "{}",
        dev.text()
    );
    assert!(
        report.table().contains("device: "),
        "the table has no device line"
    );
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn fsync_saves_are_timed_under_the_write_load() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("fsync");
    let p = plan(
        ModelKind::Fsync,
        &[ModeName::Idle, ModeName::Stock],
        2000,
        LoadKind::Write,
        &scratch,
    );
    let report = run_checked(&p, &scratch).unwrap();
    eprintln!("{}", report.table());
    let (idle, stock) = (row(&report, ModeName::Idle), row(&report, ModeName::Stock));
    assert!(idle.summary.n >= 4, "only {} saves in 2 s", idle.summary.n);
    assert!(stock.summary.n >= 1, "no save under the write load");
    assert!(idle.summary.p50 > 0.0);
    assert!(
        stock.background.unwrap() > 0.0,
        "the write load reported nothing"
    );
    assert_eq!(stock.background_unit.as_deref(), Some("written bytes/s"));
    assert!(
        !loads::write::data_dir(&p.load).exists(),
        "the write load's files were left behind"
    );
    assert!(
        report.device.idle_write_mib_s.is_some(),
        "{}",
        report.device.text()
    );
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_cpu_scenario_names_the_device_without_measuring() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("nostorage");
    let p = plan(
        ModelKind::Alarm,
        &[ModeName::Idle],
        300,
        LoadKind::Cpu,
        &scratch,
    );
    let report = run_checked(&p, &scratch).unwrap();
    let dev = &report.device;
    assert!(dev.idle_read_mib_s.is_none());
    assert!(
        dev.text().contains("not a storage scenario"),
        "{}",
        dev.text()
    );
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn gallery_flips_enough_for_a_p99() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("gallery");
    // One default-length run: 3 of them (the default --reps) must give ≥ 100 flips.
    let p = plan(
        ModelKind::Gallery,
        &[ModeName::Idle],
        5000,
        LoadKind::Io,
        &scratch,
    );
    let report = run_checked(&p, &scratch).unwrap();
    eprintln!("{}", report.table());
    let idle = row(&report, ModeName::Idle);
    assert!(
        idle.summary.n * 3 >= 100,
        "{} flips in a 5 s run: under 100 per mode with 3 reps",
        idle.summary.n
    );
    assert!(idle.extras.contains_key("flips_late"));
}

#[test]
#[ignore = "needs root: the launch scenario drops the page cache and runs xterm as uxsched-bench"]
fn launch_times_cold_launches_until_the_window_maps() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("launch");
    // The duration is only a bound: each run ends after 3 launches.
    let mut p = plan(
        ModelKind::Launch,
        &[ModeName::Idle, ModeName::Stock],
        60_000,
        LoadKind::Write,
        &scratch,
    );
    p.launches = Some(3);
    let report = run_checked(&p, &scratch).unwrap();
    eprintln!("{}", report.table());
    for mode in [ModeName::Idle, ModeName::Stock] {
        let r = row(&report, mode);
        assert_eq!(r.extras["launches"], 3.0, "{:?}", r.extras);
        assert_eq!(r.extras["lost"], 0.0, "a launch never mapped");
        // Cold: the program read its libraries and data from the disk (about 35 MiB here).
        let mib = r.extras["read_mib"];
        assert!(
            mib > 5.0,
            "mousepad read {mib:.1} MiB from disk: not a cold launch"
        );
    }
    for record in &report.records {
        assert_eq!(record.samples_ms.len(), 3, "{:?}", record.samples_ms);
        for ms in &record.samples_ms {
            assert!(*ms > 0.0 && *ms < 20_000.0, "launch time {ms} ms");
        }
    }
    let stock = row(&report, ModeName::Stock);
    assert_eq!(stock.background_unit.as_deref(), Some("written bytes/s"));
    assert!(
        stock.background.unwrap() > 0.0,
        "the write load reported nothing"
    );
    assert!(
        report.device.idle_read_mib_s.is_some(),
        "launch is a storage scenario: {}",
        report.device.text()
    );
    assert!(
        launched_left_running(&scratch.0).is_empty(),
        "launched programs left running"
    );
}

/// Processes whose working directory is under `dir` (the launched programs run in the
/// run's home).
fn launched_left_running(dir: &std::path::Path) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(dir))
        })
        .collect()
}

#[test]
fn launch_refuses_without_the_program_it_launches() {
    // A PATH with the desktop and the terminal but not mousepad.
    let dir = std::env::temp_dir().join(format!("uxsched-launch-path-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for bin in ["Xvfb", "openbox", "xterm"] {
        std::fs::write(dir.join(bin), "").unwrap();
    }
    let err = uxsched_bench::models::xapp::require_programs(ModelKind::Launch, dir.as_os_str())
        .unwrap_err()
        .to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        err.contains("'launch'") && err.contains("apt-get install mousepad"),
        "{err}"
    );
}
