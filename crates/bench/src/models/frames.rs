//! `frames` (seeds 003/004): a 60 Hz render loop. The UI thread wakes on each vsync, does its
//! part and posts the frame to the render thread, which finishes it. Metric: frame time (gap
//! between consecutive frame completions); a frame is janky when completion − its intended
//! vsync ≥ one interval (HWUI JankTracker's rule). A UI thread that misses vsyncs skips them.

use super::{ns_to_ms, ready_then_wait_for_go, spawn_named, spin_cpu, ModelArgs, ModelOutput};
use crate::sys;
use anyhow::{Context, Result};
use std::sync::mpsc;

const VSYNC_NS: u64 = 16_666_667;
const UI_MS: f64 = 3.0;
/// Render-thread work per frame (ms); UI + render ≈ half the frame budget when idle.
const RENDER_MS: f64 = 5.0;

pub fn app(args: &ModelArgs) -> Result<ModelOutput> {
    let render_ms = args.compute_ms.unwrap_or(RENDER_MS);
    let duration_ns = args.duration_ms * 1_000_000;
    let (frame_tx, frame_rx) = mpsc::channel::<u64>();
    let render = spawn_named("render", None, move || {
        // (intended vsync, completion) per frame.
        let mut done = Vec::new();
        for vsync in frame_rx {
            spin_cpu(render_ms);
            done.push((vsync, sys::now_ns()));
        }
        done
    })?;
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let ui = spawn_named("ui", None, move || {
        if go_rx.recv().is_err() {
            return;
        }
        let start = sys::now_ns();
        let mut vsync = start + VSYNC_NS;
        while vsync <= start + duration_ns {
            sys::sleep_until_ns(vsync);
            spin_cpu(UI_MS);
            if frame_tx.send(vsync).is_err() {
                return;
            }
            // The next vsync still ahead of us; the ones already passed are missed.
            let now = sys::now_ns();
            vsync += VSYNC_NS;
            if vsync <= now {
                vsync += (now - vsync) / VSYNC_NS * VSYNC_NS + VSYNC_NS;
            }
        }
    })?;
    ready_then_wait_for_go()?;
    go_tx.send(())?;
    ui.join().ok().context("ui thread panicked")?;
    let done = render.join().ok().context("render thread panicked")?;
    Ok(summarize(&done))
}

fn summarize(done: &[(u64, u64)]) -> ModelOutput {
    let samples: Vec<f64> = done
        .windows(2)
        .map(|w| ns_to_ms(w[1].1 as i128 - w[0].1 as i128))
        .collect();
    let janky = done.iter().filter(|(v, c)| c - v >= VSYNC_NS).count();
    let mut out = ModelOutput {
        samples_ms: samples,
        ..Default::default()
    };
    out.extras.insert("frames".into(), done.len() as f64);
    let pct = if done.is_empty() {
        0.0
    } else {
        100.0 * janky as f64 / done.len() as f64
    };
    out.extras.insert("jank_pct".into(), pct);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jank_counts_frames_completing_a_full_interval_late() {
        let v = VSYNC_NS;
        let done = [(v, v + 8_000_000), (2 * v, 2 * v + v), (3 * v, 3 * v + 1)];
        let out = summarize(&done);
        assert_eq!(out.samples_ms.len(), 2);
        assert!((out.extras["jank_pct"] - 100.0 / 3.0).abs() < 1e-9);
    }
}
