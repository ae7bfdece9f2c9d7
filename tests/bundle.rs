//! Signed bundles end to end: build with the compiler's writer, open with
//! the VM's reader. A bundle that was modified in any way, cut short,
//! extended, or signed by a key the host does not trust is refused before
//! anything is decoded; a good one decodes to exactly the program the
//! compiler analysed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use converge::{binary, repo_root};
use converge_compiler::bundle::keys::SecretKey;
use converge_compiler::bundle::lower::{lower, BuildInfo};
use converge_compiler::bundle::seal;
use converge_compiler::check::{check, CheckedProgram};
use converge_compiler::workspace::{FileSystem, Workspace};
use converge_vm::bundle::format::{Item, Operand};
use converge_vm::bundle::keys::{key_id, PublicKey};
use converge_vm::bundle::{open, BundleError};
use converge_vm::schema::promise_type_by_id;
use ed25519_dalek::SigningKey;

fn key(seed: u8) -> (SecretKey, PublicKey) {
    let signing = SigningKey::from_bytes(&[seed; 32]);
    let public = signing.verifying_key().to_bytes();
    let id = key_id(&public);
    (SecretKey { signing, id }, PublicKey { id, key: public })
}

fn maybe_program(path: &Path) -> (Workspace, Option<CheckedProgram>) {
    let mut ws = Workspace::new(FileSystem::new());
    ws.add_root(path).unwrap();
    let mut outcome = check(&ws);
    assert!(
        outcome.count(converge_compiler::diagnostic::Severity::Error) == 0,
        "{}: {:?}",
        path.display(),
        outcome.diagnostics
    );
    let checked = outcome.programs.pop();
    (ws, checked)
}

fn program(path: &Path) -> (Workspace, CheckedProgram) {
    let (ws, checked) = maybe_program(path);
    (ws, checked.expect("a program"))
}

fn build(path: &Path, secret: &SecretKey, serial: u64) -> Vec<u8> {
    let (ws, checked) = program(path);
    let info = BuildInfo {
        name: "test".into(),
        key_id: secret.id,
        serial,
    };
    let body = lower(&ws.db, &checked.files, &checked.program, &info).unwrap();
    seal(&body, secret).unwrap()
}

fn small_policy() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("converge-bundle-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("small.policy");
    std::fs::write(
        &path,
        r#"class web = sys.hostname =~ r"^web";
bundle b {
  file "/etc/motd" { content = "hi ${sys.hostname}\n"; mode = 0o644; }
  when web { package "nginx" { state = installed; } }
}
policy { b(); }
"#,
    )
    .unwrap();
    path
}

#[test]
fn a_good_bundle_opens() {
    let (secret, public) = key(1);
    let bytes = build(&small_policy(), &secret, 42);
    let v = open(&bytes, &[public]).unwrap();
    assert_eq!(v.body.header.serial, 42);
    assert_eq!(v.body.header.name, "test");
    assert_eq!(v.body.promises.len(), 2);
}

#[test]
fn flipping_any_byte_is_refused() {
    let (secret, public) = key(1);
    let bytes = build(&small_policy(), &secret, 1);
    assert!(
        bytes.len() < 2_000,
        "the small bundle is {} bytes",
        bytes.len()
    );
    for i in 0..bytes.len() {
        for bit in [0x01u8, 0x80] {
            let mut tampered = bytes.clone();
            tampered[i] ^= bit;
            let result = open(&tampered, std::slice::from_ref(&public));
            assert!(
                result.is_err(),
                "flipping bit {bit:#x} of byte {i} was accepted"
            );
        }
    }
}

#[test]
fn flipping_sampled_bytes_of_a_large_bundle_is_refused() {
    let (secret, public) = key(2);
    let bytes = build(&repo_root().join("examples/site.policy"), &secret, 1);
    // A deterministic sample: every 7th byte, plus the first and last 64.
    let mut positions: Vec<usize> = (0..bytes.len()).step_by(7).collect();
    positions.extend(0..64.min(bytes.len()));
    positions.extend(bytes.len().saturating_sub(64)..bytes.len());
    for i in positions {
        let mut tampered = bytes.clone();
        tampered[i] = tampered[i].wrapping_add(1);
        assert!(
            open(&tampered, std::slice::from_ref(&public)).is_err(),
            "byte {i} changed and accepted"
        );
    }
}

