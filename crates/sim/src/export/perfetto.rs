//! A streaming Chrome trace-event JSON writer, loadable by ui.perfetto.dev and chrome://tracing.
//!
//! Layout: process 1 "CPUs" has one thread track per CPU carrying a complete ("X") slice per
//! running task, throttling instants, and one frequency counter ("C") per domain. Process 2
//! "Interactions" carries each interaction as an async slice ("b"/"e") from begin to end, even
//! when begin and end happen on different tasks. Each simulated process then gets a process
//! with one thread track per task, carrying a "runnable" slice for every wait for a CPU (after a
//! wake-up, a preemption or a yield: the latencies made visible) and wake-up, migration, period
//! and exit instants.
//!
//! Deterministic: events are written in log order (a slice when it closes), names in id order,
//! times as integer nanoseconds printed as microseconds with exactly three decimals, no floats
//! and no hash-map iteration. The same records give a byte-identical file.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufWriter, Write};

use uxsched_model::Nanos;

use crate::log::{CpuId, LeaveReason, Record, RunMeta, Sink, TaskId};

const CPUS_PID: u32 = 1;
const INTERACTIONS_PID: u32 = 2;
const FIRST_PROCESS_PID: u32 = 3;
/// The document around the streamed events.
const TRACE_OPEN: &str = r#"{"displayTimeUnit":"ns","traceEvents":["#;
const TRACE_CLOSE: &str = "\n]}\n";

/// The trace writer: a [`Sink`]; call [`PerfettoTrace::finish`] after the run for I/O errors.
pub struct PerfettoTrace<W: Write> {
    out: Events<W>,
    names: Names,
    ended: bool,
    last_t: Nanos,
    /// Per CPU: the running task and since when.
    running: Vec<Option<(TaskId, Nanos)>>,
    /// Open interactions: id → kind.
    open: BTreeMap<u64, u32>,
    /// Per task: runnable (waiting for a CPU) since when, and why ("woken", "preempted", …).
    waiting: Vec<Option<(Nanos, &'static str)>>,
}

/// The JSON array being streamed; keeps the first I/O error and stops writing after it.
struct Events<W: Write> {
    out: BufWriter<W>,
    error: Option<io::Error>,
    count: u64,
}

impl<W: Write> Events<W> {
    fn raw(&mut self, s: &str) {
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(s.as_bytes()) {
                self.error = Some(e);
            }
        }
    }

    /// Writes one event object; `body` is its members without the braces.
    fn event(&mut self, body: fmt::Arguments) {
        self.raw(if self.count == 0 { "\n{" } else { ",\n{" });
        self.count += 1;
        if self.error.is_none() {
            if let Err(e) = self.out.write_fmt(body) {
                self.error = Some(e);
            }
        }
        self.raw("}");
    }

    fn metadata(&mut self, kind: &str, pid: u32, tid: u32, args: fmt::Arguments) {
        self.event(format_args!(
            r#""name":"{kind}","ph":"M","pid":{pid},"tid":{tid},"args":{{{args}}}"#
        ));
    }
}

/// Every name the trace prints, JSON-escaped once, and the track ids.
#[derive(Default)]
struct Names {
    ncpus: u32,
    tasks: Vec<String>,
    task_pid: Vec<u32>,
    processes: Vec<String>,
    domains: Vec<String>,
    groups: Vec<String>,
    kinds: Vec<String>,
}

impl Names {
    fn new(meta: &RunMeta) -> Names {
        let mut processes: Vec<&str> = Vec::new();
        let mut task_pid = Vec::new();
        for task in &meta.tasks {
            let idx = match processes.iter().position(|p| *p == task.process) {
                Some(i) => i,
                None => {
                    processes.push(&task.process);
                    processes.len() - 1
                }
            };
            task_pid.push(FIRST_PROCESS_PID + idx as u32);
        }
        Names {
            ncpus: meta.cpus.max(meta.cpu_domain.len()) as u32,
            tasks: meta.tasks.iter().map(|t| json_str(&t.name)).collect(),
            task_pid,
            processes: processes.iter().map(|p| json_str(p)).collect(),
            domains: meta
                .domains
                .iter()
                .map(|d| json_str(&format!("freq {}", d.name)))
                .collect(),
            groups: meta.groups.clone(),
            kinds: meta.interactions.iter().map(|k| json_str(k)).collect(),
        }
    }

