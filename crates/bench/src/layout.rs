//! Load layouts: where the background load sits relative to the foreground app — the shape
//! that decides whether stock Linux already shields the app. With autogroup on, a load in a
//! session of its own is one group and barely hurts (`other-session`); a build started from
//! the app's own terminal shares the app's autogroup (`same-session`); Android and most
//! embedded systems run without autogroup (`no-autogroup`); a systemd desktop puts every app
//! in a unit of its own with equal weight (`units`).
//!
//! A layout is entered once per plan ([`Layout::enter`]) and undone on every exit path (the
//! [`ActiveLayout`] restores on drop, so errors and Ctrl-C put the sysctl and cgroups back,
//! through the same undo log as the modes). A layout the machine cannot provide is refused.

use crate::cgroup::CpuGroup;
use crate::modes::Changes;
use crate::sys;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// The load in a session of its own, like a background service (autogroup separates it);
    /// the app in another, like a launched desktop app.
    #[default]
    OtherSession,
    /// The load started from the app's own session, like a build in the editor's terminal:
    /// same session, same autogroup (the harness's: it plays the terminal).
    SameSession,
    /// `kernel.sched_autogroup_enabled=0` for the run (Android, embedded, one-cgroup setups).
    NoAutogroup,
    /// systemd-style: the app and the load each in a cpu cgroup of its own, equal weights,
    /// under one slice-like parent.
    Units,
}

impl Layout {
    pub const ALL: [Layout; 4] = [
        Layout::OtherSession,
        Layout::SameSession,
        Layout::NoAutogroup,
        Layout::Units,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Layout::OtherSession => "other-session",
            Layout::SameSession => "same-session",
            Layout::NoAutogroup => "no-autogroup",
            Layout::Units => "units",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Layout::OtherSession => "load in its own session (a background service): autogroup gives it its own group",
            Layout::SameSession => "load started from the app's session (a build in the same terminal): same sid, same autogroup",
            Layout::NoAutogroup => "kernel.sched_autogroup_enabled=0 for the run, restored after (Android, embedded)",
            Layout::Units => "app and load each in a cpu cgroup of equal weight under one parent (systemd units in a slice)",
        }
    }

    /// Whether the load gets a session of its own (`setsid`) rather than only a process group.
    pub fn load_own_session(self) -> bool {
        self != Layout::SameSession
    }

    /// Check the machine can provide the layout, then set it up; refused with the reason and
    /// what to do otherwise (never a silent fallback to another shape).
    pub fn enter(self) -> Result<ActiveLayout> {
        let mut active = ActiveLayout {
            layout: self,
            changes: Changes::default(),
            groups: None,
            note: String::new(),
        };
        let autogroup = sys::autogroup();
        active.note = match self {
            Layout::OtherSession | Layout::SameSession => match autogroup {
                Some(true) => {
                    if self == Layout::SameSession {
                        own_autogroup_at_zero()?;
                    }
                    "autogroup on".into()
                }
                Some(false) => bail!(
                    "layout {} needs autogroup, which is off on this machine (kernel.sched_autogroup_enabled=0): \
                     use --layout no-autogroup, or switch it on with `sysctl kernel.sched_autogroup_enabled=1`",
                    self.name()
                ),
                None => bail!(
                    "layout {} needs autogroup, which this kernel lacks (no /proc/sys/kernel/sched_autogroup_enabled; \
                     CONFIG_SCHED_AUTOGROUP): here the app and the load always share one group, which is the \
                     no-autogroup layout: use --layout no-autogroup (or units)",
                    self.name()
                ),
            },
            // A kernel built without autogroup (e.g. the 6.12 sched_ext test guest's) is this
            // layout as it stands: nothing to switch.
            Layout::NoAutogroup if autogroup.is_none() => {
                "this kernel has no autogroup (CONFIG_SCHED_AUTOGROUP unset): no-autogroup as built".into()
            }
            Layout::NoAutogroup => {
                active
                    .changes
                    .autogroup(false)
                    .context("layout no-autogroup: switching autogroup off")?;
                "autogroup off for the run (kernel.sched_autogroup_enabled=0), restored after".into()
            }
            Layout::Units => {
                let (groups, note) = Units::create(&mut active.changes)?;
                active.groups = Some(groups);
                note
            }
        };
        Ok(active)
    }
}

/// In `same-session` the app is started in the harness's session, so it shares the harness's
/// autogroup: if that
/// autogroup's nice is not 0 (left raised by an earlier daemon run, or set by hand), every
/// mode — `idle` and `stock` included — would run with a boosted app and the comparison would
/// be off. Refused, with the fix.
fn own_autogroup_at_zero() -> Result<()> {
    let me = std::process::id() as i32;
    match uxsched_os::autogroup::get(me) {
        Ok(0) => Ok(()),
        Ok(nice) => bail!(
            "this session's autogroup is at nice {nice}, not 0 (left by an earlier run?): the app would start boosted in every mode; \
             reset it with `echo 0 > /proc/{me}/autogroup` (any process of this session) and rerun"
        ),
        // The boot session has no autogroup of its own (the root group): nothing boosted.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).context("reading this session's autogroup"),
    }
}

