//! The Debian package `make deb` builds (scripts/deb.sh, docs/packaging.md), built here from the
//! release binary Cargo built for these tests (no workspace rebuild): its file list and modes,
//! its control fields, the package unpacked (the binary runs, the configuration validates, every
//! man page renders), installed into a scratch root with dpkg and purged from it, and what its
//! maintainer scripts do on a live system (with recording stand-ins for systemctl & co.).

mod package_support;

use package_support::*;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

#[test]
fn the_package_holds_every_file_with_sane_modes_owned_by_root() {
    let entries = contents();
    let files: BTreeSet<&str> = (entries.iter())
        .filter(|e| e.mode.starts_with('-'))
        .map(|e| e.path.as_str())
        .collect();
    let mut wanted = vec![
        "/usr/bin/uxsched".to_owned(),
        "/usr/lib/systemd/system/uxsched.service".to_owned(),
        "/etc/uxsched/uxsched.toml".to_owned(),
        "/usr/share/doc/uxsched/copyright".to_owned(),
        "/usr/share/doc/uxsched/changelog.gz".to_owned(),
        "/usr/share/doc/uxsched/daemon.md".to_owned(),
    ];
    wanted.extend(dbus_files());
    for f in &wanted {
        assert!(files.contains(f.as_str()), "{f} missing from {files:#?}");
    }
    let pages: BTreeSet<String> = (files.iter())
        .filter_map(|f| f.strip_prefix("/usr/share/man/man1/"))
        .map(str::to_owned)
        .collect();
    let expected = expected_man_pages();
    assert!(expected.len() > 20, "{expected:?}");
    assert!(expected.contains("uxsched-daemon.1.gz"), "{expected:?}");
    assert_eq!(pages, expected, "a man page for every command, no other");
    for e in &entries {
        assert_eq!(e.owner, "root/root", "{}", e.path);
        let want = if e.mode.starts_with('d') {
            "drwxr-xr-x"
        } else if e.path == "/usr/bin/uxsched" {
            "-rwxr-xr-x"
        } else {
            "-rw-r--r--"
        };
        assert_eq!(e.mode, want, "{}", e.path);
        assert!(
            e.path.starts_with("/usr/") || e.path.starts_with("/etc/uxsched/") || e.path.len() <= 5,
            "{} outside /usr and /etc/uxsched",
            e.path
        );
        let known = wanted.contains(&e.path)
            || e.path.starts_with("/usr/share/man/man1/")
            || e.mode.starts_with('d');
        assert!(known, "{} is in the package but not checked here", e.path);
    }
}

