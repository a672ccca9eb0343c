//! `uxsched-client`: ask the uxsched daemon for real-time scheduling, a higher priority or a
//! latency hint for threads of your own process, name the processes you depend on, run
//! performance-hint sessions and say when a thread handles user input (protocol v1,
//! docs/api.md).
//!
//! ```no_run
//! let mut c = uxsched_client::Client::connect(uxsched_client::DEFAULT_SOCKET)?;
//! let got = c.for_this_thread(uxsched_client::Ask::Realtime {
//!     policy: uxsched_client::Policy::Fifo,
//!     priority: 10,
//! })?;
//! println!("now {} {:?}", got.policy, got.priority);
//! // … time-critical work; the grant ends with `reset`, the thread's exit or when `c` is dropped.
//! # Ok::<(), uxsched_client::Error>(())
//! ```
//!
//! Real-time grants need a hard `RLIMIT_RTTIME` of at most 200 ms on the process (the kernel
//! then stops a runaway thread): [`limit_rttime`] sets it.

pub mod control;
pub mod proto;

pub use proto::{Ask, Granted, Policy, Refusal, Reply, Request, Session, Until};

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Where the daemon listens unless its config says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/uxsched/uxsched.sock";

/// Longest reply line a client reads.
const MAX_REPLY: u64 = 1 << 16;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot connect to the daemon at {path}: {err} (is `uxsched daemon` running?)")]
    Connect { path: String, err: std::io::Error },
    #[error("talking to the daemon: {0}")]
    Io(#[from] std::io::Error),
    #[error("the daemon's reply is not valid: {0}")]
    Reply(#[from] serde_json::Error),
    #[error("the daemon closed the connection without answering")]
    Closed,
    #[error("the daemon's reply has no `{0}`: is it older than this client? (upgrade it)")]
    Missing(&'static str),
    #[error("refused ({reason:?}): {message}")]
    Refused { reason: Refusal, message: String },
}

/// One connection to the daemon. Grants asked with [`Until::Close`] last while it is open.
pub struct Client {
    stream: UnixStream,
    reader: BufReader<std::io::Take<UnixStream>>,
}

impl Client {
    pub fn connect(socket: impl AsRef<Path>) -> Result<Client, Error> {
        let path = socket.as_ref();
        let stream = UnixStream::connect(path).map_err(|err| Error::Connect {
            path: path.display().to_string(),
            err,
        })?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let reader = BufReader::new(stream.try_clone()?.take(u64::MAX));
        Ok(Client { stream, reader })
    }

    /// Send one request; `Ok` with what the thread has now, or why it was refused.
    pub fn call(&mut self, req: &Request) -> Result<Granted, Error> {
        let r = self.send(req)?;
        r.granted.ok_or(Error::Missing("granted"))
    }

    /// Send one request; the whole reply when granted (hint requests carry the `session`,
    /// `depend` the threads `raised`), or why it was refused.
    pub fn send(&mut self, req: &Request) -> Result<Reply, Error> {
        let mut line = serde_json::to_string(req)?;
        line.push('\n');
        self.stream.write_all(line.as_bytes())?;
        let mut reply = String::new();
        self.reader.get_mut().set_limit(MAX_REPLY);
        if self.reader.read_line(&mut reply)? == 0 {
            return Err(Error::Closed);
        }
        let r: Reply = serde_json::from_str(&reply)?;
        if r.ok && r.granted.is_some() {
            return Ok(r);
        }
        Err(Error::Refused {
            reason: r.refused.unwrap_or(Refusal::BadRequest),
            message: r.error.unwrap_or_default(),
        })
    }

    /// `ask` for the calling thread (until this connection closes), the whole reply.
    pub fn send_for_this_thread(&mut self, ask: Ask) -> Result<Reply, Error> {
        self.send(&Request {
            tid: this_thread(),
            ask,
            until: Until::Close,
        })
    }

    /// A performance-hint session (ADPF's `createHintSession`) for `tids` (threads of this
    /// process; the first asks), aiming at `target_ns` per unit of work.
    pub fn create_hint_session(&mut self, tids: &[i32], target_ns: u64) -> Result<Session, Error> {
        let (&first, rest) = tids.split_first().ok_or_else(|| Error::Refused {
            reason: Refusal::BadRequest,
            message: "a hint session needs at least one thread".into(),
        })?;
        let at = |tid, ask| Request {
            tid,
            ask,
            until: Until::Close,
        };
        let mut s = self.session_of(&at(first, Ask::HintCreate { target_ns }))?;
        for &tid in rest {
            s = self.session_of(&at(tid, Ask::HintThread { session: s.id }))?;
        }
        Ok(s)
    }

    /// Send a hint request (`HintReport`, `HintTarget`, `HintClose`…) for the calling thread;
    /// the session as the daemon holds it after.
    pub fn hint(&mut self, ask: Ask) -> Result<Session, Error> {
        self.session_of(&Request {
            tid: this_thread(),
            ask,
            until: Until::Close,
        })
    }

    fn session_of(&mut self, req: &Request) -> Result<Session, Error> {
        self.send(req)?.session.ok_or(Error::Missing("session"))
    }

    /// `ask` for the calling thread, until this connection closes.
    pub fn for_this_thread(&mut self, ask: Ask) -> Result<Granted, Error> {
        self.call(&Request {
            tid: this_thread(),
            ask,
            until: Until::Close,
        })
    }
}

/// The calling thread's kernel id.
pub fn this_thread() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Set this process's `RLIMIT_RTTIME` (soft and hard) to `us` microseconds unless its hard
/// limit is already at most that: the daemon grants real time only to processes the kernel
/// will stop if a thread runs that long without blocking (SIGXCPU, then SIGKILL).
pub fn limit_rttime(us: u64) -> std::io::Result<()> {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid pointer to an rlimit for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_RTTIME, &mut old) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if old.rlim_max != libc::RLIM_INFINITY && old.rlim_max <= us {
        return Ok(());
    }
    let new = libc::rlimit {
        rlim_cur: us,
        rlim_max: us,
    };
    // SAFETY: valid pointer to an initialised rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_RTTIME, &new) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
