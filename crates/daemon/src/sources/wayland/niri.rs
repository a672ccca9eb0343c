//! niri (`$NIRI_SOCKET`): newline-delimited JSON. The source sends the request `"EventStream"`,
//! reads the reply (`{"Ok":"Handled"}`), then one event per line, each an object with one key
//! (serde's externally tagged enum of niri-ipc 25.2): `WindowsChanged {windows}` (the full set,
//! sent first), `WindowOpenedOrChanged {window}`, `WindowClosed {id}` and
//! `WindowFocusChanged {id}` (`null`: no window focused). A window is
//! `{id, pid, is_focused, ...}`; the source keeps a window id → pid map and names the focused
//! window's pid. Other events are not about windows and are skipped.

use super::{owner_of, read_line, Complaints, Follower, Lost};
use crate::sources::Reporter;
use crate::types::{Event, SourceName};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::mpsc::Sender;

/// More windows than any desktop has: a stream that claims more is not believed.
const MAX_WINDOWS: usize = 100_000;

/// The windows niri has told of, and which one is focused.
#[derive(Debug, Default)]
pub struct Windows {
    pid: HashMap<u64, Option<i32>>,
    focused: Option<u64>,
}

/// A window object's id and pid (`None`: not a window).
fn window(v: &Value) -> Option<(u64, Option<i32>, bool)> {
    let id = v.get("id")?.as_u64()?;
    let pid = v
        .get("pid")
        .and_then(Value::as_i64)
        .and_then(|p| i32::try_from(p).ok())
        .filter(|&p| p > 0);
    let focused = v
        .get("is_focused")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Some((id, pid, focused))
}

impl Windows {
    /// The focused window's pid (`None`: none focused, or it names no process).
    pub fn focused_pid(&self) -> Option<i32> {
        self.focused
            .and_then(|id| self.pid.get(&id).copied().flatten())
    }

