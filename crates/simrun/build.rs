//! `ENGINE`: a hash of every source a run's result depends on (the simulator, the model, this
//! crate, the built-in scenarios), so that `sim sweep --ray` can refuse a worker whose wheel was
//! built from other sources than the binary driving it.

use std::path::{Path, PathBuf};

fn main() {
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let crates = here.parent().expect("crates/simrun").to_path_buf();
    // Sources and manifests only: a test or a scratch file elsewhere changes no result.
    let roots = [
        crates.join("sim/src"),
        crates.join("sim/Cargo.toml"),
        crates.join("model/src"),
        crates.join("model/Cargo.toml"),
        here.join("src"),
        here.join("Cargo.toml"),
        crates.join("../scenarios"),
    ];
    let mut files = Vec::new();
    for r in &roots {
        println!("cargo:rerun-if-changed={}", r.display());
        walk(r, &mut files);
    }
    files.sort();
    // FNV-1a over each file's path (relative to crates/) and bytes: stable across toolchains.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in &files {
        let rel = f
            .strip_prefix(&crates)
            .unwrap_or(f)
            .to_string_lossy()
            .into_owned();
        let bytes = std::fs::read(f).expect("a source file is readable");
        for b in rel.bytes().chain([0]).chain(bytes) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=UXSCHED_ENGINE={version}+{h:016x}");
}

/// `dir` if a file, else every `.rs`, `.toml` and `.json` file under it.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.is_file() {
        return out.push(dir.to_path_buf());
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p
            .extension()
            .is_some_and(|x| x == "rs" || x == "toml" || x == "json")
        {
            out.push(p);
        }
    }
}
