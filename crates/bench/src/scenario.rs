//! Scenarios: a foreground model, its default background load, and what its metric means.

use crate::loads::LoadKind;
use crate::models::ModelKind;

#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub model: ModelKind,
    pub default_load: LoadKind,
    /// What one sample is (VISION's measurement words).
    pub metric: &'static str,
    pub source: &'static str,
}

pub const ALL: [ModelKind; 13] = [
    ModelKind::Painting,
    ModelKind::Worker,
    ModelKind::Frames,
    ModelKind::Alarm,
    ModelKind::Player,
    ModelKind::Reader,
    ModelKind::Gallery,
    ModelKind::Fsync,
    ModelKind::Xterm,
    ModelKind::Xedit,
    ModelKind::Chromium,
    ModelKind::Launch,
    ModelKind::Foot,
];

pub fn scenario(model: ModelKind) -> Scenario {
    let (default_load, metric, source) = match model {
        ModelKind::Painting => (
            LoadKind::Cpu,
            "response time: touch event written → frame received (UI thread computes 4 ms)",
            "seed 000",
        ),
        ModelKind::Worker => (
            LoadKind::Cpu,
            "response time via a nice-10 worker thread (4 ms) and the UI thread (1 ms)",
            "seed 003",
        ),
        ModelKind::Frames => (
            LoadKind::Cpu,
            "frame time at 60 Hz (UI 3 ms + render 5 ms); jank % in extras",
            "seeds 003/004",
        ),
        ModelKind::Alarm => (
            LoadKind::Cpu,
            "wake-up delay of a thread sleeping 100 ms in a loop",
            "seed 002",
        ),
        ModelKind::Player => (
            LoadKind::Cpu,
            "buffer-writing delay of a 20 ms block decoder (2 ms); underruns in extras",
            "seed 002",
        ),
        ModelKind::Reader => (
            LoadKind::Io,
            "time per MiB of 256 KiB sequential reads from a cold page cache (reader_cpu_pct in extras: storage-bound, not CPU)",
            "seed 001",
        ),
        ModelKind::Gallery => (
            LoadKind::Io,
            "flip → image ready: every 100 ms, a 1.5 MiB file read cold and decoded (3 ms); flips_late in extras",
            "seed 003",
        ),
        ModelKind::Fsync => (
            LoadKind::Write,
            "one editor save: 320 KiB written to a temporary file, fsync, rename over the document (every 250 ms)",
            "issue 33",
        ),
        ModelKind::Xterm => (
            LoadKind::Cpu,
            "keystroke → screen: XTEST key sent → xterm's window damaged (echoed by `cat` through a pty); client SCHED_FIFO 10",
            "real app",
        ),
        ModelKind::Xedit => (
            LoadKind::Cpu,
            "keystroke → screen: XTEST key sent → xedit's window damaged (Xaw text draws it); client SCHED_FIFO 10",
            "real app",
        ),
        ModelKind::Chromium => (
            LoadKind::Cpu,
            "keystroke → screen: XTEST key sent → Chromium's window damaged (a <textarea>: browser → renderer → software compositor); client SCHED_FIFO 10",
            "real app",
        ),
        ModelKind::Launch => (
            LoadKind::Write,
            "cold launch: Return typed through XTEST into an xterm's shell running `mousepad launch.txt &` → the new window's MapNotify (page cache dropped before each); extras `launches`, `lost`, `read_mib` (read from disk until mapped)",
            "issue 33, real app",
        ),
        ModelKind::Foot => (
            LoadKind::Cpu,
            "keystroke → frame shown: virtual-keyboard key sent to sway → screencopy copy_with_damage `ready` (sway composited foot's echo by `cat` and copied the frame; headless output: no vblank wait); client SCHED_FIFO 10; focus_*: sway focus command → the daemon's boost visible on the focused foot",
            "real app, Wayland",
        ),
    };
    Scenario {
        model,
        default_load,
        metric,
        source,
    }
}
