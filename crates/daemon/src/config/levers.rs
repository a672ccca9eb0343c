//! `cpu_levers`: the switch that turns every CPU lever of the modes off and leaves their
//! storage levers as configured — seed 003's "I/O manager alone" (docs/storage.md, "Table 8 on
//! the real kernel"). What it turns off is cut in one place, after every policy
//! (`Desired::cpu_switch`, `policy/mod.rs`); this file validates the key.

use super::backend::Kind;
use super::Config;
use serde::{Deserialize, Deserializer};

/// `cpu_levers` as a boolean only, with an error that names the key and says what each value
/// does (toml then adds the file's line).
pub(super) fn cpu_levers<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match toml::Value::deserialize(d)? {
        toml::Value::Boolean(b) => Ok(b),
        other => Err(serde::de::Error::custom(format!(
            "`cpu_levers` = {other}: expected true (the default: every lever) or false (the \
             storage levers alone: no nice, slice, real-time class, autogroup or cgroup change)"
        ))),
    }
}

/// The combinations of keys no single key's check can refuse: the `scx` backend is itself a
/// CPU lever (threads switched to `SCHED_EXT`), so it cannot run with `cpu_levers = false`.
/// Checked after parsing and again at start (`--backend` overrides the file).
pub fn check(cfg: &Config) -> Result<(), String> {
    if !cfg.cpu_levers && cfg.backend.kind == Kind::Scx {
        return Err(
            "`cpu_levers` = false with `[backend] kind = \"scx\"`: the scx backend is a CPU \
             lever (it switches threads to SCHED_EXT); use kind = \"stock\" or cpu_levers = true"
                .into(),
        );
    }
    Ok(())
}

impl Config {
    /// Whether the tracker's critical set may be made real-time: `[tracker] lever = "rt"` and
    /// the CPU levers on. The policy, the rt guard and its canary all ask this one question.
    pub fn rt_lever_in_force(&self) -> bool {
        self.cpu_levers && self.tracker.lever == super::Lever::Rt
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use std::path::Path;

    fn parse(s: &str) -> Result<Config, String> {
        Config::parse(s, Path::new("levers.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn cpu_levers_is_on_by_default_and_off_leaves_the_storage_keys_alone() {
        assert!(Config::default().cpu_levers);
        assert!(parse("cpu_levers = true\n").unwrap().cpu_levers);
        let c = parse("mode = \"uxsched\"\ncpu_levers = false\n").unwrap();
        assert!(!c.cpu_levers);
        assert_eq!(c.storage, Config::default().storage);
        assert_eq!(c.uxsched, Config::default().uxsched);
    }

    #[test]
    fn a_bad_cpu_levers_is_named_with_its_file_and_line() {
        for bad in ["\"no\"", "0", "[]"] {
            let e = parse(&format!("min_nice = -10\ncpu_levers = {bad}\n")).unwrap_err();
            assert!(
                e.contains("levers.toml") && e.contains("line 2") && e.contains("`cpu_levers`"),
                "{e}"
            );
        }
    }

    #[test]
    fn cpu_levers_off_refuses_the_scx_backend() {
        let e = parse("cpu_levers = false\n[backend]\nkind = \"scx\"\n").unwrap_err();
        assert!(
            e.contains("levers.toml") && e.contains("cpu_levers") && e.contains("scx"),
            "{e}"
        );
        parse("cpu_levers = true\n[backend]\nkind = \"scx\"\n").unwrap();
    }
}
