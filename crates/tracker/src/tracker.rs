//! The tracker on the real kernel: loads `bpf/tracker.bpf.c` (libbpf, CO-RE), keeps its maps
//! in step with the foreground app and the input/display threads, and feeds the ring buffer's
//! events to the [`Classifier`].

use crate::classify::{App, Classifier};
use crate::config::TrackerConfig;
use crate::critical::Snapshot;
use crate::procfs;
use crate::store::{app_key, Store};
use crate::wire::{self, Event};
use libbpf_rs::{
    Link, MapCore, MapFlags, Object, ObjectBuilder, PrintLevel, RingBuffer, RingBufferBuilder,
};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/tracker.bpf.o"));

/// The `sched_switch` program, loaded only for [`TrackerConfig::episode_cpu`].
const SWITCH_PROGRAM: &str = "ux_switch";

/// Why the tracker cannot run here; the daemon falls back to name-based roles and says so once.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    #[error("loading BPF programs needs root (or CAP_BPF and CAP_PERFMON): {0}")]
    NotPermitted(String),
    #[error("kernel lockdown ({0}) forbids BPF tracing; boot with lockdown=integrity or none")]
    Lockdown(String),
    #[error("the kernel has no BTF (/sys/kernel/btf/vmlinux): it needs CONFIG_DEBUG_INFO_BTF=y")]
    NoBtf,
    #[error("the kernel refused the tracker's BPF programs (kernel ≥ 5.11 with BTF tracepoints is needed): {0}")]
    Load(String),
    #[error("cannot open the decision store {path}: {err}")]
    Store { path: String, err: String },
}

/// How many times the family is scanned at focus ([`Tracker::set_family`]): a fork can
/// slip between a scan and its parent's entry in the kernel's map only once per generation.
const FAMILY_SCANS: usize = 4;

/// Events between polls, bounded ([`TrackerConfig::max_pending_events`]).
#[derive(Default)]
struct Pending {
    events: VecDeque<Event>,
    dropped: u64,
}

pub struct Tracker {
    obj: Object,
    _links: Vec<Link>,
    ring: RingBuffer<'static>,
    pending: Arc<Mutex<Pending>>,
    cls: Classifier,
    cfg: TrackerConfig,
    /// The tids written to the kernel's `members` map: the set as last synced.
    in_kernel: std::collections::BTreeSet<u32>,
    /// The foreground process and its user (0/None: none).
    fg: u32,
    fg_uid: Option<u32>,
    /// The last episode resolved here and written to the kernel (`config.closed_epoch`).
    closed: Option<u64>,
}

fn lockdown() -> Option<String> {
    let text = std::fs::read_to_string("/sys/kernel/security/lockdown").ok()?;
    let mode = text.split('[').nth(1)?.split(']').next()?.to_owned();
    (mode == "confidentiality").then_some(mode)
}

fn libbpf_log(level: PrintLevel, msg: String) {
    match level {
        PrintLevel::Warn => tracing::warn!("libbpf: {}", msg.trim_end()),
        _ => tracing::debug!("libbpf: {}", msg.trim_end()),
    }
}

