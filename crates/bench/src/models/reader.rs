//! `reader` (seed 001, EIMOS): sequential 256 KiB `read(2)`s through a 30 MiB file from a cold
//! page cache (POSIX_FADV_DONTNEED before each pass), like an app loading a document or a
//! library. Metric: time to read each MiB, so read-ahead and I/O priority both show.
//!
//! It used to read 48 bytes at a time: the app then spent 98.8 % of a CPU on syscalls on the
//! idle machine (issue 33) and measured CPU, not storage. With 256 KiB reads the thread waits
//! on the disk; its own CPU share is in the extras (`reader_cpu_pct`, beside the process's
//! `app_cpu_pct`) so anyone can check that the scenario is storage-bound.

use super::{
    drop_from_cache, ns_to_ms, reader_file, ready_then_wait_for_go, spawn_named, ModelArgs,
    ModelOutput,
};
use crate::sys;
use anyhow::{Context, Result};
use std::io::Read;

/// Large enough that syscall cost vanishes beside the device's; small enough that one MiB
/// takes several reads, so read-ahead (seed 001) decides how many wait on the disk.
pub const READ_SIZE: usize = 256 << 10;
const CHUNK: u64 = 1 << 20;

struct Pass {
    samples: Vec<f64>,
    passes: u32,
    bytes: u64,
    busy_ns: u64,
    cpu_ns: u64,
}

pub fn app(args: &ModelArgs) -> Result<ModelOutput> {
    let path = reader_file(&args.scratch);
    let mut file = std::fs::File::open(&path)
        .with_context(|| format!("opening {} (created by the runner)", path.display()))?;
    let duration_ns = args.duration_ms * 1_000_000;
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let reader = spawn_named("reader", None, move || {
        let mut r = Pass {
            samples: Vec::new(),
            passes: 0,
            bytes: 0,
            busy_ns: 0,
            cpu_ns: 0,
        };
        if go_rx.recv().is_err() {
            return r;
        }
        let (start, cpu_start) = (sys::now_ns(), sys::thread_cpu_ns());
        let mut buf = vec![0u8; READ_SIZE];
        'run: while sys::now_ns() < start + duration_ns {
            drop_from_cache(&file);
            let _ = std::io::Seek::rewind(&mut file);
            let (mut in_chunk, mut chunk_start) = (0u64, sys::now_ns());
            loop {
                match file.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => (in_chunk, r.bytes) = (in_chunk + n as u64, r.bytes + n as u64),
                }
                if in_chunk >= CHUNK {
                    let now = sys::now_ns();
                    r.samples.push(ns_to_ms((now - chunk_start) as i128));
                    (in_chunk, chunk_start) = (0, now);
                    if now >= start + duration_ns {
                        break 'run;
                    }
                }
            }
            r.passes += 1;
        }
        (r.busy_ns, r.cpu_ns) = (sys::now_ns() - start, sys::thread_cpu_ns() - cpu_start);
        r
    })?;
    ready_then_wait_for_go()?;
    go_tx.send(())?;
    let r = reader.join().ok().context("reader thread panicked")?;
    let mut out = ModelOutput {
        samples_ms: r.samples,
        ..Default::default()
    };
    let busy_s = r.busy_ns.max(1) as f64 / 1e9;
    out.extras.insert("passes".into(), r.passes as f64);
    out.extras.insert(
        "read_mib_s".into(),
        r.bytes as f64 / busy_s / (1 << 20) as f64,
    );
    out.extras.insert(
        "reader_cpu_pct".into(),
        100.0 * r.cpu_ns as f64 / 1e9 / busy_s,
    );
    Ok(out)
}
