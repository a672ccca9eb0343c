//! Compiles the sched_ext scheduler (`bpf/scx_uxsched.bpf.c`) into `$OUT_DIR/scx_uxsched.bpf.o`,
//! which `src/loader.rs` embeds and libbpf loads.
//!
//! sched_ext BPF needs clang >= 16 (Debian bookworm has 14): the compiler is `$CLANG` if set,
//! else the system `clang` when it is new enough, else the clang that PyPI's `ziglang` carries
//! (`python3 -m ziglang cc`, installed by scripts/setup.sh), with the flags
//! shared/kernels/README.md gives. The headers:
//! - `scx/common.bpf.h` and friends: 6.12's `tools/sched_ext/include`, extracted from Debian's
//!   `linux-source-6.12` (`/usr/src/linux-source-6.12.tar.xz`), or `$UXSCHED_SCX_INCLUDE`;
//! - `vmlinux.h`: vendored in `bpf/vmlinux/` (see its README), so no `shared/` is needed;
//! - libbpf's `bpf/*.h`: those of the vendored libbpf libbpf-rs links (`DEP_BPF_INCLUDE`).

use std::path::{Path, PathBuf};
use std::process::Command;

const TARBALL: &str = "/usr/src/linux-source-6.12.tar.xz";
const TAR_DIR: &str = "linux-source-6.12/tools/sched_ext/include";

fn main() {
    let bpf = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../bpf");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    for f in [
        "scx_uxsched.bpf.c",
        "scx_uxsched_rules.bpf.h",
        "scx_uxsched.h",
        "vmlinux/vmlinux-6.12-scx.h.gz",
    ] {
        println!("cargo:rerun-if-changed={}", bpf.join(f).display());
    }
    for v in ["CLANG", "UXSCHED_SCX_INCLUDE"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").unwrap().as_str() {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => panic!("the sched_ext scheduler supports x86_64 and aarch64, not {other}"),
    };
    let vmlinux = out.join("vmlinux");
    unpack_vmlinux(&bpf.join("vmlinux/vmlinux-6.12-scx.h.gz"), &vmlinux);
    let scx = scx_include(&out);
    let mut cmd = compiler();
    cmd.args(["-g", "-O2", "-mcpu=v3", "-Wall", "-Wno-macro-redefined"])
        .arg(format!("-D__TARGET_ARCH_{arch}"))
        .arg(format!("-I{}", vmlinux.display()))
        .arg(format!("-I{}", scx.display()))
        .arg(format!("-I{}", scx.join("bpf-compat").display()))
        .arg(format!("-I{}", bpf.display()));
    if let Ok(inc) = std::env::var("DEP_BPF_INCLUDE") {
        cmd.arg(format!("-I{inc}"));
    }
    // asm-generic/errno.h (package linux-libc-dev), which scx/common.bpf.h includes.
    cmd.arg("-idirafter/usr/include");
    let src = bpf.join("scx_uxsched.bpf.c");
    let obj = out.join("scx_uxsched.bpf.o");
    cmd.arg("-c").arg(&src).arg("-o").arg(&obj);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run the BPF compiler {cmd:?}: {e}"));
    assert!(status.success(), "{cmd:?} failed on {}", src.display());
}

/// `vmlinux.h` into `dir`.
fn unpack_vmlinux(gz: &Path, dir: &Path) {
    use std::io::Read;
    let file = std::fs::File::open(gz).unwrap_or_else(|e| panic!("{}: {e}", gz.display()));
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(file)
        .read_to_end(&mut text)
        .unwrap_or_else(|e| panic!("{}: {e}", gz.display()));
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("vmlinux.h"), text).unwrap();
}

/// The directory holding `scx/common.bpf.h`: `$UXSCHED_SCX_INCLUDE`, else 6.12's headers
/// extracted from the Debian source package (once per build directory).
fn scx_include(out: &Path) -> PathBuf {
    if let Some(dir) = std::env::var_os("UXSCHED_SCX_INCLUDE") {
        return PathBuf::from(dir);
    }
    let dir = out.join(TAR_DIR);
    if dir.join("scx/common.bpf.h").is_file() {
        return dir;
    }
    println!("cargo:rerun-if-changed={TARBALL}");
    let status = Command::new("tar")
        .arg("-xJf")
        .arg(TARBALL)
        .arg("-C")
        .arg(out)
        .args(["--wildcards", &format!("{TAR_DIR}/*")])
        .status();
    match status {
        Ok(s) if s.success() && dir.join("scx/common.bpf.h").is_file() => dir,
        other => panic!(
            "the sched_ext headers (6.12's tools/sched_ext/include) are needed to build the \
             scheduler: extracting them from {TARBALL} gave {other:?}. Install the Debian \
             package linux-source-6.12 (`bash scripts/setup.sh` does), or set \
             UXSCHED_SCX_INCLUDE to a directory holding scx/common.bpf.h"
        ),
    }
}

/// `$CLANG`, the system clang if >= 16, else ziglang's clang 22; each set up for BPF.
fn compiler() -> Command {
    if let Ok(cc) = std::env::var("CLANG") {
        let mut c = Command::new(cc);
        c.args(["-target", "bpf"]);
        return c;
    }
    if clang_major("clang", &[]).is_some_and(|v| v >= 16) {
        let mut c = Command::new("clang");
        c.args(["-target", "bpf"]);
        return c;
    }
    if clang_major("python3", &["-m", "ziglang", "cc"]).is_some_and(|v| v >= 16) {
        let mut c = Command::new("python3");
        // Without the three -f flags zig adds unwind tables and sanitizers libbpf rejects.
        c.args(["-m", "ziglang", "cc", "-target", "bpfel-freestanding-none"])
            .args(["-fno-unwind-tables", "-fno-asynchronous-unwind-tables"])
            .arg("-fno-sanitize=all");
        return c;
    }
    panic!(
        "the sched_ext scheduler needs clang >= 16 (this system's clang is older or absent): \
         `bash scripts/setup.sh` installs PyPI's ziglang (clang 22) when needed, or set CLANG \
         to a clang >= 16"
    )
}

/// The major version `<prog> <args> --version` reports ("clang version 22.1.8"), if it runs.
fn clang_major(prog: &str, args: &[&str]) -> Option<u32> {
    let out = Command::new(prog)
        .args(args)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let rest = text.split("clang version ").nth(1)?;
    rest.split('.').next()?.trim().parse().ok()
}