#[test]
fn the_control_fields_scripts_and_checksums_are_right() {
    let deb = deb().to_str().unwrap();
    let field = |name: &str| run("dpkg-deb", &["-f", deb, name]).trim().to_owned();
    assert_eq!(field("Package"), "uxsched");
    assert_eq!(field("Version"), VERSION);
    assert_eq!(field("Architecture"), arch());
    assert_eq!(field("Section"), "admin");
    assert!(field("Maintainer").contains('@'), "{}", field("Maintainer"));
    assert!(field("Description").starts_with("keep the app in front"));
    assert_eq!(
        field("Recommends"),
        "dbus-bin",
        "the KWin source's dbus-send/monitor"
    );
    let size: u64 = field("Installed-Size").parse().unwrap();
    let binary_kib = std::fs::metadata(BIN).unwrap().len() / 1024;
    assert!(
        size > 1024 && size < binary_kib,
        "Installed-Size {size} KiB"
    );

    // Depends: every shared library the binary links is a package there, at a version.
    let depends = field("Depends");
    let deps: Vec<&str> = depends.split(", ").collect();
    assert!(
        deps.iter().any(|d| d.starts_with("libc6 (>= ")),
        "{depends}"
    );
    for lib in run("ldd", &[BIN]).lines() {
        let Some(path) = lib
            .split(" => ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
        else {
            continue;
        };
        let owner = [path.to_owned(), format!("/usr{path}")]
            .iter()
            .find_map(|p| {
                let out = Command::new("dpkg").args(["-S", p]).output().unwrap();
                let s = String::from_utf8(out.stdout).unwrap();
                out.status
                    .success()
                    .then(|| s.split(':').next().unwrap().to_owned())
            })
            .unwrap_or_else(|| panic!("no package owns {path}"));
        assert!(
            deps.iter()
                .any(|d| d.split([' ', ':']).next() == Some(owner.as_str())),
            "{path} comes from {owner}, not in Depends: {depends}"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let ctrl = dir.path().join("DEBIAN");
    run("dpkg-deb", &["-e", deb, ctrl.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(ctrl.join("conffiles")).unwrap(),
        format!("{}\n", uxsched_daemon::config::DEFAULT_PATH)
    );
    for script in ["preinst", "postinst", "prerm", "postrm"] {
        let p = ctrl.join(script);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755, "{script}");
        run("sh", &["-n", p.to_str().unwrap()]);
    }
    // md5sums covers every file and matches what is unpacked.
    let root = dir.path().join("root");
    run("dpkg-deb", &["-x", deb, root.to_str().unwrap()]);
    let sums = std::fs::read_to_string(ctrl.join("md5sums")).unwrap();
    let listed = sums.lines().count();
    let files = (contents().iter())
        .filter(|e| e.mode.starts_with('-'))
        .count();
    assert_eq!(listed, files, "{sums}");
    let check = Command::new("md5sum")
        .args(["--check", "--quiet", "--strict"])
        .arg(ctrl.join("md5sums"))
        .current_dir(&root)
        .output()
        .unwrap();
    ok("md5sum --check", check);
}

#[test]
fn unpacked_the_binary_runs_the_configuration_validates_and_every_man_page_renders() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    run(
        "dpkg-deb",
        &["-x", deb().to_str().unwrap(), root.to_str().unwrap()],
    );
    let bin = root.join("usr/bin/uxsched");
    let bin = bin.to_str().unwrap();
    assert_eq!(
        run(bin, &["--version"]).trim(),
        format!("uxsched {VERSION}")
    );

    // The unit runs this binary with this configuration, the daemon's default path.
    let unit =
        std::fs::read_to_string(root.join("usr/lib/systemd/system/uxsched.service")).unwrap();
    let shipped = std::fs::read_to_string(repo().join("packaging/uxsched.service")).unwrap();
    assert_eq!(unit, shipped);
    let exec = (unit.lines())
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart=");
    let config = uxsched_daemon::config::DEFAULT_PATH;
    assert_eq!(exec, format!("/usr/bin/uxsched daemon --config {config}"));
    let toml = root.join(config.trim_start_matches('/'));
    assert_eq!(
        std::fs::read_to_string(&toml).unwrap(),
        uxsched_daemon::config::DEFAULT_TOML
    );
    run(bin, &["config", "check", toml.to_str().unwrap()]);
    // copyright: the project's license (the workspace's `license`), and the linked crates'.
    let workspace = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    assert!(
        workspace.contains("\nlicense = \"GPL-2.0-only\"\n"),
        "license changed: update packaging/debian/copyright"
    );
    let copyright = std::fs::read_to_string(root.join("usr/share/doc/uxsched/copyright")).unwrap();
    assert!(copyright.starts_with(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
    ));
    assert!(
        copyright.contains("\nLicense: GPL-2\n")
            && copyright.contains("/usr/share/common-licenses/GPL-2")
    );
    for krate in ["clap ", "clap_mangen ", "libbpf-sys ", "rusqlite "] {
        assert!(
            copyright.contains(&format!("\n {krate}")),
            "{krate}missing from copyright"
        );
    }
    let changelog = run(
        "gzip",
        &[
            "-dc",
            root.join("usr/share/doc/uxsched/changelog.gz")
                .to_str()
                .unwrap(),
        ],
    );
    assert!(
        changelog.starts_with(&format!("uxsched ({VERSION}) ")),
        "{changelog}"
    );
    // The unit's Documentation= is in the package.
    let docs = (unit.lines())
        .find_map(|l| l.strip_prefix("Documentation=file://"))
        .expect("Documentation=");
    assert!(root.join(docs.trim_start_matches('/')).is_file(), "{docs}");

    // Every page renders with groff without a warning, and man-db reads the main one.
    let man1 = root.join("usr/share/man/man1");
    let mut pages = 0;
    for e in std::fs::read_dir(&man1).unwrap() {
        let gz = e.unwrap().path();
        let roff = run("gzip", &["-dc", gz.to_str().unwrap()]);
        let flat = dir.path().join("page.1");
        std::fs::write(&flat, &roff).unwrap();
        let out = Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-z"]) // -k: preconv, UTF-8 input as man-db reads it
            .arg(&flat)
            .output()
            .expect("groff (groff-base)");
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{gz:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(roff.contains(".SH NAME"), "{gz:?}");
        pages += 1;
    }
    assert!(pages > 20, "{pages} pages");
    let out = Command::new("man")
        .arg("-l")
        .arg(man1.join("uxsched-daemon.1.gz"))
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .output()
        .expect("man (man-db)");
    let text = ok("man -l uxsched-daemon.1.gz", out);
    assert!(
        text.contains("SYNOPSIS") && text.contains("--config"),
        "{text}"
    );
}

/// Debian's own checker finds no error in the package (its warnings are printed: today only
/// `maintainer-script-calls-systemctl`, for the fallbacks used where init-system-helpers is
/// missing).
#[test]
fn lintian_finds_no_error() {
    // Its scratch (an `mldbm-elf-*` file per run) in a directory of the test's, not in /tmp.
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new("lintian")
        .args(["--tag-display-limit", "0"])
        .env("TMPDIR", tmp.path())
        .arg(deb())
        .output()
        .expect("lintian (scripts/setup.sh installs it)");
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{report}{}", String::from_utf8_lossy(&out.stderr));
    let errors: Vec<&str> = report.lines().filter(|l| l.starts_with("E: ")).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(out.status.success(), "lintian: {}", out.status);
}

/// On the live system (no DPKG_ROOT): postinst enables the unit unless the administrator
/// disabled it, reloads the bus's policy where a system bus runs, and starts (upgrade:
/// restarts) the unit only where systemd runs; prerm stops it on removal only.
#[test]
fn the_maintainer_scripts_enable_start_and_stop_only_where_systemd_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ctrl = dir.path().join("DEBIAN");
    run(
        "dpkg-deb",
        &["-e", deb().to_str().unwrap(), ctrl.to_str().unwrap()],
    );
    let systemd = Path::new("/run/systemd/system").is_dir();
    let bus = Path::new("/run/dbus/system_bus_socket").exists();
    let calls = |log: &Path| std::fs::read_to_string(log).unwrap();

    // First install.
    let (bin, log) = stubs(dir.path(), true);
    maintainer_script(&ctrl, "postinst", &["configure", ""], &bin);
    let c = calls(&log);
    assert!(
        c.contains("deb-systemd-helper enable uxsched.service DPKG_ROOT=\n"),
        "{c}"
    );
    assert_eq!(
        c.contains("deb-systemd-invoke start uxsched.service"),
        systemd,
        "{c}"
    );
    assert_eq!(
        c.contains("systemctl --system daemon-reload"),
        systemd,
        "{c}"
    );
    assert_eq!(c.contains("org.freedesktop.DBus.ReloadConfig"), bus, "{c}");
    assert!(!c.contains("restart"), "{c}");

    // Upgrade, after the administrator disabled the unit: stays disabled, restarted if running.
    let (bin, log) = stubs(dir.path(), false);
    maintainer_script(&ctrl, "postinst", &["configure", "0.0.1"], &bin);
    let c = calls(&log);
    assert!(
        c.contains("deb-systemd-helper update-state uxsched.service"),
        "{c}"
    );
    assert!(!c.contains("helper enable"), "{c}");
    assert_eq!(
        c.contains("deb-systemd-invoke restart uxsched.service"),
        systemd,
        "{c}"
    );

    // prerm: stop on removal, nothing on upgrade.
    let (bin, log) = stubs(dir.path(), true);
    maintainer_script(&ctrl, "prerm", &["upgrade", "0.2.0"], &bin);
    assert_eq!(calls(&log), "");
    maintainer_script(&ctrl, "prerm", &["remove"], &bin);
    let c = calls(&log);
    assert_eq!(
        c.contains("deb-systemd-invoke stop uxsched.service"),
        systemd,
        "{c}"
    );
    // postrm remove: the unit masked (its file is gone), gamemode-daemon's file put back.
    maintainer_script(&ctrl, "postrm", &["remove"], &bin);
    let c = calls(&log);
    assert!(c.contains("deb-systemd-helper mask uxsched.service"), "{c}");
    let diverts = diverted(&dir.path().join("divert"));
    for d in &diverts {
        let put_back = "dpkg-divert --package uxsched --remove --rename --divert ";
        assert!(
            c.contains(put_back) && c.contains(&format!(" {d} DPKG_ROOT=")),
            "{d}: {c}"
        );
    }
    assert_eq!(c.contains("dpkg-divert"), !diverts.is_empty(), "{c}");
}

/// Installing the package overwrites no other package's file: each file of the package that a
/// package installed on this machine owns (gamemode-daemon's GameMode activation file where
/// it is installed) is diverted by preinst; and preinst diverts only files the package ships.
#[test]
fn every_file_another_package_owns_is_diverted() {
    let dir = tempfile::tempdir().unwrap();
    let diverted = diverted(dir.path());
    let files: Vec<String> = (contents().into_iter())
        .filter(|e| e.mode.starts_with('-'))
        .map(|e| e.path)
        .collect();
    for d in &diverted {
        assert!(
            files.contains(d),
            "preinst diverts {d}, which the package does not ship"
        );
    }
    for f in &files {
        let out = Command::new("dpkg").args(["-S", f]).output().unwrap();
        let owners = String::from_utf8_lossy(&out.stdout).into_owned();
        let foreign = (owners.lines())
            .filter_map(|l| l.split(": ").next())
            .filter(|o| !o.starts_with("diversion by") && !o.split(", ").all(|p| p == "uxsched"))
            .count();
        assert!(
            !out.status.success() || foreign == 0 || diverted.contains(f),
            "{f} belongs to another package ({owners}) and is not diverted"
        );
    }
}

/// `dpkg --root` into an empty scratch root, scripts run outside a chroot with DPKG_ROOT set (as
/// dpkg does for --force-script-chrootless): installed and registered with its conffile, the
/// unit enabled inside the root only, nothing started; removed, the conffile stays; purged, the
/// conffile and the daemon's state under the root are gone. Not root: `--force-not-root` (the
/// files are then the caller's, which nothing here checks).
#[test]
fn installed_into_a_scratch_root_removed_and_purged() {
    // SAFETY: geteuid has no preconditions.
    let root_user = unsafe { libc::geteuid() } == 0;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    for d in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/log",
        "etc",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("var/lib/dpkg/status"), "").unwrap();
    let (bin, log) = stubs(dir.path(), true);
    // The real deb-systemd-helper and dpkg-divert, which honour DPKG_ROOT; the stubs catch
    // anything live.
    std::fs::remove_file(bin.join("deb-systemd-helper")).unwrap();
    std::fs::remove_file(bin.join("dpkg-divert")).unwrap();
    let dpkg = |args: &[&str]| {
        let out = Command::new("dpkg")
            .arg(format!("--root={}", root.display()))
            .args([
                "--force-script-chrootless",
                "--force-depends",
                "--log=/dev/null",
            ])
            .args((!root_user).then_some("--force-not-root"))
            .args(args)
            .env(
                "PATH",
                format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", bin.display()),
            )
            .output()
            .unwrap();
        ok(&format!("dpkg {args:?}"), out)
    };
    // Another package owning the files uxsched diverts (as gamemode-daemon owns GameMode's
    // activation file), installed first: uxsched must install over it and give them back.
    let theirs = diverted(&dir.path().join("divert"));
    if !theirs.is_empty() {
        let other = dir.path().join("other");
        std::fs::create_dir_all(other.join("DEBIAN")).unwrap();
        std::fs::write(
            other.join("DEBIAN/control"),
            "Package: other-owner\nVersion: 1\nArchitecture: all\nMaintainer: t <t@example.org>\n\
             Description: owns the files uxsched diverts\n",
        )
        .unwrap();
        for f in &theirs {
            let p = other.join(f.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "theirs\n").unwrap();
        }
        let other_deb = dir.path().join("other.deb");
        run(
            "dpkg-deb",
            &[
                "--root-owner-group",
                "--build",
                other.to_str().unwrap(),
                other_deb.to_str().unwrap(),
            ],
        );
        dpkg(&["--install", other_deb.to_str().unwrap()]);
    }
    let read = |f: &str| std::fs::read_to_string(root.join(f.trim_start_matches('/'))).unwrap();
    dpkg(&["--install", deb().to_str().unwrap()]);
    for f in &theirs {
        assert_ne!(read(f), "theirs\n", "{f}: uxsched's after the install");
    }
    let status = dpkg(&["--status", "uxsched"]);
    assert!(status.contains("Status: install ok installed"), "{status}");
    assert!(status.contains(&format!("Version: {VERSION}")), "{status}");
    assert!(status.contains(" /etc/uxsched/uxsched.toml "), "{status}");
    let bin_in_root = root.join("usr/bin/uxsched");
    assert_eq!(
        run(bin_in_root.to_str().unwrap(), &["--version"]).trim(),
        format!("uxsched {VERSION}")
    );
    let wants = root.join("etc/systemd/system/multi-user.target.wants/uxsched.service");
    assert_eq!(
        std::fs::read_link(&wants).unwrap(),
        Path::new("/usr/lib/systemd/system/uxsched.service"),
        "enabled inside the root"
    );
    let live = std::fs::read_to_string(&log).unwrap();
    assert_eq!(live, "", "nothing run on the live system");

    // The daemon's state, as a run would have left it.
    std::fs::create_dir_all(root.join("var/lib/uxsched")).unwrap();
    std::fs::write(root.join("var/lib/uxsched/tracker.sqlite"), "x").unwrap();
    let edited = root.join("etc/uxsched/uxsched.toml");
    std::fs::write(&edited, "mode = \"eimos\"\n").unwrap();

    dpkg(&["--remove", "uxsched"]);
    for f in &theirs {
        assert_eq!(
            read(f),
            "theirs\n",
            "{f}: the other package's again once uxsched is gone"
        );
    }
    assert!(!bin_in_root.exists());
    assert!(!root.join("usr/lib/systemd/system/uxsched.service").exists());
    assert_eq!(
        std::fs::read_to_string(&edited).unwrap(),
        "mode = \"eimos\"\n"
    );
    assert!(root.join("var/lib/uxsched/tracker.sqlite").exists());

    dpkg(&["--purge", "uxsched"]);
    assert!(
        !root.join("etc/uxsched").exists(),
        "conffile and its directory purged"
    );
    assert!(!root.join("var/lib/uxsched").exists(), "state purged");
    assert!(!wants.exists() && std::fs::symlink_metadata(&wants).is_err());
    let status = Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args(["--status", "uxsched"])
        .output()
        .unwrap();
    assert!(
        !status.status.success() || !String::from_utf8_lossy(&status.stdout).contains("installed")
    );
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "",
        "nothing run on the live system"
    );
}
