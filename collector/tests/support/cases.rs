//! Test cases run against every database backend: the SQLite tests run
//! them on a file, the PostgreSQL tests on a throwaway cluster.

use base64::Engine as _;
use converge_format::report::{SignedReport, MAX_ENVELOPE_BYTES, SIGNING_CONTEXT};
use ed25519_dalek::Signer as _;
use serde_json::Value;

use super::*;

/// web-01 (key 1), web-02 (key 2), old-01 (key 3, revoked), rot-01 (key 5,
/// previously key 4), db-01 (key 6, never reports).
pub fn fleet_inventory() -> String {
    inventory_text(&[
        Entry {
            name: "web-01",
            key: &key(1),
            extra: "groups = [\"web\", \"eu\"]\nfacts = { datacenter = \"eu-1\", rack = 12 }",
        },
        Entry {
            name: "web-02",
            key: &key(2),
            extra: "groups = [\"web\"]",
        },
        Entry {
            name: "old-01",
            key: &key(3),
            extra: "revoked = true",
        },
        Entry {
            name: "rot-01",
            key: &key(5),
            extra: &format!(
                "previous_report_keys = [\"{}\"]",
                format_report_key(&key(4).verifying_key())
            ),
        },
        Entry {
            name: "db-01",
            key: &key(6),
            extra: "",
        },
    ])
}

fn expect(answer: &Answer, status: u16, stored: bool, reason: Option<&str>) {
    assert_eq!(answer.status, status, "{}", answer.body);
    let json = answer.json();
    assert_eq!(json["stored"], Value::from(stored), "{}", answer.body);
    assert_eq!(json["reason"].as_str(), reason, "{}", answer.body);
}

/// An envelope over arbitrary signed bytes.
fn envelope_over(host: &str, bytes: &[u8], key: &SigningKey) -> Vec<u8> {
    let mut message = SIGNING_CONTEXT.to_vec();
    message.extend_from_slice(bytes);
    let signature = key.sign(&message);
    let b64 = base64::engine::general_purpose::STANDARD;
    serde_json::to_vec(&SignedReport {
        host: host.into(),
        report: b64.encode(bytes),
        signature: b64.encode(signature.to_bytes()),
    })
    .unwrap()
}

/// Accepted, duplicate, older, and every refusal; nothing of a refused
/// upload is stored; each outcome counted in the metrics by reason.
pub fn upload_rules(database: &str) {
    let c = Collector::start(database, &fleet_inventory(), &[]);
    let first = signed(&report("web-01", 2, false), &key(1));
    expect(&c.post(&first), 201, true, None);
    expect(&c.post(&first), 200, false, Some("duplicate"));
    expect(
        &c.post(&signed(&report("web-01", 1, true), &key(1))),
        200,
        false,
        Some("older"),
    );
    // The same sequence under another run id is not newer either.
    expect(
        &c.post(&signed(&report("web-01", 2, true), &key(1))),
        200,
        false,
        Some("older"),
    );
    // A key rotation in progress: the previous key still signs.
    expect(
        &c.post(&signed(&report("rot-01", 1, false), &key(4))),
        201,
        true,
        None,
    );
    expect(
        &c.post(&signed(&report("rot-01", 2, false), &key(5))),
        201,
        true,
        None,
    );

    // Refusals.
    expect(
        &c.post(&signed(&report("web-01", 3, false), &key(2))),
        403,
        false,
        Some("bad_signature"),
    );
    expect(
        &c.post(&signed(&report("ghost", 1, false), &key(1))),
        403,
        false,
        Some("unknown_host"),
    );
    expect(
        &c.post(&signed(&report("old-01", 1, false), &key(3))),
        403,
        false,
        Some("revoked"),
    );
    let mut other_format = report("web-01", 4, false);
    other_format.format = "converge-report/2".into();
    expect(
        &c.post(&signed(&other_format, &key(1))),
        400,
        false,
        Some("wrong_format"),
    );
    // web-01 signs a report that claims to be web-02's.
    let claims_web02 = report("web-02", 5, false);
    let mut envelope = SignedReport::sign(&claims_web02, &key(1));
    envelope.host = "web-01".into();
    expect(
        &c.post(&serde_json::to_vec(&envelope).unwrap()),
        400,
        false,
        Some("host_mismatch"),
    );
    expect(&c.post(b"{not json"), 400, false, Some("malformed"));
    expect(
        &c.post(&envelope_over("web-01", b"{\"format\": \"\xff\"}", &key(1))),
        400,
        false,
        Some("malformed"),
    );
    // Refused on the declared length, before a byte of the body is read.
    let too_large = c.raw(&format!(
        "POST /api/v1/reports HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        MAX_ENVELOPE_BYTES + 1
    ));
    assert!(too_large.starts_with("HTTP/1.1 413"), "{too_large}");

    // Nothing refused was stored; the newest run stands.
    let status = c.json("/api/v1/status");
    assert_eq!(status["reports"], 3, "{status}");
    let host = c.json("/api/v1/hosts/web-01");
    assert_eq!(host["host"]["sequence"], 2);
    assert_eq!(host["host"]["status"], "repaired");
    assert_eq!(host["recent_reports"].as_array().unwrap().len(), 1);

    for (reason, n) in [
        ("bad_signature", 1.0),
        ("unknown_host", 1.0),
        ("revoked", 1.0),
        ("wrong_format", 1.0),
        ("host_mismatch", 1.0),
        ("malformed", 2.0),
        ("too_large", 1.0),
    ] {
        assert_eq!(
            c.metric(&format!(
                "converge_collector_reports_refused_total{{reason=\"{reason}\"}}"
            )),
            n,
            "{reason}"
        );
    }
    assert_eq!(c.metric("converge_collector_reports_ingested_total"), 3.0);
    assert_eq!(
        c.metric("converge_collector_reports_ignored_total{reason=\"duplicate\"}"),
        1.0
    );
    assert_eq!(
        c.metric("converge_collector_reports_ignored_total{reason=\"older\"}"),
        2.0
    );
    assert_eq!(
        c.metric("converge_collector_ingest_duration_seconds_count"),
        14.0
    );
    // One log line per refusal, with its reason.
    let log = c.log();
    assert_eq!(log.matches("report refused").count(), 8, "{log}");
    assert!(
        log.contains("reason=\"unknown_host\"") || log.contains("reason=unknown_host"),
        "{log}"
    );
}

