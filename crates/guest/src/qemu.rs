//! Finding the kernel, QEMU and busybox; booting the guest; reading its verdict off the console.

use crate::Initramfs;
use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Environment variable naming the kernel image (overrides the search for `shared/kernels/`).
pub const KERNEL_ENV: &str = "UXSCHED_GUEST_KERNEL";
const QEMU_ENV: &str = "UXSCHED_GUEST_QEMU";
const BUSYBOX_ENV: &str = "UXSCHED_GUEST_BUSYBOX";
const KERNEL_FILE: &str = "shared/kernels/bzImage-6.12-scx";
/// `panic=-1`: reboot at once on a panic, which `-no-reboot` turns into QEMU's exit.
/// `no_timer_check`: under emulation on a loaded host the kernel's check that the timer
/// interrupt reaches the IO-APIC can miss its window and panic ("IO-APIC + timer doesn't
/// work!"); KVM guests skip the check for the same reason (arch/x86/kernel/kvm.c).
const CMDLINE: &str = "console=ttyS0 quiet panic=-1 no_timer_check";

/// Why a guest run gave no exit status.
#[derive(Debug)]
pub enum Error {
    /// A tool or the kernel image is absent; the text says what to install or set.
    Missing(String),
    Io(io::Error),
    /// The guest did not power off in time.
    Timeout {
        after: Duration,
        tail: String,
    },
    /// The kernel panicked (including init exiting).
    Panic {
        tail: String,
    },
    /// The kernel panicked while booting, before `/init` ran: nothing of the test ran (seen
    /// once in many boots under TCG: an int3 oops in early boot). [`Guest::run`] boots again
    /// once before reporting it.
    BootPanic {
        tail: String,
    },
    /// `/init` could not prepare the guest (a mount or a controller failed).
    Setup {
        what: String,
        tail: String,
    },
    /// QEMU exited without the status marker.
    NoStatus {
        qemu: String,
        tail: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Missing(m) => write!(f, "cannot boot the test guest: {m}"),
            Error::Io(e) => write!(f, "guest: {e}"),
            Error::Timeout { after, tail } => write!(
                f,
                "guest did not power off within {after:?}; console tail:\n{tail}"
            ),
            Error::Panic { tail } => write!(f, "guest kernel panicked; console tail:\n{tail}"),
            Error::BootPanic { tail } => write!(
                f,
                "guest kernel panicked while booting, twice, before /init ran; console tail:\n{tail}"
            ),
            Error::Setup { what, tail } => {
                write!(f, "guest /init failed: {what}; console tail:\n{tail}")
            }
            Error::NoStatus { qemu, tail } => write!(
                f,
                "guest stopped without reporting a status ({qemu}); console tail:\n{tail}"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

/// What the script did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The script's exit status (`$?` of `sh /run.sh`).
    pub status: i32,
    /// The whole serial console (kernel messages and the script's stdout/stderr), `\n` lines.
    pub console: String,
    /// Wall time from starting QEMU to its exit.
    pub wall: Duration,
}

/// A bootable guest: the kernel, the emulator, the init's busybox, and the machine's size.
#[derive(Debug, Clone)]
pub struct Guest {
    pub kernel: PathBuf,
    pub qemu: PathBuf,
    pub busybox: PathBuf,
    pub cpus: u32,
    pub memory_mib: u32,
    pub timeout: Duration,
    /// Controllers written to the root's `cgroup.subtree_control` (`+cpu`, …).
    pub controllers: Vec<String>,
    /// More QEMU arguments (e.g. `-icount shift=3,sleep=on`: a clock that counts the guest's
    /// own instructions, so the host's load does not show up as guest latency).
    pub qemu_args: Vec<String>,
    /// Kernel modules `/init` loads, in this order, before the script (`insmod`; empty for the
    /// test kernel, which has none).
    pub modules: Vec<PathBuf>,
}

impl Guest {
    /// Find the kernel (`$UXSCHED_GUEST_KERNEL`, else `shared/kernels/bzImage-6.12-scx` beside
    /// the repository or one of its ancestors), `qemu-system-x86_64` and `busybox` (in `PATH`,
    /// or `$UXSCHED_GUEST_QEMU` / `$UXSCHED_GUEST_BUSYBOX`). 2 CPUs, 512 MiB, `+cpu`, 120 s.
    pub fn locate() -> Result<Guest, Error> {
        Guest::with_kernel(kernel()?)
    }

    /// As [`Guest::locate`] with a kernel image of the caller's.
    pub fn with_kernel(kernel: PathBuf) -> Result<Guest, Error> {
        Ok(Guest {
            kernel,
            qemu: tool(QEMU_ENV, "qemu-system-x86_64", "qemu-system-x86")?,
            busybox: tool(BUSYBOX_ENV, "busybox", "busybox-static")?,
            cpus: 2,
            memory_mib: 512,
            timeout: Duration::from_secs(120),
            controllers: vec!["cpu".into()],
            qemu_args: Vec::new(),
            modules: Vec::new(),
        })
    }

    /// Boot with `fs` plus busybox, `/init` and the script at `/run.sh`, and wait for the
    /// script's exit status.
    pub fn run(&self, fs: &Initramfs, script: &str) -> Result<Outcome, Error> {
        let marker = format!("UXSCHED-GUEST-{:016x}", nonce());
        let mut fs = fs.clone();
        fs.binary(&self.busybox, "/bin/busybox")?;
        let mut names = Vec::new();
        for ko in &self.modules {
            let name = ko.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
                Error::Missing(format!("{}: not a module file name", ko.display()))
            })?;
            fs.file(ko, &format!("/lib/modules/{name}"))?;
            names.push(name.to_owned());
        }
        fs.bytes(
            "/init",
            init_script(&marker, &self.controllers, &names),
            0o755,
        );
        fs.bytes("/run.sh", script, 0o755);
        let image = std::env::temp_dir().join(format!("{}.cpio.gz", marker.to_lowercase()));
        fs.write_gz(&image)?;
        let mut result = self.boot(&image, &marker);
        if let Err(Error::BootPanic { tail }) = &result {
            eprintln!(
                "uxsched-guest: the guest kernel panicked before /init ran (nothing of the test \
                 ran); booting once more. Console tail:\n{tail}"
            );
            result = self.boot(&image, &marker);
        }
        let _ = std::fs::remove_file(&image);
        result
    }

