//! What the package tests share (`package.rs`): the package built once by scripts/deb.sh,
//! its file list, the man pages the binary's commands call for, where the D-Bus files go, and
//! recording stand-ins for the commands the maintainer scripts call.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const BIN: &str = env!("CARGO_BIN_EXE_uxsched");

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn ok(what: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{what}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (scripts/setup.sh installs it)"));
    ok(&format!("{program} {args:?}"), out)
}

pub fn arch() -> String {
    run("dpkg", &["--print-architecture"]).trim().to_owned()
}

/// The package, built once per test run by scripts/deb.sh into target/tmp.
pub fn deb() -> &'static Path {
    static DEB: OnceLock<PathBuf> = OnceLock::new();
    DEB.get_or_init(|| {
        // One folder per test process; those of processes that are gone are removed.
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        for e in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("package-") {
                if !Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let out = tmp.join(format!("package-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let started = std::time::Instant::now();
        let printed = ok(
            "scripts/deb.sh",
            Command::new("bash")
                .arg(repo().join("scripts/deb.sh"))
                .arg(BIN)
                .arg(&out)
                .output()
                .unwrap(),
        );
        eprintln!(
            "scripts/deb.sh built the package in {:.1?}",
            started.elapsed()
        );
        let expected = out.join(format!("uxsched_{VERSION}_{}.deb", arch()));
        assert_eq!(Path::new(printed.trim()), expected);
        assert!(expected.is_file(), "{expected:?}");
        expected
    })
}

/// `uxsched …  --help`'s subcommands (clap's "Commands:" list, without `help`).
pub fn subcommands(path: &[String]) -> Vec<String> {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let help = run(BIN, &args);
    let Some(list) = help.split("\nCommands:\n").nth(1) else {
        return vec![];
    };
    (list.lines())
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l[2..].starts_with(' '))
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .filter(|name| name != "help")
        .collect()
}

/// The man page every command should have: uxsched.1.gz, uxsched-daemon.1.gz,
/// uxsched-sim-run.1.gz, … — found by walking the binary's own `--help`, not its man code.
pub fn expected_man_pages() -> BTreeSet<String> {
    let mut pages = BTreeSet::new();
    let mut todo = vec![vec![]];
    while let Some(path) = todo.pop() {
        let mut name = vec!["uxsched".to_owned()];
        name.extend(path.iter().cloned());
        pages.insert(format!("{}.1.gz", name.join("-")));
        for sub in subcommands(&path) {
            let mut next = path.clone();
            next.push(sub);
            todo.push(next);
        }
    }
    pages
}

/// One line of `dpkg-deb -c`: mode string, owner, path (without the leading `.`).
pub struct Entry {
    pub mode: String,
    pub owner: String,
    pub path: String,
}

pub fn contents() -> Vec<Entry> {
    let listing = run("dpkg-deb", &["-c", deb().to_str().unwrap()]);
    (listing.lines())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert!(f.len() >= 6, "odd dpkg-deb -c line: {l}");
            Entry {
                mode: f[0].to_owned(),
                owner: f[1].to_owned(),
                path: f[5..].join(" ").trim_start_matches('.').to_owned(),
            }
        })
        .collect()
}

/// Where scripts/deb.sh puts each file of packaging/dbus (docs/packaging.md).
pub fn dbus_files() -> Vec<String> {
    let mut files = vec![];
    for e in std::fs::read_dir(repo().join("packaging/dbus")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_owned();
        let text = std::fs::read_to_string(&p).unwrap();
        let dir = match p.extension().and_then(|e| e.to_str()) {
            Some("conf") => "system.d",
            Some("service") if text.lines().any(|l| l.starts_with("User=")) => "system-services",
            Some("service") => "services",
            Some("xml") => "interfaces",
            _ => continue,
        };
        files.push(format!("/usr/share/dbus-1/{dir}/{name}"));
    }
    assert!(
        files
            .iter()
            .any(|f| f.ends_with("/system.d/uxsched-rtkit.conf")),
        "{files:?}"
    );
    files
}

/// A file that writes its name and arguments to `log` and exits with `rc`.
pub fn stub(dir: &Path, name: &str, log: &Path, rc: i32) {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\necho \"{name} $* DPKG_ROOT=${{DPKG_ROOT:-}}\" >>{}\nexit {rc}\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Stand-ins for every command the maintainer scripts may call on the live system.
pub fn stubs(dir: &Path, was_enabled: bool) -> (PathBuf, PathBuf) {
    let bin = dir.join("stubs");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("calls.log");
    std::fs::write(&log, "").unwrap();
    for name in [
        "deb-systemd-invoke",
        "systemctl",
        "dbus-send",
        "busctl",
        "dpkg-divert",
    ] {
        stub(&bin, name, &log, 0);
    }
    // The real helper's `was-enabled` is true on a first install, false once disabled.
    let helper = bin.join("deb-systemd-helper");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\necho \"deb-systemd-helper $* DPKG_ROOT=${{DPKG_ROOT:-}}\" >>{log}\n\
             [ \"$1 $2\" = \"--quiet was-enabled\" ] && exit {rc}\nexit 0\n",
            log = log.display(),
            rc = if was_enabled { 0 } else { 1 }
        ),
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    (bin, log)
}

pub fn maintainer_script(ctrl: &Path, script: &str, args: &[&str], stubs: &Path) {
    let out = Command::new("sh")
        .arg(ctrl.join(script))
        .args(args)
        .env(
            "PATH",
            format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", stubs.display()),
        )
        .env_remove("DPKG_ROOT")
        .output()
        .unwrap();
    ok(&format!("{script} {args:?}"), out);
}

/// The paths preinst diverts (as its `dpkg-divert --add` calls name them).
pub fn diverted(dir: &Path) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    let ctrl = dir.join("DEBIAN");
    run(
        "dpkg-deb",
        &["-e", deb().to_str().unwrap(), ctrl.to_str().unwrap()],
    );
    let (bin, log) = stubs(dir, true);
    maintainer_script(&ctrl, "preinst", &["install"], &bin);
    (std::fs::read_to_string(&log).unwrap().lines())
        .filter(|l| l.starts_with("dpkg-divert --package uxsched --add"))
        .map(|l| l.split_whitespace().rev().nth(1).unwrap().to_owned())
        .collect()
}
