//! `[audio]`: audible counts as in front (issue 32, as Windows 11 does). A process playing sound
//! through PipeWire is a second, lower class of foreground: the `uxsched` mode protects the
//! wake-ups of its audio thread (`threads.rs`) and raises nothing else of it; when its stream
//! pauses or closes, or it exits, that ends.
//!
//! The users are those of the machine's local sessions as the `auto` source's discovery finds
//! them (`sources/auto/`: logind, else the X and Wayland sockets), less root and the sessions
//! logind says are not active (a switched-away user's audio is not heard). Each such user's
//! PipeWire (`/run/user/<uid>/pipewire-0`, served by a process of that uid: `SO_PEERCRED`) is
//! followed by `follow.rs`; the union of the processes playing goes to the daemon as
//! [`Event::Audible`] whenever it changes.
//!
//! Bad input (garbage from `pw-dump`, a server that goes away, a stream whose process is root's,
//! pid 1 or another user's) is logged at most once a minute per kind and changes nothing.

mod follow;
pub mod pipewire;
pub mod threads;

use crate::sources::auto::{self, procs, Discovery};
use crate::types::{AppId, Event};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// How often the users and their PipeWire servers are looked for again.
pub const RESCAN: Duration = Duration::from_secs(5);
/// PipeWire's socket in a user's runtime directory.
pub const SOCKET: &str = "pipewire-0";
/// At most one warning per kind of problem per this period; the rest go to the debug log.
const COMPLAIN_EVERY: Duration = Duration::from_secs(60);

/// What a follower tells the audio thread.
pub enum Msg {
    /// Follower `id`'s user's processes playing now (admitted, sorted).
    Set(u64, Vec<AppId>),
    /// Follower `id` ended.
    Ended(u64),
}

/// Start the audio source: discovery under `roots` every [`RESCAN`], a follower per user with
/// a PipeWire server.
pub fn spawn(roots: auto::Roots, events: Sender<Event>) -> std::io::Result<()> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("uxsched-audio".into())
        .spawn(move || {
            let mut a = Audio {
                roots,
                events,
                inbox: tx,
                running: BTreeMap::new(),
                next_id: 0,
                sets: BTreeMap::new(),
                sent: Vec::new(),
            };
            a.run(&rx);
            for (_, stop) in a.running.values() {
                stop.stop();
            }
        })?;
    Ok(())
}

struct Audio {
    roots: auto::Roots,
    events: Sender<Event>,
    inbox: Sender<Msg>,
    /// Per user: its follower's id and how to stop it.
    running: BTreeMap<u32, (u64, follow::Stop)>,
    next_id: u64,
    sets: BTreeMap<u32, Vec<AppId>>,
    sent: Vec<AppId>,
}

