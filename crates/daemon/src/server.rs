//! The control socket: a Unix stream socket, one JSON request line and one reply line per
//! connection. The caller's uid comes from the kernel (SO_PEERCRED), never from the message.
//!
//! Safety rules: anyone may read `status`; changing anything needs root or a uid in
//! `control_uids` (a local user must not be able to boost arbitrary processes); requests are
//! bounded in size and in concurrent connections, and a slow client times out (no client can
//! grow the daemon's memory or stall the loop).

use crate::api::{Request, Response, MAX_LINE};
use crate::sources::Event;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::Duration;
use tracing::{debug, warn};

const MAX_CONNECTIONS: usize = 32;
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The uid of the process at the other end of `stream`.
pub fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
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
        let active = Arc::new(AtomicUsize::new(0));
        let control_uids = Arc::new(control_uids);
        std::thread::Builder::new()
            .name("uxsched-server".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    if active.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                        let _ = reply(&stream, &Response::error("busy: too many connections"));
                        continue;
                    }
                    active.fetch_add(1, Ordering::Relaxed);
                    let (active, uids, events) =
                        (active.clone(), control_uids.clone(), events.clone());
                    let spawned = std::thread::Builder::new()
                        .name("uxsched-client".into())
                        .spawn(move || {
                            if let Err(e) = serve(&stream, &uids, &events) {
                                debug!("client: {e}");
                            }
                            active.fetch_sub(1, Ordering::Relaxed);
                        });
                    if let Err(e) = spawned {
                        warn!("cannot serve a client: {e}");
                    }
                }
            })?;
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

fn reply(mut stream: &UnixStream, resp: &Response) -> std::io::Result<()> {
    let mut line = serde_json::to_string(resp)?;
    line.push('\n');
    stream.write_all(line.as_bytes())
}

fn serve(stream: &UnixStream, control_uids: &[u32], events: &Sender<Event>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let uid = peer_uid(stream)?;
    let mut line = String::new();
    BufReader::new(stream.take(MAX_LINE)).read_line(&mut line)?;
    let request: Request = match serde_json::from_str(&line) {
        Ok(r) => r,
        Err(e) => return reply(stream, &Response::error(format!("bad request: {e}"))),
    };
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
        .recv_timeout(CLIENT_TIMEOUT)
        .unwrap_or_else(|_| Response::error("the daemon did not answer in time"));
    reply(stream, &resp)
}
