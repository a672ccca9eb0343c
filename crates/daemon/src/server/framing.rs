//! The socket's wire: request lines (bounded, deadline-armed, several per connection) and their
//! parsing into a control request or a real-time API request.

use super::REQUEST_TIMEOUT;
use std::io::{self, Read};
use uxsched_client::control::{Request, MAX_REQUEST};
use uxsched_client::proto as v1;

/// Read one request line (without its newline) from `r`, at most [`MAX_REQUEST`] bytes; the
/// last line may end at end of file instead. `arm` runs before each read (sets the deadline).
pub fn read_line<R: Read>(
    r: &mut R,
    arm: impl FnMut(&mut R) -> io::Result<()>,
) -> Result<Vec<u8>, String> {
    Lines::default().next(r, arm)
}

/// The lines of one connection: what a read brought past a newline is kept for the next line,
/// so requests a client sends back to back are each answered (never more than one line and
/// one read's chunk is held: memory stays bounded whatever the client sends).
#[derive(Debug, Default)]
pub struct Lines {
    pending: Vec<u8>,
}

impl Lines {
    /// The next line, as [`read_line`] reads one.
    pub fn next<R: Read>(
        &mut self,
        r: &mut R,
        mut arm: impl FnMut(&mut R) -> io::Result<()>,
    ) -> Result<Vec<u8>, String> {
        let mut chunk = [0u8; 512];
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                if end > MAX_REQUEST {
                    return Err(too_long());
                }
                let line = self.pending[..end].to_vec();
                self.pending.drain(..=end);
                return Ok(line);
            }
            if self.pending.len() > MAX_REQUEST {
                return Err(too_long());
            }
            arm(r).map_err(|e| format!("{e}"))?;
            let n = match r.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(too_slow());
                }
                Err(e) => return Err(format!("reading the request: {e}")),
            };
            if n == 0 {
                return Ok(std::mem::take(&mut self.pending));
            }
            self.pending.extend_from_slice(&chunk[..n]);
        }
    }
}

fn too_long() -> String {
    format!("bad request: longer than {MAX_REQUEST} bytes; send one JSON object per line")
}

pub(super) fn too_slow() -> String {
    format!(
        "timed out: send the whole request line within {} ms",
        REQUEST_TIMEOUT.as_millis()
    )
}

/// A request line: a control request (unversioned) or a real-time API request (`"v":1`).
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Control(Request),
    Thread(v1::Request),
}

/// Parse one request line; the error says what a well-formed request looks like.
pub fn parse_request(line: &[u8]) -> Result<Incoming, String> {
    let text = std::str::from_utf8(line).map_err(|e| format!("bad request: not UTF-8 ({e})"))?;
    if text.trim().is_empty() {
        return Err(r#"bad request: empty line; send e.g. {"cmd":"status"}"#.into());
    }
    if v1::is_versioned(text) {
        return serde_json::from_str(text)
            .map(Incoming::Thread)
            .map_err(|e| format!("bad request: {e}"));
    }
    parse_control(text).map(Incoming::Control)
}

fn parse_control(text: &str) -> Result<Request, String> {
    let request = serde_json::from_str(text).map_err(|e| format!("bad request: {e}"))?;
    // serde ignores `deny_unknown_fields` on a unit variant of an internally tagged enum.
    if request == Request::Status {
        let fields: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).map_err(|e| format!("bad request: {e}"))?;
        if let Some(extra) = fields.keys().find(|k| *k != "cmd") {
            return Err(format!(
                "bad request: unknown field `{extra}`; status takes none"
            ));
        }
    }
    Ok(request)
}
