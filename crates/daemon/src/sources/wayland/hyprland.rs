//! Hyprland: its event socket (`.socket2.sock` in the instance directory
//! `$XDG_RUNTIME_DIR/hypr/<HYPRLAND_INSTANCE_SIGNATURE>`) streams `EVENT>>DATA` lines; on
//! `activewindow`, `activewindowv2` and `closewindow` the source asks the request socket
//! (`.socket.sock`) `j/activewindow`, a JSON object with the window's `pid` (`{}` when no window
//! is active). Hyprland serves its request socket synchronously and stalls while a client holds
//! it open, so each request opens a new connection and closes it as soon as the answer is read
//! (bounded by a timeout). Events already buffered are read before asking, so the pair
//! `activewindow` + `activewindowv2` sent for one change costs one request.

use super::{owner_of, read_line, Complaints, Follower, Lost, MAX_MESSAGE, REQUEST_TIMEOUT};
use crate::sources::Reporter;
use crate::types::{Event, SourceName};
use serde_json::Value;
use std::io::{BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;

pub const EVENTS: &str = ".socket2.sock";
pub const REQUESTS: &str = ".socket.sock";
const ASK: &[u8] = b"j/activewindow";

/// Does this event line mean the active window may have changed? Lines that are not
/// `EVENT>>DATA` are `None`.
pub fn moves_focus(line: &[u8]) -> Option<bool> {
    let line = std::str::from_utf8(line).ok()?;
    let (event, _data) = line.split_once(">>")?;
    let named = !event.is_empty()
        && event
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !named {
        return None;
    }
    Some(matches!(
        event,
        "activewindow" | "activewindowv2" | "closewindow"
    ))
}

/// The answer to `j/activewindow`: `Some(pid)`, `Some(None)` for no active window (or one
/// without a pid), `None` for an answer that is not such an object.
pub fn active_pid(answer: &[u8]) -> Option<Option<i32>> {
    let v: Value = serde_json::from_slice(answer).ok()?;
    let obj = v.as_object()?;
    Some(
        obj.get("pid")
            .and_then(Value::as_i64)
            .and_then(|p| i32::try_from(p).ok())
            .filter(|&p| p > 0),
    )
}

/// Ask the request socket once, on a connection of its own that is closed at once.
fn ask(dir: &Path, any: bool) -> std::io::Result<(Vec<u8>, Result<crate::sources::Owner, String>)> {
    let stream = super::connect(&dir.join(REQUESTS))?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let owner = owner_of(&stream, any);
    (&stream).write_all(ASK)?;
    let mut answer = Vec::new();
    (&stream)
        .take(MAX_MESSAGE as u64)
        .read_to_end(&mut answer)?;
    Ok((answer, owner))
}

/// Ask for the active window and report it; a bad answer is complained about and changes
/// nothing.
fn update(
    dir: &Path,
    any: bool,
    reporter: &mut Reporter,
    complaints: &mut Complaints,
) -> Result<(), Lost> {
    let (answer, owner) = ask(dir, any)?;
    match active_pid(&answer) {
        Some(pid) => reporter.seen(pid, owner)?,
        None => complaints.say(
            "answer",
            &format!(
            "hyprland source: `{}` answered with something that is not a JSON object ({} bytes: \
             {:?})",
            String::from_utf8_lossy(ASK),
            answer.len(),
            String::from_utf8_lossy(&answer[..answer.len().min(80)])
        ),
        ),
    }
    Ok(())
}

/// Serve one event connection until it ends.
fn serve(
    events: UnixStream,
    dir: &Path,
    any: bool,
    reporter: &mut Reporter,
    complaints: &mut Complaints,
) -> Result<(), Lost> {
    let uid = uxsched_os::peer::peer_uid(&events).ok();
    tracing::info!(instance = %dir.display(), owner = ?uid, "hyprland source connected");
    update(dir, any, reporter, complaints)?;
    let mut reader = BufReader::new(events);
    let mut line = Vec::new();
    let mut dirty = false;
    loop {
        if !read_line(&mut reader, &mut line)? {
            return Err(Lost::Conn("the compositor closed the event socket".into()));
        }
        match moves_focus(&line) {
            Some(moves) => dirty |= moves,
            None => complaints.say(
                "event",
                &format!(
                    "hyprland source: an event line that is not EVENT>>DATA ({:?})",
                    String::from_utf8_lossy(&line[..line.len().min(80)])
                ),
            ),
        }
        // Ask once the lines already received are read.
        if dirty && !reader.buffer().contains(&b'\n') {
            dirty = false;
            update(dir, any, reporter, complaints)?;
        }
    }
}

/// Follow the focus of the Hyprland instance whose sockets are in `instance_dir`, on a thread
/// that ends when its event socket is gone for good. `any_owner`: act on any process it names
/// (`sources_any_owner`). Fails at once if the event socket cannot be reached.
pub fn spawn(
    instance_dir: PathBuf,
    any_owner: bool,
    events: Sender<Event>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let socket = instance_dir.join(EVENTS);
    let first = super::connect(&socket)?;
    let follower = Follower {
        thread: "uxsched-hyprland",
        source: SourceName::Hyprland,
        connect: move || super::connect(&socket),
        serve: move |c, r: &mut Reporter, k: &mut Complaints| {
            serve(c, &instance_dir, any_owner, r, k)
        },
    };
    super::run(follower, first, events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_lines_are_read_and_garbage_is_told_apart() {
        assert_eq!(moves_focus(b"activewindow>>foot,~"), Some(true));
        assert_eq!(moves_focus(b"activewindowv2>>55d1c4b0e2a0"), Some(true));
        assert_eq!(moves_focus(b"closewindow>>55d1c4b0e2a0"), Some(true));
        assert_eq!(moves_focus(b"workspace>>2"), Some(false));
        assert_eq!(moves_focus(b"activewindowv2>>"), Some(true));
        assert_eq!(moves_focus(b"\xff\xfe>>x"), None);
        assert_eq!(moves_focus(b"no separator"), None);
        assert_eq!(moves_focus(b">>x"), None);
        assert_eq!(moves_focus(b"{\"a\": 1}>>x"), None);
    }

    #[test]
    fn answers_name_a_pid_nothing_or_are_garbage() {
        assert_eq!(active_pid(br#"{"class":"foot","pid":77}"#), Some(Some(77)));
        assert_eq!(active_pid(b"{}"), Some(None));
        assert_eq!(active_pid(br#"{"pid":-1}"#), Some(None));
        assert_eq!(active_pid(br#"{"pid":4294967297}"#), Some(None));
        assert_eq!(active_pid(b"unknown request"), None);
        assert_eq!(active_pid(b"[1,2]"), None);
    }
}