    /// Apply one event line. `Ok(true)`: a window event, applied; `Ok(false)`: another event;
    /// `Err`: not an event as niri sends them (nothing is changed).
    pub fn apply(&mut self, line: &[u8]) -> Result<bool, String> {
        let v: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON ({e})"))?;
        let (name, body) = match v.as_object().map(|o| o.iter().next()) {
            Some(Some((k, b))) if v.as_object().map_or(0, |o| o.len()) == 1 => (k.as_str(), b),
            _ => return Err("not an object with one key".into()),
        };
        let bad = || format!("a {name} event of a shape this source does not know");
        match name {
            "WindowsChanged" => {
                let list = body
                    .get("windows")
                    .and_then(Value::as_array)
                    .ok_or_else(bad)?;
                let parsed: Option<Vec<_>> = list.iter().map(window).collect();
                let parsed = parsed.filter(|l| l.len() <= MAX_WINDOWS).ok_or_else(bad)?;
                self.pid = parsed.iter().map(|&(id, pid, _)| (id, pid)).collect();
                self.focused = parsed.iter().find(|w| w.2).map(|w| w.0);
            }
            "WindowOpenedOrChanged" => {
                let (id, pid, focused) = body.get("window").and_then(window).ok_or_else(bad)?;
                if !self.pid.contains_key(&id) && self.pid.len() >= MAX_WINDOWS {
                    return Err(format!("more than {MAX_WINDOWS} windows"));
                }
                self.pid.insert(id, pid);
                if focused {
                    self.focused = Some(id);
                } else if self.focused == Some(id) {
                    self.focused = None;
                }
            }
            "WindowClosed" => {
                let id = body.get("id").and_then(Value::as_u64).ok_or_else(bad)?;
                self.pid.remove(&id);
                if self.focused == Some(id) {
                    self.focused = None;
                }
            }
            "WindowFocusChanged" => {
                let id = body.get("id").ok_or_else(bad)?;
                self.focused = match id {
                    Value::Null => None,
                    id => Some(id.as_u64().ok_or_else(bad)?),
                };
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Serve one connection until it ends.
fn serve(
    stream: UnixStream,
    any: bool,
    reporter: &mut Reporter,
    complaints: &mut Complaints,
) -> Result<(), Lost> {
    let owner = owner_of(&stream, any);
    (&stream).write_all(b"\"EventStream\"\n")?;
    let mut reader = BufReader::new(&stream);
    let mut line = Vec::new();
    if !read_line(&mut reader, &mut line)? {
        return Err(Lost::Conn(
            "niri closed the connection before replying".into(),
        ));
    }
    let reply: Option<Value> = serde_json::from_slice(&line).ok();
    if reply.as_ref().and_then(|r| r.get("Ok")) != Some(&Value::from("Handled")) {
        return Err(Lost::Conn(format!(
            "niri refused the event stream: {:?}",
            String::from_utf8_lossy(&line[..line.len().min(200)])
        )));
    }
    let uid = owner.as_ref().map(|o| o.uid).ok();
    tracing::info!(owner = ?uid, "niri source connected");
    let mut windows = Windows::default();
    loop {
        if !read_line(&mut reader, &mut line)? {
            return Err(Lost::Conn("niri closed the event stream".into()));
        }
        match windows.apply(&line) {
            Ok(true) => reporter.seen(windows.focused_pid(), owner.clone())?,
            Ok(false) => {}
            Err(e) => complaints.say("event", &format!("niri source: an event line that is {e}")),
        }
    }
}

/// Follow the focus of the niri instance listening on `socket` (`$NIRI_SOCKET`), on a thread
/// that ends when the socket is gone for good. `any_owner`: act on any process it names
/// (`sources_any_owner`). Fails at once if the socket cannot be reached.
pub fn spawn(
    socket: PathBuf,
    any_owner: bool,
    events: Sender<Event>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let first = super::connect(&socket)?;
    let follower = Follower {
        thread: "uxsched-niri",
        source: SourceName::Niri,
        connect: move || super::connect(&socket),
        serve: move |c, r: &mut Reporter, k: &mut Complaints| serve(c, any_owner, r, k),
    };
    super::run(follower, first, events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn win(id: u64, pid: i32, focused: bool) -> String {
        format!(
            r#"{{"id":{id},"title":"t","app_id":"foot","pid":{pid},"workspace_id":1,"is_focused":{focused},"is_floating":false}}"#
        )
    }

    #[test]
    fn the_window_map_follows_niris_events() {
        let mut w = Windows::default();
        let all = format!(
            r#"{{"WindowsChanged":{{"windows":[{},{}]}}}}"#,
            win(1, 10, false),
            win(2, 20, true)
        );
        assert_eq!(w.apply(all.as_bytes()), Ok(true));
        assert_eq!(w.focused_pid(), Some(20));
        assert_eq!(w.apply(br#"{"WindowFocusChanged":{"id":1}}"#), Ok(true));
        assert_eq!(w.focused_pid(), Some(10));
        let opened = format!(
            r#"{{"WindowOpenedOrChanged":{{"window":{}}}}}"#,
            win(3, 30, true)
        );
        assert_eq!(w.apply(opened.as_bytes()), Ok(true));
        assert_eq!(w.focused_pid(), Some(30));
        assert_eq!(w.apply(br#"{"WindowClosed":{"id":3}}"#), Ok(true));
        assert_eq!(w.focused_pid(), None);
        assert_eq!(w.apply(br#"{"WindowFocusChanged":{"id":2}}"#), Ok(true));
        assert_eq!(w.focused_pid(), Some(20));
        assert_eq!(w.apply(br#"{"WindowFocusChanged":{"id":null}}"#), Ok(true));
        assert_eq!(w.focused_pid(), None);
        // Not about windows: skipped. Garbage: an error, nothing changed.
        assert_eq!(
            w.apply(br#"{"KeyboardLayoutSwitched":{"idx":1}}"#),
            Ok(false)
        );
        assert_eq!(w.apply(br#"{"WindowFocusChanged":{"id":2}}"#), Ok(true));
        assert!(w.apply(b"\x00garbage").is_err());
        assert!(w.apply(br#"{"WindowFocusChanged":{"id":"x"}}"#).is_err());
        assert!(w
            .apply(br#"{"WindowClosed":{},"WindowFocusChanged":{}}"#)
            .is_err());
        assert!(w
            .apply(br#"{"WindowsChanged":{"windows":[{"pid":1}]}}"#)
            .is_err());
        assert_eq!(w.focused_pid(), Some(20));
        // A window niri names no pid for (a portal's) is nothing in front.
        let nopid = r#"{"WindowOpenedOrChanged":{"window":{"id":9,"pid":null,"is_focused":true}}}"#;
        assert_eq!(w.apply(nopid.as_bytes()), Ok(true));
        assert_eq!(w.focused_pid(), None);
    }
}
