//! The cross-checks of the hosts' watch histories (docs/fleet.md,
//! "Tampered hosts"), run against every database backend: reports that
//! extend the history pass; a rewrite, a truncation, an unverifiable jump,
//! a malformed chain and a dropped history flag their host, whose reports
//! are stored all the same; `/api/v1/tampered`, the metric, and the
//! latest signed report for the neighbours.

use converge_format::chain::{format_digest, link, ChainReport, Digest, EXTENSION, GENESIS};
use converge_format::fetch_auth;
use sha2::{Digest as _, Sha256};

use super::*;

/// The body digest of a record numbered `n`.
fn body(n: u32) -> Digest {
    Sha256::digest(n.to_le_bytes()).into()
}

/// The chain report of a history whose records are `records` (body
/// numbers), carrying at most `tail` body digests.
pub fn chain(records: &[u32], tail: usize) -> ChainReport {
    let bodies: Vec<Digest> = records.iter().map(|n| body(*n)).collect();
    let head = bodies.iter().fold(GENESIS, |h, b| link(&h, b));
    let skip = bodies.len().saturating_sub(tail);
    ChainReport {
        length: bodies.len() as u64,
        head: format_digest(&head),
        tail: bodies.iter().skip(skip).map(format_digest).collect(),
    }
}

/// A report of `host`, run `sequence`, carrying `chain`.
pub fn watched(host: &str, sequence: u64, chain: &ChainReport) -> Report {
    let mut r = report(host, sequence, false);
    r.extensions
        .insert(EXTENSION.into(), serde_json::to_value(chain).unwrap());
    r
}

/// Hosts a..f, keys 21..26.
pub fn watch_inventory() -> String {
    let keys: Vec<(String, SigningKey)> = (0..6u8)
        .map(|i| (format!("w-{}", char::from(b'a' + i)), key(21 + i)))
        .collect();
    inventory_text(
        &keys
            .iter()
            .map(|(name, key)| Entry {
                name,
                key,
                extra: "",
            })
            .collect::<Vec<_>>(),
    )
}

fn send(c: &Collector, host: &str, seed: u8, r: &Report) {
    let answer = c.post(&signed(r, &key(seed)));
    assert_eq!(answer.status, 201, "{host}: {}", answer.body);
}

