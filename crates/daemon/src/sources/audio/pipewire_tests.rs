//! The parser on `pw-dump --monitor` text shaped as PipeWire 0.3.65 prints it (trimmed from a
//! capture of `pw-play` on a null sink), and on garbage.

use super::*;

/// The server's client 25 (pw-play, pid 21340 by SO_PEERCRED) and its stream node 36, whose own
/// properties claim other processes (what a client may write about itself).
const NEW_STREAM: &str = r#"[
  {
    "id": 25,
    "type": "PipeWire:Interface:Client",
    "version": 3,
    "permissions": [ "r", "w", "x", "m" ],
    "info": {
      "change-mask": [ "props" ],
      "props": {
        "application.name": "pw-cat",
        "application.process.binary": "pw-cat",
        "application.process.id": 1,
        "pipewire.access": "unrestricted",
        "pipewire.protocol": "protocol-native",
        "pipewire.sec.gid": 1000,
        "pipewire.sec.pid": 21340,
        "pipewire.sec.uid": 1000
      }
    }
  },
  {
    "id": 36,
    "type": "PipeWire:Interface:Node",
    "version": 3,
    "permissions": [ "r", "w", "x", "m" ],
    "info": {
      "max-input-ports": 0,
      "max-output-ports": 65,
      "change-mask": [ "input-ports", "output-ports", "state", "props", "params" ],
      "n-input-ports": 0,
      "n-output-ports": 0,
      "state": "suspended",
      "error": null,
      "props": {
        "application.name": "pw-play",
        "application.process.id": 4242,
        "pipewire.sec.pid": 4243,
        "client.id": 25,
        "media.class": "Stream/Output/Audio",
        "node.name": "pw-play",
        "object.id": 36
      },
      "params": { "EnumFormat": [ { "mediaType": "audio" } ] }
    }
  }
]
"#;

const RUNNING: &str = r#"[
  {
    "id": 36,
    "type": "PipeWire:Interface:Node",
    "info": {
      "change-mask": [ "state" ],
      "state": "running",
      "props": {
        "client.id": 25,
        "media.class": "Stream/Output/Audio",
        "node.name": "pw-play"
      }
    }
  }
]
"#;

fn feed(g: &mut Graph, text: &str) -> Result<(), String> {
    let mut f = Framer::default();
    for line in text.lines() {
        if let Some(chunk) = f.line(line)? {
            g.apply(&chunk)?;
        }
    }
    Ok(())
}

fn pids(g: &Graph) -> Vec<i32> {
    g.audible().iter().map(|a| a.pid).collect()
}

#[test]
fn a_running_output_stream_names_its_clients_peer_pid_only() {
    let mut g = Graph::default();
    feed(&mut g, NEW_STREAM).unwrap();
    assert!(pids(&g).is_empty(), "suspended is not audible");
    feed(&mut g, RUNNING).unwrap();
    let a: Vec<Audible> = g.audible().into_iter().collect();
    assert_eq!(
        a,
        [Audible {
            node: 36,
            client: 25,
            pid: 21340,
            uid: Some(1000)
        }],
        "the client's pipewire.sec.pid, never the node's claims (4242, 4243) nor the client's \
         application.process.id (1)"
    );
    // A state-only update keeps the class and client it had.
    feed(
        &mut g,
        "[\n  { \"id\": 36, \"type\": \"PipeWire:Interface:Node\", \"info\": { \"state\": \"idle\" } }\n]",
    )
    .unwrap();
    assert!(pids(&g).is_empty(), "paused (idle) is not audible");
    feed(&mut g, RUNNING).unwrap();
    assert_eq!(pids(&g), [21340]);
    // The stream closes; then the client.
    feed(
        &mut g,
        "[\n  {\n    \"id\": 36,\n    \"info\": null\n  }\n]",
    )
    .unwrap();
    assert!(pids(&g).is_empty());
    assert!(g.has_client(25));
    feed(&mut g, "[\n  { \"id\": 25, \"info\": null }\n]").unwrap();
    assert!(!g.has_client(25));
}