    fn boot(&self, image: &Path, marker: &str) -> Result<Outcome, Error> {
        let start = Instant::now();
        let mut cmd = Command::new(&self.qemu);
        // One host thread for all vCPUs: with multi-threaded TCG the kernel's live code patching
        // (static keys flipped when the test enables a cgroup controller or a BPF program) raced
        // on another vCPU and oopsed on the patch's int3 (2 of 8 runs of cgroup2_guest here,
        // 6.12.117, QEMU 7.2; 0 of 10 with one thread): single-threaded TCG keeps cross-modified
        // code coherent.
        cmd.args([
            "-accel",
            "tcg,thread=single",
            "-cpu",
            "max",
            "-nodefaults",
            "-display",
            "none",
        ])
        .args(["-serial", "stdio", "-no-reboot"])
        .args(["-smp", &self.cpus.to_string()])
        .args(["-m", &self.memory_mib.to_string()])
        .arg("-kernel")
        .arg(&self.kernel)
        .arg("-initrd")
        .arg(image)
        .args(["-append", CMDLINE])
        .args(&self.qemu_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = KillOnDrop(
            cmd.spawn()
                .map_err(|e| Error::Missing(format!("starting {}: {e}", self.qemu.display())))?,
        );
        let console = collect(child.0.stdout.take());
        let stderr = collect(child.0.stderr.take());
        let deadline = start + self.timeout;
        let exit = loop {
            if let Some(st) = child.0.try_wait()? {
                break st;
            }
            if Instant::now() >= deadline {
                let _ = child.0.kill();
                let _ = child.0.wait();
                let tail = tail(&text(&console));
                return Err(Error::Timeout {
                    after: self.timeout,
                    tail,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let wall = start.elapsed();
        // The pipes reach EOF once QEMU has exited; give the reader threads a moment to drain.
        std::thread::sleep(Duration::from_millis(50));
        let console = text(&console);
        verdict(&console, marker)
            .map(|status| Outcome {
                status,
                console: console.clone(),
                wall,
            })
            .map_err(|e| match e {
                Error::NoStatus { tail, .. } => Error::NoStatus {
                    qemu: format!("{exit}; stderr: {}", text(&stderr).trim()),
                    tail,
                },
                e => e,
            })
    }
}

/// The script's status from the console, or why there is none.
fn verdict(console: &str, marker: &str) -> Result<i32, Error> {
    for line in console.lines() {
        let Some(rest) = line.trim().strip_prefix(marker) else {
            continue;
        };
        if let Some(st) = rest.strip_prefix(" exit=") {
            if let Ok(st) = st.trim().parse() {
                return Ok(st);
            }
        }
        if let Some(what) = rest.strip_prefix(" setup-failed: ") {
            let what = what.trim().to_owned();
            return Err(Error::Setup {
                what,
                tail: tail(console),
            });
        }
    }
    if console.contains("Kernel panic") {
        let init_ran = (console.lines()).any(|l| l.trim() == format!("{marker} init"));
        let tail = oops(console);
        return Err(if init_ran {
            Error::Panic { tail }
        } else {
            Error::BootPanic { tail }
        });
    }
    Err(Error::NoStatus {
        qemu: String::new(),
        tail: tail(console),
    })
}

/// `/init`: mounts, controllers, the script, its status after the marker, power off. `poweroff
/// -f` calls reboot(2) directly (there is no init system to ask); with `-no-reboot` QEMU exits.
fn init_script(marker: &str, controllers: &[String], modules: &[String]) -> String {
    let load: String = modules
        .iter()
        .map(|m| format!("insmod /lib/modules/{m} || fail 'loading the module {m}'\n"))
        .collect();
    let enable: String = controllers
        .iter()
        .map(|c| {
            format!(
                "echo +{c} > /sys/fs/cgroup/cgroup.subtree_control || fail 'enabling the {c} \
                 controller (cgroup.controllers: '\"$(cat /sys/fs/cgroup/cgroup.controllers)\"')'\n"
            )
        })
        .collect();
    format!(
        "#!/bin/busybox sh\n\
         /bin/busybox --install -s\n\
         echo \"{marker} init\"\n\
         export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/tmp\n\
         fail() {{ echo \"{marker} setup-failed: $*\"; poweroff -f; }}\n\
         mount -t proc proc /proc || fail 'mounting /proc'\n\
         mount -t sysfs sysfs /sys || fail 'mounting /sys'\n\
         mount -t devtmpfs devtmpfs /dev || fail 'mounting /dev'\n\
         mount -t tmpfs tmpfs /tmp || fail 'mounting /tmp'\n\
         mount -t cgroup2 cgroup2 /sys/fs/cgroup || fail 'mounting cgroup2 at /sys/fs/cgroup'\n\
         {load}\
         {enable}\
         cd /tmp\n\
         sh /run.sh </dev/null\n\
         echo \"{marker} exit=$?\"\n\
         poweroff -f\n"
    )
}

/// A run-unique number, so that no output of the script can fake the status line.
fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.write_u32(std::process::id());
    h.finish()
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

type Buffer = Arc<Mutex<Vec<u8>>>;

/// Read a pipe to its end in a thread; the buffer holds what arrived so far.
fn collect(pipe: Option<impl Read + Send + 'static>) -> Buffer {
    let buf: Buffer = Arc::default();
    if let Some(mut pipe) = pipe {
        let b = Arc::clone(&buf);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                b.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&chunk[..n]);
            }
        });
    }
    buf
}

fn text(buf: &Buffer) -> String {
    let bytes = buf.lock().unwrap_or_else(|e| e.into_inner()).clone();
    String::from_utf8_lossy(&bytes).replace("\r\n", "\n")
}

/// The last 40 lines, enough to see what the guest was doing.
/// A panic's report: from a few lines before its first sign (the cause is there, not in the
/// last lines of the backtrace) to the end, at most 80 lines.
fn oops(console: &str) -> String {
    const SIGNS: [&str; 6] = [
        "BUG:",
        "Oops",
        "WARNING:",
        "general protection",
        "rcu:",
        "Kernel panic",
    ];
    let lines: Vec<&str> = console.lines().collect();
    let first = lines
        .iter()
        .position(|l| SIGNS.iter().any(|s| l.contains(s)))
        .unwrap_or(0);
    let from = first.saturating_sub(5);
    lines[from..lines.len().min(from + 80)].join("\n")
}

fn tail(console: &str) -> String {
    let lines: Vec<&str> = console.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

fn kernel() -> Result<PathBuf, Error> {
    if let Some(p) = std::env::var_os(KERNEL_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(Error::Missing(format!(
                "{KERNEL_ENV}={} is not a file",
                p.display()
            )))
        };
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let repo = repo.canonicalize().unwrap_or(repo);
    repo.ancestors()
        .skip(1)
        .map(|d| d.join(KERNEL_FILE))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::Missing(format!(
                "no kernel image: {KERNEL_FILE} is neither beside {} nor beside one of its \
                 parents; set {KERNEL_ENV} to a bzImage (shared/kernels/README.md says how it \
                 was built)",
                repo.display()
            ))
        })
}

