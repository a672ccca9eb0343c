//! `alarm` (seed 002, MCFS): a thread sleeping 100 ms in a loop; the metric is its wake-up
//! delay, actual wake time − intended expiry (timer expiry → running, VISION's wake-up latency).
//! In the `rtapi` mode the `alarm` thread asks the daemon for real time itself first
//! ([`super::spawn_asking`], seed 002's cross-layer API).

use super::{ns_to_ms, ready_then_wait_for_go, spawn_asking, ModelArgs, ModelOutput};
use crate::sys;
use anyhow::{Context, Result};

const PERIOD_NS: u64 = 100_000_000;

pub fn app(args: &ModelArgs) -> Result<ModelOutput> {
    let duration_ns = args.duration_ms * 1_000_000;
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let alarm = spawn_asking("alarm", args.rt_socket.clone(), move || {
        let mut samples = Vec::new();
        if go_rx.recv().is_err() {
            return samples;
        }
        let start = sys::now_ns();
        let mut deadline = start + PERIOD_NS;
        while deadline <= start + duration_ns {
            sys::sleep_until_ns(deadline);
            samples.push(ns_to_ms(sys::now_ns() as i128 - deadline as i128));
            deadline += PERIOD_NS;
        }
        samples
    })?;
    ready_then_wait_for_go()?;
    go_tx.send(())?;
    let samples = alarm.join().ok().context("alarm thread panicked")?;
    Ok(ModelOutput {
        samples_ms: samples,
        ..Default::default()
    })
}
