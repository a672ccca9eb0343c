//! Byte sizes as workloads write them.

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * KIB;
/// The page size the page cache works in.
pub const PAGE: u64 = 4 * KIB;

/// Parse a size such as `48`, `48B`, `8KiB`, `30MiB`, `1GiB`, or decimal `30MB`, `4kB`.
/// Returns a message naming what was wrong.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let (num, unit) = crate::time::split_number(s);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (expected e.g. 48, 8KiB, 30MiB)"))?;
    let scale = match unit.trim() {
        "" | "B" => 1.0,
        "KiB" | "K" => KIB as f64,
        "MiB" | "M" => MIB as f64,
        "GiB" | "G" => (1024 * MIB) as f64,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        other => {
            return Err(format!(
                "`{s}`: unknown unit `{other}` (use B, KiB, MiB, GiB, kB, MB or GB)"
            ))
        }
    };
    Ok((value * scale).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_and_decimal_units() {
        assert_eq!(parse_bytes("48"), Ok(48));
        assert_eq!(parse_bytes("8KiB"), Ok(8192));
        assert_eq!(parse_bytes("30MiB"), Ok(30 * MIB));
        assert_eq!(parse_bytes("30MB"), Ok(30_000_000));
        assert_eq!(parse_bytes("1.5K"), Ok(1536));
        assert!(parse_bytes("3 parsecs").unwrap_err().contains("parsecs"));
        assert!(parse_bytes("KiB").is_err());
    }
}
