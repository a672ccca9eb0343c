//! The tests' fixture binary (`src/bin/uxsched-daemon-fixture.rs`: the child processes), and a
//! copy of it runnable by any user: children that drop to another uid run the fixture, and the
//! checkout's `target/` may sit where other users cannot enter (a clone in `/root`, mode 0700,
//! where they failed with EACCES). Included with `#[path]` by the tests that do not use the
//! rest of `common`.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The fixture binary, built with the tests (`uxsched-daemon-fixture ROLE [ARG]`).
pub const FIXTURE: &str = env!("CARGO_BIN_EXE_uxsched-daemon-fixture");

/// A copy of the fixture in a 0755 directory under the system temp dir, named as the fixture
/// and the build it comes from (its path, size and time, hashed), replaced atomically. Copies of
/// other builds older than an hour are removed, so they do not pile up.
pub fn exe_for_any_user() -> PathBuf {
    static COPY: OnceLock<PathBuf> = OnceLock::new();
    COPY.get_or_init(|| {
        use std::hash::{Hash, Hasher};
        let exe = std::path::Path::new(FIXTURE);
        let meta = std::fs::metadata(exe).expect("the fixture binary");
        let mut build = std::collections::hash_map::DefaultHasher::new();
        (exe, meta.len(), meta.modified().ok()).hash(&mut build);
        let name = format!(
            "{}-{:016x}",
            exe.file_name().unwrap().to_string_lossy(),
            build.finish()
        );
        let dir = std::env::temp_dir().join("uxsched-test-binaries");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let copy = dir.join(&name);
        let tmp = dir.join(format!(".{}.{name}", std::process::id()));
        std::fs::copy(exe, &tmp).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&tmp, &copy).unwrap();
        remove_stale(&dir, &copy);
        copy
    })
    .clone()
}

fn remove_stale(dir: &std::path::Path, current: &std::path::Path) {
    let name = current.file_name().unwrap().to_string_lossy();
    let stem = name.rsplit_once('-').map_or(&*name, |(s, _)| s);
    let hour = std::time::Duration::from_secs(3600);
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let old = e
            .file_name()
            .to_string_lossy()
            .starts_with(&format!("{stem}-"))
            && e.path() != current
            && e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > hour));
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
