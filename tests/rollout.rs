//! Staged rollout end to end (issue 21 item 4, docs/rollout.md): `policyc
//! publish` into a directory served on loopback, 40 enrolled sandbox hosts
//! running `policyvm agent` against it and uploading to a real
//! `converge-collector`, and `policyc fleet rollout` reading the collector.
//!
//! Serial 1 goes to everyone; serial 3 to 5% of the hosts (the set is
//! computed here from the documented bucket formula, independently of the
//! VM), the same hosts on a second run; `--promote 100%` gives it to all;
//! `--halt` brings serial 1's policy back to everyone under serial 4. One
//! canary is planted to fail on serial 3, so the collector's failure rate
//! of serial 3 is not that of serial 1. Every root and state directory is
//! a temporary directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::{Command, Output};

use converge::binary;
use converge::collector::Collector;
use converge::http::serve_dir;
use serde_json::Value;
use sha2::{Digest, Sha256};

const HOSTS: usize = 40;

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The policy of `serial`: the motd says which policy a host runs; serial
/// 3 also manages `/srv/app`, which the planted host has as a file.
fn policy(serial: u64) -> String {
    let app = if serial == 3 {
        "  directory \"/srv\" { mode = 0o755; }\n  directory \"/srv/app\" { mode = 0o755; }\n"
    } else {
        ""
    };
    format!(
        "bundle site {{\n  directory \"/etc\" {{ mode = 0o755; }}\n  \
         file \"/etc/motd\" {{ content = \"policy {serial}\\n\"; }}\n{app}}}\npolicy {{ site(); }}\n"
    )
}

/// The bucket of `host` in the rollout of `site` to `serial`, as
/// docs/rollout.md defines it (written out here, not the VM's function).
fn bucket(serial: u64, host: &str) -> u64 {
    let digest = Sha256::digest(format!("converge-rollout\nsite\n{serial}\n{host}\n").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first) % 100
}

/// The publisher: a key, a publish directory, a loopback hub serving it.
struct Hub {
    work: tempfile::TempDir,
    pubdir: PathBuf,
    trust: PathBuf,
    server: converge::http::Scripted,
}

impl Hub {
    fn start() -> Hub {
        let work = tempfile::tempdir().unwrap();
        let pubdir = work.path().join("srv");
        std::fs::create_dir(&pubdir).unwrap();
        let trust = converge::support::hub_keys(work.path());
        Hub {
            server: serve_dir(pubdir.clone()),
            work,
            pubdir,
            trust,
        }
    }

    /// `policyc publish` with these arguments (a policy file is written
    /// for `Some(serial)`).
    fn publish(&self, serial: Option<u64>, extra: &[&str]) -> Output {
        let mut cmd = Command::new(binary("policyc"));
        cmd.arg("publish");
        if let Some(serial) = serial {
            let file = self.work.path().join("site.policy");
            std::fs::write(&file, policy(serial)).unwrap();
            cmd.arg(&file).args(["--serial", &serial.to_string()]);
        }
        cmd.arg("--key")
            .arg(self.work.path().join("keys/hub.key"))
            .arg("--dir")
            .arg(&self.pubdir)
            .args(["--name", "site"])
            .args(extra)
            .output()
            .unwrap()
    }

