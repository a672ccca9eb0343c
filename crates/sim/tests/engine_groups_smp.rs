//! cgroups (shares, nesting, bandwidth), multi-core balancing and affinity, causality chains.

mod common;
use common::*;
use uxsched_model::{MS, SEC};
use uxsched_sim::log::Record;
use uxsched_sim::workload::{Bandwidth, Event, GroupSpec};

fn group(path: &str, shares: u64, bandwidth: Option<Bandwidth>) -> GroupSpec {
    GroupSpec {
        path: path.into(),
        shares,
        bandwidth,
    }
}

fn in_group(mut t: uxsched_sim::workload::TaskSpec, g: &str) -> uxsched_sim::workload::TaskSpec {
    t.group = Some(g.into());
    t
}

#[test]
fn android_background_group_gets_52_of_1076() {
    for sched in ["cfs", "eevdf"] {
        let mut w = workload(vec![
            in_group(hog("fg", nice(0)), "fg"),
            in_group(hog("bg", nice(0)), "bg"),
        ]);
        w.groups = vec![group("fg", 1024, None), group("bg", 52, None)];
        let t = cpu_time(&run(&w, config(sched, 1, 20 * SEC)));
        let bg = t[1] as f64 / (t[0] + t[1]) as f64;
        let expect = 52.0 / 1076.0;
        assert!(
            (bg / expect - 1.0).abs() < 0.05,
            "{sched}: bg share {bg}, expected {expect}"
        );
    }
}

#[test]
fn nested_groups_split_level_by_level() {
    // root: hog r vs group apps (1024); apps: a and b (1024 each) → r 1/2, a 1/4, b 1/4.
    let mut w = workload(vec![
        hog("r", nice(0)),
        in_group(hog("a", nice(0)), "apps/a"),
        in_group(hog("b", nice(0)), "apps/b"),
    ]);
    w.groups = vec![
        group("apps", 1024, None),
        group("apps/a", 1024, None),
        group("apps/b", 1024, None),
    ];
    for sched in ["cfs", "eevdf"] {
        let t = cpu_time(&run(&w, config(sched, 1, 20 * SEC)));
        let total = (t[0] + t[1] + t[2]) as f64;
        let shares: Vec<f64> = t.iter().map(|&x| x as f64 / total).collect();
        for (got, want) in shares.iter().zip([0.5, 0.25, 0.25]) {
            assert!((got - want).abs() < 0.02, "{sched}: shares {shares:?}");
        }
    }
}

#[test]
fn bandwidth_quota_caps_a_group() {
    let mut w = workload(vec![
        in_group(hog("capped", nice(0)), "lim"),
        hog("free", nice(0)),
    ]);
    w.groups = vec![group(
        "lim",
        1024,
        Some(Bandwidth {
            quota: 20 * MS,
            period: 100 * MS,
        }),
    )];
    // Two CPUs: without the cap both hogs would get a whole CPU each.
    let log = run(&w, config("eevdf", 2, 10 * SEC));
    let t = cpu_time(&log);
    let capped = t[0] as f64 / (10 * SEC) as f64;
    assert!(
        (capped - 0.20).abs() < 0.03,
        "capped group used {capped} of a CPU"
    );
    assert!(log
        .records
        .iter()
        .any(|r| matches!(r, Record::Throttle { on: true, .. })));
}

#[test]
fn load_balancing_spreads_hogs_and_respects_affinity() {
    let mut tasks: Vec<_> = (0..4).map(|i| hog(&format!("h{i}"), nice(0))).collect();
    let mut pinned = hog("pinned", nice(0));
    pinned.affinity = Some(vec![1]);
    tasks.push(pinned);
    let log = run(&workload(tasks), config("eevdf", 2, 4 * SEC));
    let t = cpu_time(&log);
    // Five hogs on two CPUs: both CPUs busy the whole time.
    let busy: u64 = t.iter().sum();
    assert!(busy as f64 >= 0.99 * (8 * SEC) as f64, "CPUs busy {busy}");
    // The pinned task never ran anywhere but CPU 1.
    for r in &log.records {
        if let Record::Switch {
            cpu, next: Some(4), ..
        } = *r
        {
            assert_eq!(cpu, 1);
        }
    }
}

#[test]
fn idle_cpu_pulls_waiting_work() {
    // Two hogs start on an otherwise idle 2-CPU machine: each gets a CPU.
    let log = run(
        &workload(vec![hog("a", nice(0)), hog("b", nice(0))]),
        config("cfs", 2, SEC),
    );
    let t = cpu_time(&log);
    assert!(t.iter().all(|&x| x as f64 > 0.99 * SEC as f64), "{t:?}");
}

#[test]
fn interaction_chain_across_threads_measures_the_whole_response() {
    // input → ui (3 ms) → render (2 ms) → compositor ends it: 5 ms of work on an idle machine.
    let input = task(
        "input",
        nice(0),
        vec![
            Event::Sleep(20 * MS),
            Event::Begin("touch".into()),
            Event::Send("to_ui".into()),
        ],
    );
    let ui = task(
        "ui",
        nice(0),
        vec![
            Event::Recv("to_ui".into()),
            Event::Run(3 * MS),
            Event::Send("to_r".into()),
        ],
    );
    let render = task(
        "render",
        nice(0),
        vec![
            Event::Recv("to_r".into()),
            Event::Run(2 * MS),
            Event::Send("to_c".into()),
        ],
    );
    let comp = task(
        "comp",
        nice(0),
        vec![Event::Recv("to_c".into()), Event::End("touch".into())],
    );
    let log = run(
        &workload(vec![input, ui, render, comp]),
        config("eevdf", 1, SEC),
    );
    let r = responses(&log);
    assert!(r.len() >= 45, "{} interactions", r.len());
    assert!(r.iter().all(|&x| x == 5 * MS), "{:?}", &r[..5]);
}

#[test]
fn mutex_serialises_critical_sections() {
    let a = task(
        "a",
        nice(0),
        vec![
            Event::Lock("m".into()),
            Event::Run(5 * MS),
            Event::Unlock("m".into()),
        ],
    );
    let b = task(
        "b",
        nice(0),
        vec![
            Event::Lock("m".into()),
            Event::Run(5 * MS),
            Event::Unlock("m".into()),
        ],
    );
    let log = run(&workload(vec![a, b]), config("eevdf", 2, SEC));
    // With the lock held 100 % of the time by one of them, the two together use one CPU.
    let t = cpu_time(&log);
    let total = (t[0] + t[1]) as f64 / SEC as f64;
    assert!((total - 1.0).abs() < 0.02, "CPU used {total}");
}

/// Balancing by load (PELT), not by task count: a nice −10 hog (weight 9548) and four nice-0
/// hogs on two CPUs end with the heavy one alone and the four together, as the kernel's
/// `migrate_load` does — counting tasks, three against two is balanced and the two nice-0 hogs
/// beside the heavy one get 9 % of a CPU each.
#[test]
fn a_busy_cpu_pulls_by_load_so_a_heavy_task_ends_alone() {
    let mut tasks = vec![hog("heavy", nice(-10))];
    tasks.extend((0..4).map(|i| hog(&format!("h{i}"), nice(0))));
    let t = cpu_time(&run(&workload(tasks), config("eevdf", 2, 4 * SEC)));
    let d = (4 * SEC) as f64;
    assert!(t[0] as f64 > 0.95 * d, "heavy ran {} of {d}", t[0]);
    for (i, &x) in t[1..].iter().enumerate() {
        assert!(x as f64 > 0.2 * d, "h{i} ran {x} of {d}: {t:?}");
    }
}
