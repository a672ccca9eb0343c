//! The page cache and the kernel's on-demand read-ahead, for `read` events.
//!
//! A `read` of `bytes` at the task's position in a file needs the pages it covers in memory. A
//! missing page starts a synchronous read-ahead; a page carrying the read-ahead mark
//! (`PG_readahead`) starts the next window asynchronously, so a sequential reader finds its
//! pages already read or in flight. Windows follow `mm/readahead.c` of Linux 2.6.3x
//! (`ondemand_readahead`): the first window is `get_init_ra_size` (4× or 2× the request rounded
//! up to a power of two, at most the maximum), each next one `get_next_ra_size` (4× while small,
//! then 2×, capped at the maximum `ra_pages`, `read_ahead_kb`); a window whose own mark the read
//! would hit is merged with the next one. The task blocks only on pages still in flight. The
//! missing pages of a window go to the block device as one request per contiguous run, issued in
//! the reader's name (its I/O priority), taking `access + bytes / bandwidth` of device time.
//!
//! Not modelled: eviction (the cache holds every file whole), `try_context_readahead`'s history
//! search (a non-sequential miss reads just the request), `max_sectors_kb` request splitting,
//! writes.

use super::{Sim, State};
use uxsched_model::size::PAGE;
use uxsched_model::{Nanos, SEC};

/// Device characteristics for page reads (an `io` event gives its service time itself).
#[derive(Debug, Clone, Copy)]
pub struct DeviceSpec {
    /// Fixed cost of a request (command, access).
    pub access: Nanos,
    /// Sequential transfer rate, bytes per second.
    pub bytes_per_sec: u64,
    /// Default maximum read-ahead window (`/sys/block/*/queue/read_ahead_kb`).
    pub read_ahead_kb: u64,
}

impl Default for DeviceSpec {
    /// An SD card / eMMC of the seeds' era (assumed: the papers do not characterise theirs):
    /// 1 ms per request, 20 MB/s, the kernel's default 128 KiB read-ahead.
    fn default() -> Self {
        DeviceSpec {
            access: 1_000_000,
            bytes_per_sec: 20_000_000,
            read_ahead_kb: 128,
        }
    }
}

