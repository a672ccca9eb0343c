//! Frame times off the event log, for the seeds whose metric is the UI's frame time (004's
//! browser, 003's game).
//!
//! A workload marks a frame as an interaction: the UI thread wakes on its vsync timer (the
//! `Period` record it logs on reaching the timer gives the vsync instant), begins the interaction, and the render thread ends
//! it when the frame is drawn. Frame time = end − the vsync that started it, the stages
//! Android's "Profile GPU rendering" sums per frame (seed 004 §5.1) plus the wait for a CPU.

use crate::log::{Record, RunMeta, Sink};
use uxsched_model::stats::{nearest_rank, permille};
use uxsched_model::Nanos;

/// Collects the time of every frame of interactions named `name` whose vsync is a `Period`
/// record of the task labelled `vsync_label`.
pub struct FrameClock {
    name: String,
    vsync_label: String,
    kind: Option<u32>,
    vsync_task: Option<u32>,
    last_vsync: Nanos,
    /// Open frames: interaction id → start.
    open: Vec<(u64, Nanos)>,
    pub frames: Vec<Nanos>,
}

impl FrameClock {
    pub fn new(name: &str, vsync_label: &str) -> Self {
        FrameClock {
            name: name.into(),
            vsync_label: vsync_label.into(),
            kind: None,
            vsync_task: None,
            last_vsync: 0,
            open: Vec::new(),
            frames: Vec::new(),
        }
    }
}

impl Sink for FrameClock {
    fn begin(&mut self, meta: &RunMeta) {
        self.kind = meta
            .interactions
            .iter()
            .position(|n| *n == self.name)
            .map(|i| i as u32);
        self.vsync_task = meta
            .tasks
            .iter()
            .position(|t| t.labels.contains(&self.vsync_label))
            .map(|i| i as u32);
    }

    fn record(&mut self, rec: &Record) {
        match *rec {
            // Logged when the UI thread reaches its timer: the next vsync is t + slack. After an
            // overrun (slack < 0) the next frame starts at once, at t: its time is counted from
            // there, so one late frame does not make every later one late too.
            Record::Period { t, task, slack } if Some(task) == self.vsync_task => {
                self.last_vsync = t + slack.max(0) as Nanos
            }
            Record::InteractionBegin { id, name, .. } if Some(name) == self.kind => {
                self.open.push((id, self.last_vsync))
            }
            Record::InteractionEnd { t, id, .. } => {
                if let Some(i) = self.open.iter().position(|&(x, _)| x == id) {
                    let (_, start) = self.open.swap_remove(i);
                    self.frames.push(t - start);
                }
            }
            _ => {}
        }
    }
}

/// Nearest-rank percentile (p in 0..=100) of frame times, in ms.
pub fn percentile_ms(frames: &[Nanos], p: f64) -> f64 {
    if frames.is_empty() {
        return f64::NAN;
    }
    let mut s = frames.to_vec();
    s.sort_unstable();
    nearest_rank(&s, permille(p)) as f64 / 1e6
}

/// Frames longer than `limit`.
pub fn over(frames: &[Nanos], limit: Nanos) -> usize {
    frames.iter().filter(|&&f| f > limit).count()
}
