//! `fsync`: an editor saving a document, the way GLib's `g_file_replace` and most editors do
//! it safely — write the whole content (320 KiB) to a temporary file beside the document,
//! `fsync` it, `rename` it over the document. Every 250 ms (a save every keystroke burst).
//! Metric: one save, open → renamed. Under a writer's page-cache writeback the fsync waits
//! behind the writer's dirty data on the same filesystem (ext4's ordered journal), the stall
//! users see as "the editor froze while a copy ran" (issue 33).

use super::{ns_to_ms, ready_then_wait_for_go, spawn_named, ModelArgs, ModelOutput};
use crate::sys;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// "A few hundred KiB": a large source file or a small document with its markup.
pub const SAVE_BYTES: usize = 320 << 10;
const PERIOD_NS: u64 = 250_000_000;

/// The document the model saves, in the scratch directory (on the same filesystem as a
/// `write` load's files).
pub fn document(scratch: &Path) -> PathBuf {
    scratch.join("fsync-document.txt")
}

/// One save: write `data` to a temporary file, fsync it, rename it over `doc`.
pub fn save(doc: &Path, data: &[u8]) -> std::io::Result<()> {
    let tmp = doc.with_extension("txt.save");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    std::fs::rename(&tmp, doc)
}

pub fn app(args: &ModelArgs) -> Result<ModelOutput> {
    use rand::{RngCore, SeedableRng};
    let doc = document(&args.scratch);
    let mut data = vec![0u8; SAVE_BYTES];
    rand_chacha::ChaCha8Rng::seed_from_u64(args.seed).fill_bytes(&mut data);
    // The document exists before the first timed save, as an open document does.
    save(&doc, &data)
        .with_context(|| format!("saving {} (is the scratch writable?)", doc.display()))?;
    let duration_ns = args.duration_ms * 1_000_000;
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let editor = spawn_named(
        "editor",
        None,
        move || -> std::io::Result<(Vec<f64>, u32)> {
            let (mut samples, mut late) = (Vec::new(), 0u32);
            if go_rx.recv().is_err() {
                return Ok((samples, late));
            }
            let start = sys::now_ns();
            let mut next = start;
            while next < start + duration_ns {
                sys::sleep_until_ns(next);
                // The user changed a little since the last save.
                let k = samples.len();
                data[k % SAVE_BYTES] = data[k % SAVE_BYTES].wrapping_add(1);
                let t0 = sys::now_ns();
                save(&doc, &data)?;
                let t1 = sys::now_ns();
                samples.push(ns_to_ms((t1 - t0) as i128));
                next += PERIOD_NS;
                if next < t1 {
                    // A save longer than the period: the next one starts at once, not in a burst.
                    (next, late) = (t1, late + 1);
                }
            }
            let _ = std::fs::remove_file(&doc);
            Ok((samples, late))
        },
    )?;
    ready_then_wait_for_go()?;
    go_tx.send(())?;
    let (samples, late) = editor
        .join()
        .ok()
        .context("editor thread panicked")?
        .context("saving the document")?;
    let mut out = ModelOutput {
        samples_ms: samples,
        ..Default::default()
    };
    out.extras.insert("saves_late".into(), late as f64);
    Ok(out)
}
