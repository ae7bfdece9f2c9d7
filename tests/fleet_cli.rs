//! `policyc fleet` end to end (issue 18, item 6; docs/fleet.md): the real
//! `converge-collector` on a loopback port with an inventory and a SQLite
//! database in a temp dir, signed reports posted to it as agents would,
//! then the real `policyc fleet ...` (which runs curl) asserted on its
//! tables, its JSON and its exit codes.
//!
//! These tests need `curl` (policyc runs it; the test posts with it too):
//! `#[ignore = "needs curl"]`, and with `--include-ignored` a missing curl
//! is a failure (`require_tool`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use ::converge::binary;
use ::converge::support::require_tool;
use converge_format::inventory::host_entry;
use converge_format::report::{
    BundleRef, Change, Facts, ProbeFact, PromiseResult, Report, SignedReport, Status, Summary,
    Timings, REPORT_FORMAT,
};
use ed25519_dalek::SigningKey;
use serde_json::Value;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// web-01 and web-02 in group `web`, db-01 in `db` with a static fact,
/// mail-01 that never reports.
fn inventory() -> String {
    let entry = |name: &str, seed: u8, extra: &str| {
        host_entry(name, &key(seed).verifying_key(), None, None, extra)
    };
    [
        entry(
            "web-01",
            1,
            "groups = [\"web\"]\nfacts = { datacenter = \"eu-1\" }",
        ),
        entry("web-02", 2, "groups = [\"web\"]"),
        entry("db-01", 3, "groups = [\"db\"]"),
        entry("mail-01", 4, ""),
    ]
    .concat()
}

/// A `converge-collector serve` on a free loopback port, killed when
/// dropped.
struct Collector {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
}

impl Collector {
    fn start(token: bool) -> Collector {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("inventory.toml"), inventory()).unwrap();
        std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
        let mut cmd = Command::new(binary("converge-collector"));
        cmd.arg("serve")
            .arg("--inventory")
            .arg(dir.path().join("inventory.toml"))
            .arg("--database")
            .arg(format!(
                "sqlite://{}",
                dir.path().join("collector.db").display()
            ))
            .args(["--listen", "127.0.0.1:0", "--interval", "300s"])
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if token {
            cmd.arg("--token-file").arg(dir.path().join("token"));
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("converge-collector: listening on ")
            .unwrap_or_else(|| panic!("the collector did not start: {line:?}"))
            .to_owned();
        Collector { child, url, dir }
    }