#[test]
fn truncation_at_every_length_and_trailing_bytes_are_refused() {
    let (secret, public) = key(1);
    let bytes = build(&small_policy(), &secret, 1);
    for len in 0..bytes.len() {
        let err = open(&bytes[..len], std::slice::from_ref(&public)).unwrap_err();
        let expected = if len == 0 { 10 } else { 12 };
        assert_eq!(err.exit_code(), expected, "length {len}: {err}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(
        open(&longer, &[public]),
        Err(BundleError::TrailingBytes { extra: 1 })
    ));
}

#[test]
fn unknown_keys_and_key_id_collisions_are_refused() {
    let (secret, _) = key(1);
    let (_, other) = key(2);
    let bytes = build(&small_policy(), &secret, 1);
    let err = open(&bytes, std::slice::from_ref(&other)).unwrap_err();
    assert!(matches!(err, BundleError::UnknownKey { .. }), "{err}");
    assert_eq!(err.exit_code(), 14);
    // A different key that claims the signer's key id: the full key decides.
    let impostor = PublicKey {
        id: secret.id,
        key: other.key,
    };
    let err = open(&bytes, &[impostor]).unwrap_err();
    assert!(matches!(err, BundleError::BadSignature { .. }), "{err}");
    assert_eq!(err.exit_code(), 15);
}

#[test]
fn other_files_and_newer_formats_are_refused() {
    let (secret, public) = key(1);
    let err = open(b"#!/bin/sh\necho hello\n", std::slice::from_ref(&public)).unwrap_err();
    assert_eq!(err, BundleError::BadMagic);
    let mut newer = build(&small_policy(), &secret, 1);
    let next = converge_vm::bundle::envelope::FORMAT_MAJOR + 1;
    newer[8..10].copy_from_slice(&next.to_le_bytes());
    let err = open(&newer, &[public]).unwrap_err();
    assert!(
        matches!(err, BundleError::UnsupportedVersion { major, .. } if major == next),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade policyvm"));
}

#[test]
fn builds_are_deterministic() {
    let (secret, _) = key(3);
    let path = repo_root().join("examples/site.policy");
    assert_eq!(build(&path, &secret, 9), build(&path, &secret, 9));
}

/// Every program the project ships (examples, stdlib tests, clean UI
/// cases) decodes to the promise table the compiler analysed.
#[test]
fn examples_round_trip() {
    let (secret, public) = key(4);
    let mut checked_any = 0;
    let mut paths = Vec::new();
    for dir in ["examples", "stdlib/tests", "tests/ui/ok"] {
        for entry in std::fs::read_dir(repo_root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "policy") {
                paths.push(path);
            }
        }
    }
    paths.sort();
    for path in paths {
        let (ws, checked) = maybe_program(&path);
        let Some(checked) = checked else { continue };
        if checked.program.promises.is_empty() {
            continue;
        }
        let info = BuildInfo {
            name: "rt".into(),
            key_id: secret.id,
            serial: 1,
        };
        let body = lower(&ws.db, &checked.files, &checked.program, &info).unwrap();
        let bytes = seal(&body, &secret).unwrap();
        let decoded = open(&bytes, std::slice::from_ref(&public)).unwrap().body;
        assert_eq!(decoded, body, "{}", path.display());
        let ir = &checked.program;
        // Since format 2.3 the instances of a lookup split per key are one
        // bundle promise (`converge_compiler::bundle::merge`): bundle
        // promise `j` is IR promise `written[j]` (a merge's first
        // instance), in the merged order.
        let layout = converge_compiler::bundle::merge::layout(ir);
        assert_eq!(decoded.promises.len(), layout.promises.len());
        assert_eq!(decoded.header.pass_limit, ir.pass_limit.max(2));
        assert_eq!(decoded.order.0, layout.order);
        let written = layout.promises.iter().map(|&(i, _)| &ir.promises[i]);
        for (p, q) in decoded.promises.iter().zip(written) {
            assert_eq!(promise_type_by_id(p.kind).unwrap().name, q.kind);
            if let (Item::Const(c), Some(text)) = (p.promiser, q.promiser.as_str()) {
                assert!(matches!(
                    &decoded.constants.0[c as usize],
                    converge_vm::bundle::format::Constant::Str(s) if s == text
                ));
            }
            // Every state attribute of the IR is in the bundle.
            let carried = q
                .attrs
                .iter()
                .filter(|a| {
                    !["after", "notify", "on_repaired", "on_kept", "on_failed"].contains(&a.name)
                })
                .count();
            assert_eq!(p.attrs.len(), carried, "{} {:?}", q.kind, q.promiser);
            for a in p.attrs.iter() {
                assert!(matches!(a.value, Operand::Item(_) | Operand::List(_)));
            }
        }
        checked_any += 1;
    }
    assert!(
        checked_any >= 5,
        "only {checked_any} programs round-tripped"
    );
}

