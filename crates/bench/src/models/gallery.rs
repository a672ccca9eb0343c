//! `gallery` (seed 003, ImageViewFlipper): every 250 ms the user flips to the next of 15
//! image-sized files (1.5 MiB), read on demand from a cold cache and "decoded" (3 ms of CPU).
//! Metric: flip → image ready.

use super::{
    drop_from_cache, gallery_file, ns_to_ms, ready_then_wait_for_go, spawn_named, spin_cpu,
    ModelArgs, ModelOutput, GALLERY_IMAGES,
};
use crate::sys;
use anyhow::{Context, Result};
use std::io::Read;

const FLIP_NS: u64 = 250_000_000;
const DECODE_MS: f64 = 3.0;

pub fn app(args: &ModelArgs) -> Result<ModelOutput> {
    let files = (0..GALLERY_IMAGES)
        .map(|i| {
            let p = gallery_file(&args.scratch, i);
            std::fs::File::open(&p).with_context(|| format!("opening {}", p.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let decode_ms = args.compute_ms.unwrap_or(DECODE_MS);
    let duration_ns = args.duration_ms * 1_000_000;
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let ui = spawn_named("ui", None, move || {
        let mut samples = Vec::new();
        if go_rx.recv().is_err() {
            return samples;
        }
        let start = sys::now_ns();
        let mut buf = Vec::new();
        for (k, flip) in (0..).map(|k| (k, start + k * FLIP_NS)) {
            if flip > start + duration_ns {
                break;
            }
            sys::sleep_until_ns(flip);
            let mut file = &files[k as usize % files.len()];
            drop_from_cache(file);
            buf.clear();
            let _ = std::io::Seek::rewind(&mut file);
            let _ = file.read_to_end(&mut buf);
            spin_cpu(decode_ms);
            samples.push(ns_to_ms((sys::now_ns() - flip) as i128));
        }
        samples
    })?;
    ready_then_wait_for_go()?;
    go_tx.send(())?;
    let samples = ui.join().ok().context("ui thread panicked")?;
    Ok(ModelOutput {
        samples_ms: samples,
        ..Default::default()
    })
}
