//! Issue 19 end to end, every part real: two enrolled sandbox hosts run
//! `policyvm agent` with one bundle whose `watch` promise records `/etc/app`
//! and whose `neighbours` promise makes each host watch the other, both
//! uploading to a real `converge-collector` on loopback.
//!
//! `host-b`'s watched file is modified (the change is reported), then its
//! local history is edited and later truncated (an intruder covering his
//! tracks): `host-b` itself reports the break, the collector flags the
//! host as tampered, and `host-a`, which kept the head it saw, raises its
//! `on_rewrite` class and reports the rewrite.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use converge::binary;
use converge::collector::Collector;
use converge::http::serve_dir;
use serde_json::Value;

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The collector's tampered-hosts view.
fn tampered(collector: &Collector) -> Value {
    let mut answer = ureq::get(format!("{}/api/v1/tampered", collector.url))
        .call()
        .unwrap();
    serde_json::from_str(&answer.body_mut().read_to_string().unwrap()).unwrap()
}

const POLICY: &str = "\
class app_changed;
class neighbour_rewrote;
bundle site {
  watch \"/etc/app\" { recurse = true; on_changed = app_changed; }
  neighbours \"fleet\" { hosts = neighbours(inventory, 1); on_rewrite = neighbour_rewrote; }
  when neighbour_rewrote { file \"/etc/neighbour-alarm\" { content = \"rewritten\\n\"; mode = 0o644; } }
}
policy { site(); }
";

/// One enrolled sandbox host.
struct Host {
    root: PathBuf,
    config: PathBuf,
}

impl Host {
    fn enroll(w: &Path, name: &str) -> (Host, String) {
        let root = w.join(name).join("root");
        std::fs::create_dir_all(root.join("etc/app")).unwrap();
        std::fs::write(root.join("etc/hostname"), format!("{name}\n")).unwrap();
        std::fs::write(root.join("etc/app/app.conf"), "port = 80\n").unwrap();
        let out = Command::new(binary("policyvm"))
            .args(["enroll", "--name", name, "--root"])
            .arg(&root)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let entry = String::from_utf8(out.stdout).unwrap();
        let config = w.join(name).join("agent.toml");
        (Host { root, config }, entry)
    }

    fn configure(&self, hub: &str, trust: &Path, collector: &str) {
        std::fs::write(
            &self.config,
            format!(
                "hubs = [{hub:?}]\nname = \"site\"\ntrust = {trust:?}\nroot = {:?}\n\
                 timeout = \"3s\"\ncollectors = [{collector:?}]\nupload_timeout = \"5s\"\n",
                self.root
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

    fn state(&self) -> PathBuf {
        self.root.join("var/lib/converge")
    }

    fn last(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.state().join("reports/last.json")).unwrap())
            .unwrap()
    }

    fn history(&self) -> PathBuf {
        self.state().join("watch/history")
    }
}

fn verdict(report: &Value, host: &str) -> String {
    report["neighbours"]
        .as_array()
        .unwrap_or_else(|| panic!("no neighbours in {report:#}"))
        .iter()
        .find(|e| e["host"] == host)
        .unwrap_or_else(|| panic!("{host} not watched in {report:#}"))["verdict"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn outcome(report: &Value, kind: &str) -> Value {
    report["promises"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} promise in {report:#}"))
        .clone()
}

#[test]
fn changes_rewrites_and_truncations_are_seen_by_the_host_the_collector_and_its_neighbour() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let (a, a_entry) = Host::enroll(w, "host-a");
    let (b, b_entry) = Host::enroll(w, "host-b");

    let tree = w.join("policy");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("inventory.toml"), a_entry + &b_entry).unwrap();
    std::fs::write(tree.join("site.policy"), POLICY).unwrap();
    let keys = w.join("keys");
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
    let hub = serve_dir(pubdir);
    let collector = Collector::start(&tree.join("inventory.toml"));
    for host in [&a, &b] {
        host.configure(&hub.url(), &trust, &collector.url);
    }

    // Baselines, and each host learns whom to watch, then fetches.
    for _ in 0..2 {
        for host in [&b, &a] {
            let out = host.agent();
            assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        }
    }
    assert_eq!(verdict(&a.last(), "host-b"), "first");

    // A change on host-b is reported there, and its history only grows.
    std::fs::write(b.root.join("etc/app/app.conf"), "port = 8080\n").unwrap();
    let out = b.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report_b = b.last();
    let watch = outcome(&report_b, "watch");
    assert_eq!(watch["outcome"], "changed", "{watch:#}");
    assert!(
        report_b["watch"]["changes"]
            .to_string()
            .contains("app.conf"),
        "{report_b:#}"
    );
    let out = a.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(verdict(&a.last(), "host-b"), "extends");
    assert_eq!(tampered(&collector)["hosts"], Value::Array(vec![]));
    assert!(!a.root.join("etc/neighbour-alarm").exists());

    // An intruder edits host-b's history: host-b reports the break and
    // rebuilds, the collector flags it, host-a raises its alarm.
    let history = std::fs::read_to_string(b.history()).unwrap();
    let edited = history.replacen("\"time\":", "\"time\":1", 1);
    assert_ne!(edited, history);
    std::fs::write(b.history(), edited).unwrap();
    let out = b.agent();
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    let error = outcome(&b.last(), "watch").to_string();
    assert!(error.contains("history broken"), "{error}");
    // The rebuilt history keeps only the records before the edit and a
    // break record: shorter than, or diverging from, what was seen.
    let alarms = ["rewritten", "backwards"];
    let flagged = tampered(&collector);
    assert_eq!(flagged["hosts"][0]["name"], "host-b", "{flagged:#}");
    let said = flagged["hosts"][0]["verdict"].as_str().unwrap_or_default();
    assert!(alarms.contains(&said), "{flagged:#}");
    let out = a.agent();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let seen = verdict(&a.last(), "host-b");
    assert!(alarms.contains(&seen.as_str()), "{seen}");
    assert_eq!(
        std::fs::read_to_string(a.root.join("etc/neighbour-alarm")).unwrap(),
        "rewritten\n"
    );

    // Truncating the history is seen too: by host-b at its next run, and
    // by the collector as a history that does not extend the last
    // consistent head. Another change first, so there is a record to cut.
    std::fs::write(b.root.join("etc/app/app.conf"), "port = 8443\n").unwrap();
    let out = b.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(outcome(&b.last(), "watch")["outcome"], "changed");
    let history = std::fs::read_to_string(b.history()).unwrap();
    assert!(history.lines().count() >= 2, "{history}");
    let first: Vec<&str> = history.lines().take(1).collect();
    std::fs::write(b.history(), first.join("\n") + "\n").unwrap();
    let out = b.agent();
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    let error = outcome(&b.last(), "watch").to_string();
    assert!(error.contains("history broken"), "{error}");
    let flagged = tampered(&collector);
    assert_eq!(flagged["hosts"][0]["name"], "host-b", "{flagged:#}");
    drop(hub);
}
