//! Secrets, the compiler side end to end (LANGUAGE.md section 14,
//! docs/secrets.md): the real `policyc` encrypts a secret with `secret
//! add`, `build --identity` seals it to exactly the inventory hosts that
//! can activate a promise using it, a host key rotation re-encrypts, the
//! build refuses what it cannot seal, and no output of `check`, `explain`,
//! `graph` or `build` shows the plaintext.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ::converge::binary;
use ::converge::support::{
    age_keygen, policyc_ok, secret_site, write_inventory, SecretSite, SiteHost,
};
use converge_compiler::bundle::secrets::{decrypt_with, read_identity_file};
use converge_format::bundle::format::{Body, Constant, SealedSet};
use converge_format::bundle::open_unsigned;

const PLAINTEXT: &str = "hunter2-Zq9-plaintext";

/// The database group's config holds the secret; the web group's does not.
const POLICY: &str = r#"let db_password: secret = secret("secrets/db_password.age");
policy {
  when group_db {
    file "/etc/app/db.conf" {
      content = "password=${db_password}\n";
      mode = 0o600;
    }
  }
  when group_web { file "/etc/app/web.conf" { content = "web\n"; } }
}
"#;

/// Two hosts, db-01 in group db and web-01 in group web, each with its own
/// age identity (in `work/NAME.key`).
fn two_hosts(policy: &str) -> (SecretSite, PathBuf, PathBuf) {
    let keys = tempfile::tempdir().unwrap().keep();
    let db_key = keys.join("db-01.key");
    let web_key = keys.join("web-01.key");
    let hosts = vec![
        host("db-01", Some(age_keygen(&db_key)), "groups = [\"db\"]"),
        host("web-01", Some(age_keygen(&web_key)), "groups = [\"web\"]"),
    ];
    let site = secret_site(policy, &hosts, &[("db_password", PLAINTEXT)]);
    (site, db_key, web_key)
}

fn host(name: &str, recipient: Option<String>, extra: &str) -> SiteHost {
    SiteHost {
        name: name.to_owned(),
        age_recipient: recipient,
        extra: extra.to_owned(),
    }
}

fn body(bundle: &Path) -> Body {
    open_unsigned(&std::fs::read(bundle).unwrap()).unwrap().body
}

