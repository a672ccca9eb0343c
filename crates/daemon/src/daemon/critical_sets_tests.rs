use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

const NETWORK: &str = "chromium --type=utility --utility-sub-type=network.mojom.NetworkService";

/// A browser's processes by pid: 1 the browser, 2 and 4 renderers, 3 the network service.
fn browser(task: &TaskId) -> Option<ProcessKind> {
    Some(ProcessKind::of_role(match task.pid {
        1 => "chromium",
        2 | 4 => "chromium --type=renderer",
        3 => NETWORK,
        _ => return None,
    }))
}

fn member(tid: i32, pid: i32, comm: &str, kind: CriticalKind) -> Critical {
    Critical {
        task: TaskId {
            tid,
            pid,
            start: 100 + tid as u64,
        },
        comm: comm.into(),
        kind,
        provisional: false,
        since_ns: 0,
    }
}

fn app(tid: i32, comm: &str) -> Critical {
    member(tid, 1, comm, CriticalKind::App)
}

fn partner(tid: i32, pid: i32, comm: &str) -> Critical {
    member(tid, pid, comm, CriticalKind::Partner)
}

#[test]
fn a_helpers_kind_is_its_type_and_sub_type() {
    let k = ProcessKind::of_role(NETWORK);
    assert_eq!(k.label, NETWORK);
    assert_eq!(k.helper_type.as_deref(), Some("utility"));
    assert_eq!(k.sub_type.as_deref(), Some("network.mojom.NetworkService"));
    let plain = ProcessKind::of_role("Xvfb");
    assert_eq!((plain.helper_type, plain.sub_type), (None, None));
    let renderer = ProcessKind::of_role("chromium --type=renderer");
    assert_eq!(renderer.helper_type.as_deref(), Some("renderer"));
    assert_eq!(renderer.sub_type, None);
}

