//! A local X display as a root service sees it, without `DISPLAY` or `XAUTHORITY`: the server
//! listening on `/tmp/.X11-unix/X<n>` (its pid and uid from `SO_PEERCRED`), the cookie it
//! accepts (its own `-auth FILE`, the session processes' `XAUTHORITY`, the user's
//! `~/.Xauthority`) and the **session's user** — whose processes its windows may name.
//!
//! The session's user is, in this order: logind's user of the session on that display; the X
//! server's uid when it is not root (a rootless Xorg, Xvfb or Xwayland runs as its user); the
//! owner of the server's `-auth` file when that is not root (a display manager that hands the
//! server's cookie file to the user); else the one user whose processes run on the display
//! (`DISPLAY=:n` in their environment) and hold the server's cookie (or, for a server without
//! a cookie file, the one user whose processes run on it at all). Root names nobody; two users
//! name nobody either (which of them is in front cannot be told).

use super::procs;
use super::Why;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where X servers make their sockets.
pub const X11_DIR: &str = "/tmp/.X11-unix";
/// The longest Xauthority file read.
const MAX_XAUTH: u64 = 64 << 10;
const MIT: &[u8] = b"MIT-MAGIC-COOKIE-1";
/// Xauthority address families that a local connection matches.
const FAMILY_LOCAL: u16 = 256;
const FAMILY_WILD: u16 = 65535;

/// The display number of a local display name (`:0`, `:0.0`, `unix:1`); `None` for a remote
/// one (`host:0`, which is reached over TCP) or nonsense.
pub fn parse_display(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("unix").unwrap_or(name);
    let rest = rest.strip_prefix(':')?;
    let number = rest.split('.').next()?;
    number.parse().ok()
}

/// The display number of an X socket's file name (`X0` → 0).
pub fn socket_display(file_name: &str) -> Option<u32> {
    let n = file_name.strip_prefix('X')?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// The socket of display `n` under `dir`.
pub fn socket_of(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("X{n}"))
}

/// An X server that answers on a local display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XServer {
    pub display: u32,
    pub socket: PathBuf,
    pub pid: i32,
    pub uid: u32,
    /// Its process name (`Xorg`, `Xvfb`, `Xwayland`, `Xtigervnc`, …).
    pub comm: String,
    /// The `-auth FILE` of its command line: the cookies it accepts.
    pub auth_file: Option<PathBuf>,
}

impl XServer {
    /// The server listening on `socket` (display `n`), or why none answers.
    pub fn at(socket: &Path, n: u32) -> Result<XServer, String> {
        XServer::at_in(socket, n, &procs::listening())
    }

    /// [`XServer::at`] with the listening sockets read already.
    pub fn at_in(
        socket: &Path,
        n: u32,
        listening: &std::collections::BTreeMap<String, u64>,
    ) -> Result<XServer, String> {
        let (pid, uid) = procs::listener_in(socket, listening)
            .map_err(|e| format!("no X server answers on {}: {e}", socket.display()))?;
        let args = procs::cmdline(pid);
        let auth_file = args
            .iter()
            .position(|a| a == "-auth")
            .and_then(|i| args.get(i + 1))
            .map(PathBuf::from);
        Ok(XServer {
            display: n,
            socket: socket.to_owned(),
            pid,
            uid,
            comm: procs::comm(pid),
            auth_file,
        })
    }

    /// `Xorg on :0`.
    pub fn describe(&self) -> String {
        format!("{} on :{}", self.comm, self.display)
    }

    /// A VNC or RDP server: its screen is somewhere else, not in front of this machine's user.
    pub fn is_remote(&self) -> bool {
        let c = self.comm.to_ascii_lowercase();
        c.starts_with("xvnc")
            || c.starts_with("xtigervnc")
            || c.starts_with("xtightvnc")
            || c.contains("xrdp")
            || c.starts_with("x2go")
            || c.starts_with("xpra")
    }

    /// Xwayland: the X server of a Wayland session, for its X clients only.
    pub fn is_xwayland(&self) -> bool {
        self.comm == "Xwayland"
    }

    /// The cookies of the server's own `-auth` file (readable as root; a root server's file
    /// was chosen by root, a user's server's only if that user owns it).
    pub fn own_cookies(&self) -> Result<Vec<Cookie>, String> {
        let Some(f) = &self.auth_file else {
            return Ok(Vec::new());
        };
        let owners = if self.uid == 0 {
            vec![procs::owner_of(f).unwrap_or(0)]
        } else {
            vec![self.uid]
        };
        let bytes = procs::read_owned_file(f, &owners, MAX_XAUTH)?;
        Ok(cookies_in(&bytes, self.display, &f.display().to_string()))
    }
}

/// An authorisation to present to the X server (the data is a secret: never shown).
#[derive(Clone, PartialEq, Eq)]
pub struct Cookie {
    pub name: Vec<u8>,
    pub data: Vec<u8>,
    /// Where it was read.
    pub from: String,
}

impl std::fmt::Debug for Cookie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Cookie({} from {})",
            String::from_utf8_lossy(&self.name),
            self.from
        )
    }
}

