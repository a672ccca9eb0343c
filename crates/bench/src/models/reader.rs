//! `reader` (seed 001, EIMOS): sequential 48-byte `read(2)`s through a 30 MiB file from a cold
//! page cache (POSIX_FADV_DONTNEED before each pass). Metric: time to read each MiB, so
//! read-ahead and I/O priority both show.

use super::{
    drop_from_cache, ns_to_ms, reader_file, ready_then_wait_for_go, spawn_named, ModelArgs,
    ModelOutput,
};
use crate::sys;
use anyhow::{Context, Result};
use std::io::Read;

const READ_SIZE: usize = 48;
const CHUNK: u64 = 1 << 20;

pub fn app(args: &ModelArgs) -> Result<ModelOutput> {
    let path = reader_file(&args.scratch);
    let mut file = std::fs::File::open(&path)
        .with_context(|| format!("opening {} (created by the runner)", path.display()))?;
    let duration_ns = args.duration_ms * 1_000_000;
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let reader = spawn_named("reader", None, move || {
        let (mut samples, mut passes) = (Vec::new(), 0u32);
        if go_rx.recv().is_err() {
            return (samples, passes);
        }
        let start = sys::now_ns();
        let mut buf = [0u8; READ_SIZE];
        'run: while sys::now_ns() < start + duration_ns {
            drop_from_cache(&file);
            let _ = std::io::Seek::rewind(&mut file);
            let (mut in_chunk, mut chunk_start) = (0u64, sys::now_ns());
            loop {
                match file.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => in_chunk += n as u64,
                }
                if in_chunk >= CHUNK {
                    let now = sys::now_ns();
                    samples.push(ns_to_ms((now - chunk_start) as i128));
                    (in_chunk, chunk_start) = (0, now);
                    if now >= start + duration_ns {
                        break 'run;
                    }
                }
            }
            passes += 1;
        }
        (samples, passes)
    })?;
    ready_then_wait_for_go()?;
    go_tx.send(())?;
    let (samples, passes) = reader.join().ok().context("reader thread panicked")?;
    let mut out = ModelOutput {
        samples_ms: samples,
        ..Default::default()
    };
    out.extras.insert("passes".into(), passes as f64);
    Ok(out)
}
