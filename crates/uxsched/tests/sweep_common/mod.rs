//! What the sweep tests share (`sim_sweep.rs`, `sim_sweep_ray.rs`): the real binary, a scratch
//! directory per test, a sweep run with `--json`, and the 16-point spec both compare on.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn uxsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .args(args)
        .output()
        .expect("uxsched runs")
}

/// A fresh directory for test `name` of file `file`, under the system temp dir.
pub fn tmpdir(file: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("uxsched-{file}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs a sweep with `--json`; the summary (a failure shows the binary's stderr).
pub fn sweep(spec: &Path, out: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["sim", "sweep", s(spec), "--out", s(out), "--json"];
    args.extend(extra);
    let o = uxsched(&args);
    assert!(
        o.status.success(),
        "{} (on Ray, if the engine changed since the wheel was built: scripts/setup.sh rebuilds it)",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON summary")
}

/// 2 policies × 2 CPU counts × 4 seeds of the showcase (a touch chain, an animation, hogs).
pub const SIXTEEN: &str = r#"
name = "sixteen"
workloads = ["showcase"]
scheds = ["eevdf", "mcfs"]
cpus = [2, 4]
seeds = { from = 1, count = 4 }
duration = "300ms"

[params]
"mcfs.cut_rate" = [16]
"#;