/// Hostile strings are stored as data and come back as the same text,
/// JSON-escaped with no markup in the body; other hosts are untouched.
pub fn hostile_content(database: &str) {
    let c = Collector::start(database, &fleet_inventory(), &[]);
    expect(
        &c.post(&signed(&report("web-02", 1, true), &key(2))),
        201,
        true,
        None,
    );
    let script = "<script>alert(1)</script>\"><img src=x onerror=alert(2)>";
    let sql = "'; DROP TABLE reports; --";
    let long = "x".repeat(1024 * 1024);
    let mut hostile = report("web-01", 1, true);
    hostile.promises[1].promiser = script.into();
    hostile.promises[1].source = sql.into();
    hostile.promises[1].error = Some(format!("nul\0byte {long}"));
    hostile.started_at = "\0<b>".into();
    hostile
        .facts
        .sys
        .insert("motd".into(), Value::from("<script>x</script>\0"));
    expect(&c.post(&signed(&hostile, &key(1))), 201, true, None);

    let failures = c.get("/api/v1/failures");
    assert_eq!(failures.status, 200);
    assert_eq!(failures.content_type, "application/json");
    for markup in ["<script>", "<img", "\"><"] {
        assert!(!failures.body.contains(markup), "{markup} in the body");
    }
    let json = failures.json();
    let groups = json["failures"].as_array().unwrap();
    let group = groups
        .iter()
        .find(|g| g["source"] == sql)
        .unwrap_or_else(|| panic!("no hostile group in {json}"));
    assert_eq!(group["promiser"], script);
    let error = group["last_error"].as_str().unwrap();
    assert!(error.starts_with("nul\u{FFFD}byte xxx"), "NUL kept inert");
    assert_eq!(error.len(), "nul\u{FFFD}byte ".len() + long.len());
    // The other host's failure is its own group, unchanged.
    let nginx = groups.iter().find(|g| g["promiser"] == "nginx").unwrap();
    assert_eq!(nginx["hosts"][0]["host"], "web-02");

    // The stored report is the signed bytes: NUL and markup as sent.
    let detail = c.get("/api/v1/hosts/web-01");
    assert!(!detail.body.contains("<script>"));
    let detail = detail.json();
    assert_eq!(detail["last_report"]["started_at"], "\0<b>");
    assert_eq!(
        detail["last_report"]["facts"]["sys"]["motd"],
        "<script>x</script>\0"
    );
    assert_eq!(detail["host"]["started_at"], "\u{FFFD}<b>");
    let facts = c.json("/api/v1/facts?host=web-01");
    assert_eq!(facts["hosts"][0]["sys"]["motd"], "<script>x</script>\0");
    // The tables are all still there.
    assert_eq!(c.json("/api/v1/status")["reports"], 2);
    assert_eq!(c.json("/api/v1/hosts/web-02")["host"]["status"], "failed");
}

