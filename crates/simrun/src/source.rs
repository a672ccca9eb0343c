//! A workload as text, so that a point carries its workload to a machine that has neither the
//! spec's folder nor the file (a Ray worker). Parsing the text is exactly what reading the file
//! or the built-in does.

use crate::bad_input;
use serde::{Deserialize, Serialize};
use std::path::Path;
use uxsched_sim::workload::{self, native, rtapp, Workload};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSource {
    /// The file's path as read (`scenarios/NAME.toml` for a built-in): messages and the
    /// workload's default name come from it, as when the file is loaded.
    pub file: String,
    pub text: String,
}

impl WorkloadSource {
    /// A file path if it exists, else a built-in by name (as `sim run` resolves its argument).
    pub fn resolve(spec: &str) -> anyhow::Result<WorkloadSource> {
        let path = Path::new(spec);
        if path.exists() {
            let text = std::fs::read_to_string(path)
                .map_err(|e| bad_input(format!("{}: cannot read: {e}", path.display())))?;
            return Ok(WorkloadSource {
                file: path.display().to_string(),
                text,
            });
        }
        match workload::BUILTINS.iter().find(|(n, _)| *n == spec) {
            Some((name, text)) => Ok(WorkloadSource {
                file: format!("scenarios/{name}.toml"),
                text: text.to_string(),
            }),
            // The loader's own message (it lists the built-ins).
            None => Err(bad_input(
                workload::builtin(spec)
                    .err()
                    .map_or_else(|| format!("workload `{spec}`"), |e| e.to_string()),
            )),
        }
    }

    /// The workload, read by the reader its extension names (`.toml` native, `.json` rt-app).
    pub fn parse(&self) -> anyhow::Result<Workload> {
        let parsed = match Path::new(&self.file).extension().and_then(|e| e.to_str()) {
            Some("toml") => native::parse(&self.text, &self.file),
            Some("json") => rtapp::parse(&self.text, &self.file),
            _ => {
                return Err(bad_input(format!(
                    "{}: unknown workload format: use a .toml (native) or .json (rt-app) file",
                    self.file
                )))
            }
        };
        parsed.map_err(|e| bad_input(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A built-in read from its text is the built-in (same name, same tasks).
    #[test]
    fn a_builtin_from_its_text_is_the_builtin() {
        let src = WorkloadSource::resolve("showcase").unwrap();
        let (a, b) = (src.parse().unwrap(), workload::builtin("showcase").unwrap());
        assert_eq!(a.name, b.name);
        assert_eq!(format!("{:?}", a), format!("{:?}", b));
        let err = WorkloadSource::resolve("nosuch").unwrap_err().to_string();
        assert!(err.contains("no built-in workload `nosuch`"), "{err}");
    }
}
