//! A streaming Chrome trace-event JSON writer, loadable by ui.perfetto.dev and chrome://tracing.
//!
//! Layout: process 1 "CPUs" has one thread track per CPU carrying a complete ("X") slice per
//! running task, throttling instants, and one frequency counter ("C") per domain. Process 2
//! "Interactions" carries each interaction as an async slice ("b"/"e") from begin to end, even
//! when begin and end happen on different tasks. Each simulated process then gets a process
//! with one thread track per task, carrying wake-up, migration, period and exit instants.
//!
//! Deterministic: events are written in log order (a slice when it closes), names in id order,
//! times as integer nanoseconds printed as microseconds with exactly three decimals, no floats
//! and no hash-map iteration. The same records give a byte-identical file.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};

use uxsched_model::Nanos;

use crate::log::{CpuId, LeaveReason, Record, RunMeta, Sink, TaskId};

const CPUS_PID: u32 = 1;
const INTERACTIONS_PID: u32 = 2;
const FIRST_PROCESS_PID: u32 = 3;

/// The trace writer: a [`Sink`]; call [`PerfettoTrace::finish`] after the run for I/O errors.
pub struct PerfettoTrace<W: Write> {
    out: BufWriter<W>,
    error: Option<io::Error>,
    events: u64,
    ended: bool,
    last_t: Nanos,
    ncpus: u32,
    /// JSON-escaped task names and their process pid, by task id.
    task_names: Vec<String>,
    task_pid: Vec<u32>,
    process_names: Vec<String>,
    domain_names: Vec<String>,
    group_names: Vec<String>,
    kind_names: Vec<String>,
    /// Per CPU: the running task and since when.
    running: Vec<Option<(TaskId, Nanos)>>,
    /// Open interactions: id → kind.
    open: BTreeMap<u64, u32>,
}

impl<W: Write> PerfettoTrace<W> {
    pub fn new(w: W) -> Self {
        PerfettoTrace {
            out: BufWriter::new(w),
            error: None,
            events: 0,
            ended: false,
            last_t: 0,
            ncpus: 0,
            task_names: Vec::new(),
            task_pid: Vec::new(),
            process_names: Vec::new(),
            domain_names: Vec::new(),
            group_names: Vec::new(),
            kind_names: Vec::new(),
            running: Vec::new(),
            open: BTreeMap::new(),
        }
    }

    /// Completes the JSON (if the run did not call `end`), flushes, and returns the writer or the
    /// first I/O error met while streaming.
    pub fn finish(mut self) -> io::Result<W> {
        if !self.ended {
            self.end(self.last_t);
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.into_inner().map_err(|e| e.into_error())
    }

    fn raw(&mut self, s: &str) {
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(s.as_bytes()) {
                self.error = Some(e);
            }
        }
    }

    /// Writes one event object (without braces).
    fn event(&mut self, body: &str) {
        let sep = if self.events == 0 { "\n{" } else { ",\n{" };
        self.events += 1;
        let line = format!("{sep}{body}}}");
        self.raw(&line);
    }

    fn cpu_tid(cpu: CpuId) -> u32 {
        u32::from(cpu) + 1
    }

    fn task_tid(&self, task: TaskId) -> u32 {
        self.ncpus + 1 + task
    }

    fn task_name(&self, task: TaskId) -> String {
        self.task_names
            .get(task as usize)
            .cloned()
            .unwrap_or_else(|| json_str(&format!("task{task}")))
    }

    fn task_pid(&self, task: TaskId) -> u32 {
        self.task_pid
            .get(task as usize)
            .copied()
            .unwrap_or(CPUS_PID)
    }

    fn metadata(&mut self, kind: &str, pid: u32, tid: u32, args: &str) {
        self.event(&format!(
            r#""name":"{kind}","ph":"M","pid":{pid},"tid":{tid},"args":{{{args}}}"#
        ));
    }

