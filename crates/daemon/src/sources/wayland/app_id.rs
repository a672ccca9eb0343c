//! From a window's app id to the process that shows it, for the `toplevel` source: the
//! protocol it reads (wlr-foreign-toplevel-management) names a window's `app_id` and `title`,
//! never its process, so the process is found by name among the session user's.
//!
//! The rule, in order (docs/compositors.md, "toplevel"):
//! 1. **Names.** A process's names are its `comm`, the basename of its executable
//!    (`/proc/PID/exe`), the basename of its `argv[0]`, and the value of an `--app-id` or
//!    `--class` argument (`--app-id=X` or `--app-id X`), all lowercased. An app id's keys are
//!    itself, lowercased, and — for a reverse-DNS id of three or more dot-separated parts
//!    (`org.xfce.mousepad`) — its last part (`mousepad`): GTK and Qt apps take their
//!    application id from their desktop file's name, whose last part is usually the program's
//!    name. A process matches when one of its names is one of the keys.
//! 2. **Clients.** Of the matching processes (any user's), those that hold a connection to
//!    the compositor's display socket are its Wayland clients (`unix_diag.rs`); one connection
//!    held by a parent and a child it forked counts once, for the parent. Exactly one client:
//!    that process — if it is the session user's; another user's or root's is refused. Two or
//!    more: two instances of one app, which the protocol cannot tell apart — nothing in front.
//! 3. **Trees.** No matching client (an X11 window through Xwayland, whose connection is
//!    Xwayland's; or a wrapper named as the app that started the client under another name):
//!    the session user's matching processes, each counted with its tree — one whose ancestor
//!    also matches is part of that ancestor's app (a browser's helpers). Exactly one tree: its
//!    root. None or several: nothing in front.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

/// The deepest ancestry walked (a real process tree is a few dozen levels at most).
const MAX_DEPTH: usize = 256;
/// The most pids a reason lists.
const LIST: usize = 6;

/// A process as the rule sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    /// Its uid when all four (real, effective, saved, fs) are that one; `None` otherwise (a
    /// set-uid program is nobody's here).
    pub uid: Option<u32>,
    /// Its names, lowercased (rule 1).
    pub names: Vec<String>,
    /// The client ends of connections to the compositor it holds (socket inodes).
    pub conns: Vec<u64>,
}

/// The keys of an app id (rule 1); empty for an empty id.
pub fn keys(app_id: &str) -> Vec<String> {
    let id = app_id.trim().to_lowercase();
    if id.is_empty() {
        return Vec::new();
    }
    let parts: Vec<&str> = id.split('.').collect();
    let mut out = vec![id.clone()];
    if parts.len() >= 3 && parts.iter().all(|p| !p.is_empty()) {
        out.push(parts[parts.len() - 1].to_owned());
    }
    out
}

/// A process's names (rule 1) from its `comm`, executable path and arguments.
pub fn names(comm: &str, exe: Option<&Path>, argv: &[String]) -> Vec<String> {
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_lowercase();
    let mut out = vec![comm.trim().to_lowercase()];
    if let Some(e) = exe {
        let e = e.to_string_lossy();
        out.push(base(e.strip_suffix(" (deleted)").unwrap_or(&e)));
    }
    if let Some(a0) = argv.first() {
        out.push(base(a0));
    }
    for (i, a) in argv.iter().enumerate().skip(1) {
        for flag in ["--app-id", "--class"] {
            if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
                out.push(v.to_lowercase());
            } else if a == flag {
                out.extend(argv.get(i + 1).map(|v| v.to_lowercase()));
            }
        }
    }
    out.retain(|n| !n.is_empty());
    out.sort();
    out.dedup();
    out
}

