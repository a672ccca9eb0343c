//! The cpufreq source: f_max / f_cur of the CPUs the foreground runs on, sampled at each rescan
//! for `policy::facfs`. Polled rather than evented: sysfs cpufreq files do not notify. The root
//! is configurable (`facfs.sysfs_root`) so tests use a fake one.

use std::path::Path;

/// f_max / f_cur of the slowest of `cpus` under `root` (`cpuN/cpufreq/cpuinfo_max_freq` and
/// `scaling_cur_freq`, kHz); 1.0 when cpufreq is absent.
pub fn freq_ratio(root: &Path, cpus: impl IntoIterator<Item = u32>) -> f64 {
    let read = |cpu: u32, file: &str| -> Option<f64> {
        let p = root.join(format!("cpu{cpu}/cpufreq/{file}"));
        uxsched_os::procfs::read_to_string(p)
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    cpus.into_iter()
        .filter_map(|c| {
            let (max, cur) = (read(c, "cpuinfo_max_freq")?, read(c, "scaling_cur_freq")?);
            (cur > 0.0).then_some(max / cur)
        })
        .fold(1.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_root_gives_the_slowest_cpus_ratio() {
        let dir = tempfile::tempdir().unwrap();
        for (cpu, max, cur) in [(0, 2_000_000, 1_000_000), (1, 2_000_000, 2_000_000)] {
            let d = dir.path().join(format!("cpu{cpu}/cpufreq"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cpuinfo_max_freq"), format!("{max}\n")).unwrap();
            std::fs::write(d.join("scaling_cur_freq"), format!("{cur}\n")).unwrap();
        }
        assert_eq!(freq_ratio(dir.path(), [1]), 1.0);
        assert_eq!(freq_ratio(dir.path(), [0, 1]), 2.0);
        assert_eq!(freq_ratio(&dir.path().join("none"), [0]), 1.0);
    }
}