/// The `MIT-MAGIC-COOKIE-1` entries for display `n` of an Xauthority file (big-endian
/// records: family, then address, display number, name and data, each a u16 length and
/// bytes), local or wildcard ones only. A truncated or garbled file yields what came before.
pub fn cookies_in(bytes: &[u8], n: u32, from: &str) -> Vec<Cookie> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let u16_at = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
    };
    let field = |at: &mut usize| -> Option<&[u8]> {
        let len = u16_at(*at)? as usize;
        let f = bytes.get(*at + 2..*at + 2 + len)?;
        *at += 2 + len;
        Some(f)
    };
    let number = n.to_string();
    while at < bytes.len() {
        let Some(family) = u16_at(at) else { break };
        at += 2;
        let mut next = || field(&mut at);
        let (Some(_address), Some(num), Some(name), Some(data)) = (next(), next(), next(), next())
        else {
            break;
        };
        let local = family == FAMILY_LOCAL || family == FAMILY_WILD;
        let this_display = num == number.as_bytes() || (family == FAMILY_WILD && num.is_empty());
        if local && this_display && name == MIT && !data.is_empty() {
            let c = Cookie {
                name: name.to_vec(),
                data: data.to_vec(),
                from: from.to_owned(),
            };
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

/// An Xauthority file holding one local cookie for display `n` (what `xauth add` writes).
pub fn xauthority_file(n: u32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut put = |f: &[u8]| {
        out.extend_from_slice(&(f.len() as u16).to_be_bytes());
        out.extend_from_slice(f);
    };
    let host = hostname();
    put(host.as_bytes());
    put(n.to_string().as_bytes());
    put(MIT);
    put(data);
    let mut file = FAMILY_LOCAL.to_be_bytes().to_vec();
    file.extend(out);
    file
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

/// A process that runs on a display (`DISPLAY` names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisplayProc {
    pub pid: i32,
    pub uid: u32,
    pub xauthority: Option<PathBuf>,
}

/// The processes other than root's whose `DISPLAY` is local display `n` (reading other users'
/// environments needs root: as another user, only its own).
pub fn display_procs(n: u32) -> Vec<DisplayProc> {
    let mut out = Vec::new();
    for pid in procs::pids() {
        let Some(uid) = procs::uid_of(pid) else {
            continue;
        };
        if uid == 0 {
            continue;
        }
        let env = procs::environ(pid, &["DISPLAY", "XAUTHORITY"]);
        if env.get("DISPLAY").and_then(|d| parse_display(d)) != Some(n) {
            continue;
        }
        out.push(DisplayProc {
            pid,
            uid,
            xauthority: env.get("XAUTHORITY").map(PathBuf::from),
        });
    }
    out
}

/// The cookies user `uid` holds for display `n`: in the `XAUTHORITY` files of its processes on
/// it and in its `~/.Xauthority` — only files it owns.
pub fn user_cookies(uid: u32, n: u32, procs_on: &[DisplayProc]) -> Vec<Cookie> {
    let mut files: Vec<PathBuf> = procs_on
        .iter()
        .filter(|p| p.uid == uid)
        .filter_map(|p| p.xauthority.clone())
        .collect();
    if let Some((_, home)) = procs::user(uid) {
        files.push(home.join(".Xauthority"));
    }
    files.dedup();
    let mut out = Vec::new();
    for f in files {
        let Ok(bytes) = procs::read_owned_file(&f, &[uid], MAX_XAUTH) else {
            continue;
        };
        for c in cookies_in(&bytes, n, &f.display().to_string()) {
            if !out.iter().any(|o: &Cookie| o.data == c.data) {
                out.push(c);
            }
        }
    }
    out
}

/// The session's user of display `server` (see the module's doc), with how it was found; or
/// why nobody, and what to do.
pub fn session_user(server: &XServer, logind_user: Option<u32>) -> Result<(u32, String), Why> {
    let who = server.describe();
    if let Some(uid) = logind_user.filter(|&u| u != 0) {
        return Ok((uid, format!("logind's session on :{}", server.display)));
    }
    if server.uid != 0 {
        return Ok((server.uid, format!("runs {who}")));
    }
    if let Some(f) = &server.auth_file {
        if let Some(owner) = procs::owner_of(f).filter(|&o| o != 0) {
            return Ok((
                owner,
                format!("owns the server's cookie file {}", f.display()),
            ));
        }
    }
    // A root server whose cookie file is root's: the user whose processes run on the display
    // and hold its cookie (every process's environment read: at most every CACHE_FOR).
    let key = (server.display, server.pid);
    let cached = CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(k, at, _)| *k == key && at.elapsed() < CACHE_FOR)
        .map(|(_, _, r)| r.clone());
    if let Some(r) = cached {
        return r;
    }
    let r = user_on_display(server);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache.retain(|(k, at, _)| *k != key && at.elapsed() < CACHE_FOR);
    cache.push((key, Instant::now(), r.clone()));
    r
}

/// How long the answer for a root server found from its processes holds.
const CACHE_FOR: Duration = Duration::from_secs(10);

/// The answers found from displays' processes: (display, server pid), when, what.
type Found = ((u32, i32), Instant, Result<(u32, String), Why>);
static CACHE: Mutex<Vec<Found>> = Mutex::new(Vec::new());

fn user_on_display(server: &XServer) -> Result<(u32, String), Why> {
    let who = server.describe();
    let on = display_procs(server.display);
    let server_cookies = server.own_cookies().unwrap_or_default();
    let mut users: Vec<u32> = on.iter().map(|p| p.uid).collect();
    users.sort_unstable();
    users.dedup();
    let holders: Vec<u32> = if server_cookies.is_empty() {
        users.clone()
    } else {
        users
            .iter()
            .copied()
            .filter(|&u| {
                user_cookies(u, server.display, &on)
                    .iter()
                    .any(|c| server_cookies.iter().any(|s| s.data == c.data))
            })
            .collect()
    };
    let auth = match &server.auth_file {
        Some(f) => format!("its cookie file {} is root's", f.display()),
        None => "it has no cookie file (-auth)".into(),
    };
    let todo = "log in on it through logind (a display manager), run the X server as the \
                session's user (rootless Xorg), or give the server's -auth file to that user; \
                `sources_any_owner = true` follows any process (a single-user machine only)"
        .to_owned();
    match holders.as_slice() {
        [uid] => Ok((
            *uid,
            if server_cookies.is_empty() {
                format!("runs the only processes on :{}", server.display)
            } else {
                format!("runs processes on :{} and holds its cookie", server.display)
            },
        )),
        [] => Err(Why {
            why: format!(
                "{who} runs as root and no session user could be found: logind does not know \
                 the display, {auth}, and no user's process {} (DISPLAY=:{})",
                if users.is_empty() || server_cookies.is_empty() {
                    "runs on it"
                } else {
                    "on it holds its cookie"
                },
                server.display
            ),
            todo,
        }),
        several => Err(Why {
            why: format!(
                "{who} runs as root and processes of several users ({}) run on it: whose \
                 session it is cannot be told",
                several
                    .iter()
                    .map(|u| procs::describe_user(*u))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            todo,
        }),
    }
}

/// The cookies to try on `server` for its session's user `user`, best first: the server's own,
/// then the user's. An empty list: connect without one (a server without access control).
pub fn cookies_for(server: &XServer, user: Option<u32>) -> (Vec<Cookie>, Vec<String>) {
    let mut notes = Vec::new();
    let mut out = match server.own_cookies() {
        Ok(c) => c,
        Err(e) => {
            notes.push(e);
            Vec::new()
        }
    };
    if let Some(uid) = user {
        let on = display_procs(server.display);
        for c in user_cookies(uid, server.display, &on) {
            if !out.iter().any(|o| o.data == c.data) {
                out.push(c);
            }
        }
    }
    (out, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_and_socket_names() {
        assert_eq!(parse_display(":0"), Some(0));
        assert_eq!(parse_display(":12.1"), Some(12));
        assert_eq!(parse_display("unix:3"), Some(3));
        assert_eq!(parse_display("localhost:10.0"), None);
        assert_eq!(parse_display(""), None);
        assert_eq!(parse_display(":x"), None);
        assert_eq!(socket_display("X0"), Some(0));
        assert_eq!(socket_display("X1024"), Some(1024));
        assert_eq!(socket_display("X"), None);
        assert_eq!(socket_display("X1-lock"), None);
        assert_eq!(socket_display("Y1"), None);
    }

    #[test]
    fn xauthority_records_for_the_display_only_and_garbage_is_harmless() {
        let mut file = xauthority_file(5, b"0123456789abcdef");
        file.extend(xauthority_file(6, b"other"));
        // A wildcard entry with no display number matches every display.
        let mut wild = FAMILY_WILD.to_be_bytes().to_vec();
        for f in [&b""[..], b"", MIT, b"wild"] {
            wild.extend_from_slice(&(f.len() as u16).to_be_bytes());
            wild.extend_from_slice(f);
        }
        file.extend(&wild);
        // An internet (TCP) entry is not for a local connection.
        let mut tcp = 0u16.to_be_bytes().to_vec();
        for f in [&[127u8, 0, 0, 1][..], b"5", MIT, b"tcp"] {
            tcp.extend_from_slice(&(f.len() as u16).to_be_bytes());
            tcp.extend_from_slice(f);
        }
        file.extend(&tcp);
        let c = cookies_in(&file, 5, "f");
        let data: Vec<&[u8]> = c.iter().map(|c| &c.data[..]).collect();
        assert_eq!(data, [&b"0123456789abcdef"[..], b"wild"]);
        assert!(
            !format!("{:?}", c[0]).contains("0123"),
            "a cookie is never shown"
        );
        // Truncated anywhere: what came before, no panic.
        for cut in 0..file.len() {
            let _ = cookies_in(&file[..cut], 5, "f");
        }
        assert!(cookies_in(&[0xff; 7], 5, "f").is_empty());
    }
}