    fn published(&self, serial: Option<u64>, extra: &[&str]) -> String {
        let out = self.publish(serial, extra);
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn stamp(&self) -> String {
        std::fs::read_to_string(self.pubdir.join("site.stamp")).unwrap()
    }
}

struct Host {
    name: String,
    root: PathBuf,
    config: PathBuf,
}

impl Host {
    /// A sandbox host enrolled as `name`; its inventory entry.
    fn enroll(hub: &Hub, name: &str) -> (Host, String) {
        let dir = hub.work.path().join(name);
        let root = dir.join("root");
        std::fs::create_dir_all(&root).unwrap();
        let out = Command::new(binary("policyvm"))
            .args(["enroll", "--name", name, "--root"])
            .arg(&root)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let host = Host {
            name: name.to_owned(),
            root,
            config: dir.join("agent.toml"),
        };
        (host, String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn configure(&self, hub: &Hub, collector: &str) {
        std::fs::write(
            &self.config,
            format!(
                "hubs = [{:?}]\nname = \"site\"\ntrust = {:?}\nroot = {:?}\ntimeout = \"3s\"\n\
                 collectors = [{collector:?}]\nupload_timeout = \"3s\"\n",
                hub.server.url(),
                hub.trust,
                self.root,
            ),
        )
        .unwrap();
    }

    fn agent(&self) -> Output {
        Command::new(binary("policyvm"))
            .args(["agent", "--no-splay", "--config"])
            .arg(&self.config)
            .output()
            .unwrap()
    }

    fn report(&self) -> Value {
        let path = self.root.join("var/lib/converge/reports/last.json");
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    fn motd(&self) -> String {
        std::fs::read_to_string(self.root.join("etc/motd")).unwrap_or_default()
    }

    fn mark(&self) -> String {
        std::fs::read_to_string(self.root.join("var/lib/converge/serial")).unwrap()
    }
}

/// What one host ran in one agent cycle.
#[derive(Debug, PartialEq, Eq)]
struct Ran {
    serial: u64,
    /// `agent.pull.rollout.selected`; `None` without a rollout.
    selected: Option<bool>,
    motd: String,
}

/// Runs every host's agent (four at a time) and reads what each ran.
fn cycle(hosts: &[Host], failing: &str) -> Vec<Ran> {
    std::thread::scope(|scope| {
        let chunks: Vec<_> = hosts
            .chunks(HOSTS.div_ceil(4))
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|h| {
                            let out = h.agent();
                            let report = h.report();
                            let serial = report["bundle"]["serial"].as_u64();
                            // Only the planted host may fail, and only on
                            // serial 3.
                            let failed_here = h.name == failing && serial == Some(3);
                            assert_eq!(
                                out.status.code(),
                                Some(if failed_here { 1 } else { 0 }),
                                "{}: {}",
                                h.name,
                                text(&out)
                            );
                            Ran {
                                serial: serial.unwrap_or_else(|| panic!("{report:#}")),
                                selected: report["agent"]["pull"]["rollout"]["selected"].as_bool(),
                                motd: h.motd(),
                            }
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        chunks.into_iter().flat_map(|c| c.join().unwrap()).collect()
    })
}

/// The problems of `value` against the schema `docs/schemas/FILE`.
fn schema_problems(file: &str, value: &Value) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/schemas")
        .join(file);
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::draft202012::options().build(&schema).unwrap();
    validator
        .iter_errors(value)
        .map(|e| e.to_string())
        .collect()
}

fn fleet_rollout(collector: &str, json: bool) -> String {
    let mut cmd = Command::new(binary("policyc"));
    cmd.args(["fleet", "rollout", "--collector", collector]);
    if json {
        cmd.args(["--format", "json"]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn five_percent_then_everyone_then_halt_over_forty_sandbox_hosts() {
    let hub = Hub::start();
    let mut hosts = Vec::new();
    let mut inventory = String::new();
    for i in 0..HOSTS {
        let (host, entry) = Host::enroll(&hub, &format!("host-{i:02}"));
        hosts.push(host);
        inventory.push_str(&entry);
    }
    let inventory_path = hub.work.path().join("inventory.toml");
    std::fs::write(&inventory_path, &inventory).unwrap();
    let collector = Collector::start(&inventory_path);
    for host in &hosts {
        host.configure(&hub, &collector.url);
    }
    // The hosts in 5% of the rollout to serial 3, by the formula. Serial 3
    // is chosen so that the 5% of these 40 names is not empty (three).
    let canaries: Vec<&str> = hosts
        .iter()
        .map(|h| h.name.as_str())
        .filter(|name| bucket(3, name) < 5)
        .collect();
    assert!(canaries.len() >= 2, "{canaries:?}");
    let failing = canaries[0];
    let planted = hosts.iter().find(|h| h.name == failing).unwrap();
    std::fs::create_dir_all(planted.root.join("srv")).unwrap();
    std::fs::write(planted.root.join("srv/app"), "not a directory\n").unwrap();

    // Serial 1 to everyone: a plain stamp, no rollout in any report.
    hub.published(Some(1), &[]);
    assert!(hub.stamp().starts_with("converge-stamp 1\n"));
    for ran in cycle(&hosts, failing) {
        assert_eq!(
            ran,
            Ran {
                serial: 1,
                selected: None,
                motd: "policy 1\n".into()
            }
        );
    }

    // Serial 3 to 5%: exactly the canaries take it, the same ones again.
    let said = hub.published(Some(3), &["--rollout", "5%"]);
    assert!(
        said.contains("rollout to 5%, the other hosts stay on serial 1"),
        "{said}"
    );
    let stamp = hub.stamp();
    assert!(stamp.starts_with("converge-stamp 2\n"), "{stamp}");
    assert!(
        stamp.contains("\nserial 3\n") && stamp.contains("\nprevious 1\n"),
        "{stamp}"
    );
    assert!(stamp.contains("\nrollout 5%\n"), "{stamp}");
    for serial in [1, 3] {
        assert!(hub
            .pubdir
            .join(format!("site.bundles/{serial}.bundle"))
            .is_file());
    }
    let expected: Vec<Ran> = hosts
        .iter()
        .map(|h| {
            let inside = canaries.contains(&h.name.as_str());
            Ran {
                serial: if inside { 3 } else { 1 },
                selected: Some(inside),
                motd: format!("policy {}\n", if inside { 3 } else { 1 }),
            }
        })
        .collect();
    assert_eq!(cycle(&hosts, failing), expected);
    assert_eq!(
        cycle(&hosts, failing),
        expected,
        "the same hosts on a re-run"
    );
    for h in &hosts {
        let rollout = &h.report()["agent"]["pull"]["rollout"];
        assert_eq!(
            rollout["bucket"].as_u64(),
            Some(bucket(3, &h.name)),
            "{rollout}"
        );
        assert_eq!(rollout["previous_serial"], 1);
        assert_eq!(rollout["new_serial"], 3);
    }

    // Both reports carry the rollout, as their schemas say.
    for h in &hosts {
        let problems = schema_problems("converge-run-1.schema.json", &h.report());
        assert!(problems.is_empty(), "{}: {problems:?}", h.name);
    }
    let out = Command::new(binary("policyc"))
        .args([
            "fleet",
            "host",
            canaries[1],
            "--format",
            "json",
            "--collector",
        ])
        .arg(&collector.url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let uploaded = &serde_json::from_slice::<Value>(&out.stdout).unwrap()["last_report"];
    let problems = schema_problems("converge-report-1.schema.json", uploaded);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(uploaded["bundle"]["serial"], 3);
    assert_eq!(uploaded["extensions"]["rollout"]["selected"], true);
    assert_eq!(uploaded["extensions"]["rollout"]["who"], "5%");

    // The collector: the serial of every host, the failure rate per serial.
    let view: Value = serde_json::from_str(&fleet_rollout(&collector.url, true)).unwrap();
    assert_eq!(view["format"], "converge-fleet/1");
    let serials: Vec<(u64, u64, u64)> = view["serials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["serial"].as_u64().unwrap(),
                s["hosts"].as_u64().unwrap(),
                s["failed"].as_u64().unwrap(),
            )
        })
        .collect();
    let n = canaries.len() as u64;
    assert_eq!(serials, [(3, n, 1), (1, HOSTS as u64 - n, 0)]);
    let rate = view["serials"][0]["failure_rate"].as_f64().unwrap();
    assert!((rate - 1.0 / n as f64).abs() < 1e-9, "{rate}");
    for host in view["hosts"].as_array().unwrap() {
        let name = host["name"].as_str().unwrap();
        let on = if canaries.contains(&name) { 3 } else { 1 };
        assert_eq!(host["serial"], on, "{host}");
    }
    let table = fleet_rollout(&collector.url, false);
    assert!(table.contains("40 hosts on 2 serials"), "{table}");
    assert!(
        table.contains(&format!(
            "3       {n}      1       {:.1}%",
            100.0 / n as f64
        )),
        "{table}"
    );
    assert!(
        table.contains(&format!("{failing}  3       failed")),
        "{table}"
    );

    // --promote 100%: a plain stamp for serial 3, everyone takes it.
    let said = hub.published(None, &["--promote", "100%"]);
    assert!(said.contains("to every host"), "{said}");
    assert!(hub.stamp().starts_with("converge-stamp 1\n"));
    assert!(hub.stamp().contains("\nserial 3\n"));
    for (h, ran) in hosts.iter().zip(cycle(&hosts, failing)) {
        assert_eq!((ran.serial, ran.selected), (3, None), "{}", h.name);
        assert_eq!(ran.motd, "policy 3\n");
    }

    // --halt: serial 1's policy again, for everyone, under serial 4; the
    // rollback mark of every host moves up to 4, never back to 1.
    let said = hub.published(None, &["--halt", "--serial", "4"]);
    assert!(
        said.contains("every host goes to serial 4, serial 1's policy"),
        "{said}"
    );
    for (h, ran) in hosts.iter().zip(cycle(&hosts, failing)) {
        assert_eq!(
            ran,
            Ran {
                serial: 4,
                selected: None,
                motd: "policy 1\n".into()
            },
            "{}",
            h.name
        );
        assert_eq!(h.mark(), "4\n");
    }
    // A second halt has nothing to halt.
    let out = hub.publish(None, &["--halt"]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    assert!(text(&out).contains("no rollout to halt"), "{}", text(&out));
}

/// A publish directory with serial 1 published, and an inventory with
/// groups, for the command line's own checks (no agents).
fn hub_with_inventory() -> (Hub, PathBuf) {
    let hub = Hub::start();
    hub.published(Some(1), &[]);
    let key = "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
    let inventory = hub.work.path().join("fleet.toml");
    let mut text = String::new();
    for (name, groups) in [
        ("web-01", "\"canary\", \"web\""),
        ("web-02", "\"web\""),
        ("db-01", "\"canary\""),
    ] {
        text.push_str(&format!(
            "[[host]]\nname = \"{name}\"\nreport_key = \"{key}\"\ngroups = [{groups}]\n"
        ));
    }
    std::fs::write(&inventory, text).unwrap();
    (hub, inventory)
}

#[test]
fn groups_become_host_names_in_the_signed_stamp() {
    let (hub, inventory) = hub_with_inventory();
    let inv = inventory.to_str().unwrap();
    hub.published(Some(2), &["--rollout", "groups=canary", "--inventory", inv]);
    let stamp = hub.stamp();
    assert!(stamp.contains("\nrollout hosts=db-01,web-01\n"), "{stamp}");
    // Widening: more groups keep every host already in.
    hub.published(
        None,
        &["--promote", "groups=canary,web", "--inventory", inv],
    );
    assert!(hub
        .stamp()
        .contains("\nrollout hosts=db-01,web-01,web-02\n"));
    // The stamp is what a host verifies: it opens with the publisher's key.
    let trusted = converge_format::bundle::keys::load_trust_dir(&hub.trust).unwrap();
    let opened = converge_format::stamp::Stamp::open(hub.stamp().as_bytes(), &trusted).unwrap();
    let rollout = opened.rollout.unwrap();
    assert_eq!((opened.serial, rollout.previous.serial), (2, 1));
}

#[test]
fn wrong_rollouts_are_refused_with_what_to_do() {
    let (hub, inventory) = hub_with_inventory();
    let inv = inventory.to_str().unwrap();
    let refused = |serial: Option<u64>, args: &[&str], says: &str| {
        let before = hub.stamp();
        let out = hub.publish(serial, args);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(hub.stamp(), before, "{args:?} changed the stamp");
    };
    refused(None, &["--promote", "50%"], "no rollout is in progress");
    refused(None, &["--halt"], "no rollout to halt");
    refused(Some(2), &["--rollout", "150%"], "0% to 100%");
    refused(Some(2), &["--rollout=-1%"], "0% to 100%");
    refused(Some(2), &["--rollout", "half"], "a percentage (`5%`)");
    refused(
        Some(2),
        &["--rollout", "groups=canry", "--inventory", inv],
        "no group \"canry\"; did you mean \"canary\"?",
    );
    refused(
        Some(2),
        &["--rollout", "hosts=web-1", "--inventory", inv],
        "no host \"web-1\"; did you mean \"web-01\"?",
    );
    refused(
        Some(2),
        &["--rollout", "groups=canary"],
        "needs the inventory",
    );
    refused(
        None,
        &["--promote", "50%", "--serial", "9"],
        "cannot be used with",
    );
    // More names than a host reads in a stamp (64 KiB).
    let many: Vec<String> = (0..3000)
        .map(|i| format!("a-rather-long-host-name-{i:04}"))
        .collect();
    let many = format!("hosts={}", many.join(","));
    refused(
        Some(2),
        &["--rollout", &many],
        "over the 65536 bytes hosts read",
    );
    hub.published(Some(2), &["--rollout", "10%"]);
    refused(Some(3), &["--rollout", "5%"], "is in progress");
    refused(None, &["--promote", "5%"], "would narrow");
    refused(
        None,
        &["--promote", "hosts=web-01"],
        "promote it the same way",
    );
    refused(None, &["--promote", "101%"], "0% to 100%");
    // A fresh directory has nothing to roll out from.
    let empty = Hub::start();
    let out = empty.publish(Some(1), &["--rollout", "5%"]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    assert!(text(&out).contains("publish without --rollout first"));
    assert!(!empty.pubdir.join("site.stamp").exists());
}

/// The directory a publish before rollouts left (`site.bundle` and
/// `site.stamp` only) still rolls out: the previous release is taken from
/// `site.bundle`, checked against the stamp.
#[test]
fn a_publish_directory_of_the_old_layout_rolls_out() {
    let hub = Hub::start();
    hub.published(Some(1), &[]);
    assert!(!hub.pubdir.join("site.bundles").exists());
    let old = std::fs::read(hub.pubdir.join("site.bundle")).unwrap();
    hub.published(Some(2), &["--rollout", "hosts=web-01"]);
    assert_eq!(
        std::fs::read(hub.pubdir.join("site.bundles/1.bundle")).unwrap(),
        old
    );
    // Its bundle altered: refused, nothing written.
    let other = Hub::start();
    other.published(Some(1), &[]);
    std::fs::write(other.pubdir.join("site.bundle"), b"CNVGBNDL garbage").unwrap();
    let out = other.publish(Some(2), &["--rollout", "5%"]);
    assert_eq!(out.status.code(), Some(66), "{}", text(&out));
    assert!(
        text(&out).contains("the bundle of serial 1 is neither"),
        "{}",
        text(&out)
    );
    assert!(other.stamp().starts_with("converge-stamp 1\n"));
}
