//! sway and any compositor that speaks the i3 IPC protocol (`$SWAYSOCK`): each message is the
//! magic `i3-ipc`, a payload length and a type (u32s in host byte order), then a JSON payload.
//! The focused node's `pid` is asked with GET_TREE at each connection and after each window or
//! workspace event that may move the focus (a window closed or moved, a workspace focused); a
//! window `focus` event carries the newly focused container, whose `pid` is taken at once.
//!
//! Two connections: the event one (subscribed to `window`, `workspace` and `shutdown`; a
//! subscribed socket gets only events) and a request one for GET_TREE. A focused node without a
//! `pid` (a workspace, a container; i3 itself, which names no pids) is "nothing in front".

use super::{owner_of, Complaints, Follower, Lost, MAX_MESSAGE, REQUEST_TIMEOUT};
use crate::sources::{Owner, Reporter};
use crate::types::{Event, SourceName};
use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::mpsc::Sender;

const MAGIC: &[u8; 6] = b"i3-ipc";
const SUBSCRIBE: u32 = 2;
const GET_TREE: u32 = 4;
/// Event types have the high bit set.
const EVENT_WORKSPACE: u32 = 0x8000_0000;
const EVENT_WINDOW: u32 = 0x8000_0003;
const EVENT_SHUTDOWN: u32 = 0x8000_0006;
/// Nodes nested deeper than this are not searched (a real tree is a few levels deep).
const MAX_DEPTH: usize = 64;

/// Send one message of type `kind`.
fn send(stream: &mut &UnixStream, kind: u32, payload: &[u8]) -> std::io::Result<()> {
    let mut msg = Vec::with_capacity(14 + payload.len());
    msg.extend_from_slice(MAGIC);
    msg.extend_from_slice(&(payload.len() as u32).to_ne_bytes());
    msg.extend_from_slice(&kind.to_ne_bytes());
    msg.extend_from_slice(payload);
    stream.write_all(&msg)
}

/// Read one message: (type, payload). Framing that is not i3-ipc's is an error: the stream
/// cannot be followed any more.
fn recv(stream: &mut &UnixStream) -> Result<(u32, Vec<u8>), Lost> {
    let mut head = [0u8; 14];
    if let Err(e) = stream.read_exact(&mut head) {
        return Err(match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                Lost::Conn("the compositor closed the connection".into())
            }
            _ => e.into(),
        });
    }
    if &head[..6] != MAGIC {
        return Err(Lost::Conn(format!(
            "garbage instead of an i3-ipc message (starts {:?})",
            String::from_utf8_lossy(&head[..6])
        )));
    }
    let len = u32::from_ne_bytes(head[6..10].try_into().unwrap()) as usize;
    let kind = u32::from_ne_bytes(head[10..14].try_into().unwrap());
    if len > MAX_MESSAGE {
        return Err(Lost::Conn(format!(
            "an i3-ipc message of {len} bytes (bound {MAX_MESSAGE})"
        )));
    }
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload)?;
    Ok((kind, payload))
}

/// A node's `pid`, if it names a process.
fn pid_of(node: &Value) -> Option<i32> {
    node.get("pid")?
        .as_i64()
        .and_then(|p| i32::try_from(p).ok())
        .filter(|&p| p > 0)
}

/// The focused node of a GET_TREE answer: `Some(pid)` or `Some(None)` for a focused node that
/// names no process; `None` if no node is focused.
pub fn focused_pid(node: &Value) -> Option<Option<i32>> {
    fn walk(node: &Value, depth: usize) -> Option<Option<i32>> {
        if node.get("focused").and_then(Value::as_bool) == Some(true) {
            return Some(pid_of(node));
        }
        if depth >= MAX_DEPTH {
            return None;
        }
        ["nodes", "floating_nodes"]
            .iter()
            .filter_map(|k| node.get(*k)?.as_array())
            .flatten()
            .find_map(|n| walk(n, depth + 1))
    }
    walk(node, 0)
}

/// What an event means for the focus.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    /// The focus moved to this container (its pid, if it names one).
    Focus(Option<i32>),
    /// The focus may have moved: ask the tree.
    Ask,
    /// The compositor is exiting.
    Exit,
    Nothing,
}

/// Read an event (`kind`, JSON `v`).
pub fn change_of(kind: u32, v: &Value) -> Change {
    let change = v.get("change").and_then(Value::as_str).unwrap_or("");
    match (kind, change) {
        (EVENT_WINDOW, "focus") => match v.get("container") {
            Some(c) => Change::Focus(pid_of(c)),
            None => Change::Ask,
        },
        (EVENT_WINDOW, "close" | "new" | "move" | "floating" | "fullscreen_mode") => Change::Ask,
        (EVENT_WORKSPACE, "focus" | "empty" | "move" | "reload") => Change::Ask,
        (EVENT_SHUTDOWN, _) => Change::Exit,
        _ => Change::Nothing,
    }
}

/// One connection's pair: the event socket, the request socket and whose processes they name.
struct Session {
    events: UnixStream,
    requests: UnixStream,
    owner: Result<Owner, String>,
}

