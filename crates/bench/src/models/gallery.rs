//! `gallery` (seed 003, ImageViewFlipper): every 100 ms the user flips to the next of 15
//! image-sized files (1.5 MiB), read on demand from a cold cache and "decoded" (3 ms of CPU).
//! Metric: flip → image ready.
//!
//! 100 ms (it was 250 ms: 20 flips per 5 s run, 60 per mode with the default 3 repetitions,
//! too few for a p99) gives 50 flips per run and 150 per mode by default (issue 33: "enough
//! flips for p99"). A flip still loading when the next is due delays it, never queues a burst:
//! the next flip starts when the image is ready, is timed from then, and counts in
//! `flips_late`.

use super::{
    drop_from_cache, gallery_file, ns_to_ms, ready_then_wait_for_go, spawn_named, spin_cpu,
    ModelArgs, ModelOutput, GALLERY_IMAGES,
};
use crate::sys;
use anyhow::{Context, Result};
use std::io::Read;

const FLIP_NS: u64 = 100_000_000;
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
        let (mut samples, mut late) = (Vec::new(), 0u32);
        if go_rx.recv().is_err() {
            return (samples, late);
        }
        let start = sys::now_ns();
        let mut buf = Vec::new();
        let mut flip = start;
        for k in 0.. {
            if flip > start + duration_ns {
                break;
            }
            sys::sleep_until_ns(flip);
            let mut file = &files[k % files.len()];
            drop_from_cache(file);
            buf.clear();
            let _ = std::io::Seek::rewind(&mut file);
            let _ = file.read_to_end(&mut buf);
            spin_cpu(decode_ms);
            let ready = sys::now_ns();
            samples.push(ns_to_ms((ready - flip) as i128));
            flip += FLIP_NS;
            if flip < ready {
                (flip, late) = (ready, late + 1);
            }
        }
        (samples, late)
    })?;
    ready_then_wait_for_go()?;
    go_tx.send(())?;
    let (samples, late) = ui.join().ok().context("ui thread panicked")?;
    let mut out = ModelOutput {
        samples_ms: samples,
        ..Default::default()
    };
    out.extras.insert("flips_late".into(), f64::from(late));
    Ok(out)
}
