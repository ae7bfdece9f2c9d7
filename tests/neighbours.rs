//! Neighbour watch end to end (issue 19, item 3; docs/fleet.md "Neighbour
//! watch"): a sandbox host enrolled as `host-a` runs `policyvm agent`
//! with a bundle (built from a policy tree with an inventory) whose
//! `neighbours` promise watches `host-b` and `host-c` through the real
//! `converge-collector` on loopback. The neighbours' reports are
//! synthetic (signed here with their inventory keys) until the `watch`
//! engine fills them in.
//!
//! Then `host-b` rewrites its history, and the collector `host-a` talks to
//! is a compromised one: a second collector database that only ever saw
//! the rewritten report, so it flags nothing. `host-a` still raises
//! `on_rewrite` and reports the rewrite, because it kept the head it saw.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output};

use converge::binary;
use converge::collector::Collector;
use converge::http::{respond, Scripted};
use converge_format::chain::{format_digest, link, ChainReport, EXTENSION, GENESIS};
use converge_format::inventory::{host_entry, parse_report_key, Inventory};
use converge_format::report::{Report, SignedReport, Status, REPORT_FORMAT};
use ed25519_dalek::SigningKey;
use serde_json::Value;

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn chain(bodies: &[u8]) -> ChainReport {
    let head = bodies.iter().fold(GENESIS, |h, b| link(&h, &[*b; 32]));
    ChainReport {
        length: bodies.len() as u64,
        head: format_digest(&head),
        tail: bodies.iter().map(|b| format_digest(&[*b; 32])).collect(),
    }
}

/// A report of `host`, run `sequence`, showing `history` when given.
fn report(host: &str, sequence: u64, history: Option<&[u8]>) -> Report {
    let mut extensions = BTreeMap::new();
    if let Some(bodies) = history {
        extensions.insert(
            EXTENSION.to_owned(),
            serde_json::to_value(chain(bodies)).unwrap(),
        );
    }
    Report {
        format: REPORT_FORMAT.into(),
        host: host.into(),
        run_id: format!("{:016x}{sequence:016x}", u64::from(host.as_bytes()[5])),
        sequence,
        started_at: "2026-11-24T01:00:00Z".into(),
        finished_at: "2026-11-24T01:00:01Z".into(),
        status: Status::Kept,
        bundle: None,
        summary: Default::default(),
        promises: vec![],
        owed_notifications: vec![],
        facts: Default::default(),
        timings: Default::default(),
        error: None,
        truncated: false,
        extensions,
    }
}

/// What these tests do with a collector.
trait Client {
    fn post(&self, report: &Report, key: &SigningKey);
    fn json(&self, path: &str) -> Value;
}

impl Client for Collector {
    fn post(&self, report: &Report, key: &SigningKey) {
        let body = serde_json::to_vec(&SignedReport::sign(report, key)).unwrap();
        let answer = ureq::post(format!("{}/api/v1/reports", self.url))
            .header("content-type", "application/json")
            .send(&body[..])
            .unwrap();
        assert_eq!(answer.status(), 201, "{}", report.host);
    }

    fn json(&self, path: &str) -> Value {
        let mut answer = ureq::get(format!("{}{path}", self.url)).call().unwrap();
        serde_json::from_str(&answer.body_mut().read_to_string().unwrap()).unwrap()
    }
}

