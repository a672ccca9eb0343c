//! Run one shell script inside a small Linux guest under QEMU/TCG and get back its exit status
//! and the serial console — for tests that need a kernel or a cgroup layout the host does not
//! have (a pure cgroup2 hierarchy with the `cpu` controller, sched_ext).
//!
//! The guest is the kernel in `shared/kernels/` (its README: 6.12, sched_ext, no modules) with an
//! initramfs built here: a busybox `/init` that mounts proc, sys, devtmpfs, a tmpfs `/tmp` and
//! cgroup2 at `/sys/fs/cgroup` with the requested controllers enabled for the root's children,
//! runs the script, prints its exit status after a per-run marker and powers off.
//! [`Guest::locate_debian`] boots Debian's own kernel instead, with its NVMe and BFQ modules
//! loaded (`debian.rs`): the storage tests' kernel.
//!
//! ```no_run
//! use uxsched_guest::{Guest, Initramfs};
//! let guest = Guest::locate().unwrap(); // a clear error says what is missing and how to get it
//! let mut fs = Initramfs::new();
//! fs.binary("/usr/bin/stress-ng".as_ref(), "/bin/stress-ng").unwrap();
//! let out = guest.run(&fs, "stress-ng --cpu 1 -t 1").unwrap();
//! assert_eq!(out.status, 0, "{}", out.console);
//! ```

mod debian;
mod desktop;
mod facts;
mod initramfs;
mod qemu;

pub use debian::{add_on_demand_module, DEBIAN_KERNEL_DIR, DEBIAN_KERNEL_ENV};
pub use desktop::{add_x_desktop, which};
pub use facts::Facts;
pub use initramfs::{shared_libraries, Initramfs};
pub use qemu::{Error, Guest, Outcome, KERNEL_ENV};
