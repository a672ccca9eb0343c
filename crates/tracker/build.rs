//! Compiles the tracker's BPF program (`bpf/tracker.bpf.c` at the repository root) with clang
//! into `$OUT_DIR/tracker.bpf.o`, which `src/tracker.rs` embeds and libbpf loads (CO-RE). The
//! libbpf headers are those of the vendored libbpf that libbpf-rs links (`DEP_BPF_INCLUDE`).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../bpf");
    let src = root.join("tracker.bpf.c");
    for f in ["tracker.bpf.c", "tracker.h"] {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    println!("cargo:rerun-if-env-changed=CLANG");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("tracker.bpf.o");
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").unwrap().as_str() {
        "x86_64" => ("x86", "x86_64-linux-gnu"),
        "aarch64" => ("arm64", "aarch64-linux-gnu"),
        other => panic!("the tracker's BPF program supports x86_64 and aarch64, not {other}"),
    };
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let mut cmd = Command::new(&clang);
    cmd.args(["-g", "-O2", "-target", "bpf", "-mcpu=v3", "-Wall"])
        .arg(format!("-D__TARGET_ARCH_{}", arch.0))
        .arg(format!("-I/usr/include/{}", arch.1))
        .arg(format!("-I{}", root.display()));
    if let Ok(inc) = std::env::var("DEP_BPF_INCLUDE") {
        cmd.arg(format!("-I{inc}"));
    }
    cmd.arg("-c").arg(&src).arg("-o").arg(&out);
    let status = cmd.status().unwrap_or_else(|e| {
        panic!("cannot run {clang} to build the tracker's BPF program ({e}): install clang (bash scripts/setup.sh) or set CLANG")
    });
    assert!(status.success(), "{clang} failed on {}", src.display());
}