/// The units layout's cgroups: `uxsched-bench-units-<pid>/{app,load}`.
#[derive(Debug)]
struct Units {
    app: std::path::PathBuf,
    load: std::path::PathBuf,
}

impl Units {
    /// Equal weights: 1024 shares (v1) = nice 0's weight, 100 (v2's default `cpu.weight`).
    const SHARES: u64 = 1024;

    fn create(changes: &mut Changes) -> Result<(Units, String)> {
        let slice = format!("uxsched-bench-units-{}", std::process::id());
        let parent = CpuGroup::create(&slice, Units::SHARES).context(
            "layout units needs a cpu cgroup controller (cgroup v1 `cpu` or v2 with `cpu` enabled)",
        )?;
        parent
            .delegate_cpu()
            .context("layout units: enabling the cpu controller below the slice")?;
        let v1 = parent.is_v1();
        changes.group(parent);
        let app = CpuGroup::create(&format!("{slice}/app"), Units::SHARES)?;
        let load = CpuGroup::create(&format!("{slice}/load"), Units::SHARES)?;
        let units = Units {
            app: app.path().to_owned(),
            load: load.path().to_owned(),
        };
        changes.group(app);
        changes.group(load);
        let note = if v1 {
            format!("emulated on cgroup v1 `cpu`: /sys/fs/cgroup/cpu/{slice}/{{app,load}}, cpu.shares 1024 each (systemd units under a slice, which set cpu.weight 100 each on cgroup v2); autogroup does not apply inside cgroups")
        } else {
            format!("cgroup v2: /sys/fs/cgroup/{slice}/{{app,load}}, cpu.weight 100 each (the shape of two systemd units in a slice, made directly, not by systemd)")
        };
        Ok((units, note))
    }
}

/// A layout in force; restores what it changed when dropped (or by [`ActiveLayout::restore`]).
#[derive(Debug)]
pub struct ActiveLayout {
    pub layout: Layout,
    changes: Changes,
    groups: Option<Units>,
    /// What was set up or emulated, for the report.
    pub note: String,
}

/// Where a new process must go, prepared before `fork` so the child only makes syscalls.
pub struct Placement {
    pub own_session: bool,
    cgroup_procs: Option<File>,
}

impl Placement {
    /// A session of its own and no cgroup change (`other-session`'s placement).
    pub fn own_session() -> Placement {
        Placement {
            own_session: true,
            cgroup_procs: None,
        }
    }

    /// The fd the child writes "0" to (joining the cgroup itself) before exec, if any.
    pub fn cgroup_fd(&self) -> Option<RawFd> {
        self.cgroup_procs.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// In the child between fork and exec: only async-signal-safe calls (setsid, write).
    pub fn enter_in_child(own_session: bool, cgroup_fd: Option<RawFd>) -> std::io::Result<()> {
        join_cgroup_in_child(cgroup_fd)?;
        // SAFETY: setsid is async-signal-safe. Otherwise a process group of its own, so the
        // load can be signalled and killed as one without touching the app's session.
        let r = unsafe {
            if own_session {
                libc::setsid()
            } else {
                libc::setpgid(0, 0)
            }
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Between fork and exec: join the cgroup whose `cgroup.procs` is open as `fd` (writing "0"
/// moves the writer itself), so everything the process later forks starts inside it.
pub fn join_cgroup_in_child(fd: Option<RawFd>) -> std::io::Result<()> {
    if let Some(fd) = fd {
        // SAFETY: write(2) of a static byte string to an open fd is async-signal-safe.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

impl ActiveLayout {
    /// How to start the background load.
    pub fn load_placement(&self) -> Result<Placement> {
        Ok(Placement {
            own_session: self.layout.load_own_session(),
            cgroup_procs: self.procs_file(|u| &u.load)?,
        })
    }

    /// The cgroup the app must join, if the layout has one (`cgroup.procs`, opened write-only).
    pub fn app_cgroup(&self) -> Result<Option<File>> {
        self.procs_file(|u| &u.app)
    }

    fn procs_file(&self, which: fn(&Units) -> &std::path::PathBuf) -> Result<Option<File>> {
        let Some(units) = &self.groups else {
            return Ok(None);
        };
        let path = which(units).join("cgroup.procs");
        let file = File::options()
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Some(file))
    }

    /// Undo the layout (autogroup back, cgroups emptied into their parents and removed).
    pub fn restore(&mut self) -> Result<()> {
        self.changes.restore()
    }
}

impl Drop for ActiveLayout {
    fn drop(&mut self) {
        if let Err(e) = self.changes.restore() {
            eprintln!(
                "uxsched bench: restoring layout {}: {e:#}",
                self.layout.name()
            );
        }
    }
}
