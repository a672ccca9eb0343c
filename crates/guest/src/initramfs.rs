//! The guest's root file system: a newc cpio archive (the format the kernel unpacks, see the
//! kernel's Documentation/driver-api/early-userspace/buffer-format.rst), gzip-compressed.
//!
//! Files are named by their path in the guest; parent directories are added on the way, and
//! every directory precedes its contents (the kernel creates entries in archive order).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One entry of the archive.
#[derive(Debug, Clone)]
enum Entry {
    Dir,
    /// Contents read from a host file when the archive is written.
    HostFile {
        host: PathBuf,
        mode: u32,
    },
    Bytes {
        data: Vec<u8>,
        mode: u32,
    },
    /// A character device node (`/dev/console` must exist before devtmpfs is mounted).
    CharDev {
        major: u32,
        minor: u32,
    },
}

/// A set of guest paths and their contents.
#[derive(Debug, Clone, Default)]
pub struct Initramfs {
    /// Keyed by the guest path without its leading `/`; a parent sorts before its children.
    entries: BTreeMap<String, Entry>,
}

const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFCHR: u32 = 0o020_000;

fn key(guest: &str) -> String {
    guest.trim_matches('/').to_owned()
}

impl Initramfs {
    /// The empty tree with the mount points `/init` uses and `/dev/console`.
    pub fn new() -> Initramfs {
        let mut fs = Initramfs::default();
        for d in [
            "bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "etc",
        ] {
            fs.dir(d);
        }
        fs.insert("dev/console", Entry::CharDev { major: 5, minor: 1 });
        fs
    }

    /// Add a directory (and its parents).
    pub fn dir(&mut self, guest: &str) -> &mut Self {
        let k = key(guest);
        let mut at = 0;
        while let Some(i) = k[at..].find('/') {
            self.entries
                .entry(k[..at + i].to_owned())
                .or_insert(Entry::Dir);
            at += i + 1;
        }
        if !k.is_empty() {
            self.entries.entry(k).or_insert(Entry::Dir);
        }
        self
    }

    fn insert(&mut self, guest: &str, entry: Entry) {
        let k = key(guest);
        if let Some((parent, _)) = k.rsplit_once('/') {
            self.dir(parent);
        }
        self.entries.insert(k, entry);
    }

    /// Add `data` at `guest` with permission bits `mode` (e.g. 0o755).
    pub fn bytes(&mut self, guest: &str, data: impl Into<Vec<u8>>, mode: u32) -> &mut Self {
        let data = data.into();
        self.insert(guest, Entry::Bytes { data, mode });
        self
    }

    /// Add a host file at `guest`, keeping its permission bits.
    pub fn file(&mut self, host: &Path, guest: &str) -> io::Result<&mut Self> {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(host)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", host.display())))?
            .permissions()
            .mode()
            & 0o7777;
        let host = host.to_owned();
        self.insert(guest, Entry::HostFile { host, mode });
        Ok(self)
    }

    /// Add an executable at `guest` and every shared library `ldd` lists for it, each at the
    /// path `ldd` names (so the guest's dynamic loader finds them where the host's does).
    pub fn binary(&mut self, host: &Path, guest: &str) -> io::Result<&mut Self> {
        self.file(host, guest)?;
        for lib in shared_libraries(host)? {
            let at = lib.to_string_lossy().into_owned();
            self.file(&lib, &at)?;
        }
        Ok(self)
    }

    /// Add the host directory `host` at `guest`, recursively: regular files keep their mode, a
    /// link to a file is added as that file's contents, a link to a directory is skipped
    /// (fontconfig's `conf.d` links its files; no tree it is used for links directories).
    pub fn tree(&mut self, host: &Path, guest: &str) -> io::Result<&mut Self> {
        self.dir(guest);
        let entries = std::fs::read_dir(host)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", host.display())))?;
        for entry in entries {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name();
            let at = format!("{}/{}", guest.trim_end_matches('/'), name.to_string_lossy());
            // `metadata` follows links: a dangling one is skipped like a directory link.
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if meta.is_file() {
                self.file(&path, &at)?;
            } else if meta.is_dir() && !entry.file_type()?.is_symlink() {
                self.tree(&path, &at)?;
            }
        }
        Ok(self)
    }

    /// Whether `guest` is in the tree.
    pub fn contains(&self, guest: &str) -> bool {
        self.entries.contains_key(&key(guest))
    }

    /// The uncompressed newc archive.
    pub fn write_cpio(&self, out: &mut impl Write) -> io::Result<()> {
        for (ino, (name, entry)) in self.entries.iter().enumerate() {
            let ino = ino as u32 + 1;
            match entry {
                Entry::Dir => header(out, name, ino, S_IFDIR | 0o755, 0, (0, 0), &[])?,
                Entry::Bytes { data, mode } => {
                    header(out, name, ino, S_IFREG | mode, 1, (0, 0), data)?
                }
                Entry::HostFile { host, mode } => {
                    let data = std::fs::read(host).map_err(|e| {
                        io::Error::new(e.kind(), format!("{}: {e}", host.display()))
                    })?;
                    header(out, name, ino, S_IFREG | mode, 1, (0, 0), &data)?
                }
                Entry::CharDev { major, minor } => {
                    header(out, name, ino, S_IFCHR | 0o600, 1, (*major, *minor), &[])?
                }
            }
        }
        header(out, "TRAILER!!!", 0, 0, 1, (0, 0), &[])
    }

    /// Write the gzip-compressed archive to `path` (fast compression: the guest decompresses
    /// it under emulation, and archive size hardly matters on a local disk).
    pub fn write_gz(&self, path: &Path) -> io::Result<()> {
        let file = io::BufWriter::new(std::fs::File::create(path)?);
        let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
        self.write_cpio(&mut gz)?;
        gz.finish()?.flush()
    }
}

