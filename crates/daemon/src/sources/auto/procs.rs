//! What discovery reads of the machine: the Unix sockets that are listened on
//! (`/proc/net/unix`), who listens on one (`SO_PEERCRED` of a probe connection), processes'
//! names, command lines, uids and environments, and the password database. Everything is
//! bounded: a file read is capped, a walk over `/proc` reads at most [`MAX_PROCS`] processes.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// The most processes one walk over `/proc` reads.
pub const MAX_PROCS: usize = 65_536;
/// The most bytes read of one environment or command line.
const MAX_ENV: u64 = 256 << 10;

/// The listening Unix sockets of this network namespace: path (`@name` for an abstract one) →
/// inode. `__SO_ACCEPTCON` (0x10000) in `Flags` and state 01 mark a listener.
pub fn listening() -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    parse_listening(&text)
}

pub fn parse_listening(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let flags = u32::from_str_radix(f[3], 16).unwrap_or(0);
        let listen = flags & 0x10000 != 0 && f[5] == "01";
        if let (true, Ok(inode)) = (listen, f[6].parse::<u64>()) {
            // A path with spaces: the rest of the line.
            let path = f[7..].join(" ");
            out.insert(path, inode);
        }
    }
    out
}

/// Whether a server listens on `path` (its file, or the abstract name of the same path, as X
/// servers also listen on).
pub fn is_listened(listening: &BTreeMap<String, u64>, path: &Path) -> bool {
    let p = path.to_string_lossy();
    listening.contains_key(p.as_ref()) || listening.contains_key(&format!("@{p}"))
}

/// The process listening on the socket `path`, and its uid, as the kernel names it
/// (`SO_PEERCRED` of a connection made and closed at once: X and Wayland servers take a
/// connection that never speaks as a client that left).
pub fn listener(path: &Path) -> std::io::Result<(i32, u32)> {
    listener_in(path, &listening())
}

/// [`listener`], asked once per listening socket (`listening`'s inode): discovery looks every
/// few seconds, and a compositor need not see a connection each time.
pub fn listener_in(path: &Path, listening: &BTreeMap<String, u64>) -> std::io::Result<(i32, u32)> {
    type Seen = std::collections::HashMap<(String, u64), (i32, u32)>;
    static SEEN: std::sync::Mutex<Option<Seen>> = std::sync::Mutex::new(None);
    let p = path.to_string_lossy().into_owned();
    let inode = listening
        .get(&p)
        .or_else(|| listening.get(&format!("@{p}")))
        .copied();
    let key = inode.map(|i| (p, i));
    if let Some(k) = &key {
        let seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = seen.as_ref().and_then(|m| m.get(k)) {
            return Ok(*v);
        }
    }
    let found = match connect(path) {
        Ok(s) => {
            let c = uxsched_os::peer::peer_cred(&s)?;
            (c.pid, c.uid)
        }
        // A service without CAP_DAC_OVERRIDE may not connect to a user's socket (mode 0755):
        // the process holding the listening socket's inode tells the same.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            let Some(inode) = inode else { return Err(e) };
            let pid = holder(inode).ok_or(e)?;
            let uid = uid_of(pid).ok_or_else(|| {
                std::io::Error::other(format!("pid {pid}, which holds it, is not one user's"))
            })?;
            (pid, uid)
        }
        Err(e) => return Err(e),
    };
    if let Some(k) = key {
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        let m = seen.get_or_insert_with(Default::default);
        if m.len() >= 1024 {
            m.clear();
        }
        m.insert(k, found);
    }
    Ok(found)
}

/// The lowest pid with a descriptor of socket `inode` open (`/proc/<pid>/fd/*` →
/// `socket:[inode]`; other users' need CAP_SYS_PTRACE).
pub fn holder(inode: u64) -> Option<i32> {
    let want = format!("socket:[{inode}]");
    let mut pids = pids();
    pids.sort_unstable();
    pids.into_iter().find(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .take(1 << 16)
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str()))
    })
}

/// Connect to the Unix socket `path`, or to the abstract socket of the same name when the file
/// is not there (an X server in another mount namespace's /tmp). Never blocks: a listener whose
/// backlog is full (one that never accepts) is `WouldBlock`, not a wait.
pub fn connect(path: &Path) -> std::io::Result<UnixStream> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    match connect_nonblocking(bytes, false) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => connect_nonblocking(bytes, true),
        r => r,
    }
}

