//! `kbuild`: a real compile, the field's standard background load — `make -j<2×CPUs>` of the
//! Linux kernel (Debian's `linux-source-6.12`, x86 `defconfig`), restarted when it finishes.
//! Throughput = compile units (`.o` files) completed per second.
//!
//! The tree is unpacked and configured once into a cache directory (not the repository);
//! `make prepare` is run there too, so runs compile translation units, not host tools. Before
//! every run the `.o` files of the previous one are deleted (outside `scripts/` and `tools/`,
//! the host tools), so every mode compiles the same files in the same order.
//! `UXSCHED_KBUILD_TREE` names another C tree with a Makefile to build instead (used as is;
//! it must be the bench user's, who runs the build). The cached tree is handed to that user
//! once it is prepared: the build runs unprivileged, as a user's does (`loads/mod.rs`).

use super::{LoadSpec, Tool};
use crate::models::xapp::{AppUser, APP_USER};
use anyhow::{bail, Context, Result};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Debian's kernel source package and the tarball it installs.
pub const PACKAGE: &str = "linux-source-6.12";
const TARBALL: &str = "/usr/src/linux-source-6.12.tar.xz";
const CACHE: &str = "/var/cache/uxsched/kbuild";
/// Written once unpack, defconfig and `make prepare` all succeeded.
const STAMP: &str = ".uxsched-prepared";
/// Host tools: built once by `make prepare`, kept across runs.
const KEEP: [&str; 2] = ["scripts", "tools"];

pub struct KernelBuild {
    pub tree: PathBuf,
    /// Whether `tree` is our cached kernel (unpacked and configured by `prepare`).
    pub managed: bool,
}

impl KernelBuild {
    /// The cached kernel tree, or `UXSCHED_KBUILD_TREE` when set.
    pub fn from_env() -> KernelBuild {
        match std::env::var_os("UXSCHED_KBUILD_TREE") {
            Some(t) => KernelBuild {
                tree: t.into(),
                managed: false,
            },
            None => KernelBuild {
                tree: Path::new(CACHE).join(PACKAGE),
                managed: true,
            },
        }
    }

    /// Unpack, `defconfig` and `make prepare` once (minutes, the first time only); the tree
    /// is then `user`'s, who runs the build.
    pub fn prepare(&self, user: &AppUser) -> Result<()> {
        if !self.managed {
            if !self.tree.join("Makefile").is_file() {
                bail!(
                    "UXSCHED_KBUILD_TREE={} has no Makefile",
                    self.tree.display()
                );
            }
            let owner = std::fs::metadata(&self.tree)?.uid();
            if owner != user.uid {
                bail!(
                    "UXSCHED_KBUILD_TREE={} belongs to uid {owner}, but the build runs as {APP_USER} (uid {}): `chown -R {APP_USER}: {}` or name a tree of that user's",
                    self.tree.display(),
                    user.uid,
                    self.tree.display()
                );
            }
            return Ok(());
        }
        if !self.tree.join(STAMP).is_file() {
            self.unpack_and_configure()?;
        }
        hand_over(&self.tree, user)
    }

