//! `policyc plan OLD NEW` end to end (issue 21, item 2; docs/plan.md): a
//! generated inventory with known per-host differences (three groups that
//! change differently, hosts that do not change, one host missing a fact),
//! the real `policyc` asserted on its grouping, counts, unified diffs,
//! unknowns, exit codes and JSON; facts from a directory of `policyvm
//! facts` files and from a real collector (which needs curl).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use ::converge::binary;
use ::converge::collector::Collector;
use ::converge::support::require_tool;
use converge_format::inventory::host_entry;
use converge_format::report::{
    BundleRef, Facts, ProbeFact, Report, SignedReport, Status, Summary, Timings, REPORT_FORMAT,
};
use ed25519_dalek::SigningKey;
use serde_json::Value;

/// Each host's report key: seeded by its place in [`HOSTS`].
fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// The fleet: name, group, datacenter (`None`: the inventory does not
/// know it).
const HOSTS: &[(&str, &str, Option<&str>)] = &[
    ("web-00", "web", Some("eu-1")),
    ("web-01", "web", Some("eu-1")),
    ("web-02", "web", Some("eu-2")),
    ("web-03", "web", Some("eu-2")),
    ("web-04", "web", Some("eu-1")),
    ("web-05", "web", Some("eu-1")),
    ("db-00", "db", Some("eu-1")),
    ("db-01", "db", Some("eu-2")),
    ("db-02", "db", Some("eu-1")),
    ("db-03", "db", Some("eu-1")),
    ("cache-00", "cache", Some("eu-1")),
    ("cache-01", "cache", Some("eu-2")),
    ("cache-02", "cache", Some("eu-1")),
    ("batch-00", "batch", Some("eu-1")),
    ("batch-01", "batch", Some("eu-1")),
    ("batch-02", "batch", Some("eu-2")),
    ("batch-03", "batch", Some("eu-1")),
    ("batch-04", "batch", Some("eu-1")),
    ("lost-01", "batch", None),
];

fn inventory() -> String {
    HOSTS
        .iter()
        .enumerate()
        .map(|(i, (name, group, dc))| {
            let mut extra = format!("groups = [\"{group}\"]\n");
            match dc {
                Some(dc) => extra.push_str(&format!(
                    "facts = {{ os_family = \"debian\", datacenter = \"{dc}\" }}"
                )),
                None => extra.push_str("facts = { os_family = \"debian\" }"),
            }
            host_entry(name, &key(i as u8 + 1).verifying_key(), None, None, &extra)
        })
        .collect()
}

const OLD: &str = r#"fact datacenter: string from file "/etc/converge/datacenter";
class us = facts.datacenter == "us-1";

bundle base {
  file "/etc/motd" { content = "managed by converge\n"; mode = 0o644; }
  file "/etc/dc" { content = "dc=${facts.datacenter}\n"; mode = 0o644; }
  when group_web {
    file "/etc/nginx/site.conf" { content = "server {\n  listen 80;\n  root /srv/www;\n}\n"; mode = 0o644; }
  }
  when group_db {
    package "postgresql" { state = installed; }
  }
  when group_cache {
    file "/etc/redis.conf" { content = "maxmemory 1gb\n"; mode = 0o644; }
  }
}

policy { base(); }
"#;

const NEW: &str = r#"fact datacenter: string from file "/etc/converge/datacenter";
class us = facts.datacenter == "us-1";

bundle base {
  file "/etc/motd" { content = "managed by converge\n"; mode = 0o644; }
  file "/etc/dc" { content = "dc=${facts.datacenter}\n"; mode = 0o644; }
  when group_web {
    file "/etc/nginx/site.conf" { content = "server {\n  listen 443 ssl;\n  root /srv/www;\n}\n"; mode = 0o644; }
    package "nginx" { state = installed; }
  }
  when group_db {
    file "/etc/postgresql/tuning.conf" { content = "shared_buffers = 2GB\n"; mode = 0o640; }
  }
  when group_cache {
    file "/etc/redis.conf" { content = "maxmemory 1gb\n"; mode = 0o600; }
  }
  when us {
    file "/etc/us-only" { content = "us\n"; mode = 0o644; }
  }
}

policy { base(); }
"#;

/// A temp dir with `old/site.policy`, `new/site.policy` (and `same/`, a
/// copy of old) and `inventory.toml`.
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (side, text) in [("old", OLD), ("new", NEW), ("same", OLD)] {
        std::fs::create_dir(dir.path().join(side)).unwrap();
        std::fs::write(dir.path().join(side).join("site.policy"), text).unwrap();
    }
    std::fs::write(dir.path().join("inventory.toml"), inventory()).unwrap();
    dir
}

fn plan(dir: &Path, args: &[&str]) -> Output {
    Command::new(binary("policyc"))
        .current_dir(dir)
        .args(["plan", "old", "new", "--inventory", "inventory.toml"])
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(out)))
}

