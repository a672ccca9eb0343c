//! The journal (`OUT/journal.jsonl`): one JSON line per finished point, appended and synced as it
//! finishes, so a killed driver loses at most the points still running. `--resume` reads it back,
//! drops a torn last line, and skips the points it holds; the table is written from it at the end
//! in point order, each point once.

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use uxsched_simrun::Outcome;

pub const FILE: &str = "journal.jsonl";

/// The first line: which sweep the journal belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Hash of every point's key and the row selection: another spec cannot resume this one.
    pub sweep: String,
    pub points: usize,
}

pub struct Journal {
    path: PathBuf,
    file: File,
}

/// Where each finished point's line starts, by point index.
pub type Index = BTreeMap<usize, u64>;

impl Journal {
    /// A new journal; refuses to overwrite one (that is what `--resume` is for).
    pub fn create(dir: &Path, header: &Header) -> anyhow::Result<Journal> {
        let path = dir.join(FILE);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| {
                format!(
                    "creating {}: a sweep was already written there; add --resume to finish it, or choose another --out",
                    path.display()
                )
            })?;
        writeln!(file, "{}", serde_json::to_string(header)?)?;
        file.sync_data()?;
        Ok(Journal { path, file })
    }

    /// The journal of an interrupted run of the same sweep, and the points it holds. A torn
    /// last line (the driver killed mid-write) is cut off; anything else unreadable is an error.
    pub fn resume(dir: &Path, header: &Header) -> anyhow::Result<(Journal, Index)> {
        let path = dir.join(FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .with_context(|| {
                format!(
                    "--resume: opening {} (no sweep to resume there?)",
                    path.display()
                )
            })?;
        let mut text = Vec::new();
        file.read_to_end(&mut text)?;
        let complete = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if complete < text.len() {
            eprintln!(
                "uxsched: --resume: dropping the torn last line of {} ({} bytes)",
                path.display(),
                text.len() - complete
            );
            file.set_len(complete as u64)?;
        }
        let index = index_of(&text[..complete], &path, header)?;
        Ok((Journal { path, file }, index))
    }

    /// Appends one finished point and syncs it to disk before returning.
    pub fn append(&mut self, o: &Outcome) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(o)?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|_| self.file.sync_data())
            .with_context(|| format!("appending to {}", self.path.display()))
    }
}

/// Checks the header and indexes the points (the first line of a point wins; a duplicate is
/// only possible if two drivers shared the folder, and is reported).
fn index_of(text: &[u8], path: &Path, header: &Header) -> anyhow::Result<Index> {
    let mut index = Index::new();
    let mut offset = 0u64;
    for (n, line) in text.split_inclusive(|&b| b == b'\n').enumerate() {
        if n == 0 {
            let h: Header = serde_json::from_slice(line)
                .with_context(|| format!("{}: bad header", path.display()))?;
            if &h != header {
                bail!(
                    "--resume: {} belongs to another sweep (the spec's points or [output] changed); \
                     run the changed spec into another --out",
                    path.display()
                );
            }
        } else {
            #[derive(Deserialize)]
            struct Head {
                index: usize,
            }
            let h: Head = serde_json::from_slice(line).with_context(|| {
                format!("{}: line {} is not a finished point", path.display(), n + 1)
            })?;
            if let std::collections::btree_map::Entry::Vacant(e) = index.entry(h.index) {
                e.insert(offset);
            } else {
                eprintln!(
                    "uxsched: warning: {} holds point {} twice; the first is kept",
                    path.display(),
                    h.index
                );
            }
        }
        offset += line.len() as u64;
    }
    Ok(index)
}

/// Reads every finished point back, in point order, one at a time.
pub fn read_points(
    dir: &Path,
    header: &Header,
) -> anyhow::Result<impl Iterator<Item = anyhow::Result<Outcome>>> {
    let path = dir.join(FILE);
    let mut text = Vec::new();
    File::open(&path)?.read_to_end(&mut text)?;
    let index = index_of(&text, &path, header)?;
    drop(text);
    let mut reader = BufReader::new(File::open(&path)?);
    Ok(index.into_values().map(move |offset| {
        reader.seek(SeekFrom::Start(offset))?;
        let mut line = String::new();
        reader.read_line(&mut line)?;
        Ok(serde_json::from_str(&line)?)
    }))
}
