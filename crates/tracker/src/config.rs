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
    /// A wake-up of an app thread by the interrupt of an input device starts an episode.
    pub irq_starts_episode: bool,
    /// Name prefixes of the input (and vsync) devices' interrupts in /proc/interrupts. Disks,
    /// network cards and timers wake apps from IRQ context too, and are not input.
    pub input_irq_names: Vec<String>,
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
    /// Measure the episode's threads' on-CPU time (`Member::episode_cpu_ns`) with a program on
    /// every context switch system-wide. Off unless asked: it was a third of the tracker's
    /// in-kernel time at 10 k wake-ups/s, and the daemon reads run time from `/proc` for its
    /// real-time budget instead.
    pub episode_cpu: bool,
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
            input_irq_names: [
                "i8042",
                "xhci",
                "ehci",
                "ohci",
                "uhci",
                "i2c_hid",
                "hid",
                "gpio-keys",
                "i915",
                "amdgpu",
                "nouveau",
            ]
            .map(String::from)
            .to_vec(),
            episode_timeout_ms: 100,
            max_depth: 8,
            store: Some(PathBuf::from("/var/lib/uxsched/tracker.sqlite")),
            store_bytes: 2 << 20,
            max_pending_events: 65_536,
            episode_cpu: false,
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

    /// The IRQ numbers of input devices in the text of /proc/interrupts.
    pub fn input_irqs(&self, interrupts: &str) -> Vec<u32> {
        interrupts
            .lines()
            .filter_map(|l| {
                let (num, rest) = l.trim_start().split_once(':')?;
                let irq: u32 = num.parse().ok()?;
                // The last column lists the handlers' names, comma-separated.
                let names = rest
                    .split_whitespace()
                    .skip_while(|w| w.chars().all(|c| c.is_ascii_digit()));
                let text: Vec<&str> = names.collect();
                let handlers = text.join(" ");
                let input = handlers.split([',', ' ']).any(|h| {
                    self.input_irq_names
                        .iter()
                        .any(|p| !h.is_empty() && h.starts_with(p.as_str()))
                });
                input.then_some(irq)
            })
            .collect()
    }

    /// The `partners` map's role bits for a thread named `comm` (bpf/tracker.h ROLE_*).
    pub fn role_bits(&self, comm: &str) -> u32 {
        u32::from(self.is_input(comm)) | (u32::from(self.is_display(comm)) << 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_irqs_by_device_name() {
        let text = "           CPU0       CPU1
   1:          9          0   IO-APIC   1-edge      i8042
  11:          0          0   IO-APIC  11-fasteoi   virtio0-requests
  24:        120         30   PCI-MSI 512000-edge      xhci_hcd
 NMI:          0          0   Non-maskable interrupts
";
        assert_eq!(TrackerConfig::default().input_irqs(text), vec![1, 24]);
    }
}
