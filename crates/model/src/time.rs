//! Integer-nanosecond time, as the kernel counts it.

/// A duration or instant in nanoseconds.
pub type Nanos = u64;

pub const US: Nanos = 1_000;
pub const MS: Nanos = 1_000_000;
pub const SEC: Nanos = 1_000_000_000;

/// Parse a human duration such as `3ms`, `250us`, `1.5s`, `100ns` or a bare number of
/// nanoseconds. Returns a message naming what was wrong.
pub fn parse_duration(s: &str) -> Result<Nanos, String> {
    let (num, unit) = split_number(s);
    if num.is_empty() {
        return Err(format!(
            "`{s}` is not a duration (expected e.g. 3ms, 250us, 1.5s)"
        ));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (bad number `{num}`)"))?;
    let scale = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => US as f64,
        "ms" => MS as f64,
        "s" => SEC as f64,
        other => {
            return Err(format!(
                "`{s}`: unknown unit `{other}` (use ns, us, ms or s)"
            ))
        }
    };
    Ok((value * scale).round() as Nanos)
}

/// `"30 MiB"` → (`"30"`, `" MiB"`): the leading decimal number and the rest (a unit).
pub(crate) fn split_number(s: &str) -> (&str, &str) {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    t.split_at(split)
}

/// Format nanoseconds compactly for tables: `812ns`, `41.3us`, `6.18ms`, `2.500s`.
pub fn fmt_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0}ns")
    } else if ns < 1e6 {
        format!("{:.1}us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2}ms", ns / 1e6)
    } else {
        format!("{:.3}s", ns / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("3ms"), Ok(3 * MS));
        assert_eq!(parse_duration("250us"), Ok(250 * US));
        assert_eq!(parse_duration("1.5s"), Ok(1_500 * MS));
        assert_eq!(parse_duration("42"), Ok(42));
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("3 parsecs")
            .unwrap_err()
            .contains("unknown unit"));
    }

    #[test]
    fn formatting_picks_a_readable_unit() {
        assert_eq!(fmt_ns(812.0), "812ns");
        assert_eq!(fmt_ns(6_180_000.0), "6.18ms");
    }
}
