//! Who is connected to a Unix socket: the kernel's `sock_diag` (NETLINK_SOCK_DIAG, `unix_diag`,
//! what `ss -xp` reads), through the rust-netlink crates (`netlink-sys` for the socket,
//! `netlink-packet-core` and `netlink-packet-sock-diag` for the messages). A connection accepted
//! on a listening socket carries the listener's file (its VFS inode) and names its peer, the
//! client's end; a process holding that end (`/proc/<pid>/fd/* → socket:[inode]`) is a client
//! of the server. The `toplevel` source asks this to tell which processes are Wayland clients of
//! a compositor: one dump of the network namespace's connected Unix sockets, at each focus
//! change it resolves.

use std::collections::HashSet;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use netlink_packet_core::{
    Emitable, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_sock_diag::unix::nlas::{Nla, Vfs};
use netlink_packet_sock_diag::unix::{ShowFlags, StateFlags, UnixRequest, UnixResponse};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr};

/// The most bytes one dump may read (a desktop has a few thousand Unix sockets, ~100 bytes each).
const MAX_DUMP: usize = 64 << 20;
/// One datagram's buffer: the kernel fills a dump's datagrams to at most 32 KiB.
const DATAGRAM: usize = 64 << 10;
/// How long the kernel may take for the next datagram of the dump.
const TIMEOUT: Duration = Duration::from_secs(2);

/// The socket inodes of the client ends of the connections accepted on the Unix socket file
/// `path` (a compositor's `wayland-N`), in this network namespace.
pub fn clients_of(path: &Path) -> io::Result<HashSet<u64>> {
    let m = std::fs::metadata(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("sock_diag: the socket file {}: {e}", path.display()),
        )
    })?;
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

impl Diag {
    fn of(r: &UnixResponse) -> Diag {
        let vfs = r.nlas.iter().find_map(|n| match n {
            Nla::Vfs(v) => vfs_fields(v),
            _ => None,
        });
        // A peer that has closed its end is still named, as inode 0 (an orphaned socket's).
        let peer = r.peer().filter(|&p| p != 0).map(u64::from);
        Diag { vfs, peer }
    }
}

/// `UNIX_DIAG_VFS`'s inode and device. netlink-packet-sock-diag 0.5 parses the attribute but
/// keeps both fields private, with no getter; its `Emitable` writes them back as the kernel's
/// `struct unix_diag_vfs` (`udiag_vfs_ino`, `udiag_vfs_dev`: native-endian u32s), read here.
fn vfs_fields(v: &Vfs) -> Option<(u64, u32)> {
    let mut b = [0u8; 8];
    if v.buffer_len() != b.len() {
        return None;
    }
    v.emit(&mut b);
    let ino = u32::from_ne_bytes(b[..4].try_into().ok()?);
    let dev = u32::from_ne_bytes(b[4..].try_into().ok()?);
    Some((u64::from(ino), dev))
}

/// A device number as the kernel keeps it (`MKDEV`: major << 20 | minor), which is how
/// `unix_diag` reports a socket file's device (`s_dev`, not encoded for user space).
fn kernel_dev(dev: u64) -> u32 {
    (libc::major(dev) << 20) | (libc::minor(dev) & 0xf_ffff)
}

/// An error of the dump, saying what failed.
fn failed(what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("sock_diag: {what}: {e}"))
}

/// Every connected Unix socket of this network namespace, with its file and peer.
fn dump() -> io::Result<Vec<Diag>> {
    let sock = Socket::new(NETLINK_SOCK_DIAG)
        .map_err(|e| failed("opening a NETLINK_SOCK_DIAG socket", e))?;
    sock.connect(&SocketAddr::new(0, 0))
        .map_err(|e| failed("connecting to the kernel", e))?;
    rustix::net::sockopt::set_socket_timeout(
        &sock,
        rustix::net::sockopt::Timeout::Recv,
        Some(TIMEOUT),
    )
    .map_err(|e| failed("setting the receive timeout", e.into()))?;
    sock.send(&request(), 0)
        .map_err(|e| failed("sending the dump request", e))?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; DATAGRAM];
    let mut total = 0;
    loop {
        // MSG_TRUNC: the datagram's whole length, so that a truncated one is seen.
        let n = sock.recv(&mut &mut buf[..], libc::MSG_TRUNC).map_err(|e| {
            let what = match e.kind() {
                io::ErrorKind::WouldBlock => {
                    format!("the kernel sent no more of the dump within {TIMEOUT:?}")
                }
                _ => "reading the dump".to_owned(),
            };
            failed(&what, e)
        })?;
        total += n;
        if n == 0 || n > buf.len() || total > MAX_DUMP {
            return Err(io::Error::other(format!(
                "sock_diag: the dump ended early or ran too long (a datagram of {n} bytes, \
                 {total} in all; at most {DATAGRAM} and {MAX_DUMP})"
            )));
        }
        if parse(&buf[..n], &mut out)? {
            return Ok(out);
        }
    }
}

