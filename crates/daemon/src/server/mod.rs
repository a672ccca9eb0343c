//! The control socket: a Unix stream socket, one JSON request line and one reply line per
//! connection. The caller's uid comes from the kernel (SO_PEERCRED), never from the message.
//!
//! Safety rules: anyone may read `status`; changing anything needs root or a uid in
//! `control_uids` (a local user must not be able to boost arbitrary processes). No client can
//! lock others out or grow the daemon's memory: connections are counted per uid, in separate
//! pools for root, for `control_uids` and for everyone else (so a flood from an unprivileged
//! user never takes root's room); a client over its share gets a "busy" reply, not a reset; a
//! request line longer than [`MAX_REQUEST`] bytes is refused, and one that has not arrived within
//! [`REQUEST_TIMEOUT`] is dropped.

use crate::types::Event;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::{debug, warn};
use uxsched_client::control::{Request, Response, MAX_REQUEST};
use uxsched_client::proto::{self as v1, Refusal, Reply};
use uxsched_os::peer::{peer_uid, Peer};

mod framing;
use framing::too_slow;
pub use framing::{parse_request, read_line, Incoming, Lines};

/// A client must send its whole request line within this time.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);
/// How long the daemon loop may take to answer, and a client to take the reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// Who a connection counts against: (pool, room in the pool, room per uid in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Pool {
    Root,
    Control,
    Others,
}

impl Pool {
    fn of(uid: u32, control_uids: &[u32]) -> Pool {
        match uid {
            0 => Pool::Root,
            u if control_uids.contains(&u) => Pool::Control,
            _ => Pool::Others,
        }
    }

    fn who(self) -> &'static str {
        match self {
            Pool::Root => "root",
            Pool::Control => "`control_uids` users",
            Pool::Others => "unprivileged users",
        }
    }

    /// (connections open at once in the pool, per uid).
    fn room(self) -> (usize, usize) {
        match self {
            Pool::Root => (16, 16),
            Pool::Control => (16, 4),
            Pool::Others => (32, 4),
        }
    }
}

/// Open connections per pool and per uid.
#[derive(Debug, Default)]
struct Slots {
    pools: HashMap<Pool, usize>,
    uids: HashMap<u32, usize>,
}

impl Slots {
    /// Take a slot for `uid`, or say why not.
    fn take(&mut self, uid: u32, pool: Pool) -> Result<(), String> {
        let (in_pool, per_uid) = pool.room();
        let mine = self.uids.get(&uid).copied().unwrap_or(0);
        if mine >= per_uid {
            return Err(format!(
                "busy: uid {uid} already has {mine} connections open (at most {per_uid}); \
                 close some and retry"
            ));
        }
        let pooled = self.pools.get(&pool).copied().unwrap_or(0);
        if pooled >= in_pool {
            return Err(format!(
                "busy: {pooled} connections of {} are open (at most {in_pool}); retry in a moment",
                pool.who()
            ));
        }
        *self.uids.entry(uid).or_default() += 1;
        *self.pools.entry(pool).or_default() += 1;
        Ok(())
    }

    fn give_back(&mut self, uid: u32, pool: Pool) {
        for n in [self.uids.get_mut(&uid), self.pools.get_mut(&pool)]
            .into_iter()
            .flatten()
        {
            *n = n.saturating_sub(1);
        }
        self.uids.retain(|_, n| *n > 0);
    }
}

pub struct Server {
    path: PathBuf,
}

