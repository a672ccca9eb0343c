//! `painting` (seed 000, VT-CFS): an input dispatcher writes touch events over a socket to the
//! app's UI thread, which computes C ms and hands a frame to a compositor. Response time =
//! event written → frame received, measured by the system process on one monotonic clock.
//! `worker` reuses the same system process; only its app side differs.

use super::{
    inherited_socket, ns_to_ms, ready_then_wait_for_go, spawn_named, spin_cpu, ModelArgs,
    ModelOutput,
};
use crate::sys;
use anyhow::{Context, Result};
use rand::{Rng, SeedableRng};
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;

/// Default UI work per event (ms): a frame's worth of drawing on a phone-class core.
pub const DEFAULT_COMPUTE_MS: f64 = 4.0;
/// Mean gap between touch events (ms); a finger moving on screen sends ~30 events/s.
const EVENT_GAP_MS: f64 = 33.0;

/// One event or frame on the wire: sequence number and the dispatcher's write time.
pub(crate) struct Message {
    pub seq: u64,
    pub written_ns: u64,
}

impl Message {
    pub fn read(s: &mut UnixStream) -> Option<Message> {
        let mut buf = [0u8; 16];
        s.read_exact(&mut buf).ok()?;
        Some(Message {
            seq: u64::from_le_bytes(buf[..8].try_into().ok()?),
            written_ns: u64::from_le_bytes(buf[8..].try_into().ok()?),
        })
    }

    pub fn write(&self, s: &mut UnixStream) -> std::io::Result<()> {
        let mut buf = [0u8; 16];
        buf[..8].copy_from_slice(&self.seq.to_le_bytes());
        buf[8..].copy_from_slice(&self.written_ns.to_le_bytes());
        s.write_all(&buf)
    }
}

/// The app: its UI thread answers each event with C ms of work and a frame.
pub fn app(args: &ModelArgs) -> Result<ModelOutput> {
    let compute = args.compute_ms.unwrap_or(DEFAULT_COMPUTE_MS);
    let mut sock = inherited_socket();
    let ui = spawn_named("ui", None, move || {
        while let Some(event) = Message::read(&mut sock) {
            spin_cpu(compute);
            if event.write(&mut sock).is_err() {
                break;
            }
        }
    })?;
    ready_then_wait_for_go()?;
    ui.join().ok().context("ui thread panicked")?;
    Ok(ModelOutput::default())
}

/// The system side: dispatcher thread writes events at seeded jittered gaps for the duration,
/// compositor thread receives frames and records response times.
pub fn system(args: &ModelArgs) -> Result<ModelOutput> {
    let sock = inherited_socket();
    let mut rx = sock.try_clone()?;
    let duration_ns = args.duration_ms * 1_000_000;
    let seed = args.seed;
    // The input thread exists before the interaction, as a real one does (Xorg,
    // InputDispatcher): a tracker learns it by its name when it is created, not at the first
    // input (created at `go`, it raced the tracker for the first inputs).
    let (start_tx, start_rx) = std::sync::mpsc::channel::<u64>();
    let dispatcher = std::thread::Builder::new()
        .name("dispatcher".into())
        .spawn(move || -> Result<u64> {
            let Ok(start) = start_rx.recv() else {
                return Ok(0); // never told to go: the process is failing
            };
            let end = start + duration_ns;
            let mut tx = sock;
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut next = start;
            let mut seq = 0;
            while next < end {
                sys::sleep_until_ns(next);
                Message {
                    seq,
                    written_ns: sys::now_ns(),
                }
                .write(&mut tx)?;
                seq += 1;
                let gap = EVENT_GAP_MS * rng.gen_range(0.5..1.5);
                next += (gap * 1e6) as u64;
            }
            tx.shutdown(Shutdown::Write)?;
            Ok(seq)
        })?;
    ready_then_wait_for_go()?;
    start_tx
        .send(sys::now_ns())
        .context("the dispatcher thread is gone")?;
    let mut samples = Vec::new();
    while let Some(frame) = Message::read(&mut rx) {
        samples.push(ns_to_ms(sys::now_ns() as i128 - frame.written_ns as i128));
    }
    let sent = dispatcher
        .join()
        .ok()
        .context("dispatcher thread panicked")??;
    let mut out = ModelOutput {
        samples_ms: samples,
        ..Default::default()
    };
    out.extras.insert("events".into(), sent as f64);
    out.extras.insert(
        "lost_frames".into(),
        sent as f64 - out.samples_ms.len() as f64,
    );
    Ok(out)
}