impl Audio {
    fn run(&mut self, rx: &Receiver<Msg>) {
        let mut discovery = Discovery::new(self.roots.clone());
        loop {
            let found = discovery.run(&auto::Options::default());
            let users = users(
                found
                    .sessions
                    .iter()
                    .map(|s| (s.user.as_ref().map(|u| u.0), s.active)),
            );
            self.reconcile(&users);
            let next = Instant::now() + RESCAN;
            loop {
                match rx.recv_timeout(next.saturating_duration_since(Instant::now())) {
                    Ok(Msg::Set(id, set)) => {
                        if let Some(uid) = self.user_of(id) {
                            self.sets.insert(uid, set);
                        }
                    }
                    Ok(Msg::Ended(id)) => {
                        if let Some(uid) = self.user_of(id) {
                            self.running.remove(&uid);
                            self.sets.remove(&uid);
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
                if self.tell().is_err() {
                    return;
                }
            }
            if self.tell().is_err() {
                return;
            }
        }
    }

    /// Follow the PipeWire of each user in `users` that runs one; stop following the others.
    fn reconcile(&mut self, users: &BTreeSet<u32>) {
        let gone: Vec<u32> = self
            .running
            .keys()
            .filter(|u| !users.contains(u))
            .copied()
            .collect();
        for uid in gone {
            if let Some((_, stop)) = self.running.remove(&uid) {
                tracing::info!(
                    uid,
                    "audio: the user's session is gone; its PipeWire is no longer followed"
                );
                stop.stop();
            }
            self.sets.remove(&uid);
        }
        for &uid in users {
            if self.running.contains_key(&uid) {
                continue;
            }
            let runtime = self.roots.runtime.join(uid.to_string());
            let Some(gid) = owned_dir(&runtime, uid) else {
                continue;
            };
            match server_of(&runtime) {
                Ok(server) if server == uid => {}
                Ok(server) => {
                    tracing::warn!(
                        uid,
                        server,
                        "audio: {}/{SOCKET} is served by another user: not followed",
                        runtime.display()
                    );
                    continue;
                }
                Err(_) => continue, // no PipeWire running for this user
            }
            let stop = follow::Stop::default();
            let id = self.next_id;
            self.next_id += 1;
            let inst = follow::Instance {
                id,
                uid,
                gid,
                runtime,
            };
            match follow::spawn(inst, stop.clone(), self.inbox.clone()) {
                Ok(()) => {
                    self.running.insert(uid, (id, stop));
                }
                Err(e) => tracing::warn!(uid, "audio: cannot start a follower thread: {e}"),
            }
        }
    }

    /// The user whose running follower is `id` (`None`: one stopped already).
    fn user_of(&self, id: u64) -> Option<u32> {
        self.running
            .iter()
            .find(|(_, (i, _))| *i == id)
            .map(|(uid, _)| *uid)
    }

    /// Send the union of the users' audible processes when it changed.
    fn tell(&mut self) -> Result<(), mpsc::SendError<Event>> {
        let now = normal(self.sets.values().flatten().copied().collect());
        if now != self.sent {
            self.sent.clone_from(&now);
            self.events.send(Event::Audible { apps: now })?;
        }
        Ok(())
    }
}

/// The users of the sessions found (each session's user, if told, and logind's `Active`): not
/// root, not a session logind says is inactive.
pub fn users(sessions: impl Iterator<Item = (Option<u32>, Option<bool>)>) -> BTreeSet<u32> {
    sessions
        .filter(|(_, active)| *active != Some(false))
        .filter_map(|(uid, _)| uid)
        .filter(|&uid| uid != 0)
        .collect()
}

/// The group of `dir` when it is a directory of `uid` (a runtime directory).
fn owned_dir(dir: &Path, uid: u32) -> Option<u32> {
    let m = std::fs::symlink_metadata(dir).ok()?;
    (m.is_dir() && m.uid() == uid).then_some(m.gid())
}

/// The uid that serves `runtime/pipewire-0` (`SO_PEERCRED`); Err when nobody listens.
pub(crate) fn server_of(runtime: &Path) -> std::io::Result<u32> {
    let socket = runtime.join(SOCKET);
    let listening = procs::listening();
    if !procs::is_listened(&listening, &socket) {
        return Err(std::io::ErrorKind::NotFound.into());
    }
    procs::listener_in(&socket, &listening).map(|(_, uid)| uid)
}

/// A set of processes in one order, each once.
fn normal(mut apps: Vec<AppId>) -> Vec<AppId> {
    apps.sort_by_key(|a| (a.pid, a.start));
    apps.dedup();
    apps
}

/// Logs bad input at most once per [`COMPLAIN_EVERY`] per kind, counting the rest, so a server
/// or client that sends garbage in a loop cannot flood the journal.
#[derive(Default)]
pub(crate) struct Complaints {
    said: HashMap<&'static str, (Instant, u32)>,
}

impl Complaints {
    pub(crate) fn say(&mut self, kind: &'static str, msg: &str) {
        let now = Instant::now();
        if let Some((last, quiet)) = self.said.get_mut(kind) {
            if now.duration_since(*last) < COMPLAIN_EVERY {
                *quiet += 1;
                tracing::debug!("audio: {msg}");
                return;
            }
        }
        let more = match self.said.get(kind).map_or(0, |s| s.1) {
            0 => String::new(),
            n => format!(" ({n} more like it in the last minute, not shown)"),
        };
        tracing::warn!(
            "audio: {msg}{more}; nothing is changed on its word (if it repeats with a PipeWire \
             that works, report it with `pw-dump --version`)"
        );
        self.said.insert(kind, (now, 0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_are_the_sessions_told_active_and_not_roots() {
        let sessions = [
            (Some(1000), Some(true)),
            (Some(1001), None),
            (Some(1002), Some(false)),
            (Some(0), Some(true)),
            (None, Some(true)),
            (Some(1000), None),
        ];
        assert_eq!(users(sessions.into_iter()), BTreeSet::from([1000, 1001]));
    }

    #[test]
    fn complaints_are_rate_limited_per_kind() {
        let mut c = Complaints::default();
        c.say("a", "first");
        c.say("a", "second");
        c.say("a", "third");
        assert_eq!(c.said["a"].1, 2);
        c.say("b", "other");
        assert_eq!(c.said["b"].1, 0);
        c.said.get_mut("a").unwrap().0 -= COMPLAIN_EVERY;
        c.say("a", "fourth");
        assert_eq!(c.said["a"].1, 0);
    }

    #[test]
    fn a_runtime_directory_without_pipewire_has_no_server() {
        let dir = tempfile::tempdir().unwrap();
        assert!(server_of(dir.path()).is_err());
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        assert!(owned_dir(dir.path(), me).is_some());
        assert!(owned_dir(dir.path(), me + 1).is_none());
        assert!(owned_dir(&dir.path().join("nope"), me).is_none());
    }
}
