//! One native event table → one model [`Event`].

use super::schema::EventDef;
use crate::workload::Event;

/// Convert, checking that exactly one kind is given and that helper fields (`period`,
/// `absolute`, `mutex`) appear only with the kind that uses them.
pub fn convert(def: EventDef) -> Result<Event, String> {
    let helpers = Helpers {
        bytes: def.bytes.is_some(),
        period: def.period.is_some(),
        absolute: def.absolute.is_some(),
        mutex: def.mutex.is_some(),
    };
    let mut kinds = given_kinds(def)?;
    let (key, event) = match kinds.len() {
        0 => return Err("an event needs one of run, runtime, sleep, io, read, timer, lock, unlock, wait, sync, signal, broadcast, barrier, suspend, resume, send, recv, yield, begin, end".into()),
        1 => kinds.pop().expect("one element"),
        _ => {
            let keys: Vec<&str> = kinds.iter().map(|(k, _)| *k).collect();
            return Err(format!(
                "one event per table, found {}; write them as separate {{ }} entries",
                keys.join(" and ")
            ));
        }
    };
    helpers.check(key)?;
    Ok(event)
}

/// Every kind the table gives, by key, as the event it makes (helper fields filled in).
fn given_kinds(def: EventDef) -> Result<Vec<(&'static str, Event)>, String> {
    let EventDef {
        run,
        runtime,
        sleep,
        io,
        read,
        bytes,
        timer,
        period,
        absolute,
        lock,
        unlock,
        wait,
        sync,
        mutex,
        signal,
        broadcast,
        barrier,
        suspend,
        resume,
        send,
        recv,
        yield_,
        begin,
        end,
    } = def;
    let mut kinds: Vec<(&str, Event)> = Vec::new();
    let mut add = |key: &'static str, event: Option<Event>| {
        if let Some(e) = event {
            kinds.push((key, e));
        }
    };
    add("run", run.map(|d| Event::Run(d.0)));
    add("runtime", runtime.map(|d| Event::Runtime(d.0)));
    add("sleep", sleep.map(|d| Event::Sleep(d.0)));
    add("io", io.map(|d| Event::Io(d.0)));
    add(
        "read",
        read.map(|file| Event::Read {
            file,
            bytes: bytes.map_or(0, |b| b.0),
        }),
    );
    add(
        "timer",
        timer.map(|name| Event::Timer {
            name,
            period: period.map_or(0, |p| p.0),
            absolute: absolute.unwrap_or(false),
        }),
    );
    add("lock", lock.map(Event::Lock));
    add("unlock", unlock.map(Event::Unlock));
    let m = || mutex.clone().unwrap_or_default();
    add("wait", wait.map(|cond| Event::Wait { cond, mutex: m() }));
    add(
        "sync",
        sync.map(|cond| Event::SignalWait { cond, mutex: m() }),
    );
    add("signal", signal.map(Event::Signal));
    add("broadcast", broadcast.map(Event::Broadcast));
    add("barrier", barrier.map(Event::Barrier));
    add("suspend", suspend.map(Event::Suspend));
    add("resume", resume.map(Event::Resume));
    add("send", send.map(Event::Send));
    add("recv", recv.map(Event::Recv));
    match yield_ {
        Some(true) => add("yield", Some(Event::Yield)),
        Some(false) => return Err("`yield` takes `true`".into()),
        None => {}
    }
    add("begin", begin.map(Event::Begin));
    add("end", end.map(Event::End));
    Ok(kinds)
}

/// Which helper fields the table gives: each belongs to one kind (`bytes` to `read`, `period`
/// and `absolute` to `timer`, `mutex` to `wait` and `sync`).
struct Helpers {
    bytes: bool,
    period: bool,
    absolute: bool,
    mutex: bool,
}

impl Helpers {
    /// The helpers fit the event's kind `key`: none given to another kind, none its kind needs
    /// missing.
    fn check(&self, key: &str) -> Result<(), String> {
        match (key == "read", self.bytes) {
            (true, false) => {
                return Err("read needs `bytes`, e.g. { read = \"data\", bytes = \"8KiB\" }".into())
            }
            (false, true) => return Err(format!("`bytes` belongs to `read`, not `{key}`")),
            _ => {}
        }
        let is_timer = key == "timer";
        if !is_timer && (self.period || self.absolute) {
            return Err(format!(
                "`period`/`absolute` belong to `timer`, not `{key}`"
            ));
        }
        if is_timer && !self.period {
            return Err(
                "timer needs a `period`, e.g. { timer = \"vsync\", period = \"16.667ms\" }".into(),
            );
        }
        let takes_mutex = matches!(key, "wait" | "sync");
        match (takes_mutex, self.mutex) {
            (true, false) => Err(format!(
                "`{key}` needs a `mutex`, e.g. {{ {key} = \"cond\", mutex = \"m\" }}"
            )),
            (false, true) => Err(format!("`mutex` belongs to `wait`/`sync`, not `{key}`")),
            _ => Ok(()),
        }
    }
}
