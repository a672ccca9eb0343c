//! The processes playing sound (`sources/audio/`), as the loop keeps them: their audio threads
//! join every pass's state (`State::audible`), which the `uxsched` mode protects; when a stream
//! stops, or its process exits, its threads leave the desired settings and the reconciler
//! restores them.

use crate::types::AppId;
use std::sync::mpsc::Sender;
use uxsched_os::identity::TaskId;

/// Start the audio source when `[audio] enable`; say why not otherwise.
pub(super) fn start(cfg: &crate::config::Config, tx: &Sender<crate::types::Event>) {
    if !cfg.audio.enable {
        return;
    }
    let roots = crate::sources::auto::Roots::default();
    if let Err(e) = crate::sources::audio::spawn(roots, tx.clone()) {
        tracing::warn!(
            "the audio source could not start ({e}): playing processes are not protected"
        );
    }
}

impl super::Daemon {
    /// The audio source's new set of processes playing (each checked still alive: a pid that
    /// exited since is dropped, never taken for its successor).
    pub(super) fn audible_seen(&mut self, apps: Vec<AppId>) {
        let apps: Vec<AppId> = apps.into_iter().filter(AppId::alive).collect();
        if apps != self.audible {
            tracing::info!(
                pids = ?apps.iter().map(|a| a.pid).collect::<Vec<_>>(),
                "audible processes"
            );
            self.audible = apps;
            self.dirty = true;
        }
    }

    /// The audio threads of the processes playing now (none of the app in front: its own
    /// threads get more).
    pub(super) fn audible_threads(&self) -> Vec<TaskId> {
        self.audible
            .iter()
            .filter(|a| Some(a.pid) != self.focus.map(|f| f.pid))
            .flat_map(|a| crate::sources::audio::threads::of(a.pid, a.start))
            .collect()
    }

    /// `status`: each process playing, with its audio threads (`pid comm: threads …`).
    pub(super) fn audible_status(&self) -> Vec<String> {
        self.audible
            .iter()
            .filter(|a| a.alive())
            .map(|a| {
                let comm = uxsched_os::identity::stat(a.pid)
                    .map(|s| s.comm)
                    .unwrap_or_else(|_| "(exited)".into());
                let tids: Vec<String> = crate::sources::audio::threads::of(a.pid, a.start)
                    .iter()
                    .map(|t| t.tid.to_string())
                    .collect();
                let threads = match tids.as_slice() {
                    [] => "no audio thread told apart (none raised)".to_owned(),
                    t => format!("audio thread {}", t.join(", ")),
                };
                format!("{} {comm}: {threads}", a.pid)
            })
            .collect()
    }
}