/// The CLI: keygen, build, verify and inspect, with the exit codes of
/// refusals.
#[test]
fn cli_keygen_build_verify_inspect() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let trust = dir.path().join("trust");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::create_dir_all(&trust).unwrap();
    let run = |cmd: &str, args: &[&str]| {
        std::process::Command::new(binary(cmd))
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(
        "policyc",
        &["keygen", "--out", keys.join("hub").to_str().unwrap()],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(keys.join("hub.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // keygen never overwrites a key.
    let again = run(
        "policyc",
        &["keygen", "--out", keys.join("hub").to_str().unwrap()],
    );
    assert_eq!(again.status.code(), Some(73));
    std::fs::copy(keys.join("hub.pub"), trust.join("hub.pub")).unwrap();

    let bundle = dir.path().join("site.bundle");
    let site = repo_root().join("examples/site.policy");
    let out = run(
        "policyc",
        &[
            "build",
            site.to_str().unwrap(),
            "-o",
            bundle.to_str().unwrap(),
            "--key",
            keys.join("hub.key").to_str().unwrap(),
            "--serial",
            "5",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("bundle \"site\""));

    let out = run(
        "policyvm",
        &[
            "verify",
            bundle.to_str().unwrap(),
            "--trust",
            trust.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.starts_with("ok ") && line.contains("serial 5"),
        "{line}"
    );
    assert_eq!(line.lines().count(), 1);

    let mut bytes = std::fs::read(&bundle).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let forged = dir.path().join("forged.bundle");
    std::fs::write(&forged, &bytes).unwrap();
    let out = run(
        "policyvm",
        &[
            "verify",
            forged.to_str().unwrap(),
            "--trust",
            trust.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(15));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("refused "));

    let out = run(
        "policyvm",
        &[
            "inspect",
            bundle.to_str().unwrap(),
            "--trust",
            trust.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("promises (in order of application):"),
        "{text}"
    );

    // A policy with errors is not built.
    let bad = dir.path().join("bad.policy");
    std::fs::write(
        &bad,
        "bundle b { file \"relative\" { } }\npolicy { b(); }\n",
    )
    .unwrap();
    let out = run(
        "policyc",
        &[
            "build",
            bad.to_str().unwrap(),
            "-o",
            dir.path().join("bad.bundle").to_str().unwrap(),
            "--key",
            keys.join("hub.key").to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(!dir.path().join("bad.bundle").exists());
}

/// The disassembly of a small program, as a golden snapshot.
#[test]
fn inspect_snapshot() {
    let (secret, public) = key(5);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inspect.policy");
    std::fs::write(
        &path,
        r#"class web = sys.hostname =~ r"^web[0-9]+$";
class config_changed;
bundle site(port: int = 8080) {
  package "nginx" { state = installed; }
  file "/etc/nginx/port" { content = "listen ${port}\n"; mode = 0o644; on_repaired = config_changed; after = [package "nginx"]; }
  when config_changed { service "nginx" { state = running; } }
  for ip in sys.ipv4 { line "/etc/hosts.allow" { present = "sshd: ${ip}"; } }
}
policy { when web { site(); } }
"#,
    )
    .unwrap();
    let (ws, checked) = program(&path);
    let info = BuildInfo {
        name: "inspect".into(),
        key_id: secret.id,
        serial: 3,
    };
    let body = lower(&ws.db, &checked.files, &checked.program, &info).unwrap();
    let bytes = seal(&body, &secret).unwrap();
    let v = open(&bytes, &[public]).unwrap();
    let text = converge_vm::bundle::disasm::disassemble(&v.body, v.version);
    // The file name and source digest depend on the temp dir: blank them.
    let text = text.replace(path.to_str().unwrap(), "inspect.policy");
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("  source digest") {
                "  source digest <digest>"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(text);
}

/// A reader that stops early (`policyvm inspect | head`) must not make the
/// tools panic.
#[test]
fn closed_stdout_is_not_a_panic() {
    use std::process::{Command, Stdio};
    let site = repo_root().join("examples/site.policy");
    let mut child = Command::new(binary("policyc"))
        .args(["explain", site.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    assert_eq!(out.status.code(), Some(0));
}

/// The VM's evaluator on a real bundle: the classes of a host described by
/// a temporary root, guards, and strings that interpolate facts.
#[test]
fn classes_and_programs_evaluate_on_a_host() {
    use converge_vm::eval::{Evaluator, Val};
    use converge_vm::facts::Facts;

    let (secret, public) = key(6);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eval.policy");
    std::fs::write(
        &path,
        r#"import "std/classes.policy";
class web = sys.hostname =~ r"^web[0-9]+$";
class db = sys.hostname =~ r"^db";
class front = web && !db && sys.os_family == "debian";
class flagged;
bundle b {
  when front { file "/etc/role" { content = "front on ${sys.hostname} (${sys.os_release})\n"; } }
  when db { file "/etc/role" { content = "db\n"; } }
  when weekend || weekday { report "always" { message = "one of them"; } }
}
policy { b(); }
"#,
    )
    .unwrap();
    let bytes = build(&path, &secret, 1);
    let body = open(&bytes, &[public]).unwrap().body;

    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/hostname"), "web07\n").unwrap();
    std::fs::write(
        root.join("etc/os-release"),
        "ID=debian\nVERSION_ID=\"12\"\n",
    )
    .unwrap();
    let facts = Facts::gather(&root);
    let mut eval = Evaluator::new(&body, &facts);
    let classes = eval.classes(&["flagged".to_owned()]).unwrap();
    for class in ["any", "debian", "web", "front", "flagged", "host_web07"] {
        assert!(classes.contains(class), "{class} not in {classes:?}");
    }
    assert!(!classes.contains("db"));
    let weekend_or_weekday = classes.contains("weekend") ^ classes.contains("weekday");
    assert!(weekend_or_weekday, "{classes:?}");

    // The promise guarded by `front` is active, the `db` one is not, and its
    // content interpolates the facts of this host.
    let mut active = Vec::new();
    for p in body.promises.iter() {
        let on = match p.guard {
            None => true,
            Some(g) => eval.run(g, &classes, &[]).unwrap() == Val::Bool(true),
        };
        if on {
            active.push(p);
        }
    }
    assert_eq!(active.len(), 2, "the role file for `front` and the report");
    let content = active
        .iter()
        .flat_map(|p| p.attrs.iter())
        .find_map(|a| match a.value {
            Operand::Item(Item::Code(program)) => Some(eval.run(program, &classes, &[]).unwrap()),
            _ => None,
        })
        .unwrap();
    assert_eq!(content, Val::Str("front on web07 (12)\n".into()));
}

#[test]
fn policyvm_facts_describes_the_root() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(root.path().join("etc/hostname"), "db-3\n").unwrap();
    std::fs::write(
        root.path().join("etc/os-release"),
        "ID=alpine\nVERSION_ID=3.19.1\n",
    )
    .unwrap();
    let out = std::process::Command::new(binary("policyvm"))
        .args(["facts", "--format", "json", "--root"])
        .arg(root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["facts"]["sys.hostname"], "db-3");
    assert_eq!(json["facts"]["sys.os_family"], "alpine");
    assert_eq!(json["facts"]["sys.os_release"], "3.19.1");
    assert!(json["facts"]["sys.cpus"].as_i64().unwrap() >= 1);
    assert!(json["facts"]["sys.ipv4"].is_array());
    let classes: Vec<&str> = json["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    for class in ["any", "alpine", "host_db_3"] {
        assert!(classes.contains(&class), "{class} in {classes:?}");
    }
}

/// A signature whose scalar S is replaced by S + L (the group order) is the
/// same signature mathematically but not in canonical form: refused.
#[test]
fn non_canonical_signatures_are_refused() {
    let (secret, public) = key(7);
    let bytes = build(&small_policy(), &secret, 1);
    let n = bytes.len();
    // L = 2^252 + 27742317777372353535851937790883648493, little endian.
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let mut forged = bytes.clone();
    let s = &mut forged[n - 32..];
    let mut carry = 0u16;
    for (byte, l) in s.iter_mut().zip(L) {
        let sum = u16::from(*byte) + u16::from(l) + carry;
        *byte = sum as u8;
        carry = sum >> 8;
    }
    assert_eq!(carry, 0, "S + L fits in 32 bytes for this signature");
    assert_ne!(forged, bytes);
    let err = open(&forged, std::slice::from_ref(&public)).unwrap_err();
    assert!(matches!(err, BundleError::BadSignature { .. }), "{err}");
    assert!(open(&bytes, &[public]).is_ok());
}
