//! `player` (seed 002): a decoder thread decodes one block every 20 ms into a buffer that is
//! drained in real time. Metric: buffer-writing delay per block (completion − the block's
//! period start). The buffer holds two blocks ahead, so a block finishing more than 40 ms after
//! its period start arrives after playback needed it: an underrun.
//! In the `rtapi` mode the `decoder` thread asks the daemon for real time itself first
//! ([`super::spawn_asking`], seed 002's cross-layer API).

use super::{ns_to_ms, ready_then_wait_for_go, spawn_asking, spin_cpu, ModelArgs, ModelOutput};
use crate::sys;
use anyhow::{Context, Result};

const BLOCK_NS: u64 = 20_000_000;
const DECODE_MS: f64 = 2.0;
const BUFFERED_BLOCKS: u64 = 2;

pub fn app(args: &ModelArgs) -> Result<ModelOutput> {
    let decode_ms = args.compute_ms.unwrap_or(DECODE_MS);
    let duration_ns = args.duration_ms * 1_000_000;
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let decoder = spawn_asking("decoder", args.rt_socket.clone(), move || {
        let mut delays = Vec::new();
        if go_rx.recv().is_err() {
            return delays;
        }
        let start = sys::now_ns();
        let mut period = start;
        while period + BLOCK_NS <= start + duration_ns {
            sys::sleep_until_ns(period);
            spin_cpu(decode_ms);
            delays.push(sys::now_ns() - period);
            period += BLOCK_NS;
        }
        delays
    })?;
    ready_then_wait_for_go()?;
    go_tx.send(())?;
    let delays = decoder.join().ok().context("decoder thread panicked")?;
    let underruns = delays
        .iter()
        .filter(|&&d| d > BUFFERED_BLOCKS * BLOCK_NS)
        .count();
    let mut out = ModelOutput {
        samples_ms: delays.iter().map(|&d| ns_to_ms(d as i128)).collect(),
        ..Default::default()
    };
    out.extras.insert("underruns".into(), underruns as f64);
    out.extras
        .insert("cumulative_delay_ms".into(), out.samples_ms.iter().sum());
    Ok(out)
}