const POLICY: &str = "\
class neighbour_rewrote;
bundle site {
  neighbours \"fleet\" { hosts = neighbours(inventory, 2); on_rewrite = neighbour_rewrote; }
  when neighbour_rewrote { file \"/etc/neighbour-alarm\" { content = \"rewritten\\n\"; } }
}
policy { site(); }
";

#[test]
fn a_rewritten_neighbour_history_is_seen_even_through_a_compromised_collector() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // host-a: a sandbox root, enrolled.
    let root = w.join("a/root");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/hostname"), "host-a\n").unwrap();
    let out = Command::new(binary("policyvm"))
        .args(["enroll", "--name", "host-a", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let enrolled = Inventory::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let a_key = parse_report_key(enrolled.hosts[0].report_key.get_ref()).unwrap();

    // The inventory: host-a, and host-b and host-c whose keys are here.
    let tree = w.join("policy");
    std::fs::create_dir_all(&tree).unwrap();
    let inventory = [
        host_entry("host-a", &a_key, None, None, ""),
        host_entry("host-b", &key(2).verifying_key(), None, None, ""),
        host_entry("host-c", &key(3).verifying_key(), None, None, ""),
    ]
    .concat();
    std::fs::write(tree.join("inventory.toml"), &inventory).unwrap();
    std::fs::write(tree.join("site.policy"), POLICY).unwrap();

    // A hub serving the bundle.
    let keys = w.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let out = Command::new(binary("policyc"))
        .args(["keygen", "--out"])
        .arg(keys.join("hub"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let trust = w.join("trust");
    std::fs::create_dir_all(&trust).unwrap();
    std::fs::copy(keys.join("hub.pub"), trust.join("hub.pub")).unwrap();
    let pubdir = w.join("srv");
    std::fs::create_dir_all(&pubdir).unwrap();
    let out = Command::new(binary("policyc"))
        .arg("publish")
        .arg(tree.join("site.policy"))
        .arg("--key")
        .arg(keys.join("hub.key"))
        .arg("--dir")
        .arg(&pubdir)
        .args(["--name", "site", "--serial", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let served = pubdir.clone();
    let hub = Scripted::start(move |path, stream| {
        match std::fs::read(served.join(path.trim_start_matches('/'))) {
            Ok(bytes) => respond(stream, "", &bytes),
            Err(_) => {
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        }
    });

    let honest = Collector::start(&tree.join("inventory.toml"));
    let config = w.join("a/agent.toml");
    let configure = |collector: &str| {
        std::fs::write(
            &config,
            format!(
                "hubs = [{:?}]\nname = \"site\"\ntrust = {:?}\nroot = {:?}\ntimeout = \"3s\"\n\
                 collectors = [{collector:?}]\nupload_timeout = \"5s\"\n",
                hub.url(),
                trust,
                root
            ),
        )
        .unwrap();
    };
    let agent = || {
        Command::new(binary("policyvm"))
            .args(["agent", "--no-splay", "--config"])
            .arg(&config)
            .output()
            .unwrap()
    };
    let state = root.join("var/lib/converge");
    let last = || -> Value {
        serde_json::from_slice(&std::fs::read(state.join("reports/last.json")).unwrap()).unwrap()
    };
    let verdicts = |report: &Value| -> Vec<(String, String)> {
        report["neighbours"]
            .as_array()
            .unwrap_or_else(|| panic!("no neighbours in {report}"))
            .iter()
            .map(|e| {
                (
                    e["host"].as_str().unwrap().to_owned(),
                    e["verdict"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };

    // host-b keeps a history, host-c none; both report to the collector.
    honest.post(&report("host-b", 1, Some(&[1, 2, 3])), &key(2));
    honest.post(&report("host-c", 1, None), &key(3));
    configure(&honest.url);
    // The first run learns whom to watch; nothing was fetched yet.
    let out = agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        verdicts(&last()),
        [
            ("host-b".to_owned(), "unavailable".to_owned()),
            ("host-c".to_owned(), "unavailable".to_owned())
        ]
    );
    // The next fetches their reports (a signed request: no token).
    let out = agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        verdicts(&last()),
        [
            ("host-b".to_owned(), "first".to_owned()),
            ("host-c".to_owned(), "no history".to_owned())
        ]
    );
    assert!(!root.join("etc/neighbour-alarm").exists());

    // A collector that is down: the reports fetched before are checked
    // again (`same`), a warning says why nothing new came; no alarm.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    configure(&dead);
    let out = agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("neighbour report unavailable: host-b"),
        "{}",
        text(&out)
    );
    assert_eq!(
        verdicts(&last()),
        [
            ("host-b".to_owned(), "same".to_owned()),
            ("host-c".to_owned(), "no history".to_owned())
        ]
    );

    // host-b rewrites its history. The collector host-a now talks to is a
    // fresh database that only ever saw the rewritten report: it has
    // nothing to compare with, and flags nothing.
    let rewritten = report("host-b", 2, Some(&[1, 9, 3, 4]));
    let compromised = Collector::start(&tree.join("inventory.toml"));
    compromised.post(&rewritten, &key(2));
    compromised.post(&report("host-c", 1, None), &key(3));
    assert_eq!(
        compromised.json("/api/v1/tampered")["hosts"],
        Value::Array(vec![])
    );
    configure(&compromised.url);
    let out = agent();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed promise: {}",
        text(&out)
    );
    let report_a = last();
    assert_eq!(
        verdicts(&report_a),
        [
            ("host-b".to_owned(), "rewritten".to_owned()),
            ("host-c".to_owned(), "no history".to_owned())
        ]
    );
    // The run report with its neighbours still is a converge-run/1.
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schemas/converge-run-1.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::draft202012::options().build(&schema).unwrap();
    let problems: Vec<String> = validator
        .iter_errors(&report_a)
        .map(|e| e.to_string())
        .collect();
    assert!(problems.is_empty(), "{problems:?}");
    let b = &report_a["neighbours"][0];
    assert_eq!(b["alarm"], true);
    assert_eq!(b["seen"]["length"], 3);
    assert_eq!(b["seen"]["head"], chain(&[1, 2, 3]).head.as_str());
    assert_eq!(b["new"]["length"], 4);
    // on_rewrite was set: the promise guarded by it was applied.
    assert_eq!(
        std::fs::read_to_string(root.join("etc/neighbour-alarm")).unwrap(),
        "rewritten\n"
    );
    // The uploaded report carries the finding, signed by host-a.
    let latest = ureq::get(format!(
        "{}/api/v1/hosts/host-a/report/latest",
        compromised.url
    ))
    .call()
    .unwrap()
    .body_mut()
    .read_to_vec()
    .unwrap();
    let uploaded = SignedReport::parse(&latest).unwrap().open(&a_key).unwrap();
    assert_eq!(uploaded.extensions["neighbours"][0]["verdict"], "rewritten");
    assert_eq!(uploaded.status, Status::Failed);

    // The honest collector, which saw the first head, flags host-b too.
    honest.post(&rewritten, &key(2));
    let flagged = honest.json("/api/v1/tampered");
    assert_eq!(flagged["hosts"][0]["name"], "host-b", "{flagged}");
    assert_eq!(flagged["hosts"][0]["verdict"], "rewritten");

    // The alarm stays until host-b's history extends the head seen.
    let out = agent();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(verdicts(&last())[0].1, "rewritten");
    drop(hub);
}