impl Server {
    /// Bind the socket (replacing a stale one left by a killed daemon, refusing to steal a live
    /// one) and serve it on a thread that forwards requests into `events`.
    pub fn start(
        path: &Path,
        control_uids: Vec<u32>,
        events: Sender<Event>,
    ) -> anyhow::Result<Server> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                anyhow::bail!(
                    "another daemon is already serving {}; stop it or choose another `socket`",
                    path.display()
                );
            }
            std::fs::remove_file(path)
                .map_err(|e| anyhow::anyhow!("cannot remove stale {}: {e}", path.display()))?;
        }
        let listener = UnixListener::bind(path)
            .map_err(|e| anyhow::anyhow!("cannot bind {}: {e}", path.display()))?;
        // Everyone may connect; what they may do is decided per request from SO_PEERCRED.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
        std::thread::Builder::new()
            .name("uxsched-server".into())
            .spawn(move || accept_loop(listener, Arc::new(control_uids), events))?;
        Ok(Server {
            path: path.to_owned(),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Admit each connection into its uid's share (or answer "busy") and serve it on a thread.
fn accept_loop(listener: UnixListener, control_uids: Arc<Vec<u32>>, events: Sender<Event>) {
    let slots = Arc::new(Mutex::new(Slots::default()));
    let conns = AtomicU64::new(0);
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and the like: do not spin; the clients waiting are kept in the backlog.
                warn!("control socket: cannot accept a client: {e}; check the daemon's fd limit");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let Ok(uid) = peer_uid(&stream) else {
            continue;
        };
        let pool = Pool::of(uid, &control_uids);
        let taken = slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(uid, pool);
        if let Err(why) = taken {
            debug!(uid, "{why}");
            refuse(&stream, &why);
            continue;
        }
        let (held, uids, events) = (slots.clone(), control_uids.clone(), events.clone());
        let conn = conns.fetch_add(1, Ordering::Relaxed);
        let spawned = std::thread::Builder::new()
            .name("uxsched-client".into())
            .spawn(move || {
                if let Err(e) = serve(&stream, uid, conn, &uids, &events) {
                    debug!(uid, "client: {e}");
                }
                held.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .give_back(uid, pool);
            });
        if let Err(e) = spawned {
            warn!("cannot serve a client: {e}");
            slots
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .give_back(uid, pool);
        }
    }
}

/// Answer a client without reading its request: never blocks the accept loop. What it already
/// sent is drained first, so that closing does not turn into a reset before it reads the reply.
fn refuse(stream: &UnixStream, why: &str) {
    if stream.set_nonblocking(true).is_err() {
        return;
    }
    let mut sink = [0u8; 1024];
    let mut left = 4 * MAX_REQUEST;
    while let Ok(n @ 1..) = (&*stream).read(&mut sink) {
        left = left.saturating_sub(n);
        if left == 0 {
            break;
        }
    }
    let _ = reply(stream, &Response::error(why));
    let _ = stream.shutdown(Shutdown::Write);
}

fn reply(mut stream: &UnixStream, resp: &impl serde::Serialize) -> io::Result<()> {
    let mut line = serde_json::to_string(resp)?;
    line.push('\n');
    stream.write_all(line.as_bytes())
}

fn serve(
    stream: &UnixStream,
    uid: u32,
    conn: u64,
    control_uids: &[u32],
    events: &Sender<Event>,
) -> io::Result<()> {
    stream.set_write_timeout(Some(REPLY_TIMEOUT))?;
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let arm = |s: &mut &UnixStream| {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, too_slow()));
        }
        s.set_read_timeout(Some(left))
    };
    let mut lines = Lines::default();
    let line = match lines.next(&mut &*stream, arm) {
        Ok(l) => l,
        Err(e) => return reply(stream, &Response::error(e)),
    };
    match parse_request(&line) {
        Ok(Incoming::Control(request)) => control(stream, uid, request, control_uids, events),
        Ok(Incoming::Thread(first)) => threads(stream, conn, first, lines, events),
        Err(e) if v1::is_versioned(&String::from_utf8_lossy(&line)) => {
            reply(stream, &Reply::refused(Refusal::BadRequest, e))
        }
        Err(e) => reply(stream, &Response::error(e)),
    }
}

/// A real-time API session: requests and replies, one line each, for as long as the client
/// keeps the connection (its `until: close` grants last that long). The first line had to come
/// within [`REQUEST_TIMEOUT`]; later ones may come whenever. EOF, an empty line or a line that
/// cannot be read ends it; the daemon is told, so the connection's grants end with it.
fn threads(
    stream: &UnixStream,
    conn: u64,
    first: v1::Request,
    mut lines: Lines,
    events: &Sender<Event>,
) -> io::Result<()> {
    struct Closed<'a>(&'a Sender<Event>, u64);
    impl Drop for Closed<'_> {
        fn drop(&mut self) {
            let _ = self.0.send(Event::Closed { conn: self.1 });
        }
    }
    let _closed = Closed(events, conn);
    let peer = Arc::new(Peer::of(stream)?);
    let mut next = Ok(first);
    loop {
        let answer = match next {
            Ok(request) => {
                let (tx, rx) = mpsc::channel();
                let asked = events.send(Event::Thread {
                    request,
                    peer: peer.clone(),
                    conn,
                    reply: tx,
                });
                match asked {
                    Ok(()) => rx.recv_timeout(REPLY_TIMEOUT).unwrap_or_else(|_| {
                        Reply::refused(Refusal::NotApplied, "the daemon did not answer in time")
                    }),
                    Err(_) => Reply::refused(Refusal::NotApplied, "the daemon is shutting down"),
                }
            }
            Err(e) => Reply::refused(Refusal::BadRequest, e),
        };
        reply(stream, &answer)?;
        stream.set_read_timeout(None)?;
        next = match lines.next(&mut &*stream, |_| Ok(())) {
            Ok(line) if line.is_empty() => return Ok(()),
            Ok(line) => match parse_request(&line) {
                Ok(Incoming::Thread(r)) => Ok(r),
                Ok(Incoming::Control(_)) => {
                    Err("bad request: a real-time API session takes only v1 requests".into())
                }
                Err(e) => Err(e),
            },
            Err(e) => return reply(stream, &Reply::refused(Refusal::BadRequest, e)),
        };
    }
}

