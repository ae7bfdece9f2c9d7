//! The fleet dashboard against a real `converge-collector` on loopback:
//! every page's status and security headers, hostile report content
//! (T28) escaped, the read rule (T31), and, in headless Chromium, what a
//! person sees and where the links lead. Screenshots are kept in
//! `target/test-artefacts/web/` (docs/fleet.md, "Dashboard").

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;

use converge_format::report::{
    BundleRef, Change, Facts, ProbeFact, PromiseResult, Report, Status, Summary, Timings,
    REPORT_FORMAT,
};
use ed25519_dalek::SigningKey;
use support::browser::Browser;
use support::{inventory_text, key, signed, sqlite_url, Answer, Collector, Entry};

/// The hostile strings of T28, as a compromised host would send them.
const SCRIPT: &str = "<script>alert(1)</script>";
const IMG: &str = "\"><img src=x onerror=alert(1)>";
const SQL: &str = "'; DROP TABLE reports; --";

/// A report of `host`'s run `sequence` listing `promises`; the status and
/// summary follow from their outcomes.
fn report(host: &str, sequence: u64, promises: Vec<PromiseResult>) -> Report {
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
        run_id: support::run_id(),
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

fn promise(kind: &str, promiser: &str, outcome: &str, source: &str) -> PromiseResult {
    PromiseResult {
        kind: kind.to_owned(),
        promiser: promiser.to_owned(),
        outcome: outcome.to_owned(),
        source: source.to_owned(),
        error: None,
        changes: vec![],
    }
}

fn change(what: &str, before: &str, after: &str) -> Change {
    Change {
        what: what.to_owned(),
        before: before.to_owned(),
        after: after.to_owned(),
        diff: None,
    }
}

fn probe(value: Option<serde_json::Value>, error: Option<&str>) -> ProbeFact {
    ProbeFact {
        value,
        error: error.map(str::to_owned),
    }
}

/// Posts `report` signed with `key`; it must be stored.
fn post(collector: &Collector, key: &SigningKey, report: &Report) {
    let answer = collector.post(&signed(report, key));
    assert_eq!(answer.status, 201, "{}", answer.body);
}

/// The inventory of the test fleet: groups and static facts on each host.
fn fleet_inventory(hosts: &[(&str, &SigningKey)]) -> String {
    let entries: Vec<Entry> = hosts
        .iter()
        .map(|(name, key)| Entry {
            name,
            key,
            extra: "groups = [\"web\", \"eu\"]\nfacts = { datacenter = \"eu-1\", rack = 12 }",
        })
        .collect();
    inventory_text(&entries)
}

/// A promiser longer than any page shows whole.
fn long_promiser() -> String {
    format!("/srv/{}", "x".repeat(5_000))
}

/// Four hosts: `web-1` (a repaired run, then a failed one full of hostile
/// strings), `web-2` (failed on the same promise), `db-1` (kept),
/// `never-1` (in the inventory, never reported).
fn fleet(extra_args: &[&str]) -> Collector {
    let (web1, web2, db1, never) = (key(1), key(2), key(3), key(4));
    let inventory = fleet_inventory(&[
        ("web-1", &web1),
        ("web-2", &web2),
        ("db-1", &db1),
        ("never-1", &never),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inventory.toml");
    std::fs::write(&path, inventory).unwrap();
    let database = sqlite_url(dir.path());
    let collector = Collector::start_with(dir, path, &database, extra_args);

    let mut motd = promise("file", "/etc/motd", "repaired", "site.policy:4:3");
    motd.changes = vec![change("content", "old", "new")];
    post(&collector, &web1, &report("web-1", 1, vec![motd]));

    let mut failing = promise("file", SCRIPT, "failed", "site.policy:12:3");
    failing.error = Some(IMG.to_owned());
    let mut sql = promise("package", SQL, "repaired", "site.policy:20:5");
    sql.changes = vec![change("version", "1.0", SQL)];
    let mut long = promise("command", &long_promiser(), "skipped", "site.policy:30:1");
    long.error = Some(format!("long {}", "y".repeat(200_000)));
    let mut hostile = report("web-1", 2, vec![failing.clone(), sql, long]);
    if let Some(b) = hostile.bundle.as_mut() {
        b.name = "<b>site</b>".to_owned();
    }
    hostile.facts.sys.insert("evil".to_owned(), SCRIPT.into());
    hostile
        .facts
        .probes
        .insert("kernel".to_owned(), probe(Some("6.1".into()), None));
    hostile
        .facts
        .probes
        .insert("broken".to_owned(), probe(None, Some(IMG)));
    // Two-way verification: an extra account named like a script.
    hostile.extensions.insert(
        converge_format::report::EXTRA_EXTENSION.to_owned(),
        serde_json::json!({
            "counts": { "user": 1, "package": 1 },
            "entries": [
                { "type": "user", "name": SCRIPT, "action": "reported", "source": "site.policy:40" },
                { "type": "package", "name": "cvg-extra", "action": "refused", "source": "site.policy:41" },
            ],
        }),
    );
    post(&collector, &web1, &hostile);

    failing.error = Some("permission denied".to_owned());
    post(&collector, &web2, &report("web-2", 1, vec![failing]));
    post(&collector, &db1, &report("db-1", 1, vec![]));
    collector
}

fn promise_path(kind: &str, promiser: &str) -> String {
    let encode = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    format!(
        "/promises?type={}&promiser={}",
        encode(kind),
        encode(promiser)
    )
}

fn assert_security_headers(path: &str, page: &Answer) {
    let csp = page.header("content-security-policy");
    assert!(csp.starts_with("default-src 'self'"), "{path}: CSP {csp:?}");
    assert!(!csp.contains("unsafe-inline"), "{path}: CSP {csp:?}");
    assert_eq!(page.header("x-content-type-options"), "nosniff", "{path}");
    assert_eq!(page.header("referrer-policy"), "no-referrer", "{path}");
}

#[test]
fn every_page_answers_200_with_the_security_headers() {
    let c = &fleet(&[]);
    let reports_before = c.get("/api/v1/status").body;
    for path in [
        "/".to_owned(),
        "/?status=failed".to_owned(),
        "/?status=silent".to_owned(),
        "/?status=kept&page=2".to_owned(),
        "/hosts/web-1".to_owned(),
        "/hosts/never-1".to_owned(),
        promise_path("file", SCRIPT),
        promise_path("file", "/not/listed/anywhere"),
    ] {
        let page = c.get(&path);
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        assert_eq!(
            page.header("content-type"),
            "text/html; charset=utf-8",
            "{path}"
        );
        assert_security_headers(&path, &page);
        assert!(
            !page.body.contains("<script"),
            "{path} has a script element"
        );
    }
    let css = c.get("/static/style.css");
    assert_eq!(css.status, 200);
    assert!(css.header("content-type").starts_with("text/css"));
    assert!(css.body.contains(".status-failed"));
    // Reading pages stored nothing (no state change on GET).
    let after = c.get("/api/v1/status").body;
    let reports =
        |body: &str| serde_json::from_str::<serde_json::Value>(body).unwrap()["reports"].clone();
    assert_eq!(reports(&reports_before), reports(&after));
    assert_eq!(reports(&after), 4);
}

#[test]
fn an_unknown_host_or_a_bad_query_is_an_html_error_page() {
    let c = &fleet(&[]);
    for (path, status, says) in [
        ("/hosts/nobody", 404, "No such host"),
        (
            "/hosts/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
            404,
            "No such host",
        ),
        ("/promises", 400, "Which promise?"),
        ("/promises?type=file", 400, "Which promise?"),
        ("/?status=bogus", 400, "Unknown status"),
        ("/?page=0", 400, "Unknown page"),
    ] {
        let page = c.get(path);
        assert_eq!(page.status, status, "{path}: {}", page.body);
        assert!(
            page.header("content-type").starts_with("text/html"),
            "{path}"
        );
        assert_security_headers(path, &page);
        assert!(page.body.contains(says), "{path}: {}", page.body);
        assert!(!page.body.contains("<script"), "{path}: {}", page.body);
    }
}

#[test]
fn hostile_report_content_is_escaped_in_the_html() {
    let c = &fleet(&[]);
    let host = c.get("/hosts/web-1");
    assert_eq!(host.status, 200);
    for raw in ["<script>alert", "<img src=x", "<b>site</b>", "\"><img"] {
        assert!(!host.body.contains(raw), "raw {raw:?} in the host page");
    }
    assert!(
        host.body
            .contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
        "{}",
        host.body
    );
    assert!(host.body.contains("site.policy:12:3"));
    // The extra entries of the last report, escaped like the rest.
    assert!(host.body.contains("<table id=\"extra\">"), "{}", host.body);
    assert!(host.body.contains("cvg-extra"));
    assert!(host.body.contains("refused"));
    assert!(host
        .body
        .contains("2 entries the host has that no promise names"));
    // The long strings are shortened, the page stays small.
    assert!(host.body.contains("more characters)"));
    assert!(
        host.body.len() < 200_000,
        "host page is {} bytes",
        host.body.len()
    );
    let overview = c.get("/");
    assert!(!overview.body.contains("<script>alert") && !overview.body.contains("<img src"));
    let promise = c.get(&promise_path("package", SQL));
    assert!(
        promise.body.contains("&#39;; DROP TABLE reports; --"),
        "{}",
        promise.body
    );
    // The statement stayed a string: every report is still there.
    let status: serde_json::Value = serde_json::from_str(&c.get("/api/v1/status").body).unwrap();
    assert_eq!(status["reports"], 4);
}

#[test]
fn with_a_token_the_dashboard_needs_the_bearer_like_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let token = "0123456789abcdef0123456789abcdef";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let web1 = key(1);
    let c = Collector::start(
        &sqlite_url(dir.path()),
        &fleet_inventory(&[("web-1", &web1)]),
        &["--token-file", token_file.to_str().unwrap()],
    );
    let with = |path: &str, token: &str| {
        support::client()
            .get(format!("{}{path}", c.url))
            .header("authorization", format!("Bearer {token}"))
            .call()
            .unwrap()
            .status()
            .as_u16()
    };
    for path in [
        "/",
        "/hosts/web-1",
        "/promises?type=file&promiser=x",
        "/static/style.css",
    ] {
        let refused = c.get(path);
        assert_eq!(refused.status, 401, "{path} without the token");
        assert!(!refused.body.contains("web-1"), "{path} leaked the fleet");
        assert_eq!(with(path, "wrong-token-wrong-token"), 401, "{path}");
        assert_eq!(with(path, token), 200, "{path} with the token");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium"]
async fn chromium_shows_the_fleet_follows_the_links_and_runs_no_report_content() {
    support::browser::require_chromium();
    let collector = tokio::task::spawn_blocking(|| fleet(&[])).await.unwrap();
    let url = collector.url.clone();
    let b = Browser::start().await;

    // Overview: counts, hosts, silent hosts, the failing promise as text.
    b.client.goto(&format!("{url}/")).await.unwrap();
    b.screenshot("overview").await;
    assert_eq!(b.client.title().await.unwrap(), "Overview · Converge fleet");
    assert_eq!(b.text("#count-failed").await, "2");
    assert_eq!(b.text("#count-kept").await, "1");
    assert_eq!(b.text("#count-repaired").await, "0");
    assert_eq!(b.text("#count-never").await, "1");
    assert_eq!(b.text("#count-silent").await, "1");
    assert_eq!(
        b.texts("#hosts a.host").await,
        vec!["db-1", "never-1", "web-1", "web-2"]
    );
    assert_eq!(b.texts("#silent a.host").await, vec!["never-1"]);
    assert_eq!(b.texts("#failures .promiser").await, vec![SCRIPT]);
    assert_eq!(b.texts("#failures .source").await, vec!["site.policy:12:3"]);
    assert_eq!(b.texts("#failures td.number").await, vec!["2"]);
    let ages = b.texts("#hosts .age").await;
    assert_eq!(ages[1], "never");
    assert!(ages[2].ends_with(" s ago"), "{ages:?}");
    b.assert_inert().await;

    // The status filter.
    b.click_link(".counts a", "failed").await;
    assert_eq!(b.texts("#hosts a.host").await, vec!["web-1", "web-2"]);
    b.client.goto(&format!("{url}/")).await.unwrap();

    // Overview -> host.
    b.click_link("#hosts a.host", "web-1").await;
    assert!(b.url().await.ends_with("/hosts/web-1"), "{}", b.url().await);
    b.screenshot("host-web-1").await;
    assert_eq!(b.text("#host-name").await, "web-1");
    assert_eq!(b.text("#report-status").await, "failed");
    assert_eq!(b.text("#report-bundle").await, "<b>site</b> #42");
    assert_eq!(
        b.text("#report-summary").await,
        "20 kept, 1 repaired, 1 failed, 1 skipped"
    );
    assert_eq!(b.texts("#failures .promiser").await, vec![SCRIPT]);
    assert_eq!(b.texts("#failures .source").await, vec!["site.policy:12:3"]);
    assert_eq!(b.texts("#failures .error").await, vec![IMG]);
    let others = b.texts("#others .promiser").await;
    assert_eq!(others.len(), 2, "{others:?}");
    assert_eq!(others[0], SQL);
    assert!(
        others[1].ends_with("… (4605 more characters)"),
        "{}",
        &others[1][others[1].len() - 40..]
    );
    assert!(b
        .text("#others")
        .await
        .contains(&format!("version: 1.0 → {SQL}")));
    assert_eq!(b.count("#recent .recent-row").await, 2);
    let changes = b.texts("#changes .promiser").await;
    assert!(
        changes.contains(&"/etc/motd".to_owned()) && changes.contains(&SQL.to_owned()),
        "{changes:?}"
    );
    let sys = b.text("#sys-facts").await;
    assert!(sys.contains(&format!("evil {SCRIPT}")), "{sys}");
    assert!(sys.contains("os_family debian"), "{sys}");
    assert!(b
        .text("#probe-facts")
        .await
        .contains(&format!("broken (unknown) {IMG}")));
    assert!(b.text("#inventory-facts").await.contains("datacenter eu-1"));
    assert_eq!(b.text("#classes").await, "debian group_web");
    b.assert_inert().await;

    // Host -> promise: the hosts that fail it, the rest counted.
    b.click_link("#failures a.promise", "alert(1)").await;
    assert!(
        b.url().await.contains("/promises?type=file&promiser="),
        "{}",
        b.url().await
    );
    b.screenshot("promise-script").await;
    assert_eq!(b.text("#promise-kind").await, "file");
    assert_eq!(b.text("#promise-promiser").await, SCRIPT);
    assert_eq!(b.text("#count-failed").await, "2");
    assert_eq!(b.text("#count-kept_or_absent").await, "1");
    assert_eq!(b.text("#count-never").await, "1");
    assert_eq!(
        b.texts("#promise-hosts a.host").await,
        vec!["web-1", "web-2"]
    );
    assert_eq!(
        b.texts("#promise-hosts .error").await,
        vec![IMG.to_owned(), "permission denied".to_owned()]
    );
    b.assert_inert().await;

    // Promise -> the other host; overview -> the promise page directly.
    b.click_link("#promise-hosts a.host", "web-2").await;
    assert_eq!(b.text("#host-name").await, "web-2");
    b.click_link("#home", "Converge fleet").await;
    b.click_link("#failures a.promise", "alert(1)").await;
    assert_eq!(b.text("#promise-promiser").await, SCRIPT);

    // The SQL-looking promiser is a promise like any other.
    b.client.goto(&format!("{url}/hosts/web-1")).await.unwrap();
    b.click_link("#others a.promise", "DROP TABLE").await;
    assert_eq!(b.text("#promise-promiser").await, SQL);
    assert_eq!(b.text("#count-repaired").await, "1");
    assert_eq!(b.text("#count-kept_or_absent").await, "2");

    // An unknown host.
    b.client.goto(&format!("{url}/hosts/nobody")).await.unwrap();
    b.screenshot("not-found").await;
    assert_eq!(b.text("#error-title").await, "No such host");
    b.assert_inert().await;

    b.finish().await;
    let shot = support::browser::artefacts_dir().join("host-web-1.png");
    assert!(
        std::fs::metadata(&shot)
            .map(|m| m.len() > 1_000)
            .unwrap_or(false),
        "{shot:?}"
    );
}
