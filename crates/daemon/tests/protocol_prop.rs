//! The socket protocol's parser under property-based tests (proptest): any bytes, any JSON
//! shaped like a request, and every valid v1 request — the line reader and the parser never
//! panic, keep to the 4096-byte line bound, answer a clear `bad request`, and a valid request
//! survives the round trip exactly. Then a flood against a real server socket (oversized
//! lines, thousands of malformed lines in one session, more connections than the slots): the
//! server keeps answering and this process's memory stays bounded.

use proptest::prelude::*;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::time::Duration;
use uxsched_client::control::{Response, MAX_REQUEST};
use uxsched_client::proto::{Ask, Policy, Refusal, Reply, Request, Until};
use uxsched_daemon::server::{parse_request, read_line, Incoming, Server};
use uxsched_daemon::types::Event;

/// Hands out its bytes in the chunk sizes given (cycled), as a socket may.
struct Chunked<'a> {
    data: &'a [u8],
    sizes: Vec<usize>,
    i: usize,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let size = self.sizes[self.i % self.sizes.len()];
        self.i += 1;
        let n = size.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// The reader's contract on `bytes`: the first line (or all of it without a newline) if it
/// fits in [`MAX_REQUEST`], else a refusal that says so; then the parser's.
fn check_line(bytes: &[u8], sizes: Vec<usize>) -> Result<(), TestCaseError> {
    let mut r = Chunked {
        data: bytes,
        sizes,
        i: 0,
    };
    let want = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    match read_line(&mut r, |_| Ok(())) {
        Ok(line) => {
            prop_assert!(line.len() <= MAX_REQUEST);
            prop_assert_eq!(&line[..], want);
            if let Err(e) = parse_request(&line) {
                prop_assert!(e.starts_with("bad request"), "{}", e);
            }
        }
        Err(e) => {
            prop_assert!(want.len() > MAX_REQUEST, "{}", e);
            prop_assert!(e.contains("longer than 4096 bytes"), "{}", e);
        }
    }
    Ok(())
}

fn ask() -> impl Strategy<Value = Ask> {
    prop_oneof![
        (any::<bool>(), any::<u32>()).prop_map(|(rr, priority)| Ask::Realtime {
            policy: if rr { Policy::Rr } else { Policy::Fifo },
            priority
        }),
        any::<i32>().prop_map(|nice| Ask::HighPriority { nice }),
        any::<u64>().prop_map(|slice_us| Ask::Latency { slice_us }),
        Just(Ask::Reset),
    ]
}

/// JSON values a hostile client might put in a request's fields.
fn value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{json, Value};
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z_]{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "realtime",
            "high_priority",
            "latency",
            "reset",
            "fifo",
            "rr",
            "close",
            "exit",
            "status",
        ])
        .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An object with some of a request's keys (and perhaps others), each with any value.
