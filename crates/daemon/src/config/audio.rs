//! `[audio]`: audible counts as in front (`sources/audio/`).

use serde::{Deserialize, Serialize};

/// `[audio]` in the config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Audio {
    /// Follow the session users' PipeWire and protect the audio thread of each process playing
    /// sound (the `uxsched` mode). On by default: it costs one `pw-dump` per user that runs
    /// PipeWire, asleep until PipeWire's graph changes, and a look for the users every 5 s;
    /// it raises one thread per playing process, mildly, and never above the app in front.
    pub enable: bool,
}

impl Default for Audio {
    fn default() -> Self {
        Audio { enable: true }
    }
}