impl Session {
    fn open(events: UnixStream, socket: &std::path::Path, any: bool) -> Result<Session, Lost> {
        let requests = super::connect(socket)?;
        requests.set_read_timeout(Some(REQUEST_TIMEOUT))?;
        requests.set_write_timeout(Some(REQUEST_TIMEOUT))?;
        let owner = owner_of(&events, any);
        if owner_of(&requests, true).map(|o| o.uid) != owner_of(&events, true).map(|o| o.uid) {
            return Err(Lost::Conn(format!(
                "{}'s two connections reach processes of different users",
                socket.display()
            )));
        }
        let mut ev = &events;
        send(&mut ev, SUBSCRIBE, br#"["window","workspace","shutdown"]"#)?;
        let (kind, reply) = recv(&mut ev)?;
        let ok = serde_json::from_slice::<Value>(&reply)
            .ok()
            .and_then(|v| v.get("success")?.as_bool());
        if kind != SUBSCRIBE || ok != Some(true) {
            return Err(Lost::Conn(format!(
                "the compositor refused the subscription: {}",
                String::from_utf8_lossy(&reply[..reply.len().min(200)])
            )));
        }
        Ok(Session {
            events,
            requests,
            owner,
        })
    }

    /// Ask the tree for the focused pid; a reply that is not a tree is complained about and
    /// changes nothing (`Ok(None)`).
    fn ask(&self, complaints: &mut Complaints) -> Result<Option<Option<i32>>, Lost> {
        let mut rq = &self.requests;
        send(&mut rq, GET_TREE, b"")?;
        let (kind, reply) = recv(&mut rq)?;
        let tree = serde_json::from_slice::<Value>(&reply);
        match tree {
            Ok(t) if kind == GET_TREE && t.is_object() => Ok(Some(focused_pid(&t).flatten())),
            _ => {
                complaints.say(
                    "tree",
                    &format!(
                        "sway source: GET_TREE answered with something that is not a tree (type \
                     {kind}, {} bytes)",
                        reply.len()
                    ),
                );
                Ok(None)
            }
        }
    }
}

/// Serve one event connection until it ends.
fn serve(
    events: UnixStream,
    socket: &std::path::Path,
    any: bool,
    reporter: &mut Reporter,
    complaints: &mut Complaints,
) -> Result<(), Lost> {
    let s = Session::open(events, socket, any)?;
    let uid = s.owner.as_ref().map(|o| o.uid).ok();
    tracing::info!(socket = %socket.display(), owner = ?uid, "sway source connected");
    if let Some(pid) = s.ask(complaints)? {
        reporter.seen(pid, s.owner.clone())?;
    }
    let mut ev = &s.events;
    loop {
        let (kind, payload) = recv(&mut ev)?;
        let Ok(v) = serde_json::from_slice::<Value>(&payload) else {
            complaints.say(
                "event",
                &format!(
                    "sway source: an event (type {kind:#x}) that is not JSON ({} bytes)",
                    payload.len()
                ),
            );
            continue;
        };
        let pid = match change_of(kind, &v) {
            Change::Focus(pid) => Some(pid),
            Change::Ask => s.ask(complaints)?,
            Change::Exit => return Err(Lost::Conn("the compositor is exiting".into())),
            Change::Nothing => None,
        };
        if let Some(pid) = pid {
            reporter.seen(pid, s.owner.clone())?;
        }
    }
}

/// Follow the focus of the i3-IPC compositor listening on `socket` (sway's `$SWAYSOCK`), on a
/// thread that ends when the socket is gone for good. `any_owner`: act on any process it names
/// (`sources_any_owner`). Fails at once if the socket cannot be reached.
pub fn spawn(
    socket: PathBuf,
    any_owner: bool,
    events: Sender<Event>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let first = super::connect(&socket)?;
    let again = socket.clone();
    let follower = Follower {
        thread: "uxsched-sway",
        source: SourceName::Sway,
        connect: move || super::connect(&again),
        serve: move |c, r: &mut Reporter, k: &mut Complaints| serve(c, &socket, any_owner, r, k),
    };
    super::run(follower, first, events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_focused_node_is_found_in_tiled_and_floating_nodes() {
        let tree = json!({"type": "root", "focused": false, "nodes": [
            {"type": "output", "nodes": [{"type": "workspace", "focused": false,
              "nodes": [{"type": "con", "pid": 10, "focused": false}],
              "floating_nodes": [{"type": "floating_con", "pid": 11, "focused": true}]}]}]});
        assert_eq!(focused_pid(&tree), Some(Some(11)));
        let empty = json!({"nodes": [{"type": "workspace", "focused": true, "nodes": []}]});
        assert_eq!(focused_pid(&empty), Some(None));
        assert_eq!(focused_pid(&json!({"nodes": []})), None);
        let bad = json!({"nodes": [{"focused": true, "pid": "12"}, {"focused": true, "pid": -3}]});
        assert_eq!(focused_pid(&bad), Some(None));
        let mut deep = json!({"focused": true, "pid": 7});
        for _ in 0..100 {
            deep = json!({"nodes": [deep]});
        }
        assert_eq!(focused_pid(&deep), None);
    }

    #[test]
    fn events_are_read_for_what_they_mean_for_the_focus() {
        let focus = json!({"change": "focus", "container": {"pid": 42, "focused": true}});
        assert_eq!(change_of(EVENT_WINDOW, &focus), Change::Focus(Some(42)));
        let title = json!({"change": "title", "container": {"pid": 43}});
        assert_eq!(change_of(EVENT_WINDOW, &title), Change::Nothing);
        assert_eq!(
            change_of(EVENT_WINDOW, &json!({"change": "close"})),
            Change::Ask
        );
        assert_eq!(
            change_of(EVENT_WORKSPACE, &json!({"change": "focus"})),
            Change::Ask
        );
        assert_eq!(
            change_of(EVENT_SHUTDOWN, &json!({"change": "exit"})),
            Change::Exit
        );
        assert_eq!(change_of(7, &focus), Change::Nothing);
    }
}
