//! The Wayland compositors' focus sources: each asks its compositor's own IPC which window is
//! focused and names that window's process, for the user who runs the compositor (issue 32).
//!
//! What they share lives here: the thread that serves one connection after another (the focus
//! is cleared whenever a connection ends, a transient failure is retried with a bounded
//! back-off, and the thread ends once the socket is gone for good), whose processes a socket's
//! answers may name (the compositor's uid, SO_PEERCRED), bounded reads of untrusted input, and
//! rate-limited complaints about bad input. docs/compositors.md says what each source asks.

pub mod app_id;
pub mod hyprland;
pub mod kwin;
pub mod niri;
pub mod sway;
/// The fallback for compositors without an IPC: wlr-foreign-toplevel-management.
pub mod toplevel;
pub mod unix_diag;

use super::{DaemonGone, Owner, Reporter};
use crate::types::{Event, SourceName};
use std::collections::HashMap;
use std::io::{self, BufRead};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// A connection that lasted this long was healthy: the next loss starts the back-off afresh.
const HEALTHY: Duration = Duration::from_secs(10);
/// At most one warning per source per this period about bad input; the rest are counted.
const COMPLAIN_EVERY: Duration = Duration::from_secs(60);
/// The longest reply or event line a source reads (a compositor's whole tree fits easily).
pub(crate) const MAX_MESSAGE: usize = 32 << 20;
/// How long a request to a compositor may take before it counts as hung.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a connection stopped being served.
#[derive(Debug)]
pub(crate) enum Lost {
    /// The daemon is gone: the thread ends.
    Daemon,
    /// The connection ended or broke (what happened): the focus is cleared, then reconnect.
    Conn(String),
}

impl From<DaemonGone> for Lost {
    fn from(_: DaemonGone) -> Lost {
        Lost::Daemon
    }
}

impl From<io::Error> for Lost {
    fn from(e: io::Error) -> Lost {
        Lost::Conn(e.to_string())
    }
}

/// Logs bad input from a compositor at most once per [`COMPLAIN_EVERY`] for each kind of
/// problem, counting the rest, so a compositor that sends garbage in a loop cannot flood the
/// journal.
pub(crate) struct Complaints {
    source: SourceName,
    /// Per kind of problem: when it was last said, and how often since it was kept quiet.
    said: HashMap<&'static str, (Instant, u32)>,
}

impl Complaints {
    pub(crate) fn new(source: SourceName) -> Complaints {
        Complaints {
            source,
            said: HashMap::new(),
        }
    }

    /// Say `msg`, a problem of kind `kind`, unless that kind was said recently.
    pub(crate) fn say(&mut self, kind: &'static str, msg: &str) {
        let now = Instant::now();
        if let Some((last, quiet)) = self.said.get_mut(kind) {
            if now.duration_since(*last) < COMPLAIN_EVERY {
                *quiet += 1;
                tracing::debug!(source = ?self.source, "{msg}");
                return;
            }
        }
        let quiet = self.said.get(kind).map_or(0, |s| s.1);
        let more = match quiet {
            0 => String::new(),
            n => format!(" ({n} more like it in the last minute, not shown)"),
        };
        tracing::warn!(
            source = ?self.source,
            "{msg}{more}; nothing is changed on its word (if this repeats, the compositor speaks \
             a protocol version this source does not know: report it with the compositor's version)"
        );
        self.said.insert(kind, (now, 0));
    }
}

/// Whose processes a compositor's answers on `stream` may name: the uid that runs the
/// compositor (the socket's peer). A compositor running as root names nobody unless `any`.
pub(crate) fn owner_of(stream: &UnixStream, any: bool) -> Result<Owner, String> {
    let uid = uxsched_os::peer::peer_uid(stream)
        .map_err(|e| format!("cannot tell who runs the compositor ({e})"))?;
    if uid == 0 && !any {
        return Err(
            "the compositor runs as root, so it names no user whose windows may be \
                    boosted; run it as the desktop's user or set `sources_any_owner = true`"
                .into(),
        );
    }
    Ok(Owner { uid, any })
}

