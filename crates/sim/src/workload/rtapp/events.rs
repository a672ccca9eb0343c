//! rt-app events: one JSON member → one model [`Event`].
//!
//! A key is an event name plus an optional numeric suffix (`run2`, `sleep3`, `barrier1`), the
//! form workgen produces when it de-duplicates keys. The rest after the name must be digits, so
//! `runtime1` is `runtime`, never `run` + "time1".

use uxsched_model::{Nanos, US};

use super::json::{Member, Node, Value};
use super::{count, field, str_value, Ctx, Global};
use crate::workload::{Event, WorkloadError};

/// Every event rt-app knows, longest first so a prefix never shadows a longer name.
const KINDS: &[&str] = &[
    "runtime", "suspend", "barrier", "timer", "unlock", "signal", "resume", "iorun", "broad",
    "sleep", "yield", "lock", "wait", "sync", "fork", "run", "mem",
];

/// Throughput assumed for `mem` (a memset of the thread's buffer): 5 bytes per ns (5 GB/s),
/// busy wall-clock time whatever the CPU frequency, since it is bound by memory bandwidth.
const MEM_BYTES_PER_NS: u64 = 5;
/// Cost of one `write()` of a buffer to `/dev/null`, which copies nothing.
const NULL_WRITE_NS: Nanos = US;

/// The event kind a key names, if any (`"run2"` → `"run"`).
pub fn kind_of(key: &str) -> Option<&'static str> {
    KINDS.iter().copied().find(|kind| {
        key.strip_prefix(kind)
            .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit()))
    })
}

/// Read one event. `task_key` is the task's name in the file, which a bare `"suspend"`
/// refers to (workgen fills it in).
pub fn read(
    ctx: &Ctx,
    kind: &str,
    member: &Member,
    task_key: &str,
    global: &Global,
) -> Result<Event, WorkloadError> {
    let ctx = ctx.event(&member.key);
    let node = &member.value;
    let name = || str_value(&ctx, node).map(str::to_string);
    let micros = || count(&ctx, node).map(|us| us * US);
    Ok(match kind {
        "run" => Event::Run(micros()?),
        "runtime" => Event::Runtime(micros()?),
        "sleep" => Event::Sleep(micros()?),
        "timer" => timer(&ctx, node)?,
        "lock" => Event::Lock(name()?),
        "unlock" => Event::Unlock(name()?),
        "signal" => Event::Signal(name()?),
        "broad" => Event::Broadcast(name()?),
        "barrier" => Event::Barrier(name()?),
        "resume" => Event::Resume(name()?),
        "suspend" => match &node.value {
            Value::Absent => Event::Suspend(task_key.to_string()),
            Value::Str(s) if s.is_empty() => Event::Suspend(task_key.to_string()),
            _ => Event::Suspend(name()?),
        },
        "wait" => {
            let (cond, mutex) = ref_and_mutex(&ctx, node)?;
            Event::Wait { cond, mutex }
        }
        "sync" => {
            let (cond, mutex) = ref_and_mutex(&ctx, node)?;
            Event::SignalWait { cond, mutex }
        }
        "yield" => Event::Yield,
        "mem" => Event::Runtime(count(&ctx, node)?.div_ceil(MEM_BYTES_PER_NS)),
        "iorun" => {
            if global.io_device != "/dev/null" {
                return Err(ctx.err(
                    node.pos,
                    format!(
                        "iorun to `{}` is not modelled (block I/O); only /dev/null is",
                        global.io_device
                    ),
                ));
            }
            let writes = count(&ctx, node)?.div_ceil(global.mem_buffer_size);
            Event::Runtime(writes * NULL_WRITE_NS)
        }
        "fork" => {
            return Err(ctx.err(
                node.pos,
                "fork (creating threads at run time) is not supported; declare the thread as a task with a `delay` instead",
            ))
        }
        _ => unreachable!("kind_of only returns names from KINDS"),
    })
}

fn timer(ctx: &Ctx, node: &Node) -> Result<Event, WorkloadError> {
    let reference = field(ctx, node, "ref")?
        .ok_or_else(|| ctx.err(node.pos, "timer needs a `ref` (its name)"))?;
    let period = field(ctx, node, "period")?
        .ok_or_else(|| ctx.err(node.pos, "timer needs a `period` in µs"))?;
    let absolute = match field(ctx, node, "mode")? {
        None => false,
        Some(mode) => match str_value(ctx, mode)? {
            "relative" => false,
            "absolute" => true,
            other => {
                return Err(ctx.err(
                    mode.pos,
                    format!("timer mode `{other}` is neither `relative` nor `absolute`"),
                ))
            }
        },
    };
    reject_other_fields(ctx, node, &["ref", "period", "mode"])?;
    Ok(Event::Timer {
        name: str_value(ctx, reference)?.to_string(),
        period: count(ctx, period)? * US,
        absolute,
    })
}

fn ref_and_mutex(ctx: &Ctx, node: &Node) -> Result<(String, String), WorkloadError> {
    let get = |key: &str| -> Result<String, WorkloadError> {
        let value =
            field(ctx, node, key)?.ok_or_else(|| ctx.err(node.pos, format!("needs `{key}`")))?;
        str_value(ctx, value).map(str::to_string)
    };
    reject_other_fields(ctx, node, &["ref", "mutex"])?;
    Ok((get("ref")?, get("mutex")?))
}

fn reject_other_fields(ctx: &Ctx, node: &Node, allowed: &[&str]) -> Result<(), WorkloadError> {
    for m in super::object(ctx, node)? {
        if !allowed.contains(&m.key.as_str()) {
            return Err(ctx.err(
                m.key_pos,
                format!(
                    "unknown field `{}` (expected {})",
                    m.key,
                    allowed.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_suffixes_and_longest_names() {
        assert_eq!(kind_of("run"), Some("run"));
        assert_eq!(kind_of("run2"), Some("run"));
        assert_eq!(kind_of("runtime1"), Some("runtime"));
        assert_eq!(kind_of("runtime"), Some("runtime"));
        assert_eq!(kind_of("barrier12"), Some("barrier"));
        assert_eq!(kind_of("runner"), None);
        assert_eq!(kind_of("loop"), None);
        assert_eq!(kind_of("unlock3"), Some("unlock"));
    }
}
