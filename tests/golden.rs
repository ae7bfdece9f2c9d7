//! Golden bundles (`tests/golden/README.md`): bundle bytes built once and
//! checked in, the frozen contract of the format. Today's `policyvm` must
//! verify each, disassemble it to the checked-in text and converge its
//! fixture root to the checked-in report. Nothing here rebuilds a golden
//! from its policy: a format change that alters how old bytes read fails.
//!
//! `CONVERGE_GOLDEN_WRITE=1` rewrites the expectations instead of comparing
//! (`tests/golden/regenerate.sh`, for deliberate format changes only).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use converge::{binary, repo_root};
use converge_compiler::bundle::keys::SecretKey;
use converge_compiler::bundle::lower::{lower, BuildInfo};
use converge_compiler::bundle::seal;
use converge_compiler::check::check;
use converge_compiler::workspace::{FileSystem, Workspace};
use converge_vm::bundle::format::{Body, Item, Operand};
use converge_vm::bundle::keys::{key_id, load_trust_dir, PublicKey};
use converge_vm::bundle::probe::ProbeSource;
use converge_vm::bundle::{open, Verified};
use converge_vm::ids::{item_kind, operand_kind, probe_source, tables};
use converge_vm::schema::{self, AttrRole, ARCHITECTURES, WEEKDAYS};
use ed25519_dalek::SigningKey;
use serde_json::Value;

fn golden_dir() -> PathBuf {
    repo_root().join("tests/golden")
}

fn trust_dir() -> PathBuf {
    golden_dir().join("trust")
}

/// Every golden: a directory `tests/golden/NAME/` holding `NAME.policy`.
fn goldens() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(golden_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            p.join(format!("{name}.policy")).is_file()
        })
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 2, "goldens: {names:?}");
    names
}

fn bundle_path(name: &str) -> PathBuf {
    golden_dir().join(format!("{name}.bundle"))
}

fn opened(name: &str) -> Verified {
    let keys = load_trust_dir(&trust_dir()).unwrap();
    let bytes = std::fs::read(bundle_path(name)).unwrap();
    open(&bytes, &keys).unwrap_or_else(|e| panic!("golden {name} is refused: {e}"))
}

fn writing() -> bool {
    std::env::var_os("CONVERGE_GOLDEN_WRITE").is_some_and(|v| v == "1")
}

