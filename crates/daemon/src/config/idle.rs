//! `[idle]`: idle demotion (issue 32). After `after_s` without user input in the focused app's
//! session, the app loses its boost until the next input (`sources/idle/`, `daemon/idle.rs`).

use serde::{Deserialize, Deserializer, Serialize};
use std::time::Duration;

/// The longest limit accepted: a day (beyond it, turn the feature off with 0).
const MAX_S: f64 = 86_400.0;
/// The shortest limit accepted but 0: below a tenth of a second every pause between two
/// keystrokes would withdraw the boost.
const MIN_S: f64 = 0.1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Idle {
    /// Seconds without input (keyboard, pointer) after which the focused app's boost is
    /// withdrawn; fractions allowed (tests use 1.5); 0 turns idle demotion off.
    #[serde(deserialize_with = "after_s")]
    pub after_s: f64,
}

/// 300 s: long enough that reading a page or watching a build scroll by does not lose the
/// boost (the first keystroke after a withdrawal waits for the idle reader's next look, up to
/// 250 ms), short enough that a machine left alone gives the CPU back to its background work
/// well before a screen locker would (GNOME blanks the screen after 300 s by default).
impl Default for Idle {
    fn default() -> Self {
        Idle { after_s: 300.0 }
    }
}

impl Idle {
    /// The limit, `None` when idle demotion is off.
    pub fn after(&self) -> Option<Duration> {
        (self.after_s > 0.0).then(|| Duration::from_secs_f64(self.after_s))
    }
}

fn after_s<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if v == 0.0 || (MIN_S..=MAX_S).contains(&v) {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!(
            "`after_s` = {v} is out of range; expected 0 (off) or {MIN_S}..={MAX_S} seconds"
        )))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;
    use std::time::Duration;

    fn parse(s: &str) -> Result<Config, String> {
        Config::parse(s, Path::new("test.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn the_limit_is_seconds_fractions_allowed_and_0_is_off() {
        assert_eq!(
            parse("").unwrap().idle.after(),
            Some(Duration::from_secs(300))
        );
        let c = parse("[idle]\nafter_s = 1.5\n").unwrap();
        assert_eq!(c.idle.after(), Some(Duration::from_millis(1500)));
        let c = parse("[idle]\nafter_s = 60\n").unwrap();
        assert_eq!(c.idle.after(), Some(Duration::from_secs(60)));
        assert_eq!(parse("[idle]\nafter_s = 0\n").unwrap().idle.after(), None);
        for bad in ["0.01", "-1", "100000"] {
            let e = parse(&format!("[idle]\nafter_s = {bad}\n")).unwrap_err();
            assert!(e.contains("line 2") && e.contains("after_s"), "{e}");
        }
    }
}