/// The groups of a JSON plan: (hosts, actions as `ACTION TYPE PROMISER`).
fn groups(plan: &Value) -> Vec<(Vec<String>, Vec<String>)> {
    plan["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let hosts = g["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h.as_str().unwrap().to_owned())
                .collect();
            let changes = g["changes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| match c["action"].as_str().unwrap() {
                    "unknown" | "fails" => format!(
                        "{} {} {}",
                        c["action"].as_str().unwrap(),
                        c["needs"].as_str().unwrap_or("-"),
                        c["promise"].as_str().unwrap()
                    ),
                    action => format!(
                        "{action} {} {}",
                        c["type"].as_str().unwrap(),
                        c["promiser"].as_str().unwrap()
                    ),
                })
                .collect();
            (hosts, changes)
        })
        .collect()
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:02}")).collect()
}

#[test]
fn hosts_are_grouped_by_their_changes_with_counts_diffs_and_unknowns() {
    let dir = fixture();
    let out = plan(dir.path(), &["--hosts-shown", "3"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        shown.starts_with(
            "Plan: 19 hosts; 14 change (4 change sets, 1 with unknowns), 5 unchanged.\n"
        ),
        "{shown}"
    );
    let web = "\n6 hosts: web-00, web-01, web-02 and 3 more
  ~ file \"/etc/nginx/site.conf\"
      content:
        --- /etc/nginx/site.conf (old)
        +++ /etc/nginx/site.conf (new)
        @@ -1,4 +1,4 @@
         server {
        -  listen 80;
        +  listen 443 ssl;
           root /srv/www;
         }
  + package \"nginx\"
      state = installed
";
    assert!(shown.contains(web), "{shown}");
    let db = "\n4 hosts: db-00, db-01, db-02 and 1 more
  + file \"/etc/postgresql/tuning.conf\"
      content = \"shared_buffers = 2GB\\n\"
      mode = 0o640
  - package \"postgresql\"
";
    assert!(shown.contains(db), "{shown}");
    let cache = "\n3 hosts: cache-00, cache-01, cache-02
  ~ file \"/etc/redis.conf\"
      mode: 0o644 -> 0o600
";
    assert!(shown.contains(cache), "{shown}");
    // Never guessed: the host without a datacenter cannot be planned for
    // what needs it, in either policy.
    let lost = "\n1 host: lost-01
  ? unknown: needs fact facts.datacenter: file \"/etc/dc\" (both policies)
  ? unknown: needs fact facts.datacenter: file \"/etc/us-only\" (new policy)
";
    assert!(shown.contains(lost), "{shown}");
    assert!(
        shown.ends_with("\n5 unchanged: batch-00, batch-01, batch-02 and 2 more\n"),
        "{shown}"
    );

    let out = plan(dir.path(), &["--format", "json"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let shown = json(&out);
    assert_eq!(shown["format"], "converge-plan/1");
    assert_eq!(shown["hosts"], 19);
    assert_eq!(shown["changed"], 14);
    assert_eq!(
        shown["unchanged"]["hosts"],
        serde_json::json!(names("batch", 5))
    );
    assert_eq!(
        groups(&shown),
        vec![
            (
                names("web", 6),
                vec![
                    "change file /etc/nginx/site.conf".to_owned(),
                    "add package nginx".to_owned()
                ]
            ),
            (
                names("db", 4),
                vec![
                    "add file /etc/postgresql/tuning.conf".to_owned(),
                    "remove package postgresql".to_owned()
                ]
            ),
            (
                names("cache", 3),
                vec!["change file /etc/redis.conf".to_owned()]
            ),
            (
                vec!["lost-01".to_owned()],
                vec![
                    "unknown facts.datacenter file \"/etc/dc\"".to_owned(),
                    "unknown facts.datacenter file \"/etc/us-only\"".to_owned()
                ]
            ),
        ]
    );
    let site = &shown["groups"][0]["changes"][0]["attributes"][0];
    assert_eq!(site["name"], "content");
    assert!(
        site["diff"]
            .as_str()
            .unwrap()
            .contains("-  listen 80;\n+  listen 443 ssl;\n"),
        "{site}"
    );
}

#[test]
fn no_change_exits_0_and_says_so() {
    let dir = fixture();
    let out = Command::new(binary("policyc"))
        .current_dir(dir.path())
        .args([
            "plan",
            "old",
            "same/site.policy",
            "--inventory",
            "inventory.toml",
        ])
        .output()
        .unwrap();
    // lost-01's /etc/dc is unknown in both: it cannot be said unchanged.
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        shown
            .starts_with("Plan: 19 hosts; 1 change (1 change set, 1 with unknowns), 18 unchanged."),
        "{shown}"
    );
    // With the fact known (a facts file), nothing changes anywhere: exit 0.
    let facts = dir.path().join("facts");
    std::fs::create_dir(&facts).unwrap();
    std::fs::write(
        facts.join("lost-01.json"),
        r#"{"format":"converge-facts/1","facts":{"sys.hostname":"lost-01","facts.datacenter":"eu-3"},"classes":[]}"#,
    )
    .unwrap();
    let out = Command::new(binary("policyc"))
        .current_dir(dir.path())
        .args(["plan", "old", "same", "--inventory", "inventory.toml"])
        .args(["--facts-from", "facts"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Plan: 19 hosts; 0 change (0 change sets), 19 unchanged.\n\n19 unchanged: web-00, web-01, web-02, web-03, web-04, web-05, db-00, db-01, db-02, db-03 and 9 more\n"
    );
}

#[test]
fn facts_from_a_directory_override_the_inventory() {
    let dir = fixture();
    let facts = dir.path().join("facts");
    std::fs::create_dir(&facts).unwrap();
    let file = |host: &str, dc: &str| {
        format!(
            r#"{{"format":"converge-facts/1","facts":{{"sys.hostname":"{host}","sys.os_family":"debian","sys.ipv4":["10.0.0.1"],"sys.cpus":2,"facts.datacenter":"{dc}"}},"classes":["any"]}}"#
        )
    };
    // batch-00 turns out to be in the US; lost-01 says where it is; a file
    // for a host the inventory does not list is noted, not planned.
    std::fs::write(facts.join("batch-00.json"), file("batch-00", "us-1")).unwrap();
    std::fs::write(facts.join("lost-01.json"), file("lost-01", "eu-3")).unwrap();
    std::fs::write(facts.join("ghost-01.json"), file("ghost-01", "eu-1")).unwrap();
    let out = plan(dir.path(), &["--facts-from", "facts", "--format", "json"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let shown = json(&out);
    let groups = groups(&shown);
    assert_eq!(groups.len(), 4, "{groups:?}");
    assert_eq!(
        groups[3],
        (
            vec!["batch-00".to_owned()],
            vec!["add file /etc/us-only".to_owned()]
        )
    );
    let unchanged: Vec<String> = ["batch-01", "batch-02", "batch-03", "batch-04", "lost-01"]
        .map(str::to_owned)
        .to_vec();
    assert_eq!(shown["unchanged"]["hosts"], serde_json::json!(unchanged));
    assert!(
        shown["notes"][0]
            .as_str()
            .unwrap()
            .contains("ghost-01.json` names no host of the inventory"),
        "{shown}"
    );

    // A file that is not a facts document stops the plan (exit 66).
    std::fs::write(
        facts.join("batch-01.json"),
        "{\"format\":\"converge-run/1\"}",
    )
    .unwrap();
    let out = plan(dir.path(), &["--facts-from", "facts"]);
    assert_eq!(out.status.code(), Some(66), "{}", text(&out));
    assert!(
        text(&out).contains("batch-01.json` is not a `converge-facts/1` document"),
        "{}",
        text(&out)
    );
}

#[test]
fn bad_input_has_its_exit_code() {
    let dir = fixture();
    // A policy with errors: 1, saying which side.
    std::fs::write(
        dir.path().join("new/site.policy"),
        "bundle b { file \"/x\" { mode = \"rw\"; } }\npolicy { b(); }\n",
    )
    .unwrap();
    let out = plan(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("the new policy `new` has errors"),
        "{}",
        text(&out)
    );
    // A facts directory that is not there: 66.
    let dir = fixture();
    let out = plan(dir.path(), &["--facts-from", "missing"]);
    assert_eq!(out.status.code(), Some(66), "{}", text(&out));
    assert!(
        text(&out).contains("cannot read the facts directory"),
        "{}",
        text(&out)
    );
    // No inventory at all: 64, saying how to give one.
    let bare = tempfile::tempdir().unwrap();
    for side in ["old", "new"] {
        std::fs::write(
            bare.path().join(format!("{side}.policy")),
            "bundle b { file \"/etc/motd\" { content = \"hi\\n\"; } }\npolicy { b(); }\n",
        )
        .unwrap();
    }
    let out = Command::new(binary("policyc"))
        .current_dir(bare.path())
        .args(["plan", "old.policy", "new.policy"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    assert!(text(&out).contains("--inventory FILE"), "{}", text(&out));
    // A missing inventory file: 66.
    let out = Command::new(binary("policyc"))
        .current_dir(dir.path())
        .args(["plan", "old", "new", "--inventory", "nope.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(66), "{}", text(&out));
}

#[test]
fn a_secret_is_named_changed_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory.toml");
    std::fs::write(
        &inventory,
        host_entry(
            "app-01",
            &key(1).verifying_key(),
            Some("age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj"),
            None,
            "",
        ),
    )
    .unwrap();
    // The same secret text in both trees, but the encrypted file differs
    // in the new one: its version changed, its text is never read.
    for (side, armor) in [("old", "one"), ("new", "two")] {
        let root = dir.path().join(side);
        std::fs::create_dir_all(root.join("secrets")).unwrap();
        std::fs::write(
            root.join("secrets/db.age"),
            format!(
                "-----BEGIN AGE ENCRYPTED FILE-----\n{armor}\n-----END AGE ENCRYPTED FILE-----\n"
            ),
        )
        .unwrap();
        std::fs::write(
            root.join("site.policy"),
            "let db: secret = secret(\"secrets/db.age\");\nbundle app {\n  file \"/etc/app/db.conf\" { content = \"password=${db}\\n\"; mode = 0o600; }\n}\npolicy { app(); }\n",
        )
        .unwrap();
    }
    let out = Command::new(binary("policyc"))
        .current_dir(dir.path())
        .args(["plan", "old", "new", "--inventory", "inventory.toml"])
        .output()
        .unwrap();
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains("  ~ file \"/etc/app/db.conf\"\n      content: <secret db> changed\n"),
        "{shown}"
    );
    assert!(!shown.contains("one") && !shown.contains("two"), "{shown}");
}

/// Uploads a signed report of `host` with these probe facts.
fn post(
    collector: &Collector,
    dir: &Path,
    host: &str,
    seed: u8,
    probes: &[(&str, Result<&str, &str>)],
) {
    let at = converge_format::stamp::time::format_utc(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    );
    let mut sys = BTreeMap::new();
    sys.insert("hostname".to_owned(), Value::from(host));
    sys.insert("os_family".to_owned(), Value::from("debian"));
    let probes = probes
        .iter()
        .map(|(name, value)| {
            let fact = match value {
                Ok(v) => ProbeFact {
                    value: Some(Value::from(*v)),
                    error: None,
                },
                Err(e) => ProbeFact {
                    value: None,
                    error: Some((*e).to_owned()),
                },
            };
            ((*name).to_owned(), fact)
        })
        .collect();
    let report = Report {
        format: REPORT_FORMAT.into(),
        host: host.into(),
        run_id: format!("{:032x}", u128::from(seed) + 1),
        sequence: 1,
        started_at: at.clone(),
        finished_at: at,
        status: Status::Kept,
        bundle: Some(BundleRef {
            name: "site".into(),
            serial: 1,
            digest: "ab".repeat(32),
        }),
        summary: Summary {
            kept: 3,
            passes: 1,
            converged: true,
            ..Summary::default()
        },
        promises: vec![],
        owed_notifications: vec![],
        facts: Facts {
            sys,
            probes,
            classes: vec!["debian".into()],
        },
        timings: Timings::default(),
        error: None,
        truncated: false,
        extensions: BTreeMap::new(),
    };
    let body = dir.join(format!("{host}.upload.json"));
    std::fs::write(
        &body,
        serde_json::to_vec(&SignedReport::sign(&report, &key(seed))).unwrap(),
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
        .arg(format!("{}/api/v1/reports", collector.url))
        .output()
        .unwrap();
    assert!(out.status.success(), "upload of {host}: {}", text(&out));
}

fn seed_of(host: &str) -> u8 {
    HOSTS.iter().position(|(h, _, _)| *h == host).unwrap() as u8 + 1
}

#[test]
#[ignore = "needs curl"]
fn facts_from_a_real_collector() {
    require_tool("curl", "curl");
    let dir = fixture();
    let collector = Collector::start(&dir.path().join("inventory.toml"));
    // batch-01 reports that it is in the US; lost-01 reports that its
    // datacenter probe failed (the fact stays unknown, with that reason).
    post(
        &collector,
        dir.path(),
        "batch-01",
        seed_of("batch-01"),
        &[("datacenter", Ok("us-1"))],
    );
    post(
        &collector,
        dir.path(),
        "lost-01",
        seed_of("lost-01"),
        &[("datacenter", Err("exit status 1"))],
    );
    let out = plan(
        dir.path(),
        &["--facts-from", &collector.url, "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let shown = json(&out);
    let groups = groups(&shown);
    assert!(
        groups.contains(&(
            vec!["batch-01".to_owned()],
            vec!["add file /etc/us-only".to_owned()]
        )),
        "{groups:?}"
    );
    let lost = shown["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["hosts"][0] == "lost-01")
        .unwrap();
    assert!(
        lost["changes"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("its probe failed on the host: exit status 1"),
        "{lost}"
    );

    // A collector that is not there: 69, as `policyc fleet`.
    let out = plan(dir.path(), &["--facts-from", "http://127.0.0.1:1"]);
    assert_eq!(out.status.code(), Some(69), "{}", text(&out));
}