fn request_like() -> impl Strategy<Value = String> {
    let keys = prop::sample::subsequence(
        vec![
            "v", "cmd", "tid", "policy", "priority", "nice", "slice_us", "until", "pid", "mode",
            "x",
        ],
        0..=8,
    );
    (keys, prop::collection::vec(value(), 8)).prop_map(|(keys, values)| {
        let map: serde_json::Map<String, serde_json::Value> = keys
            .into_iter()
            .zip(values)
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        serde_json::Value::Object(map).to_string()
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_bytes_give_a_line_or_a_clear_refusal(
        bytes in prop::collection::vec(any::<u8>(), 0..9000),
        sizes in prop::collection::vec(1usize..2000, 1..8),
    ) {
        check_line(&bytes, sizes)?;
    }

    #[test]
    fn request_shaped_json_is_parsed_or_refused_and_never_misread(
        text in request_like(),
        pad in 0usize..5000,
    ) {
        // Sometimes pushed past the line bound with spaces (valid JSON whitespace).
        let line = format!("{text}{}\n", " ".repeat(pad));
        check_line(line.as_bytes(), vec![512])?;
        if line.len() <= MAX_REQUEST {
            if let Ok(Incoming::Thread(r)) = parse_request(line.trim_end().as_bytes()) {
                prop_assert!(r.tid > 0);
                // What was accepted is exactly what it says: it round-trips.
                let again = serde_json::to_string(&r).unwrap();
                prop_assert_eq!(parse_request(again.as_bytes()), Ok(Incoming::Thread(r)));
            }
        }
    }

    #[test]
    fn every_valid_request_round_trips(
        tid in 1i32..=i32::MAX,
        ask in ask(),
        exit in any::<bool>(),
    ) {
        let until = if exit { Until::Exit } else { Until::Close };
        let r = Request { tid, ask, until };
        let line = serde_json::to_string(&r).unwrap();
        prop_assert!(line.len() <= MAX_REQUEST);
        prop_assert_eq!(parse_request(line.as_bytes()), Ok(Incoming::Thread(r)));
    }
}

/// This process's resident memory, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// A server whose "daemon loop" refuses every v1 request and answers control requests ok.
fn server(dir: &std::path::Path) -> (std::path::PathBuf, Server) {
    let path = dir.join("s.sock");
    let (tx, rx) = mpsc::channel();
    let server = Server::start(&path, Vec::new(), tx).unwrap();
    std::thread::spawn(move || {
        for ev in rx {
            match ev {
                Event::Thread { reply, .. } => {
                    let _ = reply.send(Reply::refused(Refusal::NotAllowed, "test"));
                }
                Event::Client { reply, .. } => {
                    let _ = reply.send(Response::ok());
                }
                _ => {}
            }
        }
    });
    (path, server)
}

fn status_ok(path: &std::path::Path) -> bool {
    let Ok(mut s) = UnixStream::connect(path) else {
        return false;
    };
    let _ = s.write_all(b"{\"cmd\":\"status\"}\n");
    let mut line = String::new();
    let _ = BufReader::new(&s).read_line(&mut line);
    serde_json::from_str::<Response>(&line).is_ok_and(|r| r.ok)
}

#[test]
fn a_flood_of_oversized_malformed_and_idle_connections_is_answered_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _server) = server(dir.path());
    assert!(status_ok(&path));
    let before = rss_kib();
    std::thread::scope(|scope| {
        // Oversized: 1 MiB lines on 64 connections, 8 at a time.
        for _ in 0..8 {
            scope.spawn(|| {
                for _ in 0..8 {
                    let mut s = UnixStream::connect(&path).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let _ = s.write_all(&vec![b'{'; 1 << 20]); // the server stops reading
                    let mut reply = String::new();
                    let _ = BufReader::new(&s).read_line(&mut reply);
                }
            });
        }
        // Idle connections that never send a line: dropped after the 1 s deadline, beyond
        // the uid's slots answered "busy" at once.
        scope.spawn(|| {
            let idle: Vec<_> = (0..40)
                .filter_map(|_| UnixStream::connect(&path).ok())
                .collect();
            std::thread::sleep(Duration::from_millis(1500));
            drop(idle);
        });
    });
    // One session, 20,000 malformed v1 lines pipelined: each answered, the session goes on.
    let s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let first = format!(
        "{}\n",
        serde_json::to_string(&Request {
            tid: 1,
            ask: Ask::Reset,
            until: Until::Close,
        })
        .unwrap()
    );
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        w.write_all(first.as_bytes()).unwrap();
        let junk = "{\"v\":1,\"cmd\":\"realtime\",\"tid\":\"x\"}\n".repeat(1000);
        for _ in 0..20 {
            w.write_all(junk.as_bytes()).unwrap();
        }
    });
    let mut r = BufReader::new(&s);
    let mut bad = 0;
    for _ in 0..20_001 {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let reply: Reply = serde_json::from_str(&line).unwrap();
        if reply.refused == Some(Refusal::BadRequest) {
            bad += 1;
        }
    }
    writer.join().unwrap();
    assert_eq!(bad, 20_000);
    drop(s);
    assert!(status_ok(&path), "the server still answers after the flood");
    let grown = rss_kib().saturating_sub(before);
    eprintln!("resident memory grew by {grown} KiB during the flood");
    assert!(grown < 32 * 1024, "memory grew by {grown} KiB");
}
