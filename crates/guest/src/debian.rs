//! Debian's own kernel as a second guest kernel: the one `linux-image-amd64` points to, with the
//! storage drivers the test kernel in `shared/kernels/` lacks (NVMe, BFQ, the memory controller
//! for cgroup writeback) as modules. `scripts/setup.sh` unpacks its image and the modules the
//! guest loads into [`DEBIAN_KERNEL_DIR`]; `/init` loads them (`insmod`, in `load-order`) before
//! the script runs, except those [`add_on_demand_module`] leaves to the guest's `modprobe`.

use crate::qemu::{Error, Guest};
use crate::Initramfs;
use std::path::{Path, PathBuf};

/// Where `scripts/setup.sh` unpacks it: `vmlinuz`, `config`, `modules/*.ko`, `load-order` (one
/// module name a line, each after what it depends on) and `package` (the Debian package's name).
pub const DEBIAN_KERNEL_DIR: &str = "/opt/uxsched/debian-kernel";
/// Overrides [`DEBIAN_KERNEL_DIR`].
pub const DEBIAN_KERNEL_ENV: &str = "UXSCHED_GUEST_DEBIAN_KERNEL_DIR";

impl Guest {
    /// As [`Guest::locate`], but booting Debian's kernel with its storage modules loaded.
    pub fn locate_debian() -> Result<Guest, Error> {
        let (kernel, modules) = debian_kernel(&dir())?;
        let mut guest = Guest::with_kernel(kernel)?;
        guest.modules = modules;
        Ok(guest)
    }

    /// The Debian package the kernel came from (`linux-image-6.1.0-56-amd64`), for reports.
    pub fn debian_package() -> Option<String> {
        std::fs::read_to_string(dir().join("package"))
            .ok()
            .map(|s| s.trim().to_owned())
    }
}

/// Add Debian's module `name` to `fs` so that the guest's `modprobe` (busybox) loads it when
/// the kernel asks for `alias` (e.g. `bfq` for `bfq-iosched`, which the kernel requests when an
/// elevator of that name is chosen): the module under `/lib/modules/<release>/`, its line in
/// `modules.dep` and the alias in `/etc/modprobe.d/`. Not loaded at boot.
pub fn add_on_demand_module(fs: &mut Initramfs, name: &str, alias: &str) -> Result<(), Error> {
    let dir = dir();
    let release = std::fs::read_to_string(dir.join("release"))
        .map_err(|e| Error::Missing(format!("{}: {e}", dir.join("release").display())))?;
    let release = release.trim();
    let ko = dir.join("modules").join(format!("{name}.ko"));
    let base = format!("/lib/modules/{release}");
    fs.file(&ko, &format!("{base}/{name}.ko"))
        .map_err(|e| Error::Missing(format!("{}: {e}", ko.display())))?;
    fs.bytes(
        &format!("{base}/modules.dep"),
        format!("{name}.ko:\n"),
        0o644,
    );
    fs.bytes(
        &format!("/etc/modprobe.d/{name}.conf"),
        format!("alias {alias} {name}\n"),
        0o644,
    );
    Ok(())
}

fn dir() -> PathBuf {
    std::env::var_os(DEBIAN_KERNEL_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEBIAN_KERNEL_DIR))
}

/// The image and the modules in load order, or what is missing and how to get it.
fn debian_kernel(dir: &Path) -> Result<(PathBuf, Vec<PathBuf>), Error> {
    let missing = |what: String| {
        Error::Missing(format!(
            "{what}: Debian's kernel for the storage guest is unpacked by `bash scripts/setup.sh` \
             (apt-get download of the package linux-image-amd64 points to) into \
             {DEBIAN_KERNEL_DIR}, or set {DEBIAN_KERNEL_ENV}"
        ))
    };
    let kernel = dir.join("vmlinuz");
    if !kernel.is_file() {
        return Err(missing(format!("no {}", kernel.display())));
    }
    let order = dir.join("load-order");
    let text = std::fs::read_to_string(&order)
        .map_err(|e| missing(format!("{}: {e}", order.display())))?;
    let mut modules = Vec::new();
    for name in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let ko = dir.join("modules").join(format!("{name}.ko"));
        if !ko.is_file() {
            return Err(missing(format!(
                "no {} (named in {})",
                ko.display(),
                order.display()
            )));
        }
        modules.push(ko);
    }
    Ok((kernel, modules))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_come_in_the_named_order_and_a_missing_one_is_named() {
        let dir = std::env::temp_dir().join(format!("uxsched-guest-dk-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("modules")).unwrap();
        let e = debian_kernel(&dir).unwrap_err().to_string();
        assert!(
            e.contains("vmlinuz") && e.contains("scripts/setup.sh"),
            "{e}"
        );
        std::fs::write(dir.join("vmlinuz"), b"").unwrap();
        std::fs::write(dir.join("load-order"), "b\na\n\nc\n").unwrap();
        for m in ["a", "b"] {
            std::fs::write(dir.join("modules").join(format!("{m}.ko")), b"").unwrap();
        }
        let e = debian_kernel(&dir).unwrap_err().to_string();
        assert!(e.contains("c.ko"), "{e}");
        std::fs::write(dir.join("modules/c.ko"), b"").unwrap();
        let (_, modules) = debian_kernel(&dir).unwrap();
        let names: Vec<_> = modules
            .iter()
            .map(|m| m.file_name().unwrap().to_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["b.ko", "a.ko", "c.ko"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
