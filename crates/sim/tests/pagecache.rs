//! `read` events through the page cache and the kernel's on-demand read-ahead.

mod common;
use common::*;
use uxsched_model::size::{KIB, MIB};
use uxsched_model::{Nanos, MS, SEC, US};
use uxsched_sim::engine::{init_ra_size, next_ra_size, DeviceSpec, Sim};
use uxsched_sim::log::{LeaveReason, Record, VecSink};
use uxsched_sim::mechanism;
use uxsched_sim::policy::Params;
use uxsched_sim::workload::{self, Event, FileSpec, Phase, TaskSpec, Workload};

/// `passes` sequential passes over a file of `size` in 8 KiB reads, `cpu` after each.
fn reader(size: u64, passes: u64, cpu: Nanos) -> TaskSpec {
    let mut t = task("reader", nice(0), vec![]);
    t.phases = vec![Phase {
        name: "read".into(),
        loops: size / (8 * KIB),
        events: vec![
            Event::Read {
                file: "f".into(),
                bytes: 8 * KIB,
            },
            Event::Run(cpu),
        ],
        ..Default::default()
    }];
    t.loops = Some(passes);
    t
}

fn with_file(tasks: Vec<TaskSpec>, size: u64) -> Workload {
    let mut w = workload(tasks);
    w.files.push(FileSpec {
        name: "f".into(),
        size,
    });
    w
}

fn run_params(w: &Workload, params: &[&str], mechs: &[&str]) -> VecSink {
    let mut cfg = config("cfs", 1, 30 * SEC);
    let mut p = Params::parse(params.iter().copied()).unwrap();
    let mut built = Vec::new();
    for m in mechs {
        built.push(mechanism::by_name(m, &mut p).unwrap());
    }
    cfg.params = p;
    let mut sim = Sim::new(w, cfg).expect("workload builds");
    for m in built {
        sim.add_mechanism(m);
    }
    let mut log = VecSink::default();
    sim.run(&mut log, &mut |_| {}).unwrap();
    log
}

/// Sizes (bytes) of the device requests, from their service times.
fn request_sizes(log: &VecSink) -> Vec<u64> {
    let d = DeviceSpec::default();
    log.records
        .iter()
        .filter_map(|r| match *r {
            Record::Io { service, .. } => {
                Some(((service - d.access) as u128 * d.bytes_per_sec as u128 / SEC as u128) as u64)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn window_sizes_are_the_kernels() {
    // get_init_ra_size: 4× small requests, 2× medium ones, else the maximum (32 pages).
    assert_eq!(init_ra_size(1, 32), 4);
    assert_eq!(init_ra_size(2, 32), 4);
    assert_eq!(init_ra_size(3, 32), 8);
    assert_eq!(init_ra_size(16, 32), 32);
    // get_next_ra_size: 4× below max/16, else 2×, capped.
    assert_eq!(next_ra_size(1, 32), 4);
    assert_eq!(next_ra_size(8, 32), 16);
    assert_eq!(next_ra_size(16, 32), 32);
    assert_eq!(next_ra_size(32, 32), 32);
}

#[test]
fn a_sequential_reader_ramps_up_to_the_maximum_window() {
    let log = run_params(
        &with_file(vec![reader(4 * MIB, 1, 10 * US)], 4 * MIB),
        &[],
        &[],
    );
    let sizes = request_sizes(&log);
    // 8 KiB = 2 pages: a first window of 4 pages, then 8, 16, 32 (the 128 KiB maximum).
    assert_eq!(
        &sizes[..5],
        &[16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB, 128 * KIB]
    );
    assert!(sizes[3..].iter().all(|&s| s <= 128 * KIB), "{sizes:?}");
    assert_eq!(
        sizes.iter().sum::<u64>(),
        4 * MIB,
        "every page read exactly once"
    );
}

#[test]
fn read_ahead_keeps_a_cpu_bound_reader_from_blocking() {
    // A fast device and 1 ms of CPU per 8 KiB: each next window arrives long before it is
    // needed, so only the first read waits for the device.
    let w = with_file(vec![reader(2 * MIB, 1, MS)], 2 * MIB);
    let log = run_params(&w, &["blockdev.mb_per_s=200", "blockdev.access=100us"], &[]);
    let blocked = log
        .records
        .iter()
        .filter(|r| {
            matches!(
                r,
                Record::Switch {
                    prev: Some(_),
                    reason: LeaveReason::Blocked,
                    ..
                }
            )
        })
        .count();
    assert_eq!(blocked, 1, "blocked {blocked} times");
}

#[test]
fn a_second_pass_is_served_from_the_page_cache() {
    let log = run_params(&with_file(vec![reader(MIB, 2, 10 * US)], MIB), &[], &[]);
    let first_pass_end = log
        .records
        .iter()
        .find_map(|r| match *r {
            Record::LoopDone { t, .. } => Some(t),
            _ => None,
        })
        .unwrap();
    let io_times: Vec<Nanos> = log
        .records
        .iter()
        .filter_map(|r| match *r {
            Record::Io { t, .. } => Some(t),
            _ => None,
        })
        .collect();
    assert!(!io_times.is_empty());
    assert!(
        io_times.iter().all(|&t| t <= first_pass_end),
        "{io_times:?}"
    );
}

#[test]
fn eimos_extends_the_topmost_process_read_ahead_eightfold() {
    let mut top = reader(16 * MIB, 1, 10 * US);
    top.oom_adj = Some(0);
    let w = with_file(vec![top], 16 * MIB);
    let max = |log: &VecSink| request_sizes(log).into_iter().max().unwrap();
    assert_eq!(max(&run_params(&w, &[], &[])), 128 * KIB);
    assert_eq!(max(&run_params(&w, &[], &["eimos"])), MIB);
    assert_eq!(
        max(&run_params(&w, &["eimos.readahead=16"], &["eimos"])),
        2 * MIB
    );
    // A process that is not the topmost keeps the default.
    let mut hidden = reader(16 * MIB, 1, 10 * US);
    hidden.oom_adj = Some(7);
    let w = with_file(vec![hidden], 16 * MIB);
    assert_eq!(max(&run_params(&w, &[], &["eimos"])), 128 * KIB);
}

#[test]
fn bad_files_and_reads_are_located_errors() {
    let ok = r#"
[[file]]
name = "data"
size = "1MiB"

[[task]]
name = "r"
events = [{ read = "data", bytes = "8KiB" }]
"#;
    let w = workload::native::parse(ok, "t.toml").unwrap();
    assert_eq!(w.files[0].size, MIB);
    let cases = [
        (
            ok.replace("read = \"data\"", "read = \"nope\""),
            "t.toml:6:",
            "not declared",
        ),
        (
            ok.replace(", bytes = \"8KiB\"", ""),
            "t.toml:8:",
            "needs `bytes`",
        ),
        (ok.replace("\"1MiB\"", "0"), "t.toml:2:", "size is zero"),
        (
            ok.replace("\"1MiB\"", "\"1 furlong\""),
            "t.toml:4:",
            "furlong",
        ),
    ];
    for (text, at, what) in cases {
        let e = workload::native::parse(&text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(at) && e.contains(what), "{at} {what}: {e}");
    }
    let e = Sim::new(&w, {
        let mut c = config("cfs", 1, SEC);
        c.params = Params::parse(["blockdev.speed=3"]).unwrap();
        c
    })
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("blockdev.speed"), "{e}");
}
