//! Shared by the collector's tests: keys, inventories and signed reports
//! made in the test, a collector process on a loopback port, an HTTP
//! client, and a throwaway PostgreSQL cluster ([`postgres`]).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod browser;
pub mod cases;
pub mod postgres;
pub mod watch;

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use converge_format::inventory::{format_report_key, host_entry};
use converge_format::report::{
    BundleRef, Change, Facts, ProbeFact, PromiseResult, Report, SignedReport, Status, Summary,
    Timings, REPORT_FORMAT,
};
use ed25519_dalek::SigningKey;
use serde_json::Value;

/// A host key from a seed (tests only).
pub fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// One inventory entry.
pub struct Entry<'a> {
    pub name: &'a str,
    pub key: &'a SigningKey,
    pub extra: &'a str,
}

pub fn inventory_text(entries: &[Entry]) -> String {
    entries
        .iter()
        .map(|e| host_entry(e.name, &e.key.verifying_key(), None, None, e.extra))
        .collect()
}

/// A fresh run id (32 lowercase hex digits), unique in this process.
pub fn run_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}{:016x}", std::process::id(), n)
}

/// A report of `host`, run `sequence`, with one repaired promise and,
/// when `failing`, one failed one.
pub fn report(host: &str, sequence: u64, failing: bool) -> Report {
    let mut promises = vec![PromiseResult {
        kind: "file".into(),
        promiser: "/etc/motd".into(),
        outcome: "repaired".into(),
        source: "site.policy:3:5".into(),
        error: None,
        changes: vec![Change {
            what: "content".into(),
            before: "old".into(),
            after: "new".into(),
            diff: Some("-old\n+new\n".into()),
        }],
    }];
    if failing {
        promises.push(PromiseResult {
            kind: "package".into(),
            promiser: "nginx".into(),
            outcome: "failed".into(),
            source: "site.policy:9:1".into(),
            error: Some("apt-get install nginx: exit status 100".into()),
            changes: vec![],
        });
    }
    let mut sys = BTreeMap::new();
    sys.insert("hostname".into(), Value::from(host));
    sys.insert("os_family".into(), Value::from("debian"));
    let mut probes = BTreeMap::new();
    probes.insert(
        "kernel_taint".into(),
        ProbeFact {
            value: Some(Value::from(0)),
            error: None,
        },
    );
    Report {
        format: REPORT_FORMAT.into(),
        host: host.into(),
        run_id: run_id(),
        sequence,
        started_at: "2026-11-24T01:00:00Z".into(),
        finished_at: "2026-11-24T01:00:01Z".into(),
        status: if failing {
            Status::Failed
        } else {
            Status::Repaired
        },
        bundle: Some(BundleRef {
            name: "site".into(),
            serial: 7,
            digest: "ab".repeat(32),
        }),
        summary: Summary {
            kept: 18,
            repaired: 1,
            failed: u64::from(failing),
            passes: 2,
            converged: !failing,
            ..Summary::default()
        },
        promises,
        owed_notifications: vec![],
        facts: Facts {
            sys,
            probes,
            classes: vec!["debian".into(), "group_web".into()],
        },
        timings: Timings::default(),
        error: None,
        truncated: false,
        extensions: BTreeMap::new(),
    }
}

/// The upload body of `report` signed with `key`.
pub fn signed(report: &Report, key: &SigningKey) -> Vec<u8> {
    serde_json::to_vec(&SignedReport::sign(report, key)).unwrap()
}

/// A blocking HTTP client that returns 4xx/5xx answers as answers.
pub fn client() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// An HTTP answer: status and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    pub content_type: String,
    /// Every header, names in lower case.
    pub headers: BTreeMap<String, String>,
}

impl Answer {
    /// A header's value, or "" when it is missing.
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

fn answer(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
    let mut response = response.unwrap();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .with_config()
        .limit(64 * 1024 * 1024)
        .read_to_string()
        .unwrap();
    Answer {
        status,
        body,
        content_type,
        headers,
    }
}

/// A `converge-collector serve` process on a free loopback port, killed
/// when dropped.
pub struct Collector {
    child: Child,
    pub url: String,
    pub dir: tempfile::TempDir,
    pub inventory: PathBuf,
    stderr: PathBuf,
    client: ureq::Agent,
    token: Option<String>,
}

impl Collector {
    /// Starts a collector on `database` with `inventory` and `extra` args.
    pub fn start(database: &str, inventory: &str, extra: &[&str]) -> Collector {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inventory.toml");
        std::fs::write(&path, inventory).unwrap();
        Collector::start_with(dir, path, database, extra)
    }

    /// Starts a collector on an inventory file that already exists.
    pub fn start_with(
        dir: tempfile::TempDir,
        inventory: PathBuf,
        database: &str,
        extra: &[&str],
    ) -> Collector {
        let stderr = dir.path().join(format!("stderr-{}.log", run_id()));
        let mut child = Command::new(env!("CARGO_BIN_EXE_converge-collector"))
            .args(["serve", "--inventory"])
            .arg(&inventory)
            .args(["--database", database, "--listen", "127.0.0.1:0"])
            .args(extra)
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let Some(url) = line
            .trim()
            .strip_prefix("converge-collector: listening on ")
        else {
            let _ = child.wait();
            panic!(
                "the collector did not start: {line}\n{}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        };
        Collector {
            url: url.to_owned(),
            child,
            dir,
            inventory,
            stderr,
            client: client(),
            token: None,
        }
    }

    /// Sends this token with every read from now on.
    pub fn with_token(mut self, token: &str) -> Collector {
        self.token = Some(token.to_owned());
        self
    }

    pub fn post(&self, body: &[u8]) -> Answer {
        answer(
            self.client
                .post(format!("{}/api/v1/reports", self.url))
                .header("content-type", "application/json")
                .send(body),
        )
    }

    pub fn get(&self, path: &str) -> Answer {
        let mut request = self.client.get(format!("{}{path}", self.url));
        if let Some(token) = &self.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        answer(request.call())
    }

    /// `GET path` with one extra header (and the token, if any).
    pub fn get_with(&self, path: &str, name: &str, value: &str) -> Answer {
        let mut request = self
            .client
            .get(format!("{}{path}", self.url))
            .header(name, value);
        if let Some(token) = &self.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        answer(request.call())
    }

    /// `GET path`, which must answer 200 with JSON.
    pub fn json(&self, path: &str) -> Value {
        let answer = self.get(path);
        assert_eq!(answer.status, 200, "GET {path}: {}", answer.body);
        answer.json()
    }

    /// What the collector logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The value of a metric line (`name{labels}`) on `/metrics`.
    pub fn metric(&self, series: &str) -> f64 {
        let text = self.get("/metrics").body;
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The SQLite URL of a file in `dir`.
pub fn sqlite_url(dir: &Path) -> String {
    format!("sqlite://{}", dir.join("collector.db").display())
}

impl Collector {
    /// `host:port` of the listener.
    pub fn address(&self) -> &str {
        self.url
            .split_once("://")
            .map_or(self.url.as_str(), |(_, a)| a)
    }

    /// Sends `head` (request line and headers, as written) on a fresh
    /// connection and returns what the server answers before it closes
    /// the connection or 10 seconds pass.
    pub fn raw(&self, head: &str) -> String {
        let mut stream = std::net::TcpStream::connect(self.address()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(head.as_bytes()).unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).into_owned()
    }
}