fn connect_nonblocking(name: &[u8], abstract_name: bool) -> std::io::Result<UnixStream> {
    use std::os::fd::FromRawFd;
    // SAFETY: a zeroed sockaddr_un is valid; only `sun_family` and `sun_path` are set below.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let start = usize::from(abstract_name);
    if name.is_empty() || start + name.len() >= addr.sun_path.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "socket path too long",
        ));
    }
    for (i, b) in name.iter().enumerate() {
        addr.sun_path[start + i] = *b as libc::c_char;
    }
    let len =
        std::mem::size_of::<libc::sa_family_t>() + start + name.len() + usize::from(!abstract_name);
    // SAFETY: plain socket(2) call.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket this function owns from here on.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    // SAFETY: `addr` is a valid sockaddr_un of at least `len` bytes.
    let r = unsafe {
        libc::connect(
            fd,
            &addr as *const libc::sockaddr_un as *const libc::sockaddr,
            len as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    stream.set_nonblocking(false)?;
    Ok(stream)
}

/// A process's name (`comm`), `?` when it cannot be read.
pub fn comm(pid: i32) -> String {
    uxsched_os::procfs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}

/// A process's command line, its arguments split.
pub fn cmdline(pid: i32) -> Vec<String> {
    read_capped(Path::new(&format!("/proc/{pid}/cmdline")))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The real uid of a process whose uids are all that one (a set-uid program is nobody's here).
pub fn uid_of(pid: i32) -> Option<u32> {
    let status = uxsched_os::procfs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    let uids: Vec<u32> = line
        .split_whitespace()
        .filter_map(|u| u.parse().ok())
        .collect();
    (uids.len() == 4 && uids.iter().all(|&u| u == uids[0])).then(|| uids[0])
}

/// A process's environment variables (only `keys`).
pub fn environ(pid: i32, keys: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(bytes) = read_capped(Path::new(&format!("/proc/{pid}/environ"))) else {
        return out;
    };
    for var in bytes.split(|&c| c == 0) {
        let var = String::from_utf8_lossy(var);
        if let Some((k, v)) = var.split_once('=') {
            if keys.contains(&k) {
                out.insert(k.to_owned(), v.to_owned());
            }
        }
    }
    out
}

/// Every process id now (at most [`MAX_PROCS`]).
pub fn pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .take(MAX_PROCS)
        .collect()
}

fn read_capped(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_ENV)
        .read_to_end(&mut buf)?;
    Ok(buf)
}

/// A small file owned by one of `owners`, read without following a link at its last component
/// (a root service reading a path a user named must not be led to another file): its bytes, or
/// why not.
pub fn read_owned_file(path: &Path, owners: &[u32], max: u64) -> Result<Vec<u8>, String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let m = f
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !m.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if !owners.contains(&m.uid()) {
        return Err(format!(
            "{} belongs to uid {}, not to {}",
            path.display(),
            m.uid(),
            owners
                .iter()
                .map(|u| format!("uid {u}"))
                .collect::<Vec<_>>()
                .join(" or ")
        ));
    }
    if m.len() > max {
        return Err(format!("{} is larger than {max} bytes", path.display()));
    }
    let mut buf = Vec::new();
    f.take(max)
        .read_to_end(&mut buf)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(buf)
}

/// The owner uid of a file (not following a link).
pub fn owner_of(path: &Path) -> Option<u32> {
    std::fs::symlink_metadata(path).ok().map(|m| m.uid())
}

/// A user's name and home directory from the password database.
pub fn user(uid: u32) -> Option<(String, PathBuf)> {
    let mut buf = vec![0 as libc::c_char; 16 << 10];
    // SAFETY: a zeroed passwd is a valid out-value; getpwuid_r fills it, pointing into `buf`.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: valid pointers to `pw`, `buf` (of the length given) and `out`.
    let r = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    if r != 0 || out.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r succeeded: `pw_name` and `pw_dir` point to NUL-terminated strings in
    // `buf`, which outlives these reads.
    let (name, dir) = unsafe { (CStr::from_ptr(pw.pw_name), CStr::from_ptr(pw.pw_dir)) };
    Some((
        name.to_string_lossy().into_owned(),
        PathBuf::from(dir.to_string_lossy().into_owned()),
    ))
}

/// `alice (uid 1000)`, or `uid 1000` for a uid without a name.
pub fn describe_user(uid: u32) -> String {
    match user(uid) {
        Some((name, _)) => format!("{name} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_are_told_from_connected_and_unbound_sockets() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1001 /tmp/.X11-unix/X0\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1002 @/tmp/.X11-unix/X0\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 1003 /tmp/.X11-unix/X0\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1004 /run/user/1000/a b\n\
            0000000000000000: 00000002 00000000 00000000 0002 01 1005\n\
            garbage\n";
        let l = parse_listening(text);
        assert_eq!(l.get("/tmp/.X11-unix/X0"), Some(&1001));
        assert_eq!(l.get("@/tmp/.X11-unix/X0"), Some(&1002));
        assert_eq!(l.get("/run/user/1000/a b"), Some(&1004));
        assert_eq!(l.len(), 3);
        assert!(is_listened(&l, Path::new("/tmp/.X11-unix/X0")));
        assert!(!is_listened(&l, Path::new("/tmp/.X11-unix/X1")));
    }

    #[test]
    fn a_socket_this_process_listens_on_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sock");
        let _l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(is_listened(&listening(), &path));
        let (pid, uid) = listener(&path).unwrap();
        assert_eq!(pid as u32, std::process::id());
        // SAFETY: getuid has no preconditions.
        assert_eq!(uid, unsafe { libc::getuid() });
        assert!(listener(&dir.path().join("none")).is_err());
        let inode = *listening()
            .get(&path.to_string_lossy().into_owned())
            .unwrap();
        assert_eq!(holder(inode), Some(std::process::id() as i32));
    }

    #[test]
    fn owned_files_only_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        let f = dir.path().join("cookie");
        std::fs::write(&f, b"abc").unwrap();
        assert_eq!(read_owned_file(&f, &[me], 10).unwrap(), b"abc");
        assert!(read_owned_file(&f, &[me + 1], 10)
            .unwrap_err()
            .contains("belongs to uid"));
        assert!(read_owned_file(&f, &[me], 2)
            .unwrap_err()
            .contains("larger"));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert!(read_owned_file(&link, &[me], 10).is_err());
        assert!(read_owned_file(dir.path(), &[me], 10).is_err());
    }
}
