//! The Chromium judgement on recorded member lists: the process kinds of Chromium 156 as the
//! daemon names them (recorded with the tracker; docs/tracker.md, the Chromium section, names
//! the recording).

use super::*;
use uxsched_client::control::ProcessStat;

fn kind(kind: &str, whose: &str, procs: &[(i32, u64, u64)], threads: &[(&str, u64)]) -> KindStat {
    let arg = |key: &str| {
        kind.split(' ')
            .find_map(|a| a.strip_prefix(key))
            .map(str::to_owned)
    };
    KindStat {
        kind: kind.into(),
        whose: whose.into(),
        helper_type: arg("--type="),
        sub_type: arg("--utility-sub-type="),
        episodes: procs.iter().map(|p| p.1).max().unwrap_or(0),
        members: procs.iter().map(|p| p.2).sum(),
        threads: threads.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
        processes: (procs.iter())
            .map(|&(pid, episodes, members)| ProcessStat {
                pid,
                episodes,
                members,
            })
            .collect(),
    }
}

const NETWORK: &str = "chromium --type=utility --utility-sub-type=network.mojom.NetworkService";

/// 48 episodes: the frame path's processes, the X server, kernel workers, and what must not be
/// there — the network service, a zygote, the crashpad handler and a second renderer.
fn sets() -> CriticalSets {
    CriticalSets {
        episodes: 48,
        episodes_total: 48,
        threads_p50: 9,
        threads_p95: 11,
        threads_max: 13,
        procs_p50: 4,
        procs_max: 5,
        kinds: vec![
            kind(
                "chromium",
                "app",
                &[(7227, 48, 130)],
                &[
                    ("chromium", 48),
                    ("Chrome_IOThread", 48),
                    ("ThreadPoolForeg", 34),
                ],
            ),
            kind("Xvfb", "partner", &[(31072, 48, 48)], &[("Xvfb", 48)]),
            kind(
                "chromium --type=renderer",
                "partner",
                &[(7317, 37, 140), (7319, 2, 2)],
                &[("Compositor", 37)],
            ),
            kind(
                "chromium --type=gpu-process",
                "partner",
                &[(7274, 13, 26)],
                &[("VizCompositorTh", 13)],
            ),
            kind(
                "kernel",
                "kernel-worker",
                &[(51, 5, 5)],
                &[("kworker/0:1", 5)],
            ),
            kind(
                NETWORK,
                "partner",
                &[(7276, 3, 3)],
                &[("NetworkService", 3)],
            ),
            kind(
                "chromium --type=zygote",
                "partner",
                &[(7249, 1, 1)],
                &[("chromium", 1)],
            ),
            kind(
                "chrome_crashpad_handler",
                "partner",
                &[(7244, 1, 1)],
                &[("chrome_crashpad", 1)],
            ),
        ],
    }
}

#[test]
fn each_kind_is_judged_by_its_place_on_the_frame_path() {
    let c = sets();
    let verdict = |name: &str| judge(c.kinds.iter().find(|k| k.kind == name).unwrap());
    assert_eq!(verdict("chromium"), Verdict::FramePath);
    assert_eq!(verdict("chromium --type=renderer"), Verdict::FramePath);
    assert_eq!(verdict("chromium --type=gpu-process"), Verdict::FramePath);
    assert_eq!(verdict(NETWORK), Verdict::FalsePositive);
    assert_eq!(verdict("chromium --type=zygote"), Verdict::FalsePositive);
    assert_eq!(verdict("chrome_crashpad_handler"), Verdict::FalsePositive);
    assert_eq!(verdict("Xvfb"), Verdict::NotChromium);
    assert_eq!(verdict("kernel"), Verdict::NotChromium);
    let broker = kind("chromium --type=broker", "partner", &[], &[]);
    let storage = kind(
        "chromium --type=utility --utility-sub-type=storage.mojom.StorageService",
        "partner",
        &[],
        &[],
    );
    assert_eq!(judge(&broker), Verdict::FalsePositive);
    assert_eq!(judge(&storage), Verdict::FalsePositive);
}

#[test]
fn a_run_counts_its_false_positives_and_the_renderer_that_is_not_the_pages() {
    let v = judge_run("uxsched", 0, &sets());
    assert_eq!(v.members, 130 + 48 + 142 + 26 + 5 + 3 + 1 + 1);
    assert_eq!((v.renderers, v.page_renderer), (2, Some(7317)));
    // The second renderer's 2, the network service's 3, the zygote's and crashpad's 1 each.
    assert_eq!(v.false_positives, 7);
    assert!(v.false_kinds.contains(&(
        "chromium --type=renderer (pid 7319, not the page's)".into(),
        2
    )));
    assert!(v.false_kinds.contains(&(NETWORK.into(), 3)));
    assert!((v.share_pct() - 700.0 / 356.0).abs() < 1e-9);
    // Without them, none.
    let mut clean = sets();
    clean.kinds.retain(|k| judge(k) != Verdict::FalsePositive);
    clean.kinds[2].processes.truncate(1);
    let v = judge_run("uxsched", 0, &clean);
    assert_eq!((v.false_positives, v.renderers), (0, 1));
}

#[test]
fn the_block_shows_shares_verdicts_names_and_each_runs_false_positives() {
    let record = |rep, sets: Option<CriticalSets>| RunRecord {
        mode: ModeName::Uxsched,
        rep,
        samples_ms: vec![1.0],
        extras: Default::default(),
        context_switches: 0,
        wall_s: 1.0,
        background: None,
        critical_sets: sets,
    };
    let idle = RunRecord {
        mode: ModeName::Idle,
        ..record(0, None)
    };
    let records = [idle, record(0, Some(sets())), record(1, Some(sets()))];
    let text = block(&records, &[ModeName::Idle, ModeName::Uxsched]);
    assert!(!text.contains("idle"), "{text}");
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_default()
            .to_owned()
    };
    let browser = line("chromium (app)");
    assert!(browser.starts_with("  100.0 %"), "{text}");
    assert!(
        browser.contains("[frame path]") && browser.contains("Chrome_IOThread×96"),
        "{text}"
    );
    assert!(line("--type=zygote").contains("[FALSE POSITIVE]"), "{text}");
    assert!(
        line("Xvfb (partner)").contains("[not Chromium's]"),
        "{text}"
    );
    let run2 = line("run 2:");
    assert!(
        run2.contains("48 episodes, threads p50 9 p95 11 max 13, processes p50 4 max 5"),
        "{text}"
    );
    assert!(
        run2.contains("false positives 7 of 356 members (2.0 %)"),
        "{text}"
    );
    assert!(
        run2.contains("renderers in the sets: 2 (the page's taken to be pid 7317"),
        "{text}"
    );
    assert_eq!(verdicts(&records).len(), 2);
}
