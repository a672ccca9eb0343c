//! The boost map the daemon writes: thread id → class, checked against the thread's start time
//! so that a recycled tid does not inherit a boost.

use crate::abi::{self, Class};
use crate::loader::boost_value;
use crate::thread;
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::io;
use std::path::Path;

/// Writes classes into the `boosts` map: in-process (`Scheduler::boosts`) or through the map
/// `uxsched scx run --pin` pinned (`Boosts::open_pinned`).
pub struct Boosts<M: MapCore> {
    map: M,
}

/// The boost map of a running `uxsched scx run --pin DIR`, opened from another process.
pub type PinnedBoosts = Boosts<MapHandle>;

impl Boosts<MapHandle> {
    /// The boost map pinned at `path` by a running `uxsched scx run --pin DIR` (DIR/boosts).
    pub fn open_pinned(path: &Path) -> io::Result<Self> {
        let map = MapHandle::from_pinned_path(path).map_err(|e| {
            io::Error::other(format!(
                "opening the boost map {}: {e} (is `uxsched scx run --pin` running?)",
                path.display()
            ))
        })?;
        Ok(Boosts { map })
    }
}

impl<M: MapCore> Boosts<M> {
    pub fn new(map: M) -> Self {
        Boosts { map }
    }

    /// Give thread `tid` the class (`Class::None` removes it).
    pub fn set(&self, tid: i32, class: Class) -> io::Result<()> {
        if class == Class::None {
            return self.clear(tid);
        }
        let start = thread::start_ticks(tid)?;
        let v = boost_value(class, start);
        self.map
            .update(
                &(tid as u32).to_ne_bytes(),
                abi::bytes_of(&v),
                MapFlags::ANY,
            )
            .map_err(|e| io::Error::other(format!("boost map: setting {tid}: {e}")))
    }

    /// Forget thread `tid` (absent is fine).
    pub fn clear(&self, tid: i32) -> io::Result<()> {
        match self.map.delete(&(tid as u32).to_ne_bytes()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io::Error::other(format!("boost map: clearing {tid}: {e}"))),
        }
    }
}
