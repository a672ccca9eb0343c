//! Random SIGKILLs of the daemon during focus churn across 8 apps, in one mode: after each kill
//! the daemon is restarted on the same journal (it restores what the killed one left); at the
//! end it is stopped, and every task of every app's session must look as it did before.
//! Half-way, one forking app is killed while focused: its children stay in its session.

use super::apps::{App, AppKind};
use super::daemon::Daemon;
use super::settings::{self, Leftover};
use anyhow::Result;
use rand::Rng;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, serde::Serialize)]
pub struct KillsResult {
    pub mode: String,
    pub kills: u32,
    pub focus_requests: u64,
    /// Tasks forked by `forker` apps while boosted (each must end up unboosted too).
    pub children_forked: usize,
    /// Settings left changed after the final stop, on any task of any app's session.
    pub leftovers: Vec<Leftover>,
    /// Cgroup CPU weights that differ from before, and daemon groups still present.
    pub cgroup_leftovers: Vec<String>,
    /// Journal rows the final stop left behind.
    pub journal_rows: usize,
    pub daemon_crashes: u32,
}

pub fn run(
    exe: &Path,
    scratch: &Path,
    mode: &str,
    kills: u32,
    rng: &mut impl Rng,
) -> Result<KillsResult> {
    let mut apps = App::spawn_round(exe)?;
    let weights_before = apps
        .iter()
        .map(App::cgroup_weights)
        .collect::<Result<Vec<_>, _>>()?;
    let mut daemon = Daemon::new(exe, &scratch.join(format!("kills-{mode}")))?;
    let mut focus_requests = 0;
    for i in 0..kills {
        daemon.start(mode)?;
        if i == kills / 2 {
            let app = apps.iter_mut().find(|a| a.kind == AppKind::Forker).unwrap();
            let _ = daemon.focus(Some(app.pid));
            focus_requests += 1;
            std::thread::sleep(Duration::from_millis(300)); // boosted; it forks
            app.kill_main();
        }
        // Churn for 50–400 ms, a focus change every 5–40 ms, then SIGKILL at a random instant.
        let until = Instant::now() + Duration::from_millis(rng.gen_range(50..400));
        while Instant::now() < until {
            let app = &apps[rng.gen_range(0..apps.len())];
            let _ = daemon.focus(Some(app.pid));
            focus_requests += 1;
            std::thread::sleep(Duration::from_millis(rng.gen_range(5..40)));
        }
        daemon.alive();
        daemon.kill();
    }
    // The last restart restores the last kill's leftovers; SIGTERM restores the rest.
    daemon.start(mode)?;
    daemon.stop()?;
    let mut cgroup_leftovers = settings::leftover_groups(&daemon.cgroup_name)?;
    for (a, before) in apps.iter().zip(&weights_before) {
        for (file, now) in a.cgroup_weights()? {
            match before.get(&file) {
                Some(b) if *b == now => {}
                b => cgroup_leftovers.push(format!("{file}: {b:?} → {now}")),
            }
        }
    }
    let children_forked = apps
        .iter()
        .filter(|a| a.kind == AppKind::Forker)
        .map(|a| a.processes().iter().filter(|&&p| p != a.pid).count())
        .sum();
    Ok(KillsResult {
        mode: mode.to_owned(),
        kills,
        focus_requests,
        children_forked,
        leftovers: apps.iter().flat_map(App::leftovers).collect(),
        cgroup_leftovers,
        journal_rows: daemon.journal_rows()?,
        daemon_crashes: daemon.crashes,
    })
}