/// Connect to the compositor's socket at `path`, saying which in the error.
pub(crate) fn connect(path: &Path) -> io::Result<UnixStream> {
    UnixStream::connect(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// A connect error that means the compositor has exited: its socket is gone, or nothing listens
/// on it any more.
fn gone_for_good(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    )
}

/// Read one line (without its `\n`) of at most [`MAX_MESSAGE`] bytes. `Ok(None)`: the peer
/// closed the connection. A longer line is an error (the stream cannot be trusted any more).
pub(crate) fn read_line<R: BufRead>(reader: &mut R, line: &mut Vec<u8>) -> Result<bool, Lost> {
    line.clear();
    let n = std::io::Read::take(&mut *reader, MAX_MESSAGE as u64 + 1).read_until(b'\n', line)?;
    if n == 0 {
        return Ok(false);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    } else if line.len() > MAX_MESSAGE {
        return Err(Lost::Conn(format!(
            "a line longer than {MAX_MESSAGE} bytes"
        )));
    } else {
        return Err(Lost::Conn("the connection closed within a line".into()));
    }
    Ok(true)
}

/// One compositor follower: how it connects and how it serves one connection.
pub(crate) struct Follower<C, S> {
    pub thread: &'static str,
    pub source: SourceName,
    /// Connect again after a loss (the same socket path).
    pub connect: C,
    /// Serve one connection until it ends; sends each change of focus through the reporter.
    pub serve: S,
}

/// Run `f` on a thread, starting with the connection `first`: serve it, clear the focus when it
/// ends, reconnect with a bounded back-off; end when the socket is gone for good or the daemon
/// is.
pub(crate) fn run<T, C, S>(
    f: Follower<C, S>,
    first: T,
    events: Sender<Event>,
) -> io::Result<JoinHandle<()>>
where
    T: Send + 'static,
    C: FnMut() -> io::Result<T> + Send + 'static,
    S: FnMut(T, &mut Reporter, &mut Complaints) -> Result<(), Lost> + Send + 'static,
{
    let Follower {
        thread,
        source,
        mut connect,
        mut serve,
    } = f;
    let mut reporter = Reporter::new(source, events);
    let mut complaints = Complaints::new(source);
    super::spawn_raised(thread.into(), move || {
        let mut conn = Some(first);
        let mut backoff = FIRST_BACKOFF;
        loop {
            if let Some(c) = conn.take() {
                let began = Instant::now();
                if reporter.health(None).is_err() {
                    return;
                }
                let lost = match serve(c, &mut reporter, &mut complaints) {
                    Err(Lost::Daemon) => return,
                    Ok(()) => "the compositor closed the connection".to_string(),
                    Err(Lost::Conn(e)) => e,
                };
                if began.elapsed() >= HEALTHY {
                    backoff = FIRST_BACKOFF;
                }
                tracing::info!(?source, "compositor connection lost ({lost}); reconnecting");
                let error = format!("degraded: {lost}; reconnecting");
                let cleared = reporter.seen(None, Err(String::new()));
                if cleared.and_then(|()| reporter.health(Some(error))).is_err() {
                    return;
                }
            }
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(MAX_BACKOFF);
            match connect() {
                Ok(c) => conn = Some(c),
                Err(e) if gone_for_good(&e) => {
                    tracing::info!(?source, "the compositor is gone ({e}); no longer followed");
                    let _ = reporter.seen(None, Err(String::new()));
                    let _ = reporter.health(None);
                    return;
                }
                Err(e) => tracing::debug!(?source, "reconnecting: {e}; next in {backoff:?}"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bounded_and_a_cut_line_is_an_error() {
        let mut line = Vec::new();
        let mut r = io::BufReader::new(&b"a>>b\nlast"[..]);
        assert!(read_line(&mut r, &mut line).unwrap());
        assert_eq!(line, b"a>>b");
        assert!(matches!(read_line(&mut r, &mut line), Err(Lost::Conn(_))));
        assert!(!read_line(&mut r, &mut line).unwrap());
        let long = vec![b'x'; MAX_MESSAGE + 10];
        let mut r = io::BufReader::new(&long[..]);
        let e = read_line(&mut r, &mut line).unwrap_err();
        assert!(matches!(e, Lost::Conn(m) if m.contains("longer than")));
    }

    #[test]
    fn complaints_are_rate_limited_per_kind() {
        let mut c = Complaints::new(SourceName::Sway);
        c.say("a", "first");
        let said = c.said["a"].0;
        c.say("a", "second");
        c.say("a", "third");
        assert_eq!(c.said["a"], (said, 2));
        c.say("b", "another kind");
        assert_eq!(c.said["b"].1, 0);
        c.said.get_mut("a").unwrap().0 -= COMPLAIN_EVERY;
        c.say("a", "fourth");
        assert_eq!(c.said["a"].1, 0);
        assert_ne!(c.said["a"].0, said);
    }
}