/// On a real process started with a helper's arguments, through /proc; a thread identity that
/// is no longer the process's (another start time: a recycled pid) reads as nothing.
#[test]
fn a_live_processes_kind_is_read_from_its_command_line() {
    let mut child = std::process::Command::new("sh")
        .args(["-c", "sleep 5; :", "sh", "--type=utility"])
        .arg("--utility-sub-type=network.mojom.NetworkService")
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // The parent may run again before exec has set the new command line (it reads empty).
    let cmdline = format!("/proc/{pid}/cmdline");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while std::fs::read(&cmdline).unwrap().is_empty() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let id = uxsched_os::identity::task_id(pid).unwrap();
    let k = read_kind(&id);
    let recycled = read_kind(&TaskId {
        start: id.start + 1,
        ..id
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let k = k.expect("the child's kind");
    assert_eq!(k.helper_type.as_deref(), Some("utility"), "{k:?}");
    assert_eq!(
        k.sub_type.as_deref(),
        Some("network.mojom.NetworkService"),
        "{k:?}"
    );
    assert!(k
        .label
        .ends_with(" --type=utility --utility-sub-type=network.mojom.NetworkService"));
    assert_eq!(recycled, None);
}

#[test]
fn threads_and_processes_per_episode_are_summarised_with_the_models_percentiles() {
    let mut s = CriticalSets::with_reader(browser);
    assert_eq!(s.summary(), None);
    // Episode i holds i threads: the browser's UI thread, a renderer's, and i - 2 kernel workers
    // (threads of no process).
    for i in 2..=101 {
        let mut held = vec![app(10, "CrBrowserMain"), partner(20, 2, "Compositor")];
        held.extend((0..i - 2).map(|k| {
            member(
                1000 + k,
                1000 + k,
                "kworker/0:1",
                CriticalKind::KernelWorker,
            )
        }));
        s.record(&held, 1);
    }
    let sum = s.summary().unwrap();
    assert_eq!((sum.episodes, sum.episodes_total), (100, 100));
    let v: Vec<u64> = (2..=101).collect();
    let at = |p| uxsched_model::stats::nearest_rank(&v, p);
    assert_eq!(
        (sum.threads_p50, sum.threads_p95, sum.threads_max),
        (at(500), at(950), 101)
    );
    assert_eq!((sum.procs_p50, sum.procs_max), (2, 2));
    let kernel = sum.kinds.iter().find(|k| k.kind == "kernel").unwrap();
    assert_eq!(
        (kernel.whose.as_str(), kernel.episodes),
        ("kernel-worker", 99)
    );
}

#[test]
fn the_table_says_which_kinds_held_which_threads_in_how_many_episodes() {
    let mut s = CriticalSets::with_reader(browser);
    let ui = app(10, "CrBrowserMain");
    let io = app(11, "Chrome_IOThread");
    let (main, comp) = (partner(20, 2, "chromium"), partner(21, 2, "Compositor"));
    let other = partner(40, 4, "Compositor");
    let net = partner(30, 3, "NetworkService");
    s.record(&[ui.clone(), io.clone(), main.clone(), comp.clone()], 1);
    s.record(&[ui.clone(), comp.clone(), net.clone()], 1);
    // Two episodes resolved at once: the set counts for both.
    s.record(&[ui.clone(), comp.clone(), other.clone()], 2);
    let sum = s.summary().unwrap();
    assert_eq!((sum.episodes, sum.procs_p50, sum.procs_max), (4, 3, 3));
    let find = |kind: &str| sum.kinds.iter().find(|k| k.kind == kind).unwrap();
    let b = find("chromium");
    assert_eq!((b.whose.as_str(), b.episodes, b.members), ("app", 4, 5));
    let names = vec![
        ("CrBrowserMain".to_owned(), 4),
        ("Chrome_IOThread".to_owned(), 1),
    ];
    assert_eq!(b.threads, names);
    let r = find("chromium --type=renderer");
    assert_eq!((r.whose.as_str(), r.episodes, r.members), ("partner", 4, 7));
    assert_eq!(r.threads[0], ("Compositor".to_owned(), 6));
    let per_pid: Vec<(i32, u64, u64)> = (r.processes.iter())
        .map(|p| (p.pid, p.episodes, p.members))
        .collect();
    assert_eq!(per_pid, [(2, 4, 5), (4, 2, 2)]);
    let n = find(NETWORK);
    assert_eq!((n.episodes, n.members), (1, 1));
    assert_eq!(n.sub_type.as_deref(), Some("network.mojom.NetworkService"));
    // Most episodes first.
    assert_eq!(sum.kinds.last().unwrap().kind, NETWORK);
}

static READS: AtomicUsize = AtomicUsize::new(0);

fn counted(task: &TaskId) -> Option<ProcessKind> {
    READS.fetch_add(1, Ordering::SeqCst);
    browser(task)
}

#[test]
fn a_member_threads_process_is_read_once_and_a_gone_one_is_named_so() {
    let mut s = CriticalSets::with_reader(counted);
    let held = [
        app(10, "CrBrowserMain"),
        partner(20, 2, "Compositor"),
        partner(50, 9, "x"),
    ];
    for _ in 0..50 {
        s.record(&held, 1);
    }
    assert_eq!(READS.load(Ordering::SeqCst), 3);
    let sum = s.summary().unwrap();
    assert!(sum
        .kinds
        .iter()
        .any(|k| k.kind == "(exited)" && k.episodes == 50));
}

#[test]
fn the_history_keeps_the_latest_episodes_and_reuses_names_it_dropped() {
    let mut s = CriticalSets::with_reader(browser);
    for _ in 0..10 {
        s.record(&[partner(30, 3, "NetworkService")], 1);
    }
    // A distinct thread name per episode: more names than the table holds, over the history.
    for i in 0..EPISODES {
        s.record(&[app(10, &format!("t{i}"))], 1);
    }
    let sum = s.summary().unwrap();
    assert_eq!(sum.episodes, EPISODES as u64);
    assert_eq!(sum.episodes_total, EPISODES as u64 + 10);
    assert!(
        sum.kinds.iter().all(|k| k.kind != NETWORK),
        "{:?}",
        sum.kinds
    );
    s.record(&[app(10, "newest")], 1);
    let sum = s.summary().unwrap();
    let b = &sum.kinds[0];
    assert_eq!((b.episodes, b.threads.len()), (EPISODES as u64, EPISODES));
    assert!(b.threads.iter().any(|(n, c)| n == "newest" && *c == 1));
    assert!(b.threads.iter().all(|(n, _)| n != "t0"));
}