pub fn tampered(database: &str) {
    let c = Collector::start(database, &watch_inventory(), &[]);
    let upto = |n: u32| (1..=n).collect::<Vec<u32>>();
    // w-a: only appends.
    send(&c, "w-a", 21, &watched("w-a", 1, &chain(&upto(2), 256)));
    send(&c, "w-a", 21, &watched("w-a", 2, &chain(&upto(2), 256)));
    send(&c, "w-a", 21, &watched("w-a", 3, &chain(&upto(5), 256)));
    // w-b: record 2 edited, one appended.
    send(&c, "w-b", 22, &watched("w-b", 1, &chain(&upto(3), 256)));
    send(
        &c,
        "w-b",
        22,
        &watched("w-b", 2, &chain(&[1, 99, 3, 4], 256)),
    );
    // w-c: truncated.
    send(&c, "w-c", 23, &watched("w-c", 1, &chain(&upto(3), 256)));
    send(&c, "w-c", 23, &watched("w-c", 2, &chain(&upto(2), 256)));
    // w-d: 300 records appended, the report carries 256.
    send(&c, "w-d", 24, &watched("w-d", 1, &chain(&upto(1), 256)));
    send(&c, "w-d", 24, &watched("w-d", 2, &chain(&upto(301), 256)));
    // w-e: a first report whose chain is not one.
    let mut e = report("w-e", 1, false);
    e.extensions.insert(EXTENSION.into(), Value::from("gone"));
    send(&c, "w-e", 25, &e);
    // w-f: a history, then none.
    send(&c, "w-f", 26, &watched("w-f", 1, &chain(&upto(2), 256)));
    send(&c, "w-f", 26, &report("w-f", 2, false));

    let list = c.json("/api/v1/tampered");
    assert_eq!(list["format"], "converge-fleet/1");
    let hosts = list["hosts"].as_array().unwrap();
    let by_name = |n: &str| {
        hosts
            .iter()
            .find(|h| h["name"] == n)
            .unwrap_or_else(|| panic!("{n} not flagged: {list}"))
    };
    assert_eq!(hosts.len(), 5, "{list}");
    assert!(hosts.iter().all(|h| h["name"] != "w-a"), "{list}");
    let b = by_name("w-b");
    assert_eq!(b["verdict"], "rewritten");
    assert_eq!(b["last_consistent"]["length"], 3);
    assert_eq!(
        b["last_consistent"]["head"],
        chain(&upto(3), 256).head.as_str()
    );
    assert_eq!(b["offending"]["length"], 4);
    assert_eq!(
        b["offending"]["head"],
        chain(&[1, 99, 3, 4], 256).head.as_str()
    );
    assert_eq!(b["alarms"], 1);
    assert!(b["flagged_at"].as_str().unwrap().ends_with('Z'), "{b}");
    assert_eq!(by_name("w-c")["verdict"], "backwards");
    assert_eq!(by_name("w-c")["offending"]["length"], 2);
    let d = by_name("w-d");
    assert_eq!(d["verdict"], "unverifiable");
    assert_eq!(d["last_consistent"]["length"], 1);
    assert!(d["detail"].as_str().unwrap().contains("300"), "{d}");
    let e = by_name("w-e");
    assert_eq!(e["verdict"], "malformed");
    assert_eq!(e["last_consistent"]["length"], 0);
    assert!(e["offending"].is_null(), "{e}");
    assert_eq!(by_name("w-f")["verdict"], "missing");
    assert_eq!(c.metric("converge_fleet_tampered_hosts"), 5.0);

    // Every report was stored (the evidence); the hosts' latest are the
    // offending ones.
    for host in ["w-b", "w-c", "w-d", "w-f"] {
        let detail = c.json(&format!("/api/v1/hosts/{host}"));
        assert_eq!(detail["host"]["sequence"], 2, "{host}: {detail}");
    }

    // The rewritten chain keeps w-b flagged: a later report of the same
    // rewritten history is checked against the last consistent head
    // still, never against the offending one.
    send(
        &c,
        "w-b",
        22,
        &watched("w-b", 3, &chain(&[1, 99, 3, 4, 5], 256)),
    );
    let b = c.json("/api/v1/tampered")["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "w-b")
        .cloned()
        .unwrap();
    assert_eq!(b["alarms"], 2, "{b}");
    assert_eq!(b["last_consistent"]["length"], 3);
    assert_eq!(b["offending"]["length"], 5);
    // And w-a, extending again, is still not flagged.
    send(&c, "w-a", 21, &watched("w-a", 4, &chain(&upto(6), 256)));
    assert_eq!(c.metric("converge_fleet_tampered_hosts"), 5.0);

    // The dashboard marks the flagged hosts in the host list.
    let page = c.get("/").body;
    let row = |host: &str| {
        page.split("<tr class=\"host-row\">")
            .find(|r| r.contains(&format!(">{host}</a>")))
            .unwrap_or_else(|| panic!("no row {host}"))
            .to_owned()
    };
    assert!(row("w-b").contains("status-tampered"), "{}", row("w-b"));
    assert!(!row("w-a").contains("status-tampered"), "{}", row("w-a"));

    latest_report(&c);
}

/// The latest report is served as uploaded: it opens with the host's key
/// and is the host's last run.
fn latest_report(c: &Collector) {
    let answer = c.get("/api/v1/hosts/w-a/report/latest");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let envelope = SignedReport::parse(answer.body.as_bytes()).unwrap();
    let opened = envelope.open(&key(21).verifying_key()).unwrap();
    assert_eq!(opened.sequence, 4);
    assert_eq!(opened.extensions[EXTENSION]["length"], 6);
    assert!(envelope.open(&key(22).verifying_key()).is_err());
    assert_eq!(c.get("/api/v1/hosts/nobody/report/latest").status, 404);
}

/// With a token, a neighbour's latest report needs the token or a
/// request signed by an enrolled, unrevoked host, for that path, now.
pub fn latest_report_auth(database: &str, dir: &Path) {
    let token = dir.join("token");
    std::fs::write(&token, "9f86d081884c7d659a2feaa0c55ad015\n").unwrap();
    let mut inventory = watch_inventory();
    inventory.push_str(&host_entry(
        "w-gone",
        &key(30).verifying_key(),
        None,
        None,
        "revoked = true",
    ));
    let c = Collector::start(
        database,
        &inventory,
        &["--token-file", token.to_str().unwrap()],
    );
    send(&c, "w-a", 21, &watched("w-a", 1, &chain(&[1], 256)));
    let path = "/api/v1/hosts/w-a/report/latest";
    let now = jiff_now();
    assert_eq!(c.get(path).status, 401);
    let by = |host: &str, seed: u8, for_path: &str, time: i64| {
        c.get_with(
            path,
            fetch_auth::HEADER,
            &fetch_auth::sign(host, &key(seed), for_path, time),
        )
        .status
    };
    assert_eq!(by("w-b", 22, path, now), 200);
    assert_eq!(by("w-b", 23, path, now), 401, "another host's key");
    assert_eq!(by("w-gone", 30, path, now), 401, "a revoked host");
    assert_eq!(by("w-z", 40, path, now), 401, "a host not enrolled");
    assert_eq!(by("w-b", 22, "/api/v1/hosts/w-c/report/latest", now), 401);
    assert_eq!(by("w-b", 22, path, now - 3_600), 401, "an old request");
    // The signature opens this one path only: not the fleet API.
    let status = c
        .get_with(
            "/api/v1/hosts",
            fetch_auth::HEADER,
            &fetch_auth::sign("w-b", &key(22), "/api/v1/hosts", now),
        )
        .status;
    assert_eq!(status, 401);
    let c = c.with_token("9f86d081884c7d659a2feaa0c55ad015");
    assert_eq!(c.get(path).status, 200);
}

fn jiff_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}