/// `$env` if set, else `name` in `PATH`.
fn tool(env: &str, name: &str, package: &str) -> Result<PathBuf, Error> {
    if let Some(p) = std::env::var_os(env) {
        return Ok(PathBuf::from(p));
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::Missing(format!(
                "{name} is not in PATH: install the Debian package {package} \
                 (`bash scripts/setup.sh` does), or set {env}"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_needs_this_runs_marker() {
        let m = "UXSCHED-GUEST-00ff";
        let console = "UXSCHED-GUEST-1234 exit=0\nhello\nUXSCHED-GUEST-00ff exit=3\n";
        assert_eq!(verdict(console, m).unwrap(), 3);
        assert!(matches!(
            verdict("UXSCHED-GUEST-1234 exit=0\n", m),
            Err(Error::NoStatus { .. })
        ));
        let panic =
            "UXSCHED-GUEST-00ff init\n[ 1.7] Kernel panic - not syncing: Attempted to kill init!\n";
        assert!(matches!(verdict(panic, m), Err(Error::Panic { .. })));
        // Before /init ran: the boot's, booted again by `run`.
        let boot = "[ 1.6] Kernel panic - not syncing: Fatal exception in interrupt\n";
        assert!(matches!(verdict(boot, m), Err(Error::BootPanic { .. })));
        let setup = "UXSCHED-GUEST-00ff setup-failed: mounting /proc\n";
        assert!(
            matches!(verdict(setup, m), Err(Error::Setup { what, .. }) if what == "mounting /proc")
        );
    }

    #[test]
    fn a_missing_kernel_is_named_with_the_fix() {
        std::env::set_var(KERNEL_ENV, "/nonexistent/bzImage");
        let e = kernel().unwrap_err().to_string();
        std::env::remove_var(KERNEL_ENV);
        assert!(
            e.contains("/nonexistent/bzImage") && e.contains(KERNEL_ENV),
            "{e}"
        );
        let e = tool("UXSCHED_GUEST_NO_SUCH_ENV", "no-such-tool-xyz", "pkg-xyz")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no-such-tool-xyz") && e.contains("pkg-xyz"),
            "{e}"
        );
    }
}
