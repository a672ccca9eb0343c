//! Files written from the event log: a Perfetto/Chrome trace and a Gantt chart SVG.
//!
//! Every file is written through [`AtomicFile`]: to `<path>.tmp`, then renamed over `<path>`
//! only once complete, so an error (or a panic) never leaves a partial output behind.

pub mod gantt;
pub mod perfetto;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

pub use gantt::GanttChart;
pub use perfetto::PerfettoTrace;

/// A file that appears at its path only when [`AtomicFile::commit`] succeeds.
///
/// Dropping it uncommitted removes the temporary file.
pub struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
}

impl AtomicFile {
    pub fn create(path: impl AsRef<Path>) -> io::Result<AtomicFile> {
        let path = path.as_ref().to_path_buf();
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let file = File::create(&tmp).map_err(|e| with_path(e, "create", &tmp))?;
        Ok(AtomicFile {
            path,
            tmp,
            out: Some(BufWriter::new(file)),
        })
    }

    /// Flushes, syncs and renames the temporary file into place; on failure removes it.
    pub fn commit(mut self) -> io::Result<()> {
        let out = self.out.take().expect("an AtomicFile is committed once");
        let result = out
            .into_inner()
            .map_err(|e| with_path(e.into_error(), "write", &self.tmp))
            .and_then(|file| file.sync_all().map_err(|e| with_path(e, "sync", &self.tmp)))
            .and_then(|()| {
                std::fs::rename(&self.tmp, &self.path)
                    .map_err(|e| with_path(e, "rename into place", &self.path))
            });
        if result.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
        }
        result
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.writer().flush()
    }
}

impl AtomicFile {
    fn writer(&mut self) -> &mut BufWriter<File> {
        self.out.as_mut().expect("AtomicFile used after commit")
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `path` with `fill`, atomically: on any error from `fill` or the file system, no file
/// (neither `path` nor `path.tmp`) is left, and an existing `path` is untouched.
pub fn write_atomically<T>(
    path: impl AsRef<Path>,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<T>,
) -> io::Result<T> {
    let mut file = AtomicFile::create(path)?;
    let value = fill(&mut file)?;
    file.commit()?;
    Ok(value)
}

/// Adds what was being done and to which file to an I/O error, so the user can act on it.
fn with_path(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
}

/// Escape text for SVG/XML attributes and content (the hand-written SVG writers share it).
pub fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