/// Every query endpoint on a small fleet.
pub fn queries(database: &str) {
    let c = Collector::start(database, &fleet_inventory(), &["--interval", "60s"]);
    for (host, k, seq, failing) in [
        ("web-01", 1, 1, false),
        ("web-01", 1, 2, true),
        ("web-02", 2, 1, true),
        ("rot-01", 5, 1, false),
    ] {
        expect(
            &c.post(&signed(&report(host, seq, failing), &key(k))),
            201,
            true,
            None,
        );
    }

    let status = c.json("/api/v1/status");
    assert_eq!(status["format"], "converge-fleet/1");
    assert_eq!(status["hosts"], 5);
    assert_eq!(status["reports"], 4);
    assert_eq!(status["by_status"]["failed"], 2);
    assert_eq!(status["by_status"]["repaired"], 1);
    assert_eq!(status["by_status"]["never"], 2);
    assert_eq!(status["by_status"]["kept"], 0);
    assert_eq!(status["silent"], 2);
    assert_eq!(status["interval_seconds"], 60);

    let hosts = c.json("/api/v1/hosts");
    let list = hosts["hosts"].as_array().unwrap();
    let names: Vec<&str> = list.iter().map(|h| h["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["db-01", "old-01", "rot-01", "web-01", "web-02"]);
    let web01 = &list[3];
    assert_eq!(web01["status"], "failed");
    assert_eq!(web01["sequence"], 2);
    assert_eq!(web01["bundle_serial"], 7);
    assert_eq!(web01["failed"], 1);
    assert_eq!(web01["repaired"], 1);
    assert_eq!(web01["silent"], false);
    assert!(web01["age_seconds"].as_i64().unwrap() < 60);
    assert_eq!(web01["groups"], serde_json::json!(["web", "eu"]));
    assert_eq!(list[0]["status"], "never");
    assert_eq!(list[0]["silent"], true);
    assert_eq!(list[0]["last_seen"], Value::Null);
    assert_eq!(list[1]["revoked"], true);

    let detail = c.json("/api/v1/hosts/web-01?recent=5");
    assert_eq!(detail["last_report"]["sequence"], 2);
    assert_eq!(detail["last_report"]["format"], "converge-report/1");
    let recent: Vec<i64> = detail["recent_reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["sequence"].as_i64().unwrap())
        .collect();
    assert_eq!(recent, [2, 1]);
    assert_eq!(c.get("/api/v1/hosts/nope").status, 404);
    assert_eq!(c.json("/api/v1/hosts/db-01")["host"]["status"], "never");
    assert_eq!(c.get("/api/v1/hosts/web-01?recent=0").status, 400);

    let failures = c.json("/api/v1/failures");
    let groups = failures["failures"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{failures}");
    assert_eq!(groups[0]["type"], "package");
    assert_eq!(groups[0]["promiser"], "nginx");
    assert_eq!(groups[0]["source"], "site.policy:9:1");
    assert_eq!(
        groups[0]["last_error"],
        "apt-get install nginx: exit status 100"
    );
    let failing: Vec<&str> = groups[0]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    assert_eq!(failing, ["web-01", "web-02"]);

    let changes = c.json("/api/v1/changes?since=2000-01-01T00:00:00Z");
    let list = changes["changes"].as_array().unwrap();
    assert_eq!(list.len(), 4, "{changes}");
    assert_eq!(list[0]["type"], "file");
    assert_eq!(list[0]["changes"][0]["after"], "new");
    assert_eq!(changes["truncated"], false);
    let limited = c.json("/api/v1/changes?since=2000-01-01T00:00:00Z&limit=2&host=web-01");
    assert_eq!(limited["changes"].as_array().unwrap().len(), 2);
    assert!(limited["changes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["host"] == "web-01"));
    let future = c.json("/api/v1/changes?since=2999-01-01T00:00:00Z");
    assert_eq!(future["changes"].as_array().unwrap().len(), 0);
    let bad = c.get("/api/v1/changes?since=yesterday");
    assert_eq!(bad.status, 400);
    assert!(bad.json()["error"].as_str().unwrap().contains("since"));

    let facts = c.json("/api/v1/facts");
    let hosts = facts["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 5);
    let web01 = hosts.iter().find(|h| h["host"] == "web-01").unwrap();
    assert_eq!(web01["sys"]["os_family"], "debian");
    assert_eq!(web01["probes"]["kernel_taint"]["value"], 0);
    assert_eq!(web01["inventory_facts"]["rack"], 12);
    assert_eq!(web01["inventory_facts"]["datacenter"], "eu-1");
    assert_eq!(web01["classes"][1], "group_web");
    let db01 = c.json("/api/v1/facts?host=db-01");
    assert_eq!(db01["hosts"][0]["reported_at"], Value::Null);

    let silent = c.json("/api/v1/silent?intervals=2");
    let names: Vec<&str> = silent["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["db-01", "old-01"]);
    assert_eq!(silent["silent_after_seconds"], 120);
    assert_eq!(c.get("/api/v1/silent?intervals=0").status, 400);

    let promise = c.json("/api/v1/promises?type=package&promiser=nginx");
    assert_eq!(promise["counts"]["failed"], 2);
    assert_eq!(promise["counts"]["kept_or_absent"], 1);
    assert_eq!(promise["counts"]["never"], 2);
    let motd = c.json("/api/v1/promises?type=file&promiser=/etc/motd");
    assert_eq!(motd["counts"]["repaired"], 3);
    assert_eq!(c.get("/api/v1/promises?type=file").status, 400);

    // Reads change nothing: the same answer twice, no report counted.
    assert_eq!(c.json("/api/v1/status")["reports"], 4);
    assert_eq!(c.get("/api/v1/nothing").status, 404);
    assert_eq!(c.post(b"").status, 400);
}