    fn unpack_and_configure(&self) -> Result<()> {
        if !Path::new(TARBALL).is_file() {
            bail!("background load 'kbuild' needs {TARBALL} (Debian package {PACKAGE}, ~150 MB): run `make setup` or `apt-get install {PACKAGE} flex bison bc libssl-dev`");
        }
        eprintln!(
            "uxsched bench: first use of kbuild: unpacking and configuring {PACKAGE} into {} (a few minutes, once)",
            self.tree.display()
        );
        let cache = Path::new(CACHE);
        let staging = cache.join(format!("unpack-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging)?;
        run(
            Command::new("tar")
                .arg("-xJf")
                .arg(TARBALL)
                .arg("-C")
                .arg(&staging),
            "unpacking the kernel source",
        )?;
        let _ = std::fs::remove_dir_all(&self.tree);
        std::fs::rename(staging.join(PACKAGE), &self.tree)
            .with_context(|| format!("moving the unpacked tree to {}", self.tree.display()))?;
        let _ = std::fs::remove_dir_all(&staging);
        let jobs = format!("-j{}", 2 * crate::sys::cpu_count());
        run(
            Command::new("make")
                .current_dir(&self.tree)
                .arg("defconfig"),
            "make defconfig",
        )?;
        run(
            Command::new("make")
                .current_dir(&self.tree)
                .args([jobs.as_str(), "prepare"]),
            "make prepare",
        )?;
        std::fs::write(self.tree.join(STAMP), "")?;
        Ok(())
    }

    /// Delete the `.o` files a previous run left, so every run starts from the same point.
    pub fn reset(&self) -> Result<()> {
        let mut doomed = Vec::new();
        objects(&self.tree, true, None, &mut doomed)?;
        for o in doomed {
            std::fs::remove_file(&o).with_context(|| format!("removing {}", o.display()))?;
        }
        Ok(())
    }
}

/// Give the cached tree to `user` (once: `chown -R` of ~80 000 files takes seconds), so the
/// build, run as that user, can write its objects.
fn hand_over(tree: &Path, user: &AppUser) -> Result<()> {
    if std::fs::metadata(tree)?.uid() == user.uid {
        return Ok(());
    }
    run(
        Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", user.uid, user.gid))
            .arg(tree),
        &format!("giving {} to {APP_USER}", tree.display()),
    )
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("{what}: starting {:?}", cmd.get_program()))?;
    if !out.status.success() {
        let tail = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = tail.lines().rev().take(15).collect();
        bail!(
            "{what} failed ({}); last lines:\n{}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(())
}

/// Every `.o` below `dir` (outside the host-tool directories at the top), optionally only
/// those modified at or after `since`.
pub fn objects(
    dir: &Path,
    top: bool,
    since: Option<std::time::SystemTime>,
    found: &mut Vec<PathBuf>,
) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if !(top && KEEP.iter().any(|k| name == *k)) {
                objects(&entry.path(), false, since, found)?;
            }
        } else if kind.is_file() && name.to_string_lossy().ends_with(".o") {
            let fresh = match since {
                None => true,
                Some(t) => entry.metadata()?.modified()? >= t,
            };
            if fresh {
                found.push(entry.path());
            }
        }
    }
    Ok(())
}

/// The shell loop: build, and when the build completes, count and delete its objects and
/// build again. A failed build stops the loop and says so (no restart into the same error).
const LOOP: &str = r#"tree="$1"; jobs="$2"; out="$3"
cd "$tree" || exit 1
while :; do
  make -j"$jobs" >>"$out/make.log" 2>&1 || { echo "make exited $?" >"$out/failed"; exit 1; }
  find . \( -path ./scripts -o -path ./tools \) -prune -o -name '*.o' -type f -print | wc -l >>"$out/completed-builds"
  find . \( -path ./scripts -o -path ./tools \) -prune -o -name '*.o' -type f -exec rm -f {} +
done"#;

/// Compile units completed since the run's start marker in `out`: the objects counted before
/// each restart plus the fresh ones in the tree now.
pub fn completed_units(tree: &Path, out: &Path) -> Result<usize> {
    let start = std::fs::metadata(out.join("start"))?.modified()?;
    let mut now = Vec::new();
    objects(tree, true, Some(start), &mut now)?;
    let earlier: usize = std::fs::read_to_string(out.join("completed-builds"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse::<usize>().ok())
        .sum();
    Ok(now.len() + earlier)
}

impl Tool for KernelBuild {
    fn command(&self, spec: &LoadSpec, out: &Path) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", LOOP, "kbuild"])
            .arg(&self.tree)
            .arg(spec.workers.to_string())
            .arg(out);
        c
    }

    fn before_start(&self, _: &LoadSpec, out: &Path, _: &AppUser) -> Result<()> {
        self.reset()?;
        std::fs::write(out.join("start"), "")?;
        Ok(())
    }

    /// SIGINT to the whole load: make stops its compilers and deletes half-written objects,
    /// so only completed units are counted.
    fn stop_signal(&self) -> i32 {
        libc::SIGINT
    }

    fn stop_whole_group(&self) -> bool {
        true
    }

    fn throughput(&self, _: &LoadSpec, out: &Path, elapsed: Duration) -> Result<f64> {
        if let Ok(why) = std::fs::read_to_string(out.join("failed")) {
            let log = out.join("make.log");
            bail!(
                "the kernel build failed ({}); see {}",
                why.trim(),
                log.display()
            );
        }
        let units = completed_units(&self.tree, out)?;
        if units == 0 {
            bail!(
                "the build completed no compile unit in {:.1} s",
                elapsed.as_secs_f64()
            );
        }
        Ok(units as f64 / elapsed.as_secs_f64())
    }

    fn unit(&self) -> &'static str {
        ".o/s"
    }
}