    fn cpu_tid(cpu: CpuId) -> u32 {
        u32::from(cpu) + 1
    }

    /// Task tracks come after the CPU tracks, so every tid in the trace is distinct.
    fn task_tid(&self, task: TaskId) -> u32 {
        self.ncpus + 1 + task
    }

    fn task_pid(&self, task: TaskId) -> u32 {
        self.task_pid
            .get(task as usize)
            .copied()
            .unwrap_or(CPUS_PID)
    }

    fn task(&self, task: TaskId) -> Cow<'_, str> {
        lookup(&self.tasks, task as usize, || format!("task{task}"))
    }

    fn process_of(&self, task: TaskId) -> Cow<'_, str> {
        let idx = self.task_pid(task).saturating_sub(FIRST_PROCESS_PID) as usize;
        lookup(&self.processes, idx, String::new)
    }

    fn domain(&self, domain: u16) -> Cow<'_, str> {
        lookup(&self.domains, domain as usize, || {
            format!("freq domain{domain}")
        })
    }

    fn kind(&self, kind: u32) -> Cow<'_, str> {
        lookup(&self.kinds, kind as usize, || format!("interaction{kind}"))
    }

    fn throttle(&self, group: u32, on: bool) -> String {
        let who = match group {
            u32::MAX => "RT class".to_string(),
            g => self
                .groups
                .get(g as usize)
                .cloned()
                .unwrap_or_else(|| format!("group{g}")),
        };
        json_str(&format!(
            "{} {who}",
            if on { "throttle" } else { "unthrottle" }
        ))
    }
}

/// An escaped name, or the escaped fallback for an id the metadata did not name.
fn lookup(names: &[String], i: usize, fallback: impl FnOnce() -> String) -> Cow<'_, str> {
    match names.get(i) {
        Some(n) => Cow::Borrowed(n),
        None => Cow::Owned(json_str(&fallback())),
    }
}

impl<W: Write> PerfettoTrace<W> {
    pub fn new(w: W) -> Self {
        PerfettoTrace {
            out: Events {
                out: BufWriter::new(w),
                error: None,
                count: 0,
            },
            names: Names::default(),
            ended: false,
            last_t: 0,
            running: Vec::new(),
            open: BTreeMap::new(),
            waiting: Vec::new(),
        }
    }

    /// Completes the JSON (if the run did not call `end`), flushes, and returns the writer or the
    /// first I/O error met while streaming.
    pub fn finish(mut self) -> io::Result<W> {
        if !self.ended {
            self.end(self.last_t);
        }
        if let Some(e) = self.out.error.take() {
            return Err(e);
        }
        self.out.out.into_inner().map_err(|e| e.into_error())
    }

    fn instant_on_task(&mut self, t: Nanos, task: TaskId, name: &str, args: fmt::Arguments) {
        let (pid, tid) = (self.names.task_pid(task), self.names.task_tid(task));
        self.out.event(format_args!(
            r#""name":"{name}","ph":"i","s":"t","pid":{pid},"tid":{tid},"ts":{},"args":{{{args}}}"#,
            Us(t)
        ));
    }

    fn close_slice(&mut self, cpu: CpuId, t: Nanos, reason: &str) {
        let Some((task, since)) = self.running.get_mut(cpu as usize).and_then(Option::take) else {
            return;
        };
        let n = &self.names;
        self.out.event(format_args!(
            r#""name":{},"cat":"sched","ph":"X","pid":{CPUS_PID},"tid":{},"ts":{},"dur":{},"args":{{"task":{task},"process":{},"left":"{reason}"}}"#,
            n.task(task),
            Names::cpu_tid(cpu),
            Us(since),
            Us(t.saturating_sub(since)),
            n.process_of(task),
        ));
    }

    fn start_waiting(&mut self, task: TaskId, t: Nanos, why: &'static str) {
        let i = task as usize;
        if self.waiting.len() <= i {
            self.waiting.resize(i + 1, None);
        }
        self.waiting[i].get_or_insert((t, why));
    }