/// Which process of `user` shows the window of `app_id` (the rule above), or why none can be
/// named. `procs`: every process of the machine; `seen_clients`: whether the compositor's
/// connections could be read (else rule 2 is skipped).
pub fn decide(app_id: &str, user: u32, procs: &[Proc], seen_clients: bool) -> Result<i32, String> {
    let keys = keys(app_id);
    if keys.is_empty() {
        return Err("the focused window has no app id".into());
    }
    let by_pid: HashMap<i32, &Proc> = procs.iter().map(|p| (p.pid, p)).collect();
    let matching: Vec<&Proc> = procs
        .iter()
        .filter(|p| p.names.iter().any(|n| keys.contains(n)))
        .collect();
    let clients = if seen_clients {
        clients(&matching, &by_pid)
    } else {
        BTreeSet::new()
    };
    let whose = |pid: i32| match by_pid.get(&pid).and_then(|p| p.uid) {
        Some(0) => "root's".to_owned(),
        Some(u) => format!("uid {u}'s"),
        None => "of mixed uids".to_owned(),
    };
    match clients.len() {
        1 => {
            let pid = *clients.first().unwrap_or(&0);
            if by_pid.get(&pid).and_then(|p| p.uid) == Some(user) {
                return Ok(pid);
            }
            return Err(format!(
                "the window of app id {app_id:?} is pid {pid}'s, the one Wayland client of that \
                 name, which is {} — not the session user's (uid {user}): never acted on",
                whose(pid)
            ));
        }
        n if n >= 2 => {
            return Err(format!(
                "app id {app_id:?} is that of {n} Wayland clients of the compositor (pids {}): \
                 the protocol names no process, and two instances of one app cannot be told \
                 apart",
                list(clients.iter())
            ))
        }
        _ => {}
    }
    let mine: HashSet<i32> = matching
        .iter()
        .filter(|p| p.uid == Some(user))
        .map(|p| p.pid)
        .collect();
    let roots: BTreeSet<i32> = mine
        .iter()
        .copied()
        .filter(|&p| !ancestors(p, &by_pid).any(|a| mine.contains(&a)))
        .collect();
    match roots.len() {
        1 => Ok(*roots.first().unwrap_or(&0)),
        0 => {
            let others: Vec<String> = matching
                .iter()
                .take(LIST)
                .map(|p| format!("pid {} ({})", p.pid, whose(p.pid)))
                .collect();
            let others = match others.is_empty() {
                true => String::new(),
                false => format!("; only {} — never acted on", others.join(", ")),
            };
            Err(format!(
                "no process of the session user (uid {user}) is named {} (its comm, \
                 executable, argv[0] or --app-id/--class){others}",
                keys.join(" or ")
            ))
        }
        n => Err(format!(
            "app id {app_id:?} matches {n} separate process trees of uid {user} (pids {}): \
             which one shows the window cannot be told",
            list(roots.iter())
        )),
    }
}

/// The matching processes that are clients of the compositor: per connection, its topmost
/// holder among them.
fn clients(matching: &[&Proc], by_pid: &HashMap<i32, &Proc>) -> BTreeSet<i32> {
    let mut holders: HashMap<u64, Vec<i32>> = HashMap::new();
    for p in matching {
        for c in &p.conns {
            holders.entry(*c).or_default().push(p.pid);
        }
    }
    holders
        .values()
        .filter_map(|hs| {
            hs.iter()
                .copied()
                .filter(|&h| !ancestors(h, by_pid).any(|a| hs.contains(&a)))
                .min()
        })
        .collect()
}

/// `pid`'s ancestors, parent first (bounded).
fn ancestors<'a>(pid: i32, by_pid: &'a HashMap<i32, &'a Proc>) -> impl Iterator<Item = i32> + 'a {
    let mut at = pid;
    (0..MAX_DEPTH).map_while(move |_| {
        let parent = by_pid.get(&at)?.ppid;
        (parent > 0 && parent != at).then(|| {
            at = parent;
            parent
        })
    })
}

fn list<'a>(pids: impl Iterator<Item = &'a i32>) -> String {
    let all: Vec<String> = pids.map(i32::to_string).collect();
    match all.len() > LIST {
        true => format!("{}, …", all[..LIST].join(", ")),
        false => all.join(", "),
    }
}

/// Processes' names as last read, by pid and start time: a look with every process's
/// executable and arguments read took 25–40 µs a process here (12–14 ms for 510), one with
/// their names known about 12 µs (0.9–1.0 ms for 81). A process's names seldom change (one
/// that rewrites its arguments later keeps the first ones read).
#[derive(Debug, Default)]
pub struct Names(HashMap<i32, (u64, Vec<String>)>);

