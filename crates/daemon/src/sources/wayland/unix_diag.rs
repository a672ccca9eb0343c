//! Who is connected to a Unix socket: the kernel's `sock_diag` (NETLINK_SOCK_DIAG, `unix_diag`,
//! what `ss -xp` reads). A connection accepted on a listening socket carries the listener's
//! file (its VFS inode) and names its peer, the client's end; a process holding that end
//! (`/proc/<pid>/fd/* → socket:[inode]`) is a client of the server. The `toplevel` source asks
//! this to tell which processes are Wayland clients of a compositor: one dump of the network
//! namespace's connected Unix sockets, at each focus change it resolves.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const NETLINK_SOCK_DIAG: libc::c_int = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// `TCP_ESTABLISHED`: a connected stream socket.
const ESTABLISHED: u32 = 1;
const UDIAG_SHOW_VFS: u32 = 0x2;
const UDIAG_SHOW_PEER: u32 = 0x4;
const UNIX_DIAG_VFS: u16 = 1;
const UNIX_DIAG_PEER: u16 = 2;
/// The most bytes one dump may read (a desktop has a few thousand Unix sockets, ~100 bytes each).
const MAX_DUMP: usize = 64 << 20;

/// The socket inodes of the client ends of the connections accepted on the Unix socket file
/// `path` (a compositor's `wayland-N`), in this network namespace.
pub fn clients_of(path: &Path) -> io::Result<HashSet<u64>> {
    let m = std::fs::metadata(path)?;
    let dev = kernel_dev(m.dev());
    let mut out = HashSet::new();
    for s in dump()? {
        if s.vfs == Some((m.ino(), dev)) {
            out.extend(s.peer);
        }
    }
    Ok(out)
}

/// One connected Unix socket as the dump names it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Diag {
    /// The file it was bound or accepted at (inode, device as the kernel encodes it).
    vfs: Option<(u64, u32)>,
    /// Its peer's socket inode.
    peer: Option<u64>,
}

/// A device number as the kernel keeps it (`MKDEV`: major << 20 | minor), which is how
/// `unix_diag` reports a socket file's device (`s_dev`, not encoded for user space).
fn kernel_dev(dev: u64) -> u32 {
    (libc::major(dev) << 20) | (libc::minor(dev) & 0xf_ffff)
}

/// Every connected stream Unix socket of this network namespace, with its file and peer.
fn dump() -> io::Result<Vec<Diag>> {
    // SAFETY: plain socket(2).
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor this function owns from here on.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let timeout = libc::timeval {
        tv_sec: 2,
        tv_usec: 0,
    };
    // SAFETY: a valid timeval of the size given.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &timeout as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    let req = request();
    // SAFETY: `req` is a valid buffer of its length; the kernel is the default destination.
    let sent = unsafe { libc::send(fd, req.as_ptr().cast(), req.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0;
    loop {
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        total += n as usize;
        if n == 0 || total > MAX_DUMP {
            return Err(io::Error::other(
                "sock_diag: the dump ended early or ran too long",
            ));
        }
        if parse(&buf[..n as usize], &mut out)? {
            return Ok(out);
        }
    }
}

/// The dump request: established stream sockets, with their file and peer.
fn request() -> Vec<u8> {
    let mut r = Vec::with_capacity(40);
    r.extend_from_slice(&40u32.to_ne_bytes());
    r.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    r.extend_from_slice(&1u32.to_ne_bytes()); // seq
    r.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    r.push(libc::AF_UNIX as u8);
    r.push(0); // protocol
    r.extend_from_slice(&0u16.to_ne_bytes());
    r.extend_from_slice(&(1u32 << ESTABLISHED).to_ne_bytes());
    r.extend_from_slice(&0u32.to_ne_bytes()); // any inode
    r.extend_from_slice(&(UDIAG_SHOW_VFS | UDIAG_SHOW_PEER).to_ne_bytes());
    r.extend_from_slice(&[0xff; 8]); // no cookie
    r
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Read one datagram's netlink messages into `out`; true once the dump is done.
fn parse(mut b: &[u8], out: &mut Vec<Diag>) -> io::Result<bool> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "sock_diag: a malformed message");
    while b.len() >= 16 {
        let len = u32_at(b, 0).ok_or_else(bad)? as usize;
        let kind = u16_at(b, 4).ok_or_else(bad)?;
        if len < 16 || len > b.len() {
            return Err(bad());
        }
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let errno = u32_at(b, 16).map_or(0, |e| -(e as i32));
                return Err(io::Error::from_raw_os_error(errno));
            }
            SOCK_DIAG_BY_FAMILY => out.push(diag(&b[16..len])),
            _ => {}
        }
        b = b.get((len + 3) & !3..).unwrap_or(&[]);
    }
    Ok(false)
}

/// One `unix_diag_msg` (16 bytes) and its attributes.
fn diag(msg: &[u8]) -> Diag {
    let mut d = Diag::default();
    let mut attrs = msg.get(16..).unwrap_or(&[]);
    while let (Some(len), Some(kind)) = (u16_at(attrs, 0), u16_at(attrs, 2)) {
        let len = len as usize;
        let Some(data) = attrs.get(4..len.max(4)) else {
            break;
        };
        match kind {
            UNIX_DIAG_VFS => {
                if let (Some(ino), Some(dev)) = (u32_at(data, 0), u32_at(data, 4)) {
                    d.vfs = Some((ino as u64, dev));
                }
            }
            UNIX_DIAG_PEER => d.peer = u32_at(data, 0).map(u64::from),
            _ => {}
        }
        attrs = attrs.get((len + 3) & !3..).unwrap_or(&[]);
        if len < 4 {
            break;
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::{UnixListener, UnixStream};

    /// The socket inode of a descriptor (`/proc/self/fd/N → socket:[inode]`).
    fn inode(s: &impl AsRawFd) -> u64 {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", s.as_raw_fd())).unwrap();
        let l = link.to_string_lossy();
        l.trim_start_matches("socket:[")
            .trim_end_matches(']')
            .parse()
            .unwrap()
    }

    #[test]
    fn the_clients_of_a_listening_socket_are_told_by_their_inodes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wayland-9");
        let l = UnixListener::bind(&path).unwrap();
        let other = UnixListener::bind(dir.path().join("other")).unwrap();
        let a = UnixStream::connect(&path).unwrap();
        let b = UnixStream::connect(&path).unwrap();
        let c = UnixStream::connect(dir.path().join("other")).unwrap();
        let (_sa, _) = l.accept().unwrap();
        let (_sb, _) = l.accept().unwrap();
        let (_sc, _) = other.accept().unwrap();
        let got = clients_of(&path).unwrap();
        assert!(
            got.contains(&inode(&a)) && got.contains(&inode(&b)),
            "{got:?}"
        );
        assert!(!got.contains(&inode(&c)), "{got:?}");
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(clients_of(&dir.path().join("none")).is_err());
    }

    #[test]
    fn malformed_dumps_are_errors_not_panics() {
        let mut out = Vec::new();
        let mut m = 40u32.to_ne_bytes().to_vec();
        m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        assert!(parse(&m, &mut out).is_err()); // says 40 bytes, has 16
        m.resize(40, 0);
        // An attribute that claims more than there is.
        m[32..34].copy_from_slice(&200u16.to_ne_bytes());
        assert!(!parse(&m, &mut out).unwrap());
        assert_eq!(out, [Diag::default()]);
    }
}