/// The plaintext of secret `name` as a host holding `identity` would
/// decrypt it: its sealed set, then its entry. `None` when the host is not
/// a recipient.
fn open_secret(body: &Body, name: &str, identity: &Path) -> Option<String> {
    let sealed = body
        .constants
        .0
        .iter()
        .find_map(|c| match c {
            Constant::Secret(s) if s.name == name => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no secret {name} in the bundle"));
    let Some(Constant::SealedSet(set)) = body.constants.0.get(sealed.set as usize) else {
        panic!("secret {name} names no sealed set");
    };
    let host = read_identity_file(identity).unwrap();
    let plain = decrypt_with(host.iter().map(|i| i.as_ref()), &set.ciphertext.0).ok()?;
    let entries = SealedSet::decode_plaintext(&plain).unwrap();
    let (entry, value) = entries[sealed.index as usize];
    assert_eq!(entry, name, "the entry of secret {name} is its own");
    Some(value.to_owned())
}

fn policyc(args: &[&str], cwd: Option<&Path>) -> Output {
    let mut cmd = Command::new(binary("policyc"));
    cmd.args(args);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    cmd.output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `policyc build` of the site, returning the output (success or not).
fn build_output(site: &SecretSite, extra: &[&str]) -> (Output, PathBuf) {
    let key = site.work.path().join("hub");
    if !key.with_extension("key").exists() {
        policyc_ok(
            &["keygen".as_ref(), "--out".as_ref(), key.as_os_str()],
            None,
        );
    }
    let bundle = site.work.path().join("out.bundle");
    let key_file = key.with_extension("key");
    let mut args = vec![
        "build",
        "--output",
        bundle.to_str().unwrap(),
        "--key",
        key_file.to_str().unwrap(),
        "--serial",
        "1",
    ];
    args.extend_from_slice(extra);
    args.push(site.policy.to_str().unwrap());
    (policyc(&args, None), bundle)
}

#[test]
fn only_the_entitled_host_can_open_the_secret() {
    let (site, db_key, web_key) = two_hosts(POLICY);
    let built = site.build(&[]);
    let body = body(&built.bundle);
    assert_eq!(
        open_secret(&body, "db_password", &db_key).as_deref(),
        Some(PLAINTEXT)
    );
    assert_eq!(open_secret(&body, "db_password", &web_key), None);
    // The builder's identity opens the source file, not the bundle.
    assert_eq!(open_secret(&body, "db_password", &site.builder), None);
    // Nothing in the bundle is the plaintext.
    let bytes = std::fs::read(&built.bundle).unwrap();
    assert!(!bytes
        .windows(PLAINTEXT.len())
        .any(|w| w == PLAINTEXT.as_bytes()));
}

#[test]
fn secrets_for_one_set_of_hosts_share_one_sealed_set() {
    let policy = r#"let a: secret = secret("secrets/a.age");
let b: secret = secret("secrets/b.age");
let c: secret = secret("secrets/c.age");
policy {
  when group_db {
    file "/etc/a" { content = a; mode = 0o600; }
    file "/etc/b" { content = b; mode = 0o600; }
  }
  file "/etc/c" { content = c; mode = 0o600; }
}
"#;
    let keys = tempfile::tempdir().unwrap();
    let hosts = vec![
        host(
            "db-01",
            Some(age_keygen(&keys.path().join("db"))),
            "groups = [\"db\"]",
        ),
        host(
            "web-01",
            Some(age_keygen(&keys.path().join("web"))),
            "groups = [\"web\"]",
        ),
    ];
    let site = secret_site(policy, &hosts, &[("a", "A!"), ("b", "B!"), ("c", "C!")]);
    let body = body(&site.build(&[]).bundle);
    let keys_used: Vec<u32> = ["a", "b", "c"]
        .iter()
        .map(|n| {
            body.constants
                .0
                .iter()
                .find_map(|c| match c {
                    Constant::Secret(s) if s.name == *n => Some(s.set),
                    _ => None,
                })
                .unwrap()
        })
        .collect();
    assert_eq!(keys_used[0], keys_used[1], "a and b go to the same hosts");
    assert_ne!(keys_used[0], keys_used[2], "c goes to every host");
    let sealed_sets = body
        .constants
        .0
        .iter()
        .filter(|c| matches!(c, Constant::SealedSet(_)))
        .count();
    assert_eq!(sealed_sets, 2);
    assert_eq!(
        open_secret(&body, "c", &keys.path().join("web")).as_deref(),
        Some("C!")
    );
    assert_eq!(open_secret(&body, "a", &keys.path().join("web")), None);
    assert_eq!(
        open_secret(&body, "a", &keys.path().join("db")).as_deref(),
        Some("A!")
    );
}

#[test]
fn unknown_facts_are_possible_and_known_ones_decide() {
    // db-01's inventory says its datacenter; web-01's does not, so web-01
    // may be in eu-1 and gets the secret; db-01, in us-1, does not.
    let policy = r#"let db_password: secret = secret("secrets/db_password.age");
fact datacenter: string from ["/bin/cat", "/etc/dc"];
policy {
  when facts.datacenter == "eu-1" {
    file "/etc/app/db.conf" { content = db_password; mode = 0o600; }
  }
}
"#;
    let keys = tempfile::tempdir().unwrap();
    let hosts = vec![
        host(
            "db-01",
            Some(age_keygen(&keys.path().join("db"))),
            "facts = { datacenter = \"us-1\" }",
        ),
        host("web-01", Some(age_keygen(&keys.path().join("web"))), ""),
    ];
    let site = secret_site(policy, &hosts, &[("db_password", PLAINTEXT)]);
    let body = body(&site.build(&[]).bundle);
    assert_eq!(
        open_secret(&body, "db_password", &keys.path().join("db")),
        None
    );
    assert_eq!(
        open_secret(&body, "db_password", &keys.path().join("web")).as_deref(),
        Some(PLAINTEXT)
    );
}

#[test]
fn revoked_hosts_never_get_secrets() {
    let keys = tempfile::tempdir().unwrap();
    let hosts = vec![
        host(
            "db-01",
            Some(age_keygen(&keys.path().join("db1"))),
            "groups = [\"db\"]",
        ),
        host(
            "db-02",
            Some(age_keygen(&keys.path().join("db2"))),
            "groups = [\"db\"]\nrevoked = true",
        ),
        host("web-01", None, "groups = [\"web\"]"),
    ];
    let site = secret_site(POLICY, &hosts, &[("db_password", PLAINTEXT)]);
    let body = body(&site.build(&[]).bundle);
    assert!(open_secret(&body, "db_password", &keys.path().join("db1")).is_some());
    assert_eq!(
        open_secret(&body, "db_password", &keys.path().join("db2")),
        None
    );
}

#[test]
fn a_rotated_host_key_re_encrypts_on_the_next_build() {
    let (site, old_key, web_key) = two_hosts(POLICY);
    let first = body(&site.build(&[]).bundle);
    assert!(open_secret(&first, "db_password", &old_key).is_some());
    // db-01 rotates its age key: the inventory gets the new recipient.
    let new_key = site.work.path().join("db-01.new.key");
    let hosts = vec![
        host("db-01", Some(age_keygen(&new_key)), "groups = [\"db\"]"),
        host(
            "web-01",
            Some(age_keygen(&web_key.with_extension("2"))),
            "groups = [\"web\"]",
        ),
    ];
    write_inventory(&site.tree, &hosts);
    let second = body(&site.build(&[]).bundle);
    assert_eq!(open_secret(&second, "db_password", &old_key), None);
    assert_eq!(
        open_secret(&second, "db_password", &new_key).as_deref(),
        Some(PLAINTEXT)
    );
}

#[test]
fn building_without_a_matching_identity_is_an_error_at_the_call() {
    let (site, db_key, _) = two_hosts(POLICY);
    let (out, _) = build_output(&site, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let shown = text(&out);
    assert!(shown.contains("E1005"), "{shown}");
    assert!(shown.contains("site.policy:1:"), "{shown}");
    assert!(shown.contains("--identity"), "{shown}");
    // A host's identity is not a recipient of the source file.
    let (out, _) = build_output(&site, &["--identity", db_key.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("none of the identities"),
        "{}",
        text(&out)
    );
    // Check needs no identity.
    let out = policyc(&["check", site.policy.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn what_cannot_be_sealed_is_refused() {
    // No inventory.
    let (site, _, _) = two_hosts(POLICY);
    std::fs::remove_file(site.tree.join("inventory.toml")).unwrap();
    let policy_without_groups = POLICY
        .replace("when group_db", "when linux")
        .replace("when group_web", "when debian");
    std::fs::write(&site.policy, policy_without_groups).unwrap();
    let builder = site.builder.to_str().unwrap().to_owned();
    let (out, _) = build_output(&site, &["--identity", &builder]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("E1006") && text(&out).contains("no inventory"),
        "{}",
        text(&out)
    );

    // An entitled host without an age recipient.
    let keys = tempfile::tempdir().unwrap();
    let hosts = vec![
        host(
            "db-01",
            Some(age_keygen(&keys.path().join("db1"))),
            "groups = [\"db\"]",
        ),
        host("db-02", None, "groups = [\"db\"]"),
        host("web-01", None, "groups = [\"web\"]"),
    ];
    let site = secret_site(POLICY, &hosts, &[("db_password", PLAINTEXT)]);
    let builder = site.builder.to_str().unwrap().to_owned();
    let (out, _) = build_output(&site, &["--identity", &builder]);
    assert_eq!(out.status.code(), Some(1));
    let shown = text(&out);
    assert!(
        shown.contains("E1006") && shown.contains("db-02"),
        "{shown}"
    );
    assert!(!shown.contains("web-01"), "web-01 is not entitled: {shown}");

    // No host entitled at all.
    let hosts = vec![host(
        "web-01",
        Some(age_keygen(&keys.path().join("w"))),
        "groups = [\"web\", \"db\"]",
    )];
    let site = secret_site(
        &POLICY.replace("when group_db", "when group_db && !group_web"),
        &hosts,
        &[("db_password", PLAINTEXT)],
    );
    let builder = site.builder.to_str().unwrap().to_owned();
    let (out, _) = build_output(&site, &["--identity", &builder]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("no host of the inventory"),
        "{}",
        text(&out)
    );
}

#[test]
fn bundles_without_secrets_stay_byte_reproducible() {
    let (site, _, _) = two_hosts("policy { file \"/etc/x\" { content = \"x\\n\"; } }\n");
    let builder = site.builder.to_str().unwrap().to_owned();
    let (first, bundle) = build_output(&site, &["--identity", &builder]);
    assert!(first.status.success(), "{}", text(&first));
    let a = std::fs::read(&bundle).unwrap();
    let (_, bundle) = build_output(&site, &["--identity", &builder]);
    assert_eq!(a, std::fs::read(&bundle).unwrap());
}

#[test]
fn explain_secrets_says_who_gets_what_and_why() {
    let (site, _, _) = two_hosts(POLICY);
    let policy = site.policy.to_str().unwrap();
    let out = policyc(&["explain", "--secrets", policy], None);
    assert!(out.status.success(), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(shown.contains("secret db_password"), "{shown}");
    assert!(shown.contains("1 of 2 hosts"), "{shown}");
    assert!(shown.contains("when group_db: db-01"), "{shown}");
    let out = policyc(&["explain", "--secrets", "--format", "json", policy], None);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let secret = &json["secrets"][0];
    assert_eq!(secret["name"], "db_password");
    assert_eq!(secret["hosts"], serde_json::json!(["db-01"]));
    assert_eq!(secret["reasons"][0]["guard"], "group_db");
    assert_eq!(secret["reasons"][0]["promise"], "file \"/etc/app/db.conf\"");
}

/// Every output of the compiler for a policy with secrets, contradictions
/// between two of them included, must show `<secret NAME>` and never the
/// plaintext.
#[test]
fn no_output_shows_the_plaintext() {
    let policy = r#"let db_password: secret = secret("secrets/db_password.age");
let other: secret = secret("secrets/other.age");
policy {
  when group_db {
    file "/etc/app/db.conf" { content = "password=${db_password}\n"; mode = 0o600; }
  }
  when group_web {
    file "/etc/app/db.conf" { content = "password=${other}\n"; mode = 0o600; }
  }
  file "/etc/app/both" { content = db_password; mode = 0o600; }
  file "/etc/app/both" { content = other; mode = 0o600; }
  file "/etc/leak" { content = "x"; mode = 0o600; comment = db_password; }
}
"#;
    let keys = tempfile::tempdir().unwrap();
    let hosts = vec![
        host(
            "db-01",
            Some(age_keygen(&keys.path().join("db"))),
            "groups = [\"db\"]",
        ),
        host(
            "web-01",
            Some(age_keygen(&keys.path().join("web"))),
            "groups = [\"web\"]",
        ),
    ];
    let other_plain = "0ther-S3cret-value";
    let site = secret_site(
        policy,
        &hosts,
        &[("db_password", PLAINTEXT), ("other", other_plain)],
    );
    let path = site.policy.to_str().unwrap();
    let builder = site.builder.to_str().unwrap().to_owned();
    let mut outputs = Vec::new();
    for format in ["human", "json", "sarif"] {
        outputs.push(text(&policyc(&["check", "--format", format, path], None)));
    }
    outputs.push(text(&build_output(&site, &["--identity", &builder]).0));
    // Without the leak and the contradiction: explain, graph and a build.
    let clean = policy
        .lines()
        .filter(|l| !l.contains("/etc/leak") && !l.contains("/etc/app/both"))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&site.policy, clean).unwrap();
    outputs.push(text(&policyc(&["explain", path], None)));
    outputs.push(text(&policyc(&["explain", "--secrets", path], None)));
    outputs.push(text(&policyc(
        &["explain", "--secrets", "--format", "json", path],
        None,
    )));
    outputs.push(text(&policyc(&["graph", path], None)));
    let (built, bundle) = build_output(&site, &["--identity", &builder]);
    assert!(built.status.success(), "{}", text(&built));
    outputs.push(text(&built));
    outputs.push(String::from_utf8_lossy(&std::fs::read(bundle).unwrap()).into_owned());
    let all = outputs.join("\n");
    assert!(all.contains("<secret db_password>"), "{all}");
    // Two secrets in one file's content: a possible contradiction (their
    // plaintexts are not known to `check`), shown by name.
    assert!(
        all.contains("W0007") && all.contains("content = <secret other>"),
        "{all}"
    );
    assert!(all.contains("E1001"), "the leak is refused: {all}");
    for plain in [PLAINTEXT, other_plain] {
        assert!(
            !all.contains(plain),
            "the plaintext {plain} was printed:\n{all}"
        );
    }
}

#[test]
fn secret_add_reads_stdin_and_edit_re_encrypts_to_the_same_recipients() {
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("site");
    std::fs::create_dir_all(&tree).unwrap();
    let alice = work.path().join("alice.key");
    let bob = work.path().join("bob.key");
    let (ra, rb) = (age_keygen(&alice), age_keygen(&bob));
    let root = tree.as_os_str();
    policyc_ok(
        &[
            "secret".as_ref(),
            "add".as_ref(),
            "api".as_ref(),
            "--recipient".as_ref(),
            ra.as_ref(),
            "--recipient".as_ref(),
            rb.as_ref(),
            "--policy-root".as_ref(),
            root,
        ],
        Some(b"first value\n"),
    );
    let file = tree.join("secrets/api.age");
    let decrypt = |identity: &Path| {
        let ids = read_identity_file(identity).unwrap();
        String::from_utf8(
            decrypt_with(
                ids.iter().map(|i| i.as_ref()),
                &std::fs::read(&file).unwrap(),
            )
            .unwrap()
            .to_vec(),
        )
        .unwrap()
    };
    // One trailing line break is dropped; both recipients can decrypt.
    assert_eq!(decrypt(&alice), "first value");
    assert_eq!(decrypt(&bob), "first value");
    // A second add of the same name is refused.
    let out = policyc(
        &[
            "secret",
            "add",
            "api",
            "--recipient",
            &ra,
            "--policy-root",
            tree.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));

    // The editor: a script that records where the plaintext was, checks
    // the directory is private, and rewrites the file.
    let seen = work.path().join("seen");
    let editor = work.path().join("editor.sh");
    std::fs::write(
        &editor,
        format!(
            "#!/bin/sh\nset -e\necho \"$1\" > {seen}\nstat -c %a \"$(dirname \"$1\")\" >> {seen}\ngrep -q 'first value' \"$1\"\nprintf 'second value' > \"$1\"\n",
            seen = seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new(binary("policyc"))
        .args([
            "secret",
            "edit",
            "api",
            "--identity",
            bob.to_str().unwrap(),
            "--policy-root",
            tree.to_str().unwrap(),
        ])
        .env("EDITOR", &editor)
        .env_remove("VISUAL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let record = std::fs::read_to_string(&seen).unwrap();
    let mut lines = record.lines();
    let plain_path = PathBuf::from(lines.next().unwrap());
    assert_eq!(
        lines.next(),
        Some("700"),
        "the plaintext's directory is private"
    );
    assert!(!plain_path.exists(), "the plaintext file is removed");
    assert!(
        !plain_path.parent().unwrap().exists(),
        "its directory is removed"
    );
    // Re-encrypted to the same two recipients.
    assert_eq!(decrypt(&alice), "second value");
    assert_eq!(decrypt(&bob), "second value");

    // An editor that fails leaves the secret as it was.
    let out = Command::new(binary("policyc"))
        .args([
            "secret",
            "edit",
            "api",
            "--identity",
            bob.to_str().unwrap(),
            "--policy-root",
            tree.to_str().unwrap(),
        ])
        .env("EDITOR", "false")
        .env_remove("VISUAL")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(decrypt(&alice), "second value");

    // Rekey after a recipient is dropped from the list: bob is out.
    std::fs::write(tree.join("secrets/api.age.recipients"), format!("{ra}\n")).unwrap();
    policyc_ok(
        &[
            "secret".as_ref(),
            "rekey".as_ref(),
            "--identity".as_ref(),
            alice.as_os_str(),
            "--policy-root".as_ref(),
            root,
        ],
        None,
    );
    assert_eq!(decrypt(&alice), "second value");
    let ids = read_identity_file(&bob).unwrap();
    assert!(decrypt_with(
        ids.iter().map(|i| i.as_ref()),
        &std::fs::read(&file).unwrap()
    )
    .is_err());
}

/// Every sink of `tests/ui/secrets/ok_sinks.policy` (interpolation,
/// records, functions, an `{% if %}`, a lookup by the hostname, a user
/// password) lowers into a bundle the verifier accepts, each host getting
/// the secrets of its own lookup case.
#[test]
fn every_sink_builds_into_a_verified_bundle() {
    let policy = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/secrets/ok_sinks.policy"),
    )
    .unwrap();
    let keys = tempfile::tempdir().unwrap();
    let hosts = vec![
        host("web-01", Some(age_keygen(&keys.path().join("1"))), ""),
        host("web-02", Some(age_keygen(&keys.path().join("2"))), ""),
    ];
    let site = secret_site(&policy, &hosts, &[("db", "DB!"), ("api_token", "TOKEN!")]);
    let body = body(&site.build(&[]).bundle);
    for (identity, name, plain) in [("1", "db", "DB!"), ("2", "api_token", "TOKEN!")] {
        assert_eq!(
            open_secret(&body, name, &keys.path().join(identity)).as_deref(),
            Some(plain)
        );
    }
}