    /// Ends a task's runnable span: a "runnable" slice on its own track, so wake-up and
    /// preemption latency are visible per task.
    fn stop_waiting(&mut self, task: TaskId, t: Nanos) {
        let Some((since, why)) = self.waiting.get_mut(task as usize).and_then(Option::take) else {
            return;
        };
        let (pid, tid) = (self.names.task_pid(task), self.names.task_tid(task));
        self.out.event(format_args!(
            r#""name":"runnable","cat":"sched","ph":"X","pid":{pid},"tid":{tid},"ts":{},"dur":{},"args":{{"since":"{why}"}}"#,
            Us(since),
            Us(t.saturating_sub(since))
        ));
    }

    fn freq(&mut self, t: Nanos, domain: u16, khz: u32) {
        self.out.event(format_args!(
            r#""name":{},"ph":"C","pid":{CPUS_PID},"tid":0,"ts":{},"args":{{"kHz":{khz}}}"#,
            self.names.domain(domain),
            Us(t)
        ));
    }

    fn interaction(&mut self, phase: &str, t: Nanos, id: u64, kind: u32, task: TaskId) {
        let n = &self.names;
        self.out.event(format_args!(
            r#""name":{},"cat":"interaction","ph":"{phase}","id":{id},"pid":{INTERACTIONS_PID},"tid":0,"ts":{},"args":{{"task":{}}}"#,
            n.kind(kind),
            Us(t),
            n.task(task)
        ));
    }

    /// `prev` leaves `cpu` (its slice closes; preempted or yielded, it waits again) and `next`
    /// starts running there (its wait ends).
    fn switch(
        &mut self,
        t: Nanos,
        cpu: CpuId,
        prev: Option<TaskId>,
        next: Option<TaskId>,
        reason: LeaveReason,
    ) {
        self.close_slice(cpu, t, reason_name(reason));
        if let (Some(p), LeaveReason::Preempted | LeaveReason::Yielded) = (prev, reason) {
            self.start_waiting(p, t, reason_name(reason));
        }
        if let Some(n) = next {
            self.stop_waiting(n, t);
            if self.running.len() <= cpu as usize {
                self.running.resize(cpu as usize + 1, None);
            }
            self.running[cpu as usize] = Some((n, t));
        }
    }