/// Read the machine's processes for [`decide`]: every process's parent and names (`names`
/// caches them); the uid and connections only of those whose names match `keys` (the others
/// are only ancestors). `clients`: the socket inodes of the compositor's clients.
pub fn read(keys: &[String], clients: &HashSet<u64>, names: &mut Names) -> Vec<Proc> {
    use crate::sources::auto::procs;
    let mut out = Vec::new();
    for pid in procs::pids() {
        let Ok(f) = uxsched_os::task::Fields::read(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let start = f.num::<u64>(22).unwrap_or(0);
        let mut p = Proc {
            pid,
            ppid: f.num(4).unwrap_or(0),
            ..Proc::default()
        };
        let known = names.0.get(&pid).filter(|(s, _)| *s == start);
        let n = match known {
            Some((_, n)) => n,
            None => {
                let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
                let n = self::names(f.comm(), exe.as_deref(), &procs::cmdline(pid));
                &names.0.entry(pid).insert_entry((start, n)).into_mut().1
            }
        };
        if n.iter().any(|n| keys.contains(n)) {
            p.names = n.clone();
            p.uid = procs::uid_of(pid);
            if !clients.is_empty() {
                p.conns = sockets(pid)
                    .into_iter()
                    .filter(|i| clients.contains(i))
                    .collect();
            }
        }
        out.push(p);
    }
    let live: HashSet<i32> = out.iter().map(|p| p.pid).collect();
    names.0.retain(|pid, _| live.contains(pid));
    out
}

/// The socket inodes process `pid` holds (`/proc/<pid>/fd/* → socket:[inode]`).
fn sockets(pid: i32) -> Vec<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .take(1 << 16)
        .filter_map(|fd| {
            let l = std::fs::read_link(fd.path()).ok()?;
            let l = l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?;
            l.parse().ok()
        })
        .collect()
}

