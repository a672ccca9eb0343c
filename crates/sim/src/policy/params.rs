//! `--param key=value` tunables for policies and mechanisms, taken by name so that a key nobody
//! used is reported instead of silently ignored.

use std::collections::BTreeMap;
use uxsched_model::time::parse_duration;
use uxsched_model::Nanos;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params(BTreeMap<String, String>);

impl Params {
    /// Parse `key=value` strings; the message names the bad one.
    pub fn parse<'a>(items: impl IntoIterator<Item = &'a str>) -> Result<Params, String> {
        let mut map = BTreeMap::new();
        for it in items {
            let (k, v) = it.split_once('=').ok_or_else(|| {
                format!("--param `{it}` must look like key=value (e.g. vtcfs.tick=3ms)")
            })?;
            if map
                .insert(k.trim().to_string(), v.trim().to_string())
                .is_some()
            {
                return Err(format!("--param `{k}` is given twice"));
            }
        }
        Ok(Params(map))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Remove and parse a duration (`3ms`).
    pub fn take_duration(&mut self, key: &str) -> Result<Option<Nanos>, String> {
        self.0
            .remove(key)
            .map(|v| parse_duration(&v).map_err(|e| format!("--param {key}: {e}")))
            .transpose()
    }

    /// Remove and parse a number.
    pub fn take_num<T: std::str::FromStr>(&mut self, key: &str) -> Result<Option<T>, String> {
        self.0
            .remove(key)
            .map(|v| {
                v.parse::<T>()
                    .map_err(|_| format!("--param {key}: `{v}` is not a valid number"))
            })
            .transpose()
    }

    /// Remove a raw string value.
    pub fn take_str(&mut self, key: &str) -> Option<String> {
        self.0.remove(key)
    }

    /// Keys with this prefix (`vtcfs.`), for a consumer that takes only its own.
    pub fn split_prefix(&mut self, prefix: &str) -> Params {
        let keys: Vec<String> = self
            .0
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect();
        Params(
            keys.into_iter()
                .filter_map(|k| self.0.remove_entry(&k))
                .collect(),
        )
    }

    /// Error if any key was not taken by `who`.
    pub fn finish(self, who: &str) -> Result<(), String> {
        if self.0.is_empty() {
            return Ok(());
        }
        let keys: Vec<&str> = self.0.keys().map(String::as_str).collect();
        Err(format!(
            "--param {} is not a tunable of `{who}`",
            keys.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_named() {
        let mut p = Params::parse(["vtcfs.tick=3ms", "bogus=1"]).unwrap();
        assert_eq!(p.take_duration("vtcfs.tick").unwrap(), Some(3_000_000));
        assert!(p.finish("vtcfs").unwrap_err().contains("bogus"));
        assert!(Params::parse(["novalue"]).is_err());
        assert!(Params::parse(["a=1", "a=2"]).unwrap_err().contains("twice"));
    }
}