    /// Uploads `report` signed with `key`, as an agent does.
    fn post(&self, report: &Report, key: &SigningKey) {
        let body = self.dir.path().join("upload.json");
        std::fs::write(
            &body,
            serde_json::to_vec(&SignedReport::sign(report, key)).unwrap(),
        )
        .unwrap();
        let out = Command::new("curl")
            .args(["-q", "--silent", "--show-error", "--fail-with-body"])
            .args([
                "--header",
                "Content-Type: application/json",
                "--data-binary",
            ])
            .arg(format!("@{}", body.display()))
            .arg(format!("{}/api/v1/reports", self.url))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "upload of {}: {}",
            report.host,
            text(&out)
        );
    }

    fn token_file(&self) -> PathBuf {
        self.dir.path().join("token")
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{:016x}{:016x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    converge_format::stamp::time::format_utc(now)
}

/// A report of `host`: `/etc/motd` repaired, and when `failing` the
/// package `failing_promiser` failed.
fn report(host: &str, failing: Option<&str>) -> Report {
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
            diff: None,
        }],
    }];
    if let Some(promiser) = failing {
        promises.push(PromiseResult {
            kind: "package".into(),
            promiser: promiser.into(),
            outcome: "failed".into(),
            source: "site.policy:9:1".into(),
            error: Some("apt-get install: exit status 100".into()),
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
    let at = now_rfc3339();
    Report {
        format: REPORT_FORMAT.into(),
        host: host.into(),
        run_id: run_id(),
        sequence: 1,
        started_at: at.clone(),
        finished_at: at,
        status: if failing.is_some() {
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
            failed: u64::from(failing.is_some()),
            passes: 2,
            converged: failing.is_none(),
            ..Summary::default()
        },
        promises,
        owed_notifications: vec![],
        facts: Facts {
            sys,
            probes,
            classes: vec!["debian".into(), format!("host_{}", host.replace('-', "_"))],
        },
        timings: Timings::default(),
        error: None,
        truncated: false,
        extensions: BTreeMap::new(),
    }
}

/// A collector holding web-01 (repaired), web-02 and db-01 (nginx
/// failed); mail-01 never reported.
fn fleet(token: bool) -> Collector {
    require_tool("curl", "curl");
    let collector = Collector::start(token);
    collector.post(&report("web-01", None), &key(1));
    collector.post(&report("web-02", Some("nginx")), &key(2));
    collector.post(&report("db-01", Some("nginx")), &key(3));
    collector
}

fn policyc(args: &[&str]) -> Output {
    Command::new(binary("policyc"))
        .arg("fleet")
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `policyc fleet ARGS --collector URL`: its standard output, which must
/// be a success.
fn ask(collector: &Collector, args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.extend(["--collector", &collector.url]);
    let out = policyc(&all);
    assert!(
        out.status.success(),
        "policyc fleet {args:?}: {}",
        text(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The cells of each table line, split on runs of two or more spaces.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| {
            l.trim()
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

fn row<'a>(rows: &'a [Vec<String>], first: &str) -> &'a [String] {
    rows.iter()
        .find(|r| r.first().is_some_and(|c| c == first))
        .unwrap_or_else(|| panic!("no row {first:?} in {rows:?}"))
}

#[test]
#[ignore = "needs curl"]
fn status_hosts_and_silent_tables() {
    let collector = fleet(false);

    let status = ask(&collector, &["status"]);
    assert!(status.starts_with("4 hosts (3 reports stored)"), "{status}");
    let table = rows(&status);
    assert_eq!(row(&table, "STATUS"), ["STATUS", "HOSTS"]);
    assert_eq!(row(&table, "kept"), ["kept", "0"]);
    assert_eq!(row(&table, "repaired"), ["repaired", "1"]);
    assert_eq!(row(&table, "failed"), ["failed", "2"]);
    assert_eq!(row(&table, "never"), ["never", "1"]);
    assert_eq!(row(&table, "silent"), ["silent", "1"]);
    assert!(
        status.contains("no report for more than 15m (3 intervals of 5m)"),
        "{status}"
    );

    let hosts = ask(&collector, &["hosts"]);
    let table = rows(&hosts);
    assert_eq!(
        row(&table, "HOST"),
        ["HOST", "STATUS", "LAST SEEN", "BUNDLE"]
    );
    assert_eq!(table.len(), 5, "{hosts}");
    let web = row(&table, "web-01");
    assert_eq!(web[1], "repaired");
    assert!(web[2].ends_with("s ago"), "{web:?}");
    assert_eq!(web[3], "site 7");
    assert_eq!(row(&table, "db-01")[1], "failed");
    assert_eq!(
        row(&table, "mail-01")[1..],
        ["never", "never (silent)", "-"]
    );

    let silent = ask(&collector, &["silent", "--intervals", "5"]);
    assert!(
        silent.starts_with("1 silent: no report for more than 25m"),
        "{silent}"
    );
    let table = rows(&silent);
    assert_eq!(row(&table, "mail-01")[1], "never");
    assert!(!silent.contains("web-01"), "{silent}");
}

#[test]
#[ignore = "needs curl"]
fn failures_changes_and_facts_tables() {
    let collector = fleet(false);

    let failures = ask(&collector, &["failures"]);
    let table = rows(&failures);
    assert_eq!(
        row(&table, "PROMISE"),
        ["PROMISE", "SOURCE", "HOSTS", "WHICH", "LAST ERROR"]
    );
    assert_eq!(
        row(&table, "package nginx"),
        [
            "package nginx",
            "site.policy:9:1",
            "2",
            "db-01, web-02",
            "apt-get install: exit status 100"
        ]
    );
    assert_eq!(table.len(), 2, "only the failing promise: {failures}");

    let changes = ask(&collector, &["changes", "--since", "1h"]);
    let table = rows(&changes);
    assert_eq!(
        row(&table, "TIME"),
        ["TIME", "HOST", "PROMISE", "SOURCE", "CHANGED"]
    );
    let hosts: Vec<&str> = table.iter().skip(2).map(|r| r[1].as_str()).collect();
    assert_eq!(hosts.len(), 3, "{changes}");
    for r in table.iter().skip(2) {
        assert_eq!(r[2..], ["file /etc/motd", "site.policy:3:5", "content"]);
    }
    let only = ask(&collector, &["changes", "--since", "1h", "--host", "db-01"]);
    assert_eq!(rows(&only).len(), 3, "{only}");
    assert!(only.contains("db-01") && !only.contains("web-01"), "{only}");
    // A window after the reports has none.
    let after = ask(&collector, &["changes", "--since", "2099-01-01T00:00:00Z"]);
    assert!(
        after.starts_with("changes from 2099-01-01T00:00:00Z to "),
        "{after}"
    );
    assert!(after.ends_with("\nno changes\n"), "{after}");
    let none = Command::new(binary("policyc"))
        .args([
            "fleet",
            "changes",
            "--since",
            "yesterday",
            "--collector",
            &collector.url,
        ])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(64), "{}", text(&none));
    assert!(text(&none).contains("RFC 3339"), "{}", text(&none));

    let facts = ask(&collector, &["facts", "--host", "web-01"]);
    assert!(
        facts.starts_with("web-01 (groups: web; reported "),
        "{facts}"
    );
    let table = rows(&facts);
    assert_eq!(row(&table, "inventory")[1..], ["datacenter", "eu-1"]);
    assert!(table.contains(&vec!["sys".into(), "os_family".into(), "debian".into()]));
    assert!(table.contains(&vec!["probe".into(), "kernel_taint".into(), "0".into()]));
    assert_eq!(row(&table, "classes")[1], "debian, host_web_01");
    let all = ask(&collector, &["facts"]);
    assert!(all.contains("mail-01 (never reported)"), "{all}");
}

#[test]
#[ignore = "needs curl"]
fn one_host_and_one_promise_across_the_fleet() {
    let collector = fleet(false);

    let host = ask(&collector, &["host", "web-02"]);
    let first = host.lines().next().unwrap();
    assert!(first.starts_with("web-02: failed, last seen "), "{host}");
    assert!(first.ends_with(", bundle site 7, groups: web"), "{host}");
    let table = rows(&host);
    assert_eq!(
        row(&table, "RECEIVED"),
        ["RECEIVED", "RUN", "STATUS", "KEPT", "REPAIRED", "FAILED", "SKIPPED", "SERIAL"]
    );
    let run = &table[2];
    assert_eq!(
        run[1..],
        ["1", "failed", "18", "1", "1", "0", "7"],
        "{host}"
    );
    assert!(host.contains("not kept in the last report:\n"), "{host}");
    assert_eq!(
        row(&table, "package nginx")[1..],
        [
            "failed",
            "site.policy:9:1",
            "apt-get install: exit status 100"
        ]
    );
    assert_eq!(
        row(&table, "file /etc/motd")[1..],
        ["repaired", "site.policy:3:5"]
    );

    let never = ask(&collector, &["host", "mail-01"]);
    assert_eq!(never, "mail-01: never, never reported, silent\n");
    let unknown = policyc(&["host", "nope-99", "--collector", &collector.url]);
    assert_eq!(unknown.status.code(), Some(69), "{}", text(&unknown));
    assert!(
        text(&unknown).contains("answered 404"),
        "{}",
        text(&unknown)
    );
    let bad = policyc(&["host", "../status", "--collector", &collector.url]);
    assert_eq!(bad.status.code(), Some(64), "{}", text(&bad));

    let promise = ask(
        &collector,
        &["promise", "--type", "package", "--promiser", "nginx"],
    );
    assert_eq!(
        promise.lines().next().unwrap(),
        "package nginx: failed 2, kept_or_absent 1, never 1, repaired 0, skipped 0"
    );
    let table = rows(&promise);
    assert_eq!(row(&table, "HOST"), ["HOST", "OUTCOME", "SOURCE", "ERROR"]);
    assert_eq!(
        row(&table, "db-01")[1..],
        [
            "failed",
            "site.policy:9:1",
            "apt-get install: exit status 100"
        ]
    );
    assert_eq!(row(&table, "web-01")[1..], ["kept_or_absent", "-"]);
    assert_eq!(row(&table, "mail-01")[1..], ["never", "-"]);
}

#[test]
#[ignore = "needs curl"]
fn json_is_the_collectors_answer() {
    let collector = fleet(false);
    for (args, path) in [
        (vec!["status"], "/api/v1/status"),
        (vec!["hosts"], "/api/v1/hosts"),
        (vec!["failures"], "/api/v1/failures"),
        (vec!["facts", "--host", "db-01"], "/api/v1/facts?host=db-01"),
        (vec!["host", "db-01"], "/api/v1/hosts/db-01"),
        (
            vec!["promise", "--type", "file", "--promiser", "/etc/motd"],
            "/api/v1/promises?type=file&promiser=%2Fetc%2Fmotd",
        ),
    ] {
        let mut all = args.clone();
        all.extend(["--format", "json"]);
        let ours: Value = serde_json::from_str(&ask(&collector, &all)).unwrap();
        let direct = Command::new("curl")
            .args(["-q", "--silent", "--fail"])
            .arg(format!("{}{path}", collector.url))
            .output()
            .unwrap();
        let theirs: Value = serde_json::from_slice(&direct.stdout).unwrap();
        assert_eq!(ours["format"], "converge-fleet/1");
        // `generated_at` and ages move with the clock; the rest is equal.
        let strip = |mut v: Value| {
            if let Some(o) = v.as_object_mut() {
                o.remove("generated_at");
                if let Some(h) = o.get_mut("host").and_then(Value::as_object_mut) {
                    h.remove("age_seconds");
                }
                if let Some(hosts) = o.get_mut("hosts").and_then(Value::as_array_mut) {
                    for h in hosts {
                        if let Some(h) = h.as_object_mut() {
                            h.remove("age_seconds");
                        }
                    }
                }
            }
            v
        };
        assert_eq!(strip(ours), strip(theirs), "{args:?}");
    }
}

#[test]
#[ignore = "needs curl"]
fn the_token_is_required_and_sent_from_its_file() {
    let collector = fleet(true);
    let out = policyc(&["status", "--collector", &collector.url]);
    assert_eq!(out.status.code(), Some(69), "{}", text(&out));
    let shown = text(&out);
    assert!(shown.contains("answered 401"), "{shown}");
    assert!(shown.contains("--token-file"), "{shown}");

    let token = collector.token_file();
    let status = ask(
        &collector,
        &["status", "--token-file", token.to_str().unwrap()],
    );
    assert!(status.starts_with("4 hosts"), "{status}");

    let missing = policyc(&[
        "status",
        "--collector",
        &collector.url,
        "--token-file",
        "/nonexistent/token",
    ]);
    assert_eq!(missing.status.code(), Some(66), "{}", text(&missing));
}

#[test]
#[ignore = "needs curl"]
fn hostile_report_text_is_shown_escaped() {
    require_tool("curl", "curl");
    let collector = Collector::start(false);
    collector.post(
        &report("web-01", Some("evil\u{1b}]0;owned\u{7}\u{1b}[2J")),
        &key(1),
    );
    let failures = ask(&collector, &["failures"]);
    assert!(!failures.contains('\u{1b}'), "{failures:?}");
    assert!(!failures.contains('\u{7}'), "{failures:?}");
    assert!(
        failures.contains("package evil\\u{1b}]0;owned\\u{7}\\u{1b}[2J"),
        "{failures}"
    );
}

#[test]
#[ignore = "needs curl"]
fn unreachable_collector_and_unknown_answers_have_their_exit_codes() {
    require_tool("curl", "curl");
    // Nothing listens on port 1.
    let out = policyc(&["hosts", "--collector", "http://127.0.0.1:1"]);
    assert_eq!(out.status.code(), Some(69), "{}", text(&out));
    assert!(
        text(&out).contains("cannot reach the collector at http://127.0.0.1:1/api/v1/hosts"),
        "{}",
        text(&out)
    );
    // Something that is not a collector: the collector's own 404 for an
    // unknown path is JSON but no view; a base URL one level off gives it.
    let collector = Collector::start(false);
    let out = policyc(&[
        "status",
        "--collector",
        &format!("{}/api/v1/status", collector.url),
    ]);
    assert_eq!(out.status.code(), Some(69), "{}", text(&out));
    assert!(text(&out).contains("answered 404"), "{}", text(&out));
    assert!(text(&out).contains("no such endpoint"), "{}", text(&out));
}

/// A collector that accepts the connection and never answers: curl's
/// deadline (`--timeout`) ends the wait, and policyc says so.
#[test]
#[ignore = "needs curl"]
fn a_collector_that_never_answers_times_out() {
    require_tool("curl", "curl");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = std::thread::spawn(move || listener.accept().map(|(s, _)| s));
    let started = std::time::Instant::now();
    let out = policyc(&["status", "--collector", &url, "--timeout", "1"]);
    assert_eq!(out.status.code(), Some(69), "{}", text(&out));
    assert!(
        text(&out).contains("cannot reach the collector"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("imed out"), "{}", text(&out));
    assert!(started.elapsed() < std::time::Duration::from_secs(6));
    drop(held.join());
}

/// `policyc fleet` with curl missing from `PATH` says to install it.
#[test]
fn a_missing_curl_says_to_install_it() {
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(binary("policyc"))
        .args(["fleet", "status", "--collector", "http://127.0.0.1:1"])
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69), "{}", text(&out));
    assert!(
        text(&out).contains("apt-get install curl"),
        "{}",
        text(&out)
    );
}

/// A program named `curl` in an otherwise empty `PATH`, answering `body`
/// with HTTP status 200 the way `--write-out` makes curl do.
pub fn fake_curl(dir: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join("curl");
    std::fs::write(&path, format!("#!/bin/sh\nprintf '%s\\n200' '{body}'\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// An answer that is not a fleet view is refused with 76, whatever else
/// it is.
#[test]
fn an_answer_that_is_not_a_view_is_a_protocol_error() {
    for (body, says) in [
        ("<html>hello</html>", "not JSON"),
        (r#"{"hosts": 3}"#, "no `format`"),
        (r#"{"format": "converge-fleet/9"}"#, "converge-fleet/9"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        fake_curl(dir.path(), body);
        let out = Command::new(binary("policyc"))
            .args(["fleet", "status", "--collector", "http://collector.invalid"])
            .env("PATH", dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(76), "{}", text(&out));
        assert!(text(&out).contains(says), "{says}: {}", text(&out));
    }
}

/// The chain report of a history whose record bodies are `bodies` (each
/// body digest is the byte repeated).
fn chain(bodies: &[u8]) -> converge_format::chain::ChainReport {
    use converge_format::chain::{format_digest, link, GENESIS};
    let head = bodies.iter().fold(GENESIS, |h, b| link(&h, &[*b; 32]));
    converge_format::chain::ChainReport {
        length: bodies.len() as u64,
        head: format_digest(&head),
        tail: bodies.iter().map(|b| format_digest(&[*b; 32])).collect(),
    }
}

fn watched(host: &str, sequence: u64, bodies: &[u8]) -> Report {
    let mut r = report(host, None);
    r.sequence = sequence;
    r.extensions.insert(
        converge_format::chain::EXTENSION.into(),
        serde_json::to_value(chain(bodies)).unwrap(),
    );
    r
}

/// `policyc fleet tampered`: none at first; then web-02 rewrites its
/// history and db-01 truncates it, web-01 only appends: the two are
/// listed with their verdicts and the last consistent heads, in a table
/// and as the collector's JSON.
#[test]
#[ignore = "needs curl"]
fn tampered_hosts_table_and_json() {
    require_tool("curl", "curl");
    let collector = Collector::start(true);
    let token = collector.token_file();
    let token = token.to_str().unwrap();
    for (host, seed) in [("web-01", 1), ("web-02", 2), ("db-01", 3)] {
        collector.post(&watched(host, 1, &[1, 2, 3]), &key(seed));
    }
    let none = ask(&collector, &["tampered", "--token-file", token]);
    assert!(none.starts_with("no tampered hosts"), "{none}");

    collector.post(&watched("web-01", 2, &[1, 2, 3, 4]), &key(1));
    collector.post(&watched("web-02", 2, &[1, 9, 3, 4]), &key(2));
    collector.post(&watched("db-01", 2, &[1, 2]), &key(3));
    let out = ask(&collector, &["tampered", "--token-file", token]);
    assert!(out.starts_with("2 hosts tampered\n"), "{out}");
    let table = rows(&out);
    assert_eq!(
        row(&table, "HOST"),
        [
            "HOST",
            "VERDICT",
            "FLAGGED",
            "ALARMS",
            "LAST CONSISTENT HEAD",
            "OFFENDING HEAD"
        ]
    );
    let consistent = format!("3 {}", chain(&[1, 2, 3]).head);
    let web = row(&table, "web-02");
    assert_eq!(web[1], "rewritten");
    assert_eq!(web[3], "1");
    assert_eq!(web[4], consistent);
    assert_eq!(web[5], format!("4 {}", chain(&[1, 9, 3, 4]).head));
    let db = row(&table, "db-01");
    assert_eq!(db[1], "backwards");
    assert_eq!(db[4], consistent);
    assert!(!out.contains("web-01"), "{out}");

    let json = ask(
        &collector,
        &["tampered", "--format", "json", "--token-file", token],
    );
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["format"], "converge-fleet/1");
    let names: Vec<&str> = json["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["db-01", "web-02"]);

    // Without the token: refused, as every fleet view.
    let out = policyc(&["tampered", "--collector", &collector.url]);
    assert_eq!(out.status.code(), Some(69), "{}", text(&out));
}