impl DeviceSpec {
    pub fn read_time(&self, bytes: u64) -> Nanos {
        self.access + (bytes as u128 * SEC as u128 / self.bytes_per_sec.max(1) as u128) as Nanos
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Page {
    Absent,
    InFlight,
    Cached,
}

struct File {
    size: u64,
    pages: Vec<Page>,
    /// `PG_readahead`: reading this page starts the next window.
    marked: Vec<bool>,
}

/// `struct file_ra_state` plus the file position, per (task, file).
#[derive(Debug, Clone, Copy, Default)]
struct Stream {
    pos: u64,
    start: u64,
    size: u64,
    async_size: u64,
    /// The last page read (`prev_pos >> PAGE_SHIFT`), `None` before the first read.
    prev_page: Option<u64>,
}

pub(super) struct PageCache {
    files: Vec<File>,
    /// Streams by (task, file).
    streams: std::collections::BTreeMap<(u32, usize), Stream>,
    /// Tasks blocked on a page: (task, file, page).
    waiting: Vec<(u32, usize, u64)>,
}

/// `get_init_ra_size`: the first window for a request of `req` pages.
pub fn init_ra_size(req: u64, max: u64) -> u64 {
    let n = req.max(1).next_power_of_two();
    if n <= max / 32 {
        n * 4
    } else if n <= max / 4 {
        n * 2
    } else {
        max
    }
}

/// `get_next_ra_size`: the window after one of `cur` pages.
pub fn next_ra_size(cur: u64, max: u64) -> u64 {
    let n = if cur < max / 16 { 4 * cur } else { 2 * cur };
    n.min(max)
}

impl PageCache {
    pub(super) fn new(sizes: impl IntoIterator<Item = u64>) -> Self {
        let files = sizes
            .into_iter()
            .map(|size| {
                let n = size.div_ceil(PAGE) as usize;
                File {
                    size,
                    pages: vec![Page::Absent; n],
                    marked: vec![false; n],
                }
            })
            .collect();
        PageCache {
            files,
            streams: Default::default(),
            waiting: Vec::new(),
        }
    }
}

impl Sim {
    /// Task `tid` reads `bytes` of `file` at its position. Returns false if it blocked on a page
    /// in flight; it then retries the same read when woken.
    pub(super) fn page_read(&mut self, tid: u32, file: usize, bytes: u64) -> bool {
        let size = self.pagecache.files[file].size;
        let st = self.pagecache.streams.entry((tid, file)).or_default();
        if st.pos >= size {
            *st = Stream::default(); // opened again from the start
        }
        let (pos, prev) = (st.pos, st.prev_page);
        let end = (pos + bytes).min(size);
        let (first, last) = (pos / PAGE, (end - 1) / PAGE);
        for page in first..=last {
            let req = last - page + 1;
            if self.pagecache.files[file].pages[page as usize] == Page::Absent {
                self.readahead(tid, file, page, req, false, prev);
            }
            if std::mem::take(&mut self.pagecache.files[file].marked[page as usize]) {
                self.readahead(tid, file, page, req, true, prev);
            }
            if self.pagecache.files[file].pages[page as usize] == Page::InFlight {
                self.pagecache.waiting.push((tid, file, page));
                let t = &mut self.tasks[tid as usize];
                t.state = State::Blocked;
                t.pending_read = Some((file, bytes));
                return false;
            }
        }
        let st = self
            .pagecache
            .streams
            .get_mut(&(tid, file))
            .expect("made above");
        st.pos = end;
        st.prev_page = Some(last);
        true
    }

    /// `ondemand_readahead` for a read of `req` pages at `page` (a miss, or a marked page).
    fn readahead(
        &mut self,
        tid: u32,
        file: usize,
        page: u64,
        req: u64,
        marker: bool,
        prev: Option<u64>,
    ) {
        let max = self.tasks[tid as usize].ra_pages.max(1);
        let st = self
            .pagecache
            .streams
            .get_mut(&(tid, file))
            .expect("stream exists");
        let expected = page == st.start + st.size - st.async_size || page == st.start + st.size;
        let sequential = prev.is_some_and(|p| page >= p && page - p <= 1);
        if page == 0 {
            Self::initial_window(st, page, req, max);
        } else if expected {
            // The expected next window: ramp up and push forward.
            st.start += st.size;
            st.size = next_ra_size(st.size, max);
            st.async_size = st.size;
        } else if marker {
            // A marked page without matching state (interleaved reads): ramp up from where
            // the cached run ends.
            let pages = &self.pagecache.files[file].pages;
            let start = (page + 1..pages.len() as u64)
                .find(|&p| pages[p as usize] == Page::Absent)
                .unwrap_or(pages.len() as u64);
            st.size = next_ra_size(start - page + req, max);
            st.start = start;
            st.async_size = st.size;
        } else if req > max || sequential {
            // An oversize read or a sequential cache miss: a fresh window here.
            Self::initial_window(st, page, req, max);
        } else {
            // A standalone random read: just the request, state untouched.
            self.submit_pages(tid, file, page, req, None);
            return;
        }
        if page == st.start && st.size == st.async_size {
            // This read would hit its own window's mark: merge the next window in now.
            st.async_size = next_ra_size(st.size, max);
            st.size += st.async_size;
        }
        let (start, size, async_size) = (st.start, st.size, st.async_size);
        self.submit_pages(tid, file, start, size, Some(start + size - async_size));
    }

    fn initial_window(st: &mut Stream, page: u64, req: u64, max: u64) {
        st.start = page;
        st.size = init_ra_size(req, max);
        st.async_size = if st.size > req {
            st.size - req
        } else {
            st.size
        };
    }

    /// `__do_page_cache_readahead`: request the absent pages of [start, start + n) (clipped at
    /// the end of the file), one device request per contiguous run, and set the mark.
    fn submit_pages(&mut self, tid: u32, file: usize, start: u64, n: u64, mark: Option<u64>) {
        let f = &mut self.pagecache.files[file];
        let end = (start + n).min(f.pages.len() as u64);
        let mut runs = Vec::new();
        let mut p = start;
        while p < end {
            if f.pages[p as usize] != Page::Absent {
                p += 1;
                continue;
            }
            let run_start = p;
            while p < end && f.pages[p as usize] == Page::Absent {
                f.pages[p as usize] = Page::InFlight;
                p += 1;
            }
            runs.push((run_start, p - run_start));
        }
        if let Some(m) = mark.filter(|&m| m < end && m >= start) {
            f.marked[m as usize] = true;
        }
        let size = f.size;
        for (first, count) in runs {
            let bytes = (count * PAGE).min(size - first * PAGE);
            let service = self.cfg.device.read_time(bytes);
            self.io_submit_pages(tid, service, file, first, count);
        }
    }

    /// The device read pages [first, first + count) of `file`: cache them, wake their waiters.
    pub(super) fn pages_read(&mut self, file: usize, first: u64, count: u64) {
        let f = &mut self.pagecache.files[file];
        for p in first..first + count {
            f.pages[p as usize] = Page::Cached;
        }
        let (woken, still): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pagecache.waiting)
            .into_iter()
            .partition(|&(_, wf, p)| wf == file && (first..first + count).contains(&p));
        self.pagecache.waiting = still;
        for (tid, _, _) in woken {
            self.wake(tid, None);
        }
    }
}
