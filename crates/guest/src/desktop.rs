//! A virtual X desktop in the guest — Xvfb, openbox and xterm from the host's Debian packages —
//! so the harness's real-application scenario `xterm` runs there as on the host
//! (`crates/bench/src/models/xapp/`): the programs with their shared libraries, and the data
//! they open at start (found by `strace -e openat` of each on Debian bookworm):
//! Xvfb's keymaps and core fonts (and `xkbcomp`, which it runs through `/bin/sh`), openbox's
//! configuration, theme and one font for fontconfig, xterm's resources, terminfo and Xlib's
//! locale tables. Nothing else of the host is copied. Fontconfig gets a configuration of its own
//! that names only that font: with the host's (every font directory, the core fonts' 8 MB of
//! `pcf.gz` among them) openbox had not managed a window within the harness's 15 s.

use crate::Initramfs;
use std::io;
use std::path::{Path, PathBuf};

/// The programs, by name on `PATH`, and their Debian packages (for the error).
const PROGRAMS: [(&str, &str); 4] = [
    ("Xvfb", "xvfb"),
    ("xkbcomp", "x11-xkb-utils"),
    ("openbox", "openbox"),
    ("xterm", "xterm"),
];

/// Directories copied whole (guest path = host path).
const TREES: [&str; 5] = [
    "/usr/share/X11/xkb",
    "/usr/share/fonts/X11/misc",
    "/usr/share/X11/locale",
    "/usr/share/themes/Clearlooks/openbox-3",
    "/etc/xdg/openbox",
];

/// Single files (guest path = host path).
const FILES: [&str; 4] = [
    "/etc/X11/app-defaults/XTerm",
    "/lib/terminfo/x/xterm",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
];

/// Fontconfig's configuration in the guest: the one font directory copied, a cache in `/tmp`.
const FONTS_CONF: &str = "<?xml version=\"1.0\"?>
<!DOCTYPE fontconfig SYSTEM \"urn:fontconfig:fonts.dtd\">
<fontconfig>
  <dir>/usr/share/fonts/truetype/dejavu</dir>
  <cachedir>/tmp/fontconfig</cachedir>
</fontconfig>
";

/// Add the desktop to `fs`; an error names what is missing on the host and its package.
pub fn add_x_desktop(fs: &mut Initramfs) -> io::Result<()> {
    for (name, package) in PROGRAMS {
        let host = which(name).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{name} is not on PATH: apt-get install {package} (or bash scripts/setup.sh)"
                ),
            )
        })?;
        fs.binary(&host, &format!("/usr/bin/{name}"))?;
    }
    for dir in TREES {
        fs.tree(Path::new(dir), dir)?;
    }
    for file in FILES {
        fs.file(Path::new(file), file)?;
    }
    fs.bytes("/etc/fonts/fonts.conf", FONTS_CONF, 0o644);
    // xterm looks its user up, and the harness runs the desktop, the app and the load as its
    // unprivileged user `uxsched-bench` (it runs `useradd`, which this guest has not, only when
    // the user is missing); Xvfb writes compiled keymaps here.
    fs.bytes(
        "/etc/passwd",
        "root:x:0:0:root:/root:/bin/sh\nuxsched-bench:x:999:999::/nonexistent:/bin/sh\n",
        0o644,
    );
    fs.bytes("/etc/group", "root:x:0:\nuxsched-bench:x:999:\n", 0o644);
    fs.dir("/var/lib/xkb");
    fs.dir("/root");
    Ok(())
}

/// The program `prog` on `PATH`, as the shell would find it.
pub fn which(prog: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}
