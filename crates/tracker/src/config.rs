//! The tracker's settings: which threads are input dispatchers and displays (by thread name),
//! which are render threads, how long an episode may last, where decisions are kept.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrackerConfig {
    /// Thread names (`comm`, exact) whose wake-up of a foreground-app thread starts an episode:
    /// Android's InputDispatcher, X servers, Wayland compositors, the harness's dispatcher.
    pub input_names: Vec<String>,
    /// Thread names whose wake-up by the episode's work ends it (the work reached the screen).
    pub display_names: Vec<String>,
    /// Name prefixes (case-insensitive) of render/GL threads, delay-critical from creation
    /// (seed 003 §4: "The aforementioned GL thread is also a delay-critical thread").
    pub render_prefixes: Vec<String>,
    /// A wake-up of an app thread by a device interrupt (not a timer) starts an episode.
    pub irq_starts_episode: bool,
    /// An episode that has not reached the display by then is resolved with what it saw.
    pub episode_timeout_ms: u64,
    /// Hops from the UI thread the kernel follows (UI → kworker → shell → kworker → UI is 3).
    pub max_depth: u32,
    /// The ⟨context, decision⟩ store; `None` keeps decisions in memory only.
    pub store: Option<PathBuf>,
    /// Bytes of decisions kept in memory (LRU beyond), seed 003 §6's default 2 MB.
    pub store_bytes: usize,
    /// Ring-buffer events buffered in userspace between polls before new ones are dropped.
    pub max_pending_events: usize,
}

/// Compositors and X servers: they both deliver input and show the result.
const DISPLAY_SERVERS: [&str; 6] = [
    "Xorg",
    "Xvfb",
    "Xwayland",
    "gnome-shell",
    "kwin_wayland",
    "sway",
];

impl Default for TrackerConfig {
    fn default() -> Self {
        let mut input: Vec<String> = DISPLAY_SERVERS.iter().map(|s| s.to_string()).collect();
        input.extend(["weston", "InputDispatcher", "dispatcher"].map(String::from));
        let mut display: Vec<String> = DISPLAY_SERVERS.iter().map(|s| s.to_string()).collect();
        display.extend(["weston", "surfaceflinger", "compositor"].map(String::from));
        TrackerConfig {
            input_names: input,
            display_names: display,
            render_prefixes: ["render", "glthread", "gl-", "gpu"]
                .map(String::from)
                .to_vec(),
            irq_starts_episode: true,
            episode_timeout_ms: 100,
            max_depth: 8,
            store: Some(PathBuf::from("/var/lib/uxsched/tracker.sqlite")),
            store_bytes: 2 << 20,
            max_pending_events: 65_536,
        }
    }
}

impl TrackerConfig {
    pub fn is_input(&self, comm: &str) -> bool {
        self.input_names.iter().any(|n| n == comm)
    }

    pub fn is_display(&self, comm: &str) -> bool {
        self.display_names.iter().any(|n| n == comm)
    }

    pub fn is_render(&self, comm: &str) -> bool {
        let c = comm.to_lowercase();
        self.render_prefixes
            .iter()
            .any(|p| c.starts_with(&p.to_lowercase()))
    }

    /// The `partners` map's role bits for a thread named `comm` (bpf/tracker.h ROLE_*).
    pub fn role_bits(&self, comm: &str) -> u32 {
        u32::from(self.is_input(comm)) | (u32::from(self.is_display(comm)) << 1)
    }
}