    /// `task` becomes runnable: its wait begins, and an instant names the CPU and the waker.
    fn wakeup(&mut self, t: Nanos, task: TaskId, cpu: CpuId, waker: Option<TaskId>) {
        self.start_waiting(task, t, "woken");
        let waker = waker
            .map_or(Cow::Borrowed("null"), |w| self.names.task(w))
            .into_owned();
        self.instant_on_task(
            t,
            task,
            "wakeup",
            format_args!(r#""cpu":{cpu},"waker":{waker}"#),
        );
    }

    fn write_metadata(&mut self, meta: &RunMeta) {
        let (n, out) = (&self.names, &mut self.out);
        out.metadata(
            "process_name",
            CPUS_PID,
            0,
            format_args!(r#""name":"CPUs""#),
        );
        out.metadata(
            "process_sort_index",
            CPUS_PID,
            0,
            format_args!(r#""sort_index":0"#),
        );
        for cpu in 0..n.ncpus {
            let domain = meta
                .cpu_domain
                .get(cpu as usize)
                .and_then(|&d| meta.domains.get(d as usize))
                .map_or(String::new(), |d| format!(" ({})", d.name));
            let name = json_str(&format!("CPU {cpu}{domain}"));
            out.metadata(
                "thread_name",
                CPUS_PID,
                cpu + 1,
                format_args!(r#""name":{name}"#),
            );
            out.metadata(
                "thread_sort_index",
                CPUS_PID,
                cpu + 1,
                format_args!(r#""sort_index":{cpu}"#),
            );
        }
        out.metadata(
            "process_name",
            INTERACTIONS_PID,
            0,
            format_args!(r#""name":"Interactions""#),
        );
        out.metadata(
            "process_sort_index",
            INTERACTIONS_PID,
            0,
            format_args!(r#""sort_index":1"#),
        );
        for (i, name) in n.processes.iter().enumerate() {
            let pid = FIRST_PROCESS_PID + i as u32;
            out.metadata("process_name", pid, 0, format_args!(r#""name":{name}"#));
            out.metadata(
                "process_sort_index",
                pid,
                0,
                format_args!(r#""sort_index":{pid}"#),
            );
        }
        for (task, name) in n.tasks.iter().enumerate() {
            let task = task as TaskId;
            out.metadata(
                "thread_name",
                n.task_pid(task),
                n.task_tid(task),
                format_args!(r#""name":{name}"#),
            );
        }
    }
}

impl<W: Write> Sink for PerfettoTrace<W> {
    fn begin(&mut self, meta: &RunMeta) {
        self.names = Names::new(meta);
        self.running = vec![None; self.names.ncpus as usize];
        self.out.raw(TRACE_OPEN);
        self.write_metadata(meta);
        for (d, dom) in meta.domains.iter().enumerate() {
            self.freq(0, d as u16, dom.initial_khz);
        }
    }

    fn record(&mut self, rec: &Record) {
        self.last_t = rec.time();
        match *rec {
            // Picked again at once: the running span goes on.
            Record::Switch {
                prev: Some(p),
                next: Some(n),
                ..
            } if p == n => {}
            Record::Switch {
                t,
                cpu,
                prev,
                next,
                reason,
            } => self.switch(t, cpu, prev, next, reason),
            Record::Wakeup {
                t,
                task,
                cpu,
                waker,
            } => self.wakeup(t, task, cpu, waker),
            Record::Migrate { t, task, from, to } => {
                self.instant_on_task(
                    t,
                    task,
                    "migrate",
                    format_args!(r#""from":{from},"to":{to}"#),
                );
            }
            Record::Freq { t, domain, khz } => self.freq(t, domain, khz),
            Record::InteractionBegin { t, id, name, task } => {
                self.open.insert(id, name);
                self.interaction("b", t, id, name, task);
            }
            Record::InteractionEnd { t, id, task } => {
                // An end without a begin has no slice to close (metrics report it as an anomaly).
                if let Some(kind) = self.open.remove(&id) {
                    self.interaction("e", t, id, kind, task);
                }
            }
            Record::Period { t, task, slack } => {
                let name = if slack < 0 { "deadline miss" } else { "period" };
                self.instant_on_task(t, task, name, format_args!(r#""slack_ns":{slack}"#));
            }
            Record::LoopDone { .. } => {}
            Record::Io {
                t,
                task,
                wait,
                service,
            } => self.instant_on_task(
                t,
                task,
                "io done",
                format_args!(r#""wait_ns":{wait},"service_ns":{service}"#),
            ),
            Record::Exit { t, task } => self.instant_on_task(t, task, "exit", format_args!("")),
            Record::Throttle { t, group, cpu, on } => {
                let name = self.names.throttle(group, on);
                self.out.event(format_args!(
                    r#""name":{name},"ph":"i","s":"t","pid":{CPUS_PID},"tid":{},"ts":{}"#,
                    Names::cpu_tid(cpu),
                    Us(t)
                ));
            }
        }
    }

    fn end(&mut self, end: Nanos) {
        if self.ended {
            return;
        }
        self.ended = true;
        for cpu in 0..self.running.len() {
            self.close_slice(cpu as CpuId, end, "end of run");
        }
        for task in 0..self.waiting.len() {
            self.stop_waiting(task as TaskId, end);
        }
        self.out.raw(TRACE_CLOSE);
        if self.out.error.is_none() {
            if let Err(e) = self.out.out.flush() {
                self.out.error = Some(e);
            }
        }
    }
}

fn reason_name(r: LeaveReason) -> &'static str {
    match r {
        LeaveReason::Preempted => "preempted",
        LeaveReason::Yielded => "yielded",
        LeaveReason::Blocked => "blocked",
        LeaveReason::Exited => "exited",
    }
}

/// Nanoseconds printed as the format's microseconds, exactly: `1234567` → `1234.567`.
struct Us(Nanos);

impl fmt::Display for Us {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// A JSON string literal (quoted, escaped).
fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a str always serialises")
}

#[cfg(test)]
mod tests {
    use super::Us;

    #[test]
    fn microseconds_are_exact() {
        assert_eq!(Us(0).to_string(), "0.000");
        assert_eq!(Us(1_234_567).to_string(), "1234.567");
        assert_eq!(Us(5).to_string(), "0.005");
    }
}