/// [`decide`] for the window of `app_id` on the compositor whose display socket is `display`,
/// from the machine as it is now.
pub fn resolve(app_id: &str, user: u32, display: &Path, names: &mut Names) -> Result<i32, String> {
    let keys = keys(app_id);
    let clients = crate::sources::wayland::unix_diag::clients_of(display);
    if let Err(e) = &clients {
        let at = display.display().to_string();
        tracing::debug!(
            socket = %at,
            "toplevel: the compositor's clients cannot be read ({e}): processes are matched by \
             name alone"
        );
    }
    let seen = clients.is_ok();
    let clients = clients.unwrap_or_default();
    decide(app_id, user, &read(&keys, &clients, names), seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: u32 = 1000;

    fn p(pid: i32, ppid: i32, uid: u32, name: &str, conns: &[u64]) -> Proc {
        Proc {
            pid,
            ppid,
            uid: Some(uid),
            names: vec![name.to_owned()],
            conns: conns.to_vec(),
        }
    }

    #[test]
    fn an_app_ids_keys_are_itself_and_a_reverse_dns_ids_last_part() {
        assert_eq!(keys("foot"), ["foot"]);
        assert_eq!(keys("Alacritty"), ["alacritty"]);
        assert_eq!(keys("org.xfce.mousepad"), ["org.xfce.mousepad", "mousepad"]);
        assert_eq!(
            keys("org.gnome.TextEditor"),
            ["org.gnome.texteditor", "texteditor"]
        );
        // Two parts are not reverse DNS; an empty part is not either.
        assert_eq!(keys("firefox.desktop"), ["firefox.desktop"]);
        assert_eq!(keys("a..b"), ["a..b"]);
        assert!(keys(" ").is_empty());
    }

    #[test]
    fn a_processs_names_are_comm_executable_argv0_and_its_app_id_or_class_argument() {
        let argv: Vec<String> = ["/usr/bin/Foot", "--app-id=Mine", "--class", "K", "--x"]
            .map(String::from)
            .to_vec();
        let n = names("foot", Some(Path::new("/usr/bin/foot (deleted)")), &argv);
        assert_eq!(n, ["foot", "k", "mine"]);
        let n = names(
            "MainThread",
            Some(Path::new("/usr/lib/firefox/firefox")),
            &[],
        );
        assert_eq!(n, ["firefox", "mainthread"]);
        // A flag at the end has no value; a longer flag is not it.
        let argv: Vec<String> = ["x", "--app-idx=a", "--class"].map(String::from).to_vec();
        assert_eq!(names("x", None, &argv), ["x"]);
    }

    #[test]
    fn the_one_client_of_the_compositor_is_the_app_and_its_forks_count_with_it() {
        let procs = [
            p(10, 1, USER, "foot", &[500]),
            p(11, 10, USER, "foot", &[500]), // forked, holds the same connection
            p(12, 10, USER, "bash", &[]),
            p(20, 1, USER, "foot", &[]), // named foot, not a client: not counted
            p(30, 1, USER, "mousepad", &[501]),
        ];
        assert_eq!(decide("foot", USER, &procs, true), Ok(10));
        assert_eq!(decide("org.xfce.mousepad", USER, &procs, true), Ok(30));
    }

    #[test]
    fn two_clients_of_one_app_are_nothing_in_front_even_when_one_runs_inside_the_other() {
        let procs = [
            p(10, 1, USER, "foot", &[500]),
            p(12, 10, USER, "bash", &[]),
            p(13, 12, USER, "foot", &[502]), // a foot started from the first one's shell
        ];
        let e = decide("foot", USER, &procs, true).unwrap_err();
        assert!(
            e.contains("2 Wayland clients") && e.contains("10, 13"),
            "{e}"
        );
    }

    #[test]
    fn another_users_or_roots_client_is_refused_and_never_named() {
        let procs = [p(10, 1, 0, "foot", &[500]), p(20, 1, USER, "bash", &[])];
        let e = decide("foot", USER, &procs, true).unwrap_err();
        assert!(e.contains("pid 10") && e.contains("root's"), "{e}");
        let procs = [p(10, 1, 1001, "foot", &[500])];
        let e = decide("foot", USER, &procs, true).unwrap_err();
        assert!(e.contains("uid 1001's"), "{e}");
        // Not a client, matched by name: only the user's processes count at all.
        let procs = [p(10, 1, 0, "xterm", &[]), p(11, 1, 1001, "xterm", &[])];
        let e = decide("XTerm", USER, &procs, true).unwrap_err();
        assert!(e.contains("no process of the session user"), "{e}");
        assert!(
            e.contains("pid 10 (root's)") && e.contains("never acted on"),
            "{e}"
        );
        let mut setuid = p(12, 1, USER, "xterm", &[]);
        setuid.uid = None;
        assert!(decide("xterm", USER, &[setuid], true).is_err());
    }

    #[test]
    fn without_a_matching_client_the_users_one_process_tree_is_the_app() {
        // An X11 window through Xwayland: Xwayland holds the connection, not the app.
        let procs = [
            p(5, 1, USER, "xwayland", &[700]),
            p(40, 1, USER, "chromium", &[]),
            p(41, 40, USER, "chromium", &[]), // its zygote and renderers
            p(42, 41, USER, "chromium", &[]),
            p(50, 1, 0, "chromium", &[]), // root's: never counted
        ];
        assert_eq!(decide("chromium", USER, &procs, true), Ok(40));
        assert_eq!(decide("chromium", USER, &procs, false), Ok(40));
        let two = [p(40, 1, USER, "xterm", &[]), p(60, 2, USER, "xterm", &[])];
        let e = decide("xterm", USER, &two, true).unwrap_err();
        assert!(
            e.contains("2 separate process trees") && e.contains("40, 60"),
            "{e}"
        );
        assert!(decide("", USER, &two, true)
            .unwrap_err()
            .contains("no app id"));
    }

    #[test]
    fn a_parent_loop_in_the_fixture_does_not_hang_the_walk() {
        let procs = [p(7, 8, USER, "a", &[]), p(8, 7, USER, "a", &[])];
        // Each has the other as an ancestor: neither is a root.
        assert!(decide("a", USER, &procs, true).is_err());
    }

    #[test]
    fn this_process_is_named_as_the_one_client_of_its_own_socket() {
        use std::os::unix::net::{UnixListener, UnixStream};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wayland-7");
        let l = UnixListener::bind(&path).unwrap();
        let _c = UnixStream::connect(&path).unwrap();
        let _s = l.accept().unwrap();
        let me = std::process::id() as i32;
        let comm = crate::sources::auto::procs::comm(me);
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let mut names = Names::default();
        for pass in ["first", "names known"] {
            let t = std::time::Instant::now();
            let got = resolve(&comm, uid, &path, &mut names);
            let n = crate::sources::auto::procs::pids().len();
            eprintln!("resolve ({pass}): {:?} for {n} processes", t.elapsed());
            assert_eq!(got, Ok(me));
        }
    }

    #[test]
    fn this_process_is_read_with_its_names_and_parent() {
        let me = std::process::id() as i32;
        let comm = crate::sources::auto::procs::comm(me).to_lowercase();
        let procs = read(
            std::slice::from_ref(&comm),
            &HashSet::new(),
            &mut Names::default(),
        );
        let mine = procs.iter().find(|p| p.pid == me).expect("this process");
        assert!(mine.names.contains(&comm), "{mine:?}");
        // SAFETY: getppid has no preconditions.
        assert_eq!(mine.ppid, unsafe { libc::getppid() });
    }
}
