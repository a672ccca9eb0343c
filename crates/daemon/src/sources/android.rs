//! The Android source: the top app is the process in the `top-app` cpuset whose
//! `oom_score_adj` is 0 (ActivityManager's FOREGROUND_APP_ADJ). Without a readable top-app
//! cpuset, the app-uid (≥ 10000) process at adj 0 is taken. Polled: neither procfs nor the
//! cpuset files notify on change. Both roots are configurable for fixtures.

use crate::types::Event;

use super::{Owner, Reporter};
use crate::types::SourceName;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::time::Duration;

/// First uid of Android application processes (`Process.FIRST_APPLICATION_UID`).
const FIRST_APPLICATION_UID: u32 = 10_000;

fn read_trim(p: &Path) -> Option<String> {
    uxsched_os::procfs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_owned())
}

fn adj(proc_root: &Path, pid: i32) -> Option<i32> {
    read_trim(&proc_root.join(pid.to_string()).join("oom_score_adj"))?
        .parse()
        .ok()
}

fn uid(proc_root: &Path, pid: i32) -> Option<u32> {
    let status =
        uxsched_os::procfs::read_to_string(proc_root.join(pid.to_string()).join("status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The top-app's pid now, if any.
pub fn top_app(proc_root: &Path, cpuset_root: &Path) -> Option<i32> {
    let top: Option<Vec<i32>> = ["top-app/cgroup.procs", "top-app/tasks"]
        .iter()
        .find_map(|f| read_trim(&cpuset_root.join(f)))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect());
    let candidates: Vec<i32> = match top {
        Some(pids) => pids,
        None => std::fs::read_dir(proc_root)
            .ok()?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter(|&p| uid(proc_root, p).is_some_and(|u| u >= FIRST_APPLICATION_UID))
            .collect(),
    };
    // The most recently started (highest pid) adj-0 candidate: after an app switch the old
    // top app can linger in the cpuset for a moment.
    candidates
        .into_iter()
        .filter(|&p| adj(proc_root, p) == Some(0))
        .max()
}

/// Poll every `period` and send a focus event whenever the top app changes.
pub fn spawn(
    proc_root: PathBuf,
    cpuset_root: PathBuf,
    period: Duration,
    events: Sender<Event>,
) -> std::io::Result<()> {
    // The top-app cpuset and oom_score_adj are written only by the system server: any app is
    // acted on, its identity captured when it is seen.
    let owner = Ok(Owner { uid: 0, any: true });
    let mut reporter = Reporter::new(SourceName::Android, events);
    std::thread::Builder::new()
        .name("uxsched-android".into())
        .spawn(move || loop {
            let now = top_app(&proc_root, &cpuset_root);
            if reporter.seen(now, owner.clone()).is_err() {
                return;
            }
            std::thread::sleep(period);
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::sync::mpsc;

    fn proc_entry(root: &Path, pid: i32, adj: i32, uid: u32) {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("oom_score_adj"), format!("{adj}\n")).unwrap();
        std::fs::write(
            d.join("status"),
            format!("Name:\tx\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"),
        )
        .unwrap();
    }

    #[test]
    fn fixture_roots_give_the_top_app_and_its_changes() {
        let dir = tempfile::tempdir().unwrap();
        let (procfs, cpuset) = (dir.path().join("proc"), dir.path().join("cpuset"));
        proc_entry(&procfs, 1, -1000, 0); // init
        proc_entry(&procfs, 700, 0, 1000); // a system process at adj 0, not an app
                                           // Live processes stand for the apps: the source captures their identity from /proc.
        let mut apps: Vec<_> = (0..2)
            .map(|_| Command::new("sleep").arg("60").spawn().unwrap())
            .collect();
        let mut pids: Vec<i32> = apps.iter().map(|c| c.id() as i32).collect();
        pids.sort_unstable();
        let (fg, cached) = (pids[0], pids[1]);
        proc_entry(&procfs, fg, 0, 10_057); // the foreground app
        proc_entry(&procfs, cached, 900, 10_060); // a cached app
                                                  // No cpuset: fall back to app uids at adj 0.
        assert_eq!(top_app(&procfs, &cpuset), Some(fg));
        // With the top-app cpuset: its adj-0 member.
        std::fs::create_dir_all(cpuset.join("top-app")).unwrap();
        let members = format!("{fg}\n{cached}\n");
        std::fs::write(cpuset.join("top-app/cgroup.procs"), members).unwrap();
        assert_eq!(top_app(&procfs, &cpuset), Some(fg));

        let (tx, rx) = mpsc::channel();
        spawn(
            procfs.clone(),
            cpuset.clone(),
            Duration::from_millis(10),
            tx,
        )
        .unwrap();
        let next = || match rx.recv_timeout(Duration::from_secs(5)).unwrap() {
            Event::Focus { source, app } => {
                assert_eq!(source, SourceName::Android);
                app.map(|a| a.pid)
            }
            _ => panic!("unexpected event"),
        };
        assert_eq!(next(), Some(fg));
        // The user switches apps: the cached one comes to the front.
        proc_entry(&procfs, cached, 0, 10_060);
        proc_entry(&procfs, fg, 900, 10_057);
        assert_eq!(next(), Some(cached));
        std::fs::write(cpuset.join("top-app/cgroup.procs"), "").unwrap();
        assert_eq!(next(), None);
        for a in &mut apps {
            a.kill().unwrap();
            a.wait().unwrap();
        }
    }
}
