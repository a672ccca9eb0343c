//! PipeWire's graph as `pw-dump --monitor` prints it, reduced to what "audible" needs: which
//! client processes have an output stream that is playing.
//!
//! `pw-dump --monitor` prints a JSON array of objects at start and then one array per change,
//! each pretty-printed with the array's brackets alone on their lines at column 0 (PipeWire
//! 0.3.x and 1.x). An object is printed whole on every change (`type`, `info` with `state` and
//! `props`); a removed one as `{"id": N, "info": null}`. [`Framer`] cuts the text into those
//! arrays (each bounded by [`MAX_CHUNK`]), [`Graph`] keeps the clients and nodes.
//!
//! Trust: a node is audible when its `media.class` is `Stream/Output/Audio` and its `state` is
//! `running`. Its process is its **client's** `pipewire.sec.pid`, which the PipeWire server sets
//! from the connection's `SO_PEERCRED` and refuses to let a client change; the node's `client.id`
//! is set by the server too (and ignored in a client's updates). A node's own properties, and a
//! client's `application.process.id`, are what the client says of itself: never read here.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The largest array accepted (a desktop's whole graph is a few MiB): a longer one is an error.
pub const MAX_CHUNK: usize = 64 << 20;
/// The most objects kept: a server announcing more is an error.
pub const MAX_OBJECTS: usize = 65_536;

const CLIENT: &str = "PipeWire:Interface:Client";
const NODE: &str = "PipeWire:Interface:Node";
const OUTPUT_STREAM: &str = "Stream/Output/Audio";

/// Cuts `pw-dump`'s output into its top-level arrays, line by line.
#[derive(Default)]
pub struct Framer {
    buf: String,
}

impl Framer {
    /// Feed one line (without its newline); a complete array's text once its closing bracket
    /// comes. Err: the array outgrew [`MAX_CHUNK`] or text came outside an array.
    pub fn line(&mut self, line: &str) -> Result<Option<String>, String> {
        if self.buf.is_empty() && !line.starts_with('[') {
            if line.trim().is_empty() {
                return Ok(None);
            }
            return Err(format!("text outside a JSON array: {:?}", cut(line)));
        }
        if self.buf.len() + line.len() + 1 > MAX_CHUNK {
            self.buf.clear();
            return Err(format!("an array longer than {MAX_CHUNK} bytes"));
        }
        self.buf.push_str(line);
        self.buf.push('\n');
        // `[` and `]` alone at column 0 delimit a top-level array; `[]` or a one-line array too.
        let closed =
            line.starts_with(']') || (line.starts_with('[') && line.trim_end().ends_with(']'));
        Ok(closed.then(|| std::mem::take(&mut self.buf)))
    }
}

fn cut(s: &str) -> &str {
    let end = s.char_indices().nth(80).map_or(s.len(), |(i, _)| i);
    &s[..end]
}

/// What the server says of one client connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    /// `pipewire.sec.pid` (`None`: not given, as for a client behind a portal or the server's own).
    pub pid: Option<i32>,
    /// `pipewire.sec.uid`.
    pub uid: Option<u32>,
}

/// What the source needs of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub class: String,
    pub state: String,
    /// The client that made it (`client.id`, set by the server).
    pub client: Option<u32>,
}

/// The clients and nodes of one PipeWire instance.
#[derive(Debug, Default)]
pub struct Graph {
    clients: BTreeMap<u32, Client>,
    nodes: BTreeMap<u32, Node>,
}

/// One audible stream: the node, and its client's identity as the server knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Audible {
    pub node: u32,
    pub client: u32,
    pub pid: i32,
    pub uid: Option<u32>,
}

impl Graph {
    /// Apply one array of `pw-dump`; Err (the graph unchanged by the bad object on) when it is
    /// not what pw-dump prints.
    pub fn apply(&mut self, chunk: &str) -> Result<(), String> {
        let objects: Vec<Value> =
            serde_json::from_str(chunk).map_err(|e| format!("not pw-dump's JSON: {e}"))?;
        for o in &objects {
            self.object(o)?;
        }
        if self.clients.len() + self.nodes.len() > MAX_OBJECTS {
            return Err(format!("more than {MAX_OBJECTS} clients and nodes"));
        }
        Ok(())
    }

    fn object(&mut self, o: &Value) -> Result<(), String> {
        let id = o
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| format!("an object without a numeric id: {}", cut(&o.to_string())))?;
        let info = match o.get("info") {
            // Removed.
            Some(Value::Null) => {
                self.clients.remove(&id);
                self.nodes.remove(&id);
                return Ok(());
            }
            Some(info) => info,
            // Metadata and the like carry no `info`.
            None => return Ok(()),
        };
        let props = info.get("props");
        let prop = |key: &str| props.and_then(|p| p.get(key));
        match o.get("type").and_then(Value::as_str) {
            Some(CLIENT) => {
                let pid = number(prop("pipewire.sec.pid"))?.and_then(|p| i32::try_from(p).ok());
                let uid = number(prop("pipewire.sec.uid"))?.and_then(|u| u32::try_from(u).ok());
                self.clients.insert(id, Client { pid, uid });
            }
            Some(NODE) => {
                let old = self.nodes.remove(&id);
                let state = match info.get("state") {
                    Some(Value::String(s)) => s.clone(),
                    _ => old.as_ref().map(|n| n.state.clone()).unwrap_or_default(),
                };
                let (class, client) = match props {
                    Some(_) => (
                        prop("media.class")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        number(prop("client.id"))?.and_then(|c| u32::try_from(c).ok()),
                    ),
                    None => old.map(|n| (n.class, n.client)).unwrap_or_default(),
                };
                self.nodes.insert(
                    id,
                    Node {
                        class,
                        state,
                        client,
                    },
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// The output streams playing now, each with its client's process (streams whose client
    /// the server names no process for are left out).
    pub fn audible(&self) -> BTreeSet<Audible> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.class == OUTPUT_STREAM && n.state == "running")
            .filter_map(|(&node, n)| {
                let client = n.client?;
                let c = self.clients.get(&client)?;
                Some(Audible {
                    node,
                    client,
                    pid: c.pid?,
                    uid: c.uid,
                })
            })
            .collect()
    }

    /// Whether a client with this id is known (its connection is open).
    pub fn has_client(&self, id: u32) -> bool {
        self.clients.contains_key(&id)
    }
}

/// A number as pw-dump prints it (a JSON number; some versions print ids as strings).
fn number(v: Option<&Value>) -> Result<Option<u64>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{n} is not a process, user or object id")),
        Some(Value::String(s)) => s
            .parse()
            .map(Some)
            .map_err(|_| format!("{:?} is not a process, user or object id", cut(s))),
        Some(v) => Err(format!("{} is not a number", cut(&v.to_string()))),
    }
}

#[cfg(test)]
#[path = "pipewire_tests.rs"]
mod tests;
