//! The X side of the auto tests: displays, cookies, Xvfb and client windows as a user.

use super::*;

/// A display number nobody uses (x11.rs takes 90..200).
pub(super) fn free_display() -> u32 {
    (200..400)
        .find(|n| {
            !Path::new(&format!("/tmp/.X11-unix/X{n}")).exists()
                && !Path::new(&format!("/tmp/.X{n}-lock")).exists()
        })
        .expect("no free X display number")
}

/// The socket directory the X server makes as root (one run as another user cannot).
pub(super) fn x11_dir() {
    let dir = Path::new(xdisplay::X11_DIR);
    if std::fs::create_dir(dir).is_ok() {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    }
}

/// An Xauthority file with a fresh cookie for display `n`, owned by `owner`, mode 0600 (what
/// `xauth add :n . COOKIE` writes).
pub(super) fn cookie_file(dir: &Path, n: u32, owner: u32) -> (PathBuf, Vec<u8>) {
    let mut data = vec![0u8; 16];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut data)
        .unwrap();
    let path = dir.join(format!("cookie-{n}-{owner}"));
    write_cookie(&path, n, &data, owner);
    (path, data)
}

pub(super) fn write_cookie(path: &Path, n: u32, data: &[u8], owner: u32) {
    std::fs::write(path, xdisplay::xauthority_file(n, data)).unwrap();
    std::os::unix::fs::chown(path, Some(owner), Some(owner)).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Xvfb on `:n` run as `uid`, with `-auth FILE` when given; ready when it listens.
pub(super) fn xvfb(n: u32, uid: u32, auth: Option<&Path>) -> Kill {
    x11_dir();
    let mut cmd = Command::new("Xvfb");
    // -noreset: the server keeps its root properties when its last client leaves.
    cmd.args([&format!(":{n}"), "-noreset", "-nolisten", "tcp"])
        .args(["-screen", "0", "320x240x24"]);
    if let Some(a) = auth {
        cmd.arg("-auth").arg(a);
    }
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .uid(uid)
        .gid(uid)
        .spawn()
        .expect("Xvfb (Debian package xvfb; `make setup` installs it)");
    let guard = Kill(child);
    let socket = xdisplay::socket_of(Path::new(xdisplay::X11_DIR), n);
    wait_until(&format!("Xvfb :{n}"), Duration::from_secs(10), || {
        procs::is_listened(&procs::listening(), &socket)
    });
    guard
}

/// A client window on `:n` with the cookie file `auth`: run as `uid`, its `_NET_WM_PID` its own
/// pid or `claim`. (guard, pid, window id)
pub(super) fn window(n: u32, auth: &Path, uid: u32, claim: Option<u32>) -> (Kill, u32, u32) {
    let mut cmd = Command::new(any_user::exe_for_any_user());
    cmd.arg("window")
        .env("DISPLAY", format!(":{n}"))
        .env("XAUTHORITY", auth)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .uid(uid)
        .gid(uid);
    if let Some(pid) = claim {
        cmd.env("UXSCHED_TEST_WM_PID", pid.to_string());
    }
    let mut child = cmd.spawn().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let pid = child.id();
    let guard = Kill(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        if let Some(id) = (out.lines().next())
            .and_then(Result::ok)
            .and_then(|l| l.trim().parse::<u32>().ok())
        {
            let _ = tx.send(id);
        }
    });
    let id = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the client window did not start");
    (guard, pid, id)
}

/// Act as the window manager of `:n` (whose cookie is `cookie`): make `win` the active window.
pub(super) fn activate(n: u32, cookie: &[u8], win: u32) {
    let socket = xdisplay::socket_of(Path::new(xdisplay::X11_DIR), n);
    let stream = procs::connect(&socket).unwrap();
    let (stream, _) = x11rb::rust_connection::DefaultStream::from_unix_stream(stream).unwrap();
    let conn = x11rb::rust_connection::RustConnection::connect_to_stream_with_auth_info(
        stream,
        0,
        b"MIT-MAGIC-COOKIE-1".to_vec(),
        cookie.to_vec(),
    )
    .unwrap();
    let root = conn.setup().roots[0].root;
    let active = conn
        .intern_atom(false, b"_NET_ACTIVE_WINDOW")
        .unwrap()
        .reply()
        .unwrap()
        .atom;
    conn.change_property32(PropMode::REPLACE, root, active, AtomEnum::WINDOW, &[win])
        .unwrap();
    conn.get_input_focus().unwrap().reply().unwrap();
}