    fn instant_on_task(&mut self, t: Nanos, task: TaskId, name: &str, args: &str) {
        let (pid, tid) = (self.task_pid(task), self.task_tid(task));
        self.event(&format!(
            r#""name":"{name}","ph":"i","s":"t","pid":{pid},"tid":{tid},"ts":{},"args":{{{args}}}"#,
            us(t)
        ));
    }

    fn close_slice(&mut self, cpu: CpuId, t: Nanos, reason: &str) {
        let Some((task, since)) = self.running.get_mut(cpu as usize).and_then(Option::take) else {
            return;
        };
        let name = self.task_name(task);
        let process = self
            .process_names
            .get(self.task_pid(task).saturating_sub(FIRST_PROCESS_PID) as usize)
            .cloned()
            .unwrap_or_else(|| json_str(""));
        let tid = Self::cpu_tid(cpu);
        self.event(&format!(
            r#""name":{name},"cat":"sched","ph":"X","pid":{CPUS_PID},"tid":{tid},"ts":{},"dur":{},"args":{{"task":{task},"process":{process},"left":"{reason}"}}"#,
            us(since),
            us(t.saturating_sub(since))
        ));
    }

    fn freq(&mut self, t: Nanos, domain: u16, khz: u32) {
        let name = self
            .domain_names
            .get(domain as usize)
            .cloned()
            .unwrap_or_else(|| format!("domain{domain}"));
        let name = json_str(&format!("freq {name}"));
        self.event(&format!(
            r#""name":{name},"ph":"C","pid":{CPUS_PID},"tid":0,"ts":{},"args":{{"kHz":{khz}}}"#,
            us(t)
        ));
    }
}

