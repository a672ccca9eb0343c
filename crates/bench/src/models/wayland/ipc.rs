//! sway's IPC (the i3 protocol, sway-ipc(7)): a message is the magic `i3-ipc`, the payload's
//! length and the message type (both u32, native byte order), then the payload (JSON for
//! replies). The harness uses three requests: `RUN_COMMAND` (focus a view), `GET_TREE` (the
//! views and their pids) and `GET_OUTPUTS` (the headless output is up). Root may connect to the
//! user's socket (the socket file's permissions do not bind root; sway checks no credentials).

use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

const MAGIC: &[u8; 6] = b"i3-ipc";
pub const RUN_COMMAND: u32 = 0;
pub const SUBSCRIBE: u32 = 2;
pub const GET_OUTPUTS: u32 = 3;
pub const GET_TREE: u32 = 4;
/// A reply larger than this is not sway's (a tree of two views is a few KiB).
const MAX_REPLY: usize = 16 << 20;

/// A connection to sway's IPC socket.
pub struct Ipc {
    stream: UnixStream,
}

impl Ipc {
    pub fn connect(path: &Path) -> Result<Ipc> {
        let stream = UnixStream::connect(path)
            .with_context(|| format!("connecting to sway's IPC socket {}", path.display()))?;
        // sway answers at once; a compositor that stopped answering fails the run, not hangs it.
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Ipc { stream })
    }

    /// Send one message without waiting for its reply (the focus measurement starts its clock
    /// here and reads the reply afterwards, [`Ipc::reply`]).
    pub fn send(&mut self, kind: u32, payload: &str) -> Result<()> {
        let mut msg = Vec::with_capacity(14 + payload.len());
        msg.extend_from_slice(MAGIC);
        msg.extend_from_slice(&(payload.len() as u32).to_ne_bytes());
        msg.extend_from_slice(&kind.to_ne_bytes());
        msg.extend_from_slice(payload.as_bytes());
        self.stream
            .write_all(&msg)
            .context("writing to sway's IPC socket")
    }

    /// The next reply: it must answer a message of type `kind`.
    pub fn reply(&mut self, kind: u32) -> Result<serde_json::Value> {
        let (got, body) = self.message()?;
        if got != kind {
            bail!("sway answered message type {got}, expected {kind}");
        }
        Ok(body)
    }

    /// The next message, whatever its type (after `SUBSCRIBE`, events: type with the high bit
    /// set, e.g. `0x8000_0003` for window events).
    pub fn message(&mut self) -> Result<(u32, serde_json::Value)> {
        let mut head = [0u8; 14];
        self.stream
            .read_exact(&mut head)
            .context("reading sway's IPC reply (sway exited?)")?;
        if &head[..6] != MAGIC {
            bail!("sway's IPC reply does not start with i3-ipc: {head:?}");
        }
        let len = u32::from_ne_bytes(head[6..10].try_into().expect("4 bytes")) as usize;
        let got = u32::from_ne_bytes(head[10..14].try_into().expect("4 bytes"));
        if len > MAX_REPLY {
            bail!("sway's IPC reply announces {len} bytes");
        }
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body)?;
        let value = serde_json::from_slice(&body).context("sway's IPC message is not JSON")?;
        Ok((got, value))
    }

    pub fn request(&mut self, kind: u32, payload: &str) -> Result<serde_json::Value> {
        self.send(kind, payload)?;
        self.reply(kind)
    }

    /// Run a sway command; an error with sway's reason if it failed.
    pub fn command(&mut self, cmd: &str) -> Result<()> {
        self.send(RUN_COMMAND, cmd)?;
        self.command_reply(cmd)
    }

    /// The reply to a `RUN_COMMAND` sent with [`Ipc::send`].
    pub fn command_reply(&mut self, cmd: &str) -> Result<()> {
        let reply = self.reply(RUN_COMMAND)?;
        let results = reply
            .as_array()
            .context("RUN_COMMAND reply is not a list")?;
        for r in results {
            if r["success"] != serde_json::Value::Bool(true) {
                bail!("sway refused `{cmd}`: {}", r["error"]);
            }
        }
        Ok(())
    }

    pub fn tree(&mut self) -> Result<serde_json::Value> {
        self.request(GET_TREE, "")
    }
}

/// The view (a window) whose client is process `pid`, anywhere in `tree`.
pub fn view_of(tree: &serde_json::Value, pid: i32) -> Option<&serde_json::Value> {
    if tree["pid"].as_i64() == Some(i64::from(pid)) {
        return Some(tree);
    }
    ["nodes", "floating_nodes"]
        .iter()
        .filter_map(|k| tree[*k].as_array())
        .flatten()
        .find_map(|n| view_of(n, pid))
}

/// The pid of the view that has the focus, if any.
pub fn focused_pid(tree: &serde_json::Value) -> Option<i64> {
    if tree["focused"] == serde_json::Value::Bool(true) {
        if let Some(pid) = tree["pid"].as_i64() {
            return Some(pid);
        }
    }
    ["nodes", "floating_nodes"]
        .iter()
        .filter_map(|k| tree[*k].as_array())
        .flatten()
        .find_map(focused_pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_are_found_by_pid_and_the_focused_one_named() {
        let tree = serde_json::json!({
            "id": 1, "type": "root", "nodes": [
                {"id": 3, "type": "workspace", "nodes": [
                    {"id": 4, "pid": 100, "focused": false, "nodes": []},
                    {"id": 5, "pid": 200, "focused": true, "nodes": []}
                ], "floating_nodes": [{"id": 6, "pid": 300, "focused": false}]}
            ]
        });
        assert_eq!(view_of(&tree, 200).unwrap()["id"], 5);
        assert_eq!(view_of(&tree, 300).unwrap()["id"], 6);
        assert!(view_of(&tree, 400).is_none());
        assert_eq!(focused_pid(&tree), Some(200));
    }
}
