//! The inventory end to end (LANGUAGE.md section 16, docs/fleet.md): the
//! real `policyc` reads `inventory.toml` at the root of the policy tree (or
//! `--inventory FILE`), refuses a `host_` or `group_` class it does not
//! define, and compiles each group into a class over its members' `host_`
//! classes, which the real `policyvm` evaluates from each host's own
//! hostname: a group's promise applies on a member's sandbox root and not
//! on another host's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ::converge::binary;
use ::converge::support::policyc_build;
use converge_format::inventory::format_report_key;

fn key(seed: u8) -> String {
    format_report_key(&ed25519_dalek::SigningKey::from_bytes(&[seed; 32]).verifying_key())
}

/// web-01 and web-02 in group `web`, db-01 in group `db`.
fn inventory() -> String {
    format!(
        "[[host]]\nname = \"web-01\"\nreport_key = \"{}\"\ngroups = [\"web\"]\n\n\
         [[host]]\nname = \"web-02\"\nreport_key = \"{}\"\ngroups = [\"web\"]\n\n\
         [[host]]\nname = \"db-01\"\nreport_key = \"{}\"\ngroups = [\"db\"]\n",
        key(1),
        key(2),
        key(3)
    )
}

const SITE: &str = r#"bundle site {
  when group_web { file "/etc/role" { content = "web\n"; } }
  when host_db_01 { file "/etc/role" { content = "db\n"; } }
}
policy { site(); }
"#;

/// A policy tree in a temp dir: `site.policy`, and `inventory.toml` when
/// given.
fn tree(policy: &str, inventory: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("site.policy"), policy).unwrap();
    if let Some(text) = inventory {
        std::fs::write(dir.path().join("inventory.toml"), text).unwrap();
    }
    dir
}

fn policyc(args: &[&str], files: &[&Path]) -> Output {
    Command::new(binary("policyc"))
        .args(args)
        .args(files)
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

fn fresh_root(host: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(root.path().join("etc/hostname"), format!("{host}\n")).unwrap();
    std::fs::write(root.path().join("etc/os-release"), "ID=debian\n").unwrap();
    root
}

/// Builds `site.policy` of `dir` with a fresh key; the bundle and the
/// trust directory.
fn build(dir: &Path, extra: &[&str]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let built = policyc_build(&dir.join("site.policy"), extra);
    (built.work, built.bundle, built.trust)
}

/// What `/etc/role` holds on a fresh root of `host` after a run.
fn role_on(bundle: &Path, trust: &Path, host: &str) -> Option<String> {
    let root = fresh_root(host);
    let out = Command::new(binary("policyvm"))
        .arg("run")
        .arg(bundle)
        .arg("--trust")
        .arg(trust)
        .arg("--root")
        .arg(root.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    std::fs::read_to_string(root.path().join("etc/role")).ok()
}

#[test]
fn a_group_class_applies_on_its_members_and_nowhere_else() {
    let dir = tree(SITE, Some(&inventory()));
    let (_work, bundle, trust) = build(dir.path(), &[]);
    assert_eq!(role_on(&bundle, &trust, "web-01").as_deref(), Some("web\n"));
    assert_eq!(role_on(&bundle, &trust, "web-02").as_deref(), Some("web\n"));
    assert_eq!(role_on(&bundle, &trust, "db-01").as_deref(), Some("db\n"));
    assert_eq!(role_on(&bundle, &trust, "mail-01"), None);
}

#[test]
fn an_inventory_outside_the_tree_is_taken_from_the_command_line() {
    let dir = tree(SITE, None);
    let elsewhere = tempfile::tempdir().unwrap();
    let inventory_path = elsewhere.path().join("hosts.toml");
    std::fs::write(&inventory_path, inventory()).unwrap();
    let flag = inventory_path.to_str().unwrap();
    let (_work, bundle, trust) = build(dir.path(), &["--inventory", flag]);
    assert_eq!(role_on(&bundle, &trust, "web-02").as_deref(), Some("web\n"));
    assert_eq!(role_on(&bundle, &trust, "db-01").as_deref(), Some("db\n"));

    let out = policyc(
        &["check", "--inventory", "/nonexistent/inventory.toml"],
        &[&dir.path().join("site.policy")],
    );
    assert_eq!(out.status.code(), Some(66), "{}", text(&out));
    assert!(
        text(&out).contains("/nonexistent/inventory.toml"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_misspelt_host_or_group_is_refused_with_the_closest_name() {
    let policy = SITE
        .replace("host_db_01", "host_db_1")
        .replace("group_web", "group_wbe");
    let dir = tree(&policy, Some(&inventory()));
    let out = policyc(&["check"], &[&dir.path().join("site.policy")]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("[E0808]"), "{shown}");
    assert!(shown.contains("did you mean `group_web`?"), "{shown}");
    assert!(shown.contains("[E0807]"), "{shown}");
    assert!(shown.contains("did you mean `host_db_01`?"), "{shown}");
}

#[test]
fn an_inventory_error_is_shown_in_the_inventory_and_stops_the_build() {
    let broken = inventory().replacen("report_key", "reportkey", 1);
    let dir = tree(SITE, Some(&broken));
    let out = policyc(
        &["check", "--format", "json"],
        &[&dir.path().join("site.policy")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &json["diagnostics"][0];
    assert_eq!(first["code"], "E0802", "{json:#}");
    let label = &first["labels"][0];
    assert!(
        label["file"].as_str().unwrap().ends_with("inventory.toml"),
        "{json:#}"
    );
    assert_eq!(label["line"], 3, "{json:#}");
}

#[test]
fn without_an_inventory_host_classes_are_free_and_groups_undefined() {
    let dir = tree(SITE, None);
    let out = policyc(&["check"], &[&dir.path().join("site.policy")]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("undefined class `group_web`"), "{shown}");
    assert!(!shown.contains("host_db_01"), "{shown}");
    let free = SITE.replace("group_web", "host_any_name_at_all").replace(
        "\"/etc/role\" { content = \"db",
        "\"/etc/db\" { content = \"db",
    );
    let dir = tree(&free, None);
    let out = policyc(&["check"], &[&dir.path().join("site.policy")]);
    assert!(out.status.success(), "{}", text(&out));
}