impl<W: Write> Sink for PerfettoTrace<W> {
    fn begin(&mut self, meta: &RunMeta) {
        self.ncpus = meta.cpus.max(meta.cpu_domain.len()) as u32;
        self.running = vec![None; self.ncpus as usize];
        self.domain_names = meta.domains.iter().map(|d| d.name.clone()).collect();
        self.group_names = meta.groups.clone();
        self.kind_names = meta.interactions.iter().map(|k| json_str(k)).collect();
        let mut processes: Vec<&str> = Vec::new();
        for task in &meta.tasks {
            let idx = processes
                .iter()
                .position(|p| *p == task.process)
                .unwrap_or_else(|| {
                    processes.push(&task.process);
                    processes.len() - 1
                });
            self.task_pid.push(FIRST_PROCESS_PID + idx as u32);
            self.task_names.push(json_str(&task.name));
        }
        self.process_names = processes.iter().map(|p| json_str(p)).collect();

        self.raw(r#"{"displayTimeUnit":"ns","traceEvents":["#);
        self.metadata("process_name", CPUS_PID, 0, r#""name":"CPUs""#);
        self.metadata("process_sort_index", CPUS_PID, 0, r#""sort_index":0"#);
        for cpu in 0..self.ncpus {
            let domain = meta
                .cpu_domain
                .get(cpu as usize)
                .and_then(|&d| meta.domains.get(d as usize))
                .map_or(String::new(), |d| format!(" ({})", d.name));
            let name = json_str(&format!("CPU {cpu}{domain}"));
            self.metadata(
                "thread_name",
                CPUS_PID,
                cpu + 1,
                &format!(r#""name":{name}"#),
            );
            self.metadata(
                "thread_sort_index",
                CPUS_PID,
                cpu + 1,
                &format!(r#""sort_index":{cpu}"#),
            );
        }
        self.metadata(
            "process_name",
            INTERACTIONS_PID,
            0,
            r#""name":"Interactions""#,
        );
        self.metadata(
            "process_sort_index",
            INTERACTIONS_PID,
            0,
            r#""sort_index":1"#,
        );
        for (i, name) in self.process_names.clone().iter().enumerate() {
            let pid = FIRST_PROCESS_PID + i as u32;
            self.metadata("process_name", pid, 0, &format!(r#""name":{name}"#));
            self.metadata(
                "process_sort_index",
                pid,
                0,
                &format!(r#""sort_index":{}"#, pid),
            );
        }
        for task in 0..meta.tasks.len() as TaskId {
            let (pid, tid, name) = (
                self.task_pid(task),
                self.task_tid(task),
                self.task_name(task),
            );
            self.metadata("thread_name", pid, tid, &format!(r#""name":{name}"#));
        }
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
                next,
                reason,
                ..
            } => {
                self.close_slice(cpu, t, reason_name(reason));
                if let Some(n) = next {
                    if self.running.len() <= cpu as usize {
                        self.running.resize(cpu as usize + 1, None);
                    }
                    self.running[cpu as usize] = Some((n, t));
                }
            }
            Record::Wakeup {
                t,
                task,
                cpu,
                waker,
            } => {
                let waker = waker.map_or_else(|| "null".to_string(), |w| self.task_name(w));
                self.instant_on_task(
                    t,
                    task,
                    "wakeup",
                    &format!(r#""cpu":{cpu},"waker":{waker}"#),
                );
            }
            Record::Migrate { t, task, from, to } => {
                self.instant_on_task(t, task, "migrate", &format!(r#""from":{from},"to":{to}"#));
            }
            Record::Freq { t, domain, khz } => self.freq(t, domain, khz),
            Record::InteractionBegin { t, id, name, task } => {
                self.open.insert(id, name);
                let kind = self.kind_name(name);
                self.event(&format!(
                    r#""name":{kind},"cat":"interaction","ph":"b","id":{id},"pid":{INTERACTIONS_PID},"tid":0,"ts":{},"args":{{"task":{}}}"#,
                    us(t),
                    self.task_name(task)
                ));
            }
            Record::InteractionEnd { t, id, task } => {
                let Some(name) = self.open.remove(&id) else {
                    return;
                };
                let kind = self.kind_name(name);
                self.event(&format!(
                    r#""name":{kind},"cat":"interaction","ph":"e","id":{id},"pid":{INTERACTIONS_PID},"tid":0,"ts":{},"args":{{"task":{}}}"#,
                    us(t),
                    self.task_name(task)
                ));
            }
            Record::Period { t, task, slack } => {
                let name = if slack < 0 { "deadline miss" } else { "period" };
                self.instant_on_task(t, task, name, &format!(r#""slack_ns":{slack}"#));
            }
            Record::LoopDone { .. } => {}
            Record::Exit { t, task } => self.instant_on_task(t, task, "exit", ""),
            Record::Throttle { t, group, cpu, on } => {
                let who = if group == u32::MAX {
                    "RT class".to_string()
                } else {
                    self.group_names
                        .get(group as usize)
                        .cloned()
                        .unwrap_or_else(|| format!("group{group}"))
                };
                let name = json_str(&format!(
                    "{} {who}",
                    if on { "throttle" } else { "unthrottle" }
                ));
                let tid = Self::cpu_tid(cpu);
                self.event(&format!(
                    r#""name":{name},"ph":"i","s":"t","pid":{CPUS_PID},"tid":{tid},"ts":{}"#,
                    us(t)
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
        self.raw("\n]}\n");
        if self.error.is_none() {
            if let Err(e) = self.out.flush() {
                self.error = Some(e);
            }
        }
    }
}

impl<W: Write> PerfettoTrace<W> {
    fn kind_name(&self, kind: u32) -> String {
        self.kind_names
            .get(kind as usize)
            .cloned()
            .unwrap_or_else(|| json_str(&format!("interaction{kind}")))
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

/// Nanoseconds as the format's microseconds, exactly: `1234567` → `1234.567`.
fn us(ns: Nanos) -> String {
    let mut s = String::new();
    let _ = write!(s, "{}.{:03}", ns / 1000, ns % 1000);
    s
}

/// A JSON string literal (quoted, escaped).
fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a str always serialises")
}

#[cfg(test)]
mod tests {
    use super::us;

    #[test]
    fn microseconds_are_exact() {
        assert_eq!(us(0), "0.000");
        assert_eq!(us(1_234_567), "1234.567");
        assert_eq!(us(5), "0.005");
    }
}