impl Tracker {
    /// Load and attach the BPF programs; the reason when this kernel or user cannot.
    pub fn start(cfg: TrackerConfig) -> Result<Tracker, Unavailable> {
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            return Err(Unavailable::NoBtf);
        }
        if let Some(mode) = lockdown() {
            return Err(Unavailable::Lockdown(mode));
        }
        let store =
            Store::open(cfg.store.as_deref(), cfg.store_bytes).map_err(|e| Unavailable::Store {
                path: format!("{:?}", cfg.store),
                err: e.to_string(),
            })?;
        libbpf_rs::set_print(Some((PrintLevel::Warn, libbpf_log)));
        let refused = |e: libbpf_rs::Error| {
            // SAFETY: geteuid has no preconditions.
            if e.kind() == libbpf_rs::ErrorKind::PermissionDenied || unsafe { libc::geteuid() } != 0
            {
                Unavailable::NotPermitted(e.to_string())
            } else {
                Unavailable::Load(e.to_string())
            }
        };
        let mut open = ObjectBuilder::default()
            .open_memory(OBJECT)
            .map_err(refused)?;
        let wanted = |name: &std::ffi::OsStr| cfg.episode_cpu || name != SWITCH_PROGRAM;
        for mut p in open.progs_mut() {
            p.set_autoload(wanted(p.name()));
        }
        let obj = open.load().map_err(refused)?;
        // Exits before entries: an IRQ that enters after its entry program is attached but
        // leaves before its exit program is would leave the CPU marked "in IRQ" for good.
        let mut progs: Vec<_> = obj.progs_mut().filter(|p| wanted(p.name())).collect();
        progs.sort_by_key(|p| !p.name().to_string_lossy().ends_with("_exit"));
        let links = progs
            .iter()
            .map(|p| p.attach())
            .collect::<Result<Vec<_>, _>>()
            .map_err(refused)?;
        drop(progs);
        let pending = Arc::new(Mutex::new(Pending::default()));
        let ring = {
            let sink = Arc::clone(&pending);
            let cap = cfg.max_pending_events;
            let map = find_map(&obj, "events");
            let mut b = RingBufferBuilder::new();
            b.add(&map, move |bytes: &[u8]| {
                let mut p = sink.lock().expect("tracker queue lock");
                match wire::decode(bytes) {
                    Some(e) if p.events.len() < cap => p.events.push_back(e),
                    _ => p.dropped += 1,
                }
                0
            })
            .map_err(refused)?;
            b.build().map_err(refused)?
        };
        let t = Tracker {
            obj,
            _links: links,
            ring,
            pending,
            cls: Classifier::new(cfg.clone(), store)
                .with_roles(procfs::role)
                .with_fuse_servers(procfs::serves_fuse),
            cfg,
            in_kernel: Default::default(),
            fg: 0,
            fg_uid: None,
            closed: None,
        };
        t.write_config().map_err(refused)?;
        t.mark_input_irqs();
        for task in procfs::all_threads() {
            t.set_partner(task.tid, &task.comm);
        }
        Ok(t)
    }

    fn map(&self, name: &str) -> libbpf_rs::Map<'_> {
        find_map(&self.obj, name)
    }

    fn write_config(&self) -> libbpf_rs::Result<()> {
        let v = wire::encode_config(&wire::Config {
            fg_tgid: self.fg,
            irq_starts: self.cfg.irq_starts_episode,
            timeout_ns: self.cfg.episode_timeout_ms * 1_000_000,
            max_depth: self.cfg.max_depth,
            closed_epoch: self.closed.unwrap_or(0),
        });
        self.map("config")
            .update(&0u32.to_ne_bytes(), &v, MapFlags::ANY)
    }

    /// Tell the kernel the episode the classifier resolved, so it records nothing more of it
    /// (the kernel leaves display wake-ups to userspace, which ends episodes by the pipeline
    /// rule). A failed write costs events the classifier ignores until the timeout.
    fn close_in_kernel(&mut self) {
        let closed = self.cls.closed_epoch();
        if closed == self.closed {
            return;
        }
        self.closed = closed;
        if let Err(e) = self.write_config() {
            tracing::debug!("tracker: cannot close episode {closed:?} in the kernel: {e}");
        }
    }

    /// Put `tgid` in (or take it out of) the kernel's `family` map.
    fn set_family_in_kernel(&self, tgid: u32, member: bool) {
        let map = self.map("family");
        let key = tgid.to_ne_bytes();
        let r = if member {
            map.update(&key, &1u32.to_ne_bytes(), MapFlags::ANY)
        } else {
            match map.delete(&key) {
                Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(()),
                r => r,
            }
        };
        if let Err(e) = r {
            tracing::warn!(
                "tracker: cannot update process {tgid} in the app's family ({e}); its frame \
                 producers are found only when the episode wakes them"
            );
        }
    }

    /// The app's family at focus: its descendants of the same user, less input and display
    /// processes (the harness's input and display are the app's children), in the kernel's
    /// map and the classifier. A process forked after the scan by a parent not yet in the
    /// kernel's map is seen by neither (a zygote starting a helper just as the app comes to
    /// the front: found only episodes later, by its wake-ups), so the scan is repeated once its
    /// finds are in the map — every fork of theirs after that the kernel follows — until it
    /// finds nothing new. The threads found are then recognised from the store where their
    /// learned context is their own (`Classifier::recognise_at_focus`).
    fn set_family(&mut self, pid: Option<u32>) {
        let map = self.map("family");
        let old: Vec<Vec<u8>> = map.keys().collect();
        for k in old {
            let _ = map.delete(&k);
        }
        let mut procs: Vec<u32> = Vec::new();
        for _ in 0..FAMILY_SCANS {
            let new: Vec<u32> = self
                .family_scan(pid)
                .into_iter()
                .filter(|p| !procs.contains(p))
                .take(crate::family::MAX_PROCESSES.saturating_sub(procs.len()))
                .collect();
            if new.is_empty() {
                break;
            }
            for &p in &new {
                self.set_family_in_kernel(p, true);
            }
            procs.extend(new);
        }
        self.cls.set_family(&procs);
        let threads: Vec<_> = procs.iter().flat_map(|&p| procfs::threads(p)).collect();
        self.cls
            .recognise_at_focus(&threads, procfs::monotonic_ns());
    }

    /// `pid`'s descendants of the same user, less input and display processes.
    fn family_scan(&self, pid: Option<u32>) -> Vec<u32> {
        pid.map(procfs::family)
            .unwrap_or_default()
            .into_iter()
            .filter(|&p| procfs::task(p, p).is_some_and(|t| self.cfg.role_bits(&t.comm) == 0))
            .collect()
    }

    /// A renamed or exec'd process of the family: an input or display name, or an exec into
    /// another user (a set-uid program), takes it out of the family.
    fn follow_family(&mut self, task: &wire::Task, exec: bool) {
        if task.tid != task.tgid || !self.cls.in_family(task.tgid) {
            return;
        }
        let other_user = exec && procfs::uid(task.tgid) != self.fg_uid;
        if other_user || self.cfg.role_bits(&task.comm) != 0 {
            self.set_family_in_kernel(task.tgid, false);
            self.cls.leave_family(task.tgid);
        }
    }

    /// Fill `input_irqs` from /proc/interrupts (devices present at start).
    fn mark_input_irqs(&self) {
        let text = uxsched_os::procfs::read_to_string("/proc/interrupts").unwrap_or_default();
        let map = self.map("input_irqs");
        for irq in self.cfg.input_irqs(&text) {
            if let Err(e) = map.update(&irq.to_ne_bytes(), &1u32.to_ne_bytes(), MapFlags::ANY) {
                tracing::warn!("tracker: cannot mark IRQ {irq} as input: {e}");
            }
        }
    }

    /// Keep the `partners` map in step with a thread's (new) name.
    fn set_partner(&self, tid: u32, comm: &str) {
        let bits = self.cfg.role_bits(comm);
        let map = self.map("partners");
        let key = tid.to_ne_bytes();
        let r = if bits != 0 {
            tracing::debug!(tid, comm, bits, "tracker: an input/display thread");
            map.update(&key, &bits.to_ne_bytes(), MapFlags::ANY)
        } else {
            // Absent is the usual case; only a renamed partner had an entry.
            let _ = map.delete(&key);
            Ok(())
        };
        if let Err(e) = r {
            tracing::warn!("tracker: cannot mark thread {tid} ({comm}) as input/display: {e}");
        }
    }

    /// The app in front of the user (`None`: nothing tracked). Its learned decisions are
    /// loaded and its current threads classified from them at once.
    pub fn set_foreground(&mut self, pid: Option<u32>) -> std::io::Result<()> {
        let app = match pid {
            Some(p) => {
                let (exe, args) = procfs::identity(p)?;
                Some(App {
                    tgid: p,
                    key: app_key(&exe, &args),
                })
            }
            None => None,
        };
        self.fg = pid.unwrap_or(0);
        self.fg_uid = pid.and_then(procfs::uid);
        self.write_config()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let threads = pid.map(procfs::threads).unwrap_or_default();
        self.cls
            .set_foreground(app, &threads, procfs::monotonic_ns());
        self.set_family(pid);
        Ok(())
    }

    /// Wait up to `timeout` for events, classify them, and say where things stand.
    pub fn poll(&mut self, timeout: Duration) -> Snapshot {
        if let Err(e) = self.ring.poll(timeout) {
            tracing::debug!("tracker: ring buffer poll: {e}");
        }
        // Quiet events (about members only) woke nobody: read them too.
        if let Err(e) = self.ring.consume() {
            tracing::debug!("tracker: ring buffer consume: {e}");
        }
        let user_dropped = self.classify_pending();
        let mut s = self.cls.snapshot(user_dropped + self.kernel_dropped());
        if self.cfg.episode_cpu {
            for m in &mut s.critical {
                m.episode_cpu_ns = self.episode_cpu_ns(m.id.tid as u32);
            }
        }
        s
    }

    /// Classify what the ring buffer holds now, without waiting, and resolve an episode that
    /// timed out: for a caller that waits on [`Tracker::fd`] itself and only needs the set.
    /// True when anything was handled (the critical set may have changed).
    pub fn process(&mut self) -> bool {
        if let Err(e) = self.ring.consume() {
            tracing::debug!("tracker: ring buffer consume: {e}");
        }
        let (before, open) = (self.cls.episodes(), self.cls.episode_deadline_ns());
        let handled = self.classify_pending_count();
        handled > 0 || self.cls.episodes() != before || self.cls.episode_deadline_ns() != open
    }

    /// How long until the open episode times out (`None`: none is open) — when a caller
    /// waiting on [`Tracker::fd`] must call [`Tracker::process`] even without events.
    pub fn episode_deadline(&self) -> Option<Duration> {
        let at = self.cls.episode_deadline_ns()?;
        Some(Duration::from_nanos(
            at.saturating_sub(procfs::monotonic_ns()),
        ))
    }

    /// When the foreground was last set: the `since_ns` of the members classified then (by
    /// name or from the store), whose boost comes with the focus, not after an input.
    pub fn focused_ns(&self) -> u64 {
        self.cls.focused_ns()
    }

    /// Episodes resolved since the foreground was last set: a caller of [`Tracker::process`]
    /// sees from its growth that a keystroke's interaction has ended.
    pub fn episodes(&self) -> u64 {
        self.cls.episodes()
    }

    /// The delay-critical threads now.
    pub fn critical(&self) -> impl Iterator<Item = &crate::critical::Member> {
        self.cls.critical()
    }

    /// Hand the queued events to the classifier and tick it; the events dropped so far.
    fn classify_pending(&mut self) -> u64 {
        self.classify_pending_count();
        self.pending.lock().expect("tracker queue lock").dropped
    }

    fn classify_pending_count(&mut self) -> usize {
        let events = std::mem::take(&mut self.pending.lock().expect("tracker queue lock").events);
        let n = events.len();
        for ev in events {
            if let Event::Rename { task, .. } | Event::Exec { task, .. } = &ev {
                self.set_partner(task.tid, &task.comm);
                self.follow_family(task, matches!(ev, Event::Exec { .. }));
            }
            tracing::trace!("tracker event {ev:?}");
            self.cls.handle(ev);
        }
        self.cls.tick(procfs::monotonic_ns());
        self.sync_members();
        self.close_in_kernel();
        n
    }

    /// Bring the kernel's `members` map in step with the critical set: events about members
    /// alone then wait in the ring instead of waking this thread. A failed write only costs
    /// wake-ups (a member missing from the map) or delays a change until the next wake-up or
    /// timeout (a stale entry), so it is logged, not fatal.
    fn sync_members(&mut self) {
        let now: std::collections::BTreeSet<u32> =
            self.cls.critical().map(|m| m.id.tid as u32).collect();
        if now == self.in_kernel {
            return;
        }
        let map = self.map("members");
        let mut held = now.clone();
        for &tid in self.in_kernel.difference(&now) {
            if let Err(e) = map.delete(&tid.to_ne_bytes()) {
                if e.kind() != libbpf_rs::ErrorKind::NotFound {
                    tracing::debug!("tracker: cannot unmark thread {tid} as a member: {e}");
                    held.insert(tid); // still there: tried again at the next change
                }
            }
        }
        for &tid in now.difference(&self.in_kernel) {
            if let Err(e) = map.update(&tid.to_ne_bytes(), &[1u8], MapFlags::ANY) {
                tracing::debug!("tracker: cannot mark thread {tid} as a member: {e}");
                held.remove(&tid); // absent: it only costs wake-ups; tried again later
            }
        }
        self.in_kernel = held;
    }

    /// The threads the kernel counts as members (its `members` map), for tests.
    pub fn members_in_kernel(&self) -> Vec<u32> {
        let map = self.map("members");
        let mut v: Vec<u32> = (map.keys())
            .filter_map(|k| Some(u32::from_ne_bytes(k.try_into().ok()?)))
            .collect();
        v.sort_unstable();
        v
    }

    /// The ring buffer's epoll descriptor, for a caller's own event loop.
    pub fn fd(&self) -> i32 {
        self.ring.epoll_fd()
    }

    fn kernel_dropped(&self) -> u64 {
        match self
            .map("dropped")
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
        {
            Ok(Some(v)) if v.len() >= 8 => u64::from_ne_bytes(v[..8].try_into().expect("8")),
            _ => 0,
        }
    }

    /// On-CPU time of `tid` in the kernel's current episode (sched_switch accounting).
    fn episode_cpu_ns(&self, tid: u32) -> Option<u64> {
        let st = self
            .map("state")
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .ok()??;
        let epoch = u64::from_ne_bytes(st.get(..8)?.try_into().ok()?);
        let v = self
            .map("hot")
            .lookup(&tid.to_ne_bytes(), MapFlags::ANY)
            .ok()??;
        let (e, ran) = wire::hot_ran_ns(&v)?;
        (e == epoch).then_some(ran)
    }
}

fn find_map<'a>(obj: &'a Object, name: &str) -> libbpf_rs::Map<'a> {
    obj.maps()
        .find(|m| m.name() == name)
        .unwrap_or_else(|| panic!("bpf/tracker.bpf.c defines no map {name}"))
}
