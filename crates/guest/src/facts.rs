//! What a guest script observed: the `fact key=value` lines it printed on the console. The
//! scripts only observe and print; the tests assert on these, so a failed assertion shows the
//! whole console with it.

/// One boot's console, read by key.
#[derive(Debug, Clone)]
pub struct Facts {
    console: String,
}

impl Facts {
    pub fn new(console: impl Into<String>) -> Facts {
        Facts {
            console: console.into(),
        }
    }

    /// The whole console (for messages).
    pub fn console(&self) -> &str {
        &self.console
    }

    /// Every value printed for `key`, in order. Lines are trimmed first: the kernel's own
    /// console output may leave a line starting with spaces.
    pub fn all(&self, key: &str) -> Vec<String> {
        let prefix = format!("fact {key}=");
        self.console
            .lines()
            .filter_map(|l| l.trim().strip_prefix(&prefix).map(|v| v.trim().to_owned()))
            .collect()
    }

    /// The first value printed for `key`; panics with the console when there is none.
    pub fn one(&self, key: &str) -> String {
        self.all(key)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("the guest printed no `{key}`:\n{}", self.console))
    }

    /// The first value of `key` read as JSON (a command's `--json` answer printed on one line).
    pub fn json(&self, key: &str) -> serde_json::Value {
        serde_json::from_str(&self.one(key)).unwrap_or_else(|e| panic!("`{key}`: {e}"))
    }

    /// The strings of the array `field` of the JSON value of `key` (e.g. `status --json`'s
    /// `storage` lines).
    pub fn strings(&self, key: &str, field: &str) -> Vec<String> {
        let v = self.json(key);
        v[field]
            .as_array()
            .unwrap_or_else(|| panic!("`{key}` has no array `{field}`: {v}"))
            .iter()
            .map(|l| l.as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_facts_by_key_in_order() {
        let f = Facts::new("boot\nfact a=1\n  fact b= two words \nfact a=3\nfact ab=x\n");
        assert_eq!(f.all("a"), ["1", "3"]);
        assert_eq!(f.one("b"), "two words");
        assert_eq!(f.one("ab"), "x");
        assert!(f.all("c").is_empty());
        let missing = std::panic::catch_unwind(|| f.one("c")).unwrap_err();
        let text = missing.downcast_ref::<String>().unwrap();
        assert!(
            text.contains("no `c`") && text.contains("fact a=1"),
            "{text}"
        );
    }

    #[test]
    fn json_facts_and_their_string_arrays() {
        let f = Facts::new("fact st={\"storage\": [\"a\", \"b\"], \"n\": 1}\n");
        assert_eq!(f.json("st")["n"], 1);
        assert_eq!(f.strings("st", "storage"), ["a", "b"]);
    }
}
