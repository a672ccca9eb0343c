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
}