fn control(
    stream: &UnixStream,
    uid: u32,
    request: Request,
    control_uids: &[u32],
    events: &Sender<Event>,
) -> io::Result<()> {
    if request.is_control() && uid != 0 && !control_uids.contains(&uid) {
        return reply(
            stream,
            &Response::error(format!(
                "uid {uid} may not change anything; add it to `control_uids` in the config"
            )),
        );
    }
    let (tx, rx) = mpsc::channel();
    if events
        .send(Event::Client {
            request,
            uid,
            reply: tx,
        })
        .is_err()
    {
        return reply(stream, &Response::error("the daemon is shutting down"));
    }
    let resp = rx
        .recv_timeout(REPLY_TIMEOUT)
        .unwrap_or_else(|_| Response::error("the daemon did not answer in time"));
    reply(stream, &resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn each_pool_and_uid_has_its_own_room() {
        let mut s = Slots::default();
        for _ in 0..4 {
            s.take(65534, Pool::Others).unwrap();
        }
        let e = s.take(65534, Pool::Others).unwrap_err();
        assert!(e.starts_with("busy") && e.contains("uid 65534"), "{e}");
        // Eight users fill the unprivileged pool; root and control uids still get in.
        for uid in 1000..1007 {
            for _ in 0..4 {
                s.take(uid, Pool::Others).unwrap();
            }
        }
        assert!(s.take(2000, Pool::Others).unwrap_err().starts_with("busy"));
        for _ in 0..16 {
            s.take(0, Pool::Root).unwrap();
        }
        s.take(500, Pool::Control).unwrap();
        s.give_back(65534, Pool::Others);
        s.take(65534, Pool::Others).unwrap();
        assert_eq!(s.pools[&Pool::Others], 32);
    }

    /// Reads its bytes in chunks of random sizes, as a socket may deliver them.
    struct Chunked<'a> {
        data: &'a [u8],
        rng: ChaCha8Rng,
    }

    impl Read for Chunked<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self
                .rng
                .gen_range(1..=700)
                .min(buf.len())
                .min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// One hostile request: random bytes, a mutated valid request, deep nesting, or huge.
    fn hostile(rng: &mut ChaCha8Rng) -> Vec<u8> {
        let valid = [
            &br#"{"cmd":"status"}"#[..],
            br#"{"cmd":"focus","pid":42}"#,
            br#"{"cmd":"mode","mode":"eimos"}"#,
            br#"{"v":1,"cmd":"realtime","tid":42,"policy":"rr","priority":10}"#,
            br#"{"v":1,"cmd":"high_priority","tid":42,"nice":-5,"until":"exit"}"#,
            br#"{"v":1,"cmd":"reset","tid":42}"#,
        ];
        match rng.gen_range(0..5) {
            0 => (0..rng.gen_range(0..6000)).map(|_| rng.gen()).collect(),
            1 => {
                let mut v = valid[rng.gen_range(0..valid.len())].to_vec();
                for _ in 0..rng.gen_range(1..6) {
                    let at = rng.gen_range(0..=v.len());
                    match rng.gen_range(0..3) {
                        0 => v.insert(at, rng.gen()),
                        1 if at < v.len() => v[at] = rng.gen(),
                        _ if at < v.len() => drop(v.remove(at)),
                        _ => {}
                    }
                }
                v.push(b'\n');
                v
            }
            2 => {
                let depth = rng.gen_range(1..5000);
                let mut v = vec![b'['; depth];
                v.resize(2 * depth, b']');
                v
            }
            3 => format!(
                r#"{{"cmd":"mode","mode":"{}"}}"#,
                "x".repeat(rng.gen_range(0..9000))
            )
            .into_bytes(),
            _ => valid[rng.gen_range(0..valid.len())].to_vec(), // unterminated
        }
    }

    #[test]
    fn fuzzed_request_lines_get_a_request_or_a_clear_error_never_a_panic() {
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let (mut ok, mut refused) = (0, 0);
        for _ in 0..5_000 {
            let bytes = hostile(&mut rng);
            let mut r = Chunked {
                data: &bytes,
                rng: ChaCha8Rng::seed_from_u64(rng.gen()),
            };
            // The oracle: the first line, or everything without a newline.
            let want = bytes.split(|&b| b == b'\n').next().unwrap();
            match read_line(&mut r, |_| Ok(())) {
                Ok(line) => {
                    assert!(want.len() <= MAX_REQUEST);
                    assert_eq!(line, want);
                    match parse_request(&line) {
                        Ok(_) => ok += 1,
                        Err(e) => {
                            assert!(e.starts_with("bad request: "), "{e}");
                            refused += 1;
                        }
                    }
                }
                Err(e) => {
                    assert!(want.len() > MAX_REQUEST, "{e}");
                    assert!(e.contains("longer than 4096 bytes"), "{e}");
                    refused += 1;
                }
            }
        }
        assert!(ok > 100 && refused > 2_000, "ok {ok}, refused {refused}");
    }

    /// A server on a fresh socket whose "daemon loop" answers every request with ok.
    fn server() -> (tempfile::TempDir, PathBuf, Server) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let (tx, rx) = mpsc::channel();
        let server = Server::start(&path, Vec::new(), tx).unwrap();
        std::thread::spawn(move || {
            for ev in rx {
                if let Event::Client { reply, .. } = ev {
                    let _ = reply.send(Response::ok());
                }
            }
        });
        (dir, path, server)
    }

    /// Send `bytes` (then stop writing) and read the one reply line.
    fn exchange(path: &Path, bytes: &[u8], pause: Duration) -> Response {
        let mut s = UnixStream::connect(path).unwrap();
        let _ = s.write_all(bytes); // the server may stop reading an oversized line
        std::thread::sleep(pause);
        let _ = s.shutdown(Shutdown::Write);
        let mut line = String::new();
        let _ = s.read_to_string(&mut line);
        serde_json::from_str(line.trim_end()).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    #[test]
    fn the_socket_answers_malformed_oversized_slow_and_nested_requests_with_an_error() {
        let (_dir, path, _server) = server();
        let none = Duration::ZERO;
        let error = |r: Response| r.error.unwrap_or_else(|| panic!("not refused"));
        let e = error(exchange(&path, &[b'a'; 100_000], none));
        assert!(e.contains("longer than 4096"), "{e}");
        let e = error(exchange(&path, b"\xff\xfe{}\n", none));
        assert!(e.contains("not UTF-8"), "{e}");
        let mut nested = r#"{"a":"#.repeat(700).into_bytes();
        nested.push(b'\n');
        let e = error(exchange(&path, &nested, none));
        assert!(e.contains("recursion limit"), "{e}");
        let e = error(exchange(&path, b"\n", none));
        assert!(e.contains("empty line"), "{e}");
        let e = error(exchange(&path, b"{\"cmd\":\"status\",\"x\":1}\n", none));
        assert!(e.contains("unknown field `x`"), "{e}");
        // A request without its newline, then end of file: still a request.
        assert!(exchange(&path, br#"{"cmd":"status"}"#, none).ok);
        // Half a request, then silence: dropped after the deadline, with a reason.
        let t = Instant::now();
        let slow = REQUEST_TIMEOUT + Duration::from_millis(300);
        let e = error(exchange(&path, br#"{"cmd":"#, slow));
        assert!(e.contains("timed out"), "{e}");
        assert!(t.elapsed() < slow + Duration::from_secs(2));
        // A control request from a uid without the right (unless this runs as root).
        // SAFETY: getuid has no preconditions.
        if unsafe { libc::getuid() } != 0 {
            let e = error(exchange(&path, b"{\"cmd\":\"restore\"}\n", none));
            assert!(e.contains("control_uids"), "{e}");
        }
        // After all that, and a burst of random messages, it still serves.
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for _ in 0..200 {
            let bytes = hostile(&mut rng);
            let r = exchange(&path, &bytes, none);
            assert!(r.ok || r.error.is_some());
        }
        assert!(exchange(&path, b"{\"cmd\":\"status\"}\n", none).ok);
    }
}
