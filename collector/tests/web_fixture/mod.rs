//! What the dashboard tests share: a real `converge-collector` process on
//! loopback with an inventory and a SQLite file in a temp dir, hosts with
//! Ed25519 keys, and signed reports posted to it over HTTP.

#![allow(dead_code)] // each test target uses a part

pub mod browser;

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};

use converge_format::inventory::format_report_key;
use converge_format::report::{
    BundleRef, Change, Facts, ProbeFact, PromiseResult, Report, SignedReport, Status, Summary,
    Timings, REPORT_FORMAT,
};
use ed25519_dalek::SigningKey;

/// A host of the test fleet: its inventory name and report key.
pub struct TestHost {
    pub name: String,
    pub key: SigningKey,
}

impl TestHost {
    pub fn new(name: &str, seed: u8) -> TestHost {
        TestHost {
            name: name.to_owned(),
            key: SigningKey::from_bytes(&[seed; 32]),
        }
    }

    /// The host's `[[host]]` entry.
    pub fn inventory_entry(&self) -> String {
        format!(
            "[[host]]\nname = \"{}\"\nreport_key = \"{}\"\ngroups = [\"web\", \"eu\"]\n\
             facts = {{ datacenter = \"eu-1\", rack = 12 }}\n",
            self.name,
            format_report_key(&self.key.verifying_key())
        )
    }
}

/// A running collector, killed when dropped.
pub struct Collector {
    child: Child,
    pub url: String,
    pub dir: tempfile::TempDir,
}

impl Collector {
    /// Starts `converge-collector serve` on a free loopback port with an
    /// inventory of `hosts` (plus `extra_inventory`) and a fresh SQLite
    /// database, and waits until it listens.
    pub fn start(hosts: &[&TestHost], extra_inventory: &str, extra_args: &[&str]) -> Collector {
        let dir = tempfile::tempdir().unwrap();
        let inventory: String = hosts.iter().map(|h| h.inventory_entry()).collect();
        let inventory_path = dir.path().join("inventory.toml");
        std::fs::write(&inventory_path, format!("{inventory}{extra_inventory}")).unwrap();
        let database = format!("sqlite://{}", dir.path().join("collector.db").display());
        let mut child = Command::new(env!("CARGO_BIN_EXE_converge-collector"))
            .arg("serve")
            .arg("--inventory")
            .arg(&inventory_path)
            .args(["--database", &database, "--listen", "127.0.0.1:0", "--interval", "300s"])
            .args(extra_args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("converge-collector: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from the collector: {line:?}"))
            .to_owned();
        Collector { child, url, dir }
    }

    /// Posts `report` signed with `host`'s key; the collector's status.
    pub fn post(&self, host: &TestHost, report: &Report) -> u16 {
        let body = serde_json::to_vec(&SignedReport::sign(report, &host.key)).unwrap();
        let response = agent()
            .post(&format!("{}/api/v1/reports", self.url))
            .header("content-type", "application/json")
            .send(&body[..])
            .unwrap();
        response.status().as_u16()
    }

    /// `GET path`: status, headers, body.
    pub fn get(&self, path: &str) -> Page {
        self.get_with(path, None)
    }

    pub fn get_with(&self, path: &str, bearer: Option<&str>) -> Page {
        let mut request = agent().get(&format!("{}{path}", self.url));
        if let Some(token) = bearer {
            request = request.header("authorization", &format!("Bearer {token}"));
        }
        let mut response = request.call().unwrap();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect();
        Page {
            status: response.status().as_u16(),
            headers,
            body: response
                .body_mut()
                .with_config()
                .limit(64 * 1024 * 1024)
                .read_to_string()
                .unwrap(),
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An answer of the collector.
pub struct Page {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Page {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// A report of `host`'s run number `sequence` listing `promises`; the
/// status and summary follow from the outcomes.
pub fn report(host: &str, sequence: u64, promises: Vec<PromiseResult>) -> Report {
    let count = |o: &str| promises.iter().filter(|p| p.outcome == o).count() as u64;
    let (repaired, failed, skipped) = (count("repaired"), count("failed"), count("skipped"));
    let status = if failed > 0 {
        Status::Failed
    } else if repaired > 0 {
        Status::Repaired
    } else {
        Status::Kept
    };
    Report {
        format: REPORT_FORMAT.to_owned(),
        host: host.to_owned(),
        run_id: format!("{:032x}", u128::from(sequence) * 7919 + u128::from(host.len() as u64)),
        sequence,
        started_at: "2026-11-24T00:00:00Z".to_owned(),
        finished_at: "2026-11-24T00:00:02Z".to_owned(),
        status,
        bundle: Some(BundleRef {
            name: "site".to_owned(),
            serial: 40 + sequence,
            digest: "ab".repeat(32),
        }),
        summary: Summary {
            kept: 20,
            repaired,
            failed,
            skipped,
            passes: 1,
            converged: failed == 0,
            ..Summary::default()
        },
        promises,
        owed_notifications: vec![],
        facts: Facts {
            sys: [
                ("hostname".to_owned(), serde_json::Value::from(host)),
                ("os_family".to_owned(), serde_json::Value::from("debian")),
            ]
            .into_iter()
            .collect(),
            probes: BTreeMap::new(),
            classes: vec!["debian".to_owned(), "group_web".to_owned()],
        },
        timings: Timings::default(),
        error: None,
        truncated: false,
        extensions: BTreeMap::new(),
    }
}

pub fn promise(kind: &str, promiser: &str, outcome: &str, source: &str) -> PromiseResult {
    PromiseResult {
        kind: kind.to_owned(),
        promiser: promiser.to_owned(),
        outcome: outcome.to_owned(),
        source: source.to_owned(),
        error: None,
        changes: vec![],
    }
}

pub fn change(what: &str, before: &str, after: &str) -> Change {
    Change {
        what: what.to_owned(),
        before: before.to_owned(),
        after: after.to_owned(),
        diff: None,
    }
}

pub fn probe(value: Option<serde_json::Value>, error: Option<&str>) -> ProbeFact {
    ProbeFact {
        value,
        error: error.map(str::to_owned),
    }
}

/// The hostile strings of T28, as a compromised host would send them.
pub const SCRIPT: &str = "<script>alert(1)</script>";
pub const IMG: &str = "\"><img src=x onerror=alert(1)>";
pub const SQL: &str = "'; DROP TABLE reports; --";
