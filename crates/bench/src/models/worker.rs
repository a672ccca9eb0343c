//! `worker` (seed 003, the MuPDF case): the UI thread hands each request to a worker thread
//! that runs at background priority (nice 10, as Android's AsyncTask pool threads do), which
//! computes and posts the result back; the UI thread then draws the frame. The system side
//! (dispatcher + compositor) is `painting`'s.

use super::painting::Message;
use super::{
    inherited_socket, ready_then_wait_for_go, spawn_named, spin_cpu, ModelArgs, ModelOutput,
};
use anyhow::{Context, Result};
use std::sync::mpsc;

/// Worker CPU time per request (ms); the UI thread adds 1 ms to draw the result.
const WORKER_COMPUTE_MS: f64 = 4.0;
const UI_DRAW_MS: f64 = 1.0;
/// Android's `THREAD_PRIORITY_BACKGROUND`.
const WORKER_NICE: i32 = 10;

pub fn app(args: &ModelArgs) -> Result<ModelOutput> {
    let compute = args.compute_ms.unwrap_or(WORKER_COMPUTE_MS);
    let (req_tx, req_rx) = mpsc::channel::<Message>();
    let (done_tx, done_rx) = mpsc::channel::<Message>();
    let worker = spawn_named("worker", Some(WORKER_NICE), move || {
        for req in req_rx {
            spin_cpu(compute);
            if done_tx.send(req).is_err() {
                break;
            }
        }
    })?;
    let mut sock = inherited_socket();
    let mut tx = sock.try_clone()?;
    let ui = spawn_named("ui", None, move || {
        while let Some(event) = Message::read(&mut sock) {
            if req_tx.send(event).is_err() {
                break;
            }
            let Ok(result) = done_rx.recv() else { break };
            spin_cpu(UI_DRAW_MS);
            if result.write(&mut tx).is_err() {
                break;
            }
        }
    })?;
    ready_then_wait_for_go()?;
    ui.join().ok().context("ui thread panicked")?;
    worker.join().ok().context("worker thread panicked")?;
    Ok(ModelOutput::default())
}