/// Compares `actual` with the checked-in `path`, or rewrites it.
fn expect_file(path: &Path, actual: &str) {
    if writing() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (tests/golden/README.md)", path.display()));
    assert!(
        expected == actual,
        "{} differs from what this VM gives; a golden bundle reads differently \
         (tests/golden/README.md).\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

fn policyvm(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(binary("policyvm"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn goldens_verify_and_disassemble_as_checked_in() {
    for name in goldens() {
        let bundle = bundle_path(&name);
        let trust = trust_dir();
        let out = policyvm(&[
            "verify".as_ref(),
            bundle.as_os_str(),
            "--trust".as_ref(),
            trust.as_os_str(),
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = policyvm(&[
            "inspect".as_ref(),
            bundle.as_os_str(),
            "--trust".as_ref(),
            trust.as_os_str(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{name}");
        let text = String::from_utf8(out.stdout).unwrap();
        expect_file(&golden_dir().join(&name).join("inspect.txt"), &text);
    }
}

/// Copies a fixture tree (directories, regular files, links) with its modes.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let mut entries: Vec<_> = std::fs::read_dir(from)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&src, &dst);
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Replaces what depends on the machine, the clock or the temporary root.
fn normalise(report: &mut Value, root: &Path) {
    let root = root.to_str().unwrap().to_owned();
    fn strings(v: &mut Value, f: &dyn Fn(&str) -> String) {
        match v {
            Value::String(s) => *s = f(s),
            Value::Array(items) => items.iter_mut().for_each(|i| strings(i, f)),
            Value::Object(map) => map.values_mut().for_each(|i| strings(i, f)),
            _ => {}
        }
    }
    strings(report, &|s: &str| s.replace(&root, "<root>"));
    report["duration_ms"] = Value::from(0);
    if let Some(probes) = report["probes"].as_object_mut() {
        for probe in probes.values_mut() {
            probe["duration_ms"] = Value::from(0);
        }
    }
    report["host"]["arch"] = Value::from("<arch>");
    // A watch record holds the time of its run: its digests differ on
    // every run (their shape is checked by tests/watch.rs).
    if let Some(chain) = report["watch"]["chain"].as_object_mut() {
        if chain.get("length").and_then(Value::as_u64).unwrap_or(0) > 0 {
            chain.insert("head".into(), Value::from("<head>"));
            if let Some(tail) = chain.get_mut("tail").and_then(Value::as_array_mut) {
                tail.iter_mut().for_each(|t| *t = Value::from("<body>"));
            }
        }
    }
    let volatile = |c: &str| {
        ARCHITECTURES.contains(&c)
            || WEEKDAYS.contains(&c)
            || (c.len() == 4 && c.starts_with("hr") && c[2..].bytes().all(|b| b.is_ascii_digit()))
    };
    if let Some(classes) = report["host"]["classes"].as_array_mut() {
        classes.retain(|c| !c.as_str().is_some_and(volatile));
    }
}

fn run_json(bundle: &Path, root: &Path) -> (Option<i32>, Value) {
    let trust = trust_dir();
    let out = policyvm(&[
        "run".as_ref(),
        bundle.as_os_str(),
        "--trust".as_ref(),
        trust.as_os_str(),
        "--root".as_ref(),
        root.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

/// Each golden with a fixture root converges it to the checked-in report,
/// and a second run repairs nothing.
#[test]
fn goldens_converge_their_fixture_roots_as_checked_in() {
    let mut ran = 0;
    for name in goldens() {
        let fixture = golden_dir().join(&name).join("root");
        if !fixture.is_dir() {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        copy_tree(&fixture, &root);
        let root = std::fs::canonicalize(&root).unwrap();
        let (code, mut report) = run_json(&bundle_path(&name), &root);
        assert_eq!(code, Some(0), "{name}: {report:#}");
        normalise(&mut report, &root);
        let text = format!("{}\n", serde_json::to_string_pretty(&report).unwrap());
        expect_file(&golden_dir().join(&name).join("report.json"), &text);

        let (code, again) = run_json(&bundle_path(&name), &root);
        assert_eq!(code, Some(0), "{name}, second run: {again:#}");
        assert_eq!(
            again["summary"]["repaired"], 0,
            "{name}, second run: {again:#}"
        );
        assert_eq!(again["converged"], true);
        ran += 1;
    }
    assert!(ran >= 1, "no golden has a fixture root");
}

/// What the goldens use, by id table title: every id of every table but
/// the attributes' relations (carried as promise fields, not ids).
fn used(body: &Body, into: &mut BTreeSet<(&'static str, u32)>) {
    for program in body.programs.iter() {
        for instr in program.code.iter() {
            into.insert(("Opcodes", u32::from(instr.opcode())));
            match instr {
                converge_vm::bundle::instr::Instr::Fact(f) => {
                    into.insert(("Facts", *f));
                }
                converge_vm::bundle::instr::Instr::Func(f) => {
                    into.insert(("Functions", *f));
                }
                _ => {}
            }
        }
    }
    for c in body.constants.iter() {
        into.insert(("Constant kinds", u32::from(c.kind())));
    }
    for (_, probe) in body.probes() {
        into.insert((
            "Probe sources",
            u32::from(match probe.source {
                ProbeSource::Program(_) => probe_source::PROGRAM,
                ProbeSource::File(_) => probe_source::FILE,
            }),
        ));
    }
    let item = |i: &Item, into: &mut BTreeSet<_>| {
        into.insert((
            "Item kinds",
            u32::from(match i {
                Item::Const(_) => item_kind::CONST,
                Item::Code(_) => item_kind::CODE,
            }),
        ));
    };
    for p in body.promises.iter() {
        into.insert(("Promise types", u32::from(p.kind)));
        item(&p.promiser, into);
        for f in p.loops().iter() {
            into.insert(("Facts", *f));
        }
        for a in p.attrs.iter() {
            into.insert(("Attributes", u32::from(a.attr)));
            match &a.value {
                Operand::Item(i) => {
                    into.insert(("Operand kinds", u32::from(operand_kind::ITEM)));
                    item(i, into);
                }
                Operand::List(items) => {
                    into.insert(("Operand kinds", u32::from(operand_kind::LIST)));
                    items.iter().for_each(|i| item(i, into));
                }
            }
        }
    }
}

#[test]
fn every_opcode_promise_type_kind_fact_and_attribute_is_in_a_golden() {
    const SEALED_KINDS: [u32; 2] = [
        converge_format::ids::constant_kind::SECRET as u32,
        converge_format::ids::constant_kind::SEALED_SET as u32,
    ];
    let mut seen = BTreeSet::new();
    for name in goldens() {
        used(&opened(&name).body, &mut seen);
    }
    let relations: BTreeSet<u32> = schema::attributes()
        .iter()
        .filter(|a| a.role == AttrRole::Relation)
        .map(|a| u32::from(a.id))
        .collect();
    let mut missing = Vec::new();
    for table in tables() {
        for (id, name) in &table.rows {
            if table.title == "Attributes" && relations.contains(id) {
                continue;
            }
            // Secrets (format 2.4) are sealed to per-host keys with fresh
            // randomness each build, so no frozen bundle can hold one that a
            // later build or a fixture host could reproduce; both kinds are
            // covered by tests/secrets_e2e.rs (hand-built and compiler-built
            // bundles) and the verifier's unit tests instead.
            if table.title == "Constant kinds" && SEALED_KINDS.contains(id) {
                continue;
            }
            if !seen.contains(&(table.title, *id)) {
                missing.push(format!("{} {id} ({name})", table.title));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "no golden bundle uses: {missing:?}; add them to a golden policy and regenerate \
         (tests/golden/README.md)"
    );
}

/// Separately from the frozen bytes: today's compiler still turns each
/// golden policy into a bundle that verifies, with the same promises.
#[test]
fn todays_compiler_still_builds_each_golden_policy() {
    let signing = SigningKey::from_bytes(&[0x60; 32]);
    let public = signing.verifying_key().to_bytes();
    let id = key_id(&public);
    let secret = SecretKey { signing, id };
    let trusted = PublicKey { id, key: public };
    for name in goldens() {
        let mut ws = Workspace::new(FileSystem::new());
        ws.add_root(&golden_dir().join(&name).join(format!("{name}.policy")))
            .unwrap();
        let mut outcome = check(&ws);
        let checked = outcome.programs.pop().expect("a program");
        let info = BuildInfo {
            name: name.clone(),
            key_id: id,
            serial: 1,
        };
        let body = lower(&ws.db, &checked.files, &checked.program, &info).unwrap();
        let bytes = seal(&body, &secret).unwrap();
        let rebuilt = open(&bytes, std::slice::from_ref(&trusted)).unwrap().body;
        let frozen = opened(&name).body;
        // Since format 2.3 the instances of a lookup split per key (the
        // `templates` golden, 2.2) are merged into one promise: compared as
        // promise kinds and source lines, with consecutive instances of one
        // promise (same kind and line) counted once.
        let kinds = |b: &Body| {
            let mut kinds: Vec<(u16, Option<u32>)> = b
                .promises
                .iter()
                .map(|p| (p.kind, b.sources.get(p.source as usize).map(|s| s.line)))
                .collect();
            kinds.dedup();
            kinds
        };
        assert_eq!(kinds(&rebuilt), kinds(&frozen), "{name}");
    }
}