/// One newc header, the NUL-terminated name padded to 4 bytes, then the data padded to 4.
fn header(
    out: &mut impl Write,
    name: &str,
    ino: u32,
    mode: u32,
    nlink: u32,
    rdev: (u32, u32),
    data: &[u8],
) -> io::Result<()> {
    let size = u32::try_from(data.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{name}: over 4 GiB")))?;
    let nlink = if mode & S_IFDIR != 0 { 2 } else { nlink };
    let fields = [
        ino,
        mode,
        0,
        0,
        nlink,
        0,
        size,
        0,
        0,
        rdev.0,
        rdev.1,
        name.len() as u32 + 1,
        0,
    ];
    let mut head = String::from("070701");
    for f in fields {
        head.push_str(&format!("{f:08x}"));
    }
    out.write_all(head.as_bytes())?;
    out.write_all(name.as_bytes())?;
    out.write_all(&[0])?;
    out.write_all(&[0; 3][..pad4(110 + name.len() + 1)])?;
    out.write_all(data)?;
    out.write_all(&[0; 3][..pad4(data.len())])
}

fn pad4(n: usize) -> usize {
    (4 - n % 4) % 4
}

/// The shared libraries (and dynamic loader) an executable needs, from `ldd`; none for a
/// static executable.
pub fn shared_libraries(exe: &Path) -> io::Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(exe)
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("running ldd (package libc-bin): {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if text.contains("not a dynamic executable") || err.contains("not a dynamic executable") {
            return Ok(Vec::new());
        }
        return Err(io::Error::other(format!(
            "ldd {}: {}{}",
            exe.display(),
            text.trim(),
            err.trim()
        )));
    }
    parse_ldd(&text)
}

/// `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` and `/lib64/ld-linux-x86-64.so.2 (0x…)`
/// give a path; `linux-vdso.so.1 (0x…)` is the kernel's and has none; `=> not found` is an error.
fn parse_ldd(text: &str) -> io::Result<Vec<PathBuf>> {
    let mut libs = Vec::new();
    for line in text.lines().map(str::trim) {
        let path = match line.split_once("=>") {
            Some((name, rest)) => {
                let p = rest.split_whitespace().next().unwrap_or("");
                if p == "not" {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("shared library {} not found", name.trim()),
                    ));
                }
                p
            }
            None => line.split_whitespace().next().unwrap_or(""),
        };
        if path.starts_with('/') {
            libs.push(PathBuf::from(path));
        }
    }
    Ok(libs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_the_libraries_and_the_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f29)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f2a)\n";
        let libs = parse_ldd(text).unwrap();
        assert_eq!(
            libs,
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libm.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2")
            ]
        );
        assert!(parse_ldd("\tlibfoo.so.1 => not found\n").is_err());
    }

    #[test]
    fn a_real_binary_brings_libc_and_a_static_one_nothing() {
        let libs = shared_libraries(Path::new("/bin/sh")).unwrap();
        assert!(
            libs.iter().any(|l| l.to_string_lossy().contains("libc.so")),
            "{libs:?}"
        );
    }

    #[test]
    fn a_tree_keeps_files_follows_file_links_and_skips_directory_links() {
        let dir = std::env::temp_dir().join(format!("uxsched-tree-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/a.conf"), "a").unwrap();
        std::os::unix::fs::symlink("sub/a.conf", dir.join("link.conf")).unwrap();
        std::os::unix::fs::symlink("sub", dir.join("loop")).unwrap();
        std::os::unix::fs::symlink("missing", dir.join("dangling")).unwrap();
        let mut fs = Initramfs::new();
        fs.tree(&dir, "/etc/t").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(fs.contains("/etc/t/sub/a.conf"));
        assert!(
            fs.contains("/etc/t/link.conf"),
            "a link to a file is that file"
        );
        assert!(
            !fs.contains("/etc/t/loop"),
            "a link to a directory is skipped"
        );
        assert!(!fs.contains("/etc/t/dangling"));
        assert!(fs.tree(Path::new("/nonexistent-uxsched"), "/x").is_err());
    }

    #[test]
    fn archive_is_newc_with_parents_first_and_aligned() {
        let mut fs = Initramfs::new();
        fs.bytes("/a/b/run.sh", "echo hi\n", 0o755);
        let mut buf = Vec::new();
        fs.write_cpio(&mut buf).unwrap();
        // Walk the archive as the kernel does: every header at a multiple of 4, magic 070701.
        let (mut at, mut names) = (0, Vec::new());
        loop {
            assert_eq!(at % 4, 0);
            assert_eq!(&buf[at..at + 6], b"070701");
            let field = |i: usize| {
                let s = std::str::from_utf8(&buf[at + 6 + 8 * i..at + 14 + 8 * i]).unwrap();
                usize::from_str_radix(s, 16).unwrap()
            };
            let (size, namesize) = (field(6), field(11));
            let name = std::str::from_utf8(&buf[at + 110..at + 110 + namesize - 1]).unwrap();
            names.push(name.to_owned());
            let data = at + 110 + namesize + pad4(110 + namesize);
            if name == "TRAILER!!!" {
                break;
            }
            if name == "a/b/run.sh" {
                assert_eq!(&buf[data..data + size], b"echo hi\n");
                assert_eq!(field(1) as u32, S_IFREG | 0o755);
            }
            at = data + size + pad4(size);
        }
        let pos = |n: &str| names.iter().position(|x| x == n).unwrap();
        assert!(pos("a") < pos("a/b") && pos("a/b") < pos("a/b/run.sh"));
        assert!(names.contains(&"dev/console".to_owned()));
    }
}
