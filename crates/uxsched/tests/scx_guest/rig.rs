//! The guest the sched_ext tests boot (`scx_guest.rs`, `daemon_scx_guest.rs`): the 6.12 test
//! kernel with `uxsched` at /bin/uxsched and the test fixture (`uxsched-guest-fixture`,
//! `fixture.rs`: the guest's workload and app processes) at /bin/t.

use std::time::Duration;
use uxsched_guest::{Guest, Initramfs};

/// The guest and its initramfs; `Err` names what is missing (QEMU, busybox, the kernel).
pub fn guest() -> Result<(Guest, Initramfs), String> {
    let mut guest = Guest::locate().map_err(|e| e.to_string())?;
    guest.timeout = Duration::from_secs(240);
    // Room for a debug build's binaries (the uxsched binary alone is ~240 MB unstripped).
    guest.memory_mib = 1024;
    // Guest time counts the guest's own instructions (8 ns each): QEMU runs at the host's
    // lowest priority next to other work, and with the host's clock its starvation would
    // be measured as the guest scheduler's latency. Idle time is skipped (sleep=on).
    guest.qemu_args = ["-icount", "shift=3,sleep=on"].map(String::from).to_vec();
    let mut fs = Initramfs::new();
    fs.binary(env!("CARGO_BIN_EXE_uxsched").as_ref(), "/bin/uxsched")
        .map_err(|e| e.to_string())?;
    let fixture = env!("CARGO_BIN_EXE_uxsched-guest-fixture");
    fs.binary(fixture.as_ref(), "/bin/t")
        .map_err(|e| e.to_string())?;
    Ok((guest, fs))
}