#[test]
fn a_stream_whose_client_is_unknown_or_names_no_process_is_not_audible() {
    let mut g = Graph::default();
    feed(&mut g, RUNNING).unwrap();
    assert!(pids(&g).is_empty(), "client 25 not seen");
    let anonymous = NEW_STREAM.replace("\"pipewire.sec.pid\": 21340,", "");
    feed(&mut g, &anonymous).unwrap();
    feed(&mut g, RUNNING).unwrap();
    assert!(pids(&g).is_empty(), "no pipewire.sec.pid on the client");
    // An input stream (a recorder) playing is not audible either.
    feed(&mut g, NEW_STREAM).unwrap();
    feed(&mut g, &RUNNING.replace("Output", "Input")).unwrap();
    assert!(pids(&g).is_empty());
    // pw-dump's metadata objects carry no `info`: ignored.
    feed(
        &mut g,
        "[\n  { \"id\": 29, \"type\": \"PipeWire:Interface:Metadata\", \"metadata\": [] }\n]",
    )
    .unwrap();
}

#[test]
fn garbage_is_an_error_never_a_panic() {
    let bad = [
        "not json at all",
        "[\n  { \"id\": 36, \n]",
        "[\n  { \"type\": \"PipeWire:Interface:Node\", \"info\": {} }\n]",
        "[\n  { \"id\": -3, \"info\": {} }\n]",
        "[\n  { \"id\": 25, \"type\": \"PipeWire:Interface:Client\", \"info\": { \"props\": { \"pipewire.sec.pid\": \"x\" } } }\n]",
        "[\n  { \"id\": 25, \"type\": \"PipeWire:Interface:Client\", \"info\": { \"props\": { \"pipewire.sec.pid\": -1 } } }\n]",
        "[\n  { \"id\": 25, \"type\": \"PipeWire:Interface:Client\", \"info\": { \"props\": { \"pipewire.sec.pid\": {} } } }\n]",
        "[\n  { \"id\": 36, \"type\": \"PipeWire:Interface:Node\", \"info\": { \"props\": { \"client.id\": [1] } } }\n]",
        "[\n  { \"id\": 1e99, \"info\": null }\n]",
        "[\n  \"a string\"\n]",
        "{\n}",
    ];
    for text in bad {
        let mut g = Graph::default();
        assert!(feed(&mut g, text).is_err(), "accepted: {text}");
    }
    // Random bytes: an error or nothing, and never a panic.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..2000 {
        let mut text = String::from("[\n");
        for _ in 0..(x % 64) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let alphabet = b" {}[]\":,0123456789idnfoatruel\n";
            text.push(alphabet[(x % alphabet.len() as u64) as usize] as char);
        }
        text.push_str("\n]");
        let _ = feed(&mut Graph::default(), &text);
    }
    // A pid that is not an i32 is dropped, not wrapped.
    let mut g = Graph::default();
    feed(&mut g, &NEW_STREAM.replace("21340", "4294967297")).unwrap();
    feed(&mut g, RUNNING).unwrap();
    assert!(pids(&g).is_empty());
}

#[test]
fn the_framer_cuts_top_level_arrays_and_bounds_them() {
    let mut f = Framer::default();
    assert_eq!(f.line("").unwrap(), None);
    assert_eq!(f.line("[").unwrap(), None);
    assert_eq!(f.line("  [ \"r\", \"w\" ],").unwrap(), None);
    assert_eq!(
        f.line("  ]").unwrap(),
        None,
        "an inner bracket is not the end"
    );
    assert_eq!(
        f.line("]").unwrap().unwrap(),
        "[\n  [ \"r\", \"w\" ],\n  ]\n]\n"
    );
    assert_eq!(f.line("[]").unwrap().unwrap(), "[]\n");
    assert!(f.line("  \"id\": 3").is_err(), "text outside an array");
    f.line("[").unwrap();
    let long = "x".repeat(1 << 20);
    let mut err = None;
    for _ in 0..(MAX_CHUNK >> 20) + 1 {
        if let Err(e) = f.line(&long) {
            err = Some(e);
            break;
        }
    }
    assert!(err.unwrap().contains("longer than"));
    assert_eq!(
        f.line("[]").unwrap().unwrap(),
        "[]\n",
        "reset after the error"
    );
}