/// The dump request: established sockets, with their file and peer.
fn request() -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    header.sequence_number = 1;
    let req = UnixRequest {
        state_flags: StateFlags::ESTABLISHED,
        inode: 0,
        show_flags: ShowFlags::VFS | ShowFlags::PEER,
        cookie: [0xff; 8], // none
    };
    let mut msg = NetlinkMessage::new(header, SockDiagMessage::UnixRequest(req).into());
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf);
    buf
}

/// Read one datagram's netlink messages into `out`; true once the dump is done.
fn parse(mut b: &[u8], out: &mut Vec<Diag>) -> io::Result<bool> {
    while !b.is_empty() {
        let msg = NetlinkMessage::<SockDiagMessage>::deserialize(b).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("sock_diag: a malformed message: {e}"),
            )
        })?;
        match msg.payload {
            NetlinkPayload::Done(_) => return Ok(true),
            NetlinkPayload::Error(e) if e.code.is_some() => {
                let e = e.to_io();
                let what = match e.raw_os_error() {
                    Some(libc::ENOENT) => {
                        "the kernel has no unix_diag (CONFIG_UNIX_DIAG): `modprobe unix_diag`"
                    }
                    _ => "the kernel refused the dump request",
                };
                return Err(failed(what, e));
            }
            NetlinkPayload::InnerMessage(SockDiagMessage::UnixResponse(r)) => {
                out.push(Diag::of(&r))
            }
            _ => {}
        }
        let next = (msg.header.length as usize).next_multiple_of(4);
        b = b.get(next..).unwrap_or(&[]);
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::{DoneMessage, ErrorMessage, Parseable};
    use netlink_packet_sock_diag::unix::UnixResponseHeader;
    use proptest::prelude::*;
    use std::num::NonZeroI32;
    use std::os::fd::AsRawFd;
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
        // Connected but not yet accepted: not a client yet (its server end has no inode until
        // accepted, and the dump leaves out sockets without one).
        let pending = UnixStream::connect(&path).unwrap();
        let (_sa, _) = l.accept().unwrap();
        let (_sb, _) = l.accept().unwrap();
        let (_sc, _) = other.accept().unwrap();
        let got = clients_of(&path).unwrap();
        assert!(
            got.contains(&inode(&a)) && got.contains(&inode(&b)),
            "{got:?}"
        );
        assert!(!got.contains(&inode(&c)), "{got:?}");
        assert!(!got.contains(&inode(&pending)), "{got:?}");
        assert_eq!(got.len(), 2, "{got:?}");
        // A closed client is gone from the next dump, though its server end is still open.
        drop(a);
        let got = clients_of(&path).unwrap();
        assert_eq!(got, HashSet::from([inode(&b)]));
        let e = clients_of(&dir.path().join("none")).unwrap_err();
        assert!(e.to_string().contains("none"), "{e}");
    }

    /// A datagram of netlink messages as the kernel frames them.
    fn datagram(msgs: Vec<NetlinkPayload<SockDiagMessage>>) -> Vec<u8> {
        let mut out = Vec::new();
        for payload in msgs {
            let mut m = NetlinkMessage::new(NetlinkHeader::default(), payload);
            m.finalize();
            let mut b = vec![0; m.buffer_len().next_multiple_of(4)];
            m.serialize(&mut b[..m.buffer_len()]);
            out.extend(b);
        }
        out
    }

    fn response(nlas: Vec<Nla>) -> NetlinkPayload<SockDiagMessage> {
        let header = UnixResponseHeader {
            kind: libc::SOCK_STREAM as u8,
            state: 1,
            inode: 7,
            cookie: [0; 8],
        };
        let r = UnixResponse {
            header,
            nlas: nlas.into_iter().collect(),
        };
        SockDiagMessage::UnixResponse(Box::new(r)).into()
    }

    fn vfs(ino: u32, dev: u32) -> Nla {
        let mut b = ino.to_ne_bytes().to_vec();
        b.extend(dev.to_ne_bytes());
        Nla::Vfs(Vfs::parse(&b).unwrap())
    }

    #[test]
    fn a_dump_gives_each_sockets_file_and_peer_until_done() {
        let d = datagram(vec![
            response(vec![vfs(42, (8 << 20) | 3), Nla::Peer(99)]),
            response(vec![Nla::Peer(5)]),
        ]);
        let mut out = Vec::new();
        assert!(!parse(&d, &mut out).unwrap());
        assert_eq!(
            out,
            [
                Diag {
                    vfs: Some((42, (8 << 20) | 3)),
                    peer: Some(99)
                },
                Diag {
                    vfs: None,
                    peer: Some(5)
                }
            ]
        );
        let d = datagram(vec![NetlinkPayload::Done(DoneMessage::default())]);
        assert!(parse(&d, &mut out).unwrap());
    }

    #[test]
    fn the_kernels_refusal_is_an_error_saying_what_to_do() {
        let mut e = ErrorMessage::default();
        e.code = NonZeroI32::new(-libc::ENOENT);
        let d = datagram(vec![NetlinkPayload::Error(e)]);
        let e = parse(&d, &mut Vec::new()).unwrap_err();
        assert_eq!(e.raw_os_error(), None, "{e}"); // wrapped, with its kind
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains("modprobe unix_diag"), "{e}");
    }

    #[test]
    fn the_request_asks_for_established_sockets_files_and_peers() {
        let r = request();
        let h = netlink_packet_core::NetlinkBuffer::new_checked(&r[..]).unwrap();
        assert_eq!(h.length() as usize, r.len());
        assert_eq!(
            h.message_type(),
            netlink_packet_sock_diag::SOCK_DIAG_BY_FAMILY
        );
        assert_eq!(h.flags(), NLM_F_REQUEST | NLM_F_DUMP);
        assert_eq!(r[16], libc::AF_UNIX as u8); // `struct unix_diag_req`'s family
        let req = UnixRequest::parse(h.payload()).unwrap();
        assert_eq!(req.state_flags, StateFlags::ESTABLISHED);
        assert_eq!(req.show_flags, ShowFlags::VFS | ShowFlags::PEER);
        assert_eq!(req.inode, 0);
    }

    #[test]
    fn malformed_dumps_are_errors_not_panics() {
        let mut out = Vec::new();
        let mut m = 40u32.to_ne_bytes().to_vec();
        m.extend_from_slice(&20u16.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        assert!(parse(&m, &mut out).is_err()); // says 40 bytes, has 16
                                               // An attribute that claims more than there is.
        let mut d = datagram(vec![response(vec![Nla::Peer(5)])]);
        d[32..34].copy_from_slice(&200u16.to_ne_bytes());
        assert!(parse(&d, &mut out).is_err());
        assert!(out.is_empty(), "{out:?}");
    }

    proptest! {
        /// Whatever the bytes (a valid dump with some changed, or cut short), parsing ends in
        /// an answer or an error, never a panic or a loop.
        #[test]
        fn any_datagram_is_parsed_without_panic(
            flips in proptest::collection::vec((0usize..200, any::<u8>()), 0..8),
            cut in 0usize..200,
        ) {
            let mut d = datagram(vec![
                response(vec![vfs(42, 3), Nla::Peer(99)]),
                response(vec![Nla::Peer(5)]),
                NetlinkPayload::Done(DoneMessage::default()),
            ]);
            for (at, v) in flips {
                let n = d.len();
                d[at % n] = v;
            }
            d.truncate(cut.max(1));
            let _ = parse(&d, &mut Vec::new());
        }
    }
}
