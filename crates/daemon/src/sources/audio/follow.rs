//! One user's PipeWire, followed with `pw-dump --monitor` run as that user: the processes whose
//! output streams are playing, each admitted for that user (`sources::admit`: the process is
//! the user's, not root's, not a system service's; its identity captured when first seen).
//!
//! `pw-dump` rather than the `pipewire` crate (pipewire-rs): it needs no build dependency
//! (libpipewire-0.3-dev, bindgen, clang) and no C library inside the daemon, it speaks the
//! user's server version whatever the daemon was built against, and it runs as the user — a
//! bug in a PipeWire client parsing the user's graph then has the user's rights, not root's.
//! Its JSON is parsed here (`pipewire.rs`), bounded, and a line the parser refuses restarts it.

use super::pipewire::{Framer, Graph, MAX_CHUNK};
use super::{Complaints, Msg};
use crate::sources::{admit, Owner};
use crate::types::AppId;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One user's PipeWire instance.
#[derive(Debug, Clone)]
pub struct Instance {
    /// Which follower this is (the audio thread ignores a stopped one's last words).
    pub id: u64,
    pub uid: u32,
    /// The runtime directory's group: `pw-dump` runs with it.
    pub gid: u32,
    /// `/run/user/<uid>`, where `pipewire-0` is.
    pub runtime: PathBuf,
}

/// Stops a follower: the flag, then a kill of the `pw-dump` it runs (its read then ends).
#[derive(Clone, Default)]
pub struct Stop {
    flag: Arc<AtomicBool>,
    /// The running `pw-dump`'s pid; taken (under the lock) before it is reaped, so a kill never
    /// reaches a process that took the pid after it.
    child: Arc<Mutex<Option<i32>>>,
}

impl Stop {
    pub fn stop(&self) {
        self.flag.store(true, Ordering::Relaxed);
        let child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pid) = *child {
            // SAFETY: kill with a pid this follower spawned and has not reaped (the lock keeps
            // `Reap` from reaping it meanwhile).
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }

    fn stopped(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
}

/// Follow `inst` on a thread of its own until stopped or its server is gone; every change of its
/// audible processes goes to `out` as [`Msg::Set`], and [`Msg::Ended`] when it ends.
pub fn spawn(inst: Instance, stop: Stop, out: Sender<Msg>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("uxsched-audio-pw".into())
        .spawn(move || {
            let mut complaints = Complaints::default();
            let mut backoff = FIRST_BACKOFF;
            while !stop.stopped() {
                let began = Instant::now();
                let why = match run(&inst, &stop, &out, &mut complaints) {
                    Ok(()) => "pw-dump ended".to_owned(),
                    Err(e) => e,
                };
                if out.send(Msg::Set(inst.id, Vec::new())).is_err() || stop.stopped() {
                    break;
                }
                if began.elapsed() > MAX_BACKOFF {
                    backoff = FIRST_BACKOFF;
                }
                complaints.say("lost", &format!("uid {}'s PipeWire: {why}", inst.uid));
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
                if !super::server_of(&inst.runtime).is_ok_and(|uid| uid == inst.uid) {
                    tracing::info!(uid = inst.uid, "audio: the user's PipeWire is gone");
                    break;
                }
            }
            let _ = out.send(Msg::Ended(inst.id));
        })?;
    Ok(())
}

/// `pw-dump --monitor` as the instance's user (its uid and the runtime directory's group, no
/// supplementary groups), in `/`, with only the environment it needs.
fn pw_dump(inst: &Instance) -> std::io::Result<Child> {
    let mut c = Command::new("pw-dump");
    c.args(["--monitor", "--no-colors"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("XDG_RUNTIME_DIR", &inst.runtime)
        .env("HOME", "/")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        c.uid(inst.uid).gid(inst.gid);
    }
    c.spawn()
}

/// Kills and reaps the monitor when a run ends, its pid forgotten by [`Stop`] first.
struct Reap(Child, Stop);

impl Drop for Reap {
    fn drop(&mut self) {
        let mut child = self.1.child.lock().unwrap_or_else(|e| e.into_inner());
        *child = None;
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One run of `pw-dump`: until it ends (Ok) or prints what the parser refuses (Err).
fn run(
    inst: &Instance,
    stop: &Stop,
    out: &Sender<Msg>,
    complaints: &mut Complaints,
) -> Result<(), String> {
    let mut child = pw_dump(inst)
        .map_err(|e| format!("cannot run pw-dump (Debian package pipewire-bin): {e}"))?;
    *stop.child.lock().unwrap_or_else(|e| e.into_inner()) = Some(child.id() as i32);
    let stdout = child.stdout.take().expect("piped");
    let _reap = Reap(child, stop.clone());
    if stop.stopped() {
        return Ok(());
    }
    tracing::info!(uid = inst.uid, "audio: following the user's PipeWire");
    let mut reader = BufReader::new(stdout);
    let mut framer = Framer::default();
    let mut graph = Graph::default();
    let mut seen = Admitted::default();
    let mut sent: Option<Vec<AppId>> = None;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_CHUNK as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading pw-dump: {e}"))?;
        if n == 0 {
            return Ok(());
        }
        let text = std::str::from_utf8(&line)
            .map_err(|_| "pw-dump printed a line that is not UTF-8".to_owned())?;
        let Some(chunk) = framer.line(text.trim_end_matches('\n'))? else {
            continue;
        };
        graph.apply(&chunk)?;
        let now = seen.update(&graph, inst.uid, complaints);
        if sent.as_ref() != Some(&now) {
            out.send(Msg::Set(inst.id, now.clone()))
                .map_err(|_| "the daemon stopped".to_owned())?;
            sent = Some(now);
        }
    }
}

/// Each playing client's process, admitted once per client connection (a connection's peer
/// never changes; its process exiting closes it).
#[derive(Default)]
struct Admitted {
    by_client: BTreeMap<u32, Option<AppId>>,
}

impl Admitted {
    /// The admitted processes of the streams playing in `graph`, for user `uid`.
    fn update(&mut self, graph: &Graph, uid: u32, complaints: &mut Complaints) -> Vec<AppId> {
        self.by_client.retain(|id, _| graph.has_client(*id));
        let mut now = Vec::new();
        for a in graph.audible() {
            let app = self.by_client.entry(a.client).or_insert_with(|| {
                let owner = Owner { uid, any: false };
                let admitted = match a.uid {
                    Some(u) if u != uid => Err(format!(
                        "the server says client {} is uid {u}'s, in uid {uid}'s PipeWire",
                        a.client
                    )),
                    _ => admit(a.pid, owner),
                };
                admitted
                    .map_err(|e| {
                        complaints.say(
                            "refused",
                            &format!("uid {uid}'s PipeWire: a playing stream not acted on: {e}"),
                        )
                    })
                    .ok()
            });
            now.extend(*app);
        }
        super::normal(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A graph where client 5's stream plays, the server naming `pid` (of `uid`) as its peer.
    fn playing(pid: i64, uid: u32) -> Graph {
        let mut g = Graph::default();
        let text = format!(
            r#"[
  {{ "id": 5, "type": "PipeWire:Interface:Client",
     "info": {{ "props": {{ "pipewire.sec.pid": {pid}, "pipewire.sec.uid": {uid} }} }} }},
  {{ "id": 9, "type": "PipeWire:Interface:Node",
     "info": {{ "state": "running", "props": {{ "client.id": 5, "media.class": "Stream/Output/Audio" }} }} }}
]"#
        );
        g.apply(&text).unwrap();
        g
    }

    #[test]
    fn pid_1_roots_and_another_users_processes_are_refused_and_said_once() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        let mut complaints = Complaints::default();
        for (graph, uid) in [
            (playing(1, 1000), 1000),
            (playing(pid.into(), me + 1), me + 1),
            (playing(pid.into(), me), me + 1),
        ] {
            let mut seen = Admitted::default();
            assert!(seen.update(&graph, uid, &mut complaints).is_empty());
            assert!(seen.update(&graph, uid, &mut complaints).is_empty());
        }
        assert_eq!(
            complaints.said["refused"].1, 2,
            "said once, the rest counted"
        );
        // The user's own process is admitted, with its identity, unless the user is root.
        let own = Admitted::default().update(&playing(pid.into(), me), me, &mut complaints);
        if me != 0 {
            assert_eq!(own.iter().map(|a| a.pid).collect::<Vec<_>>(), [pid]);
        } else {
            assert!(own.is_empty(), "root's process");
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
