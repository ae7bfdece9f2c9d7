//! Incremental later passes (issue 22, item 2; docs/vm.md, "Later passes"):
//! a pass after the first checks again only the promises whose outcome
//! could differ from their last check. Whole runs with the rule are
//! compared with full passes (`run_full_passes`, every promise checked in
//! every pass) on the same trees: the reports (pass count, convergence,
//! oscillating promises, classes, every promise's outcome, changes and
//! output, unmanaged entries) and the trees they leave must be equal.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use ::converge::support::{check_text, compile, compile_files, verified};
use converge_vm::run::{run, run_full_passes, RunOptions, RunReport};

fn options(root: &Path) -> RunOptions {
    RunOptions {
        root: root.to_path_buf(),
        ..RunOptions::default()
    }
}

/// What a run is observed by, with the root's path written `ROOT` (the two
/// runs have different roots).
fn observed(r: &RunReport, root: &Path) -> String {
    let promises: Vec<String> = r
        .promises
        .iter()
        .map(|p| {
            format!(
                "{} {:?} {:?} {:?} {:?} passes={}",
                p.kind(),
                p.promiser,
                p.outcome(),
                p.changes(),
                p.output(),
                p.repaired_passes()
            )
        })
        .collect();
    let text = format!(
        "passes={} converged={}\noscillating={:?}\nclasses={:?}\nunmanaged={:?}\nowed={:?}\n{}",
        r.passes,
        r.converged,
        r.oscillating,
        r.classes,
        r.unmanaged,
        r.owed,
        promises.join("\n")
    );
    text.replace(&root.display().to_string(), "ROOT")
}

/// Every entry under `root`: its type, mode and content.
fn tree(root: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                out.insert(name, format!("dir {mode:o}"));
                walk(&path, root, out);
            } else if meta.file_type().is_symlink() {
                let to = std::fs::read_link(&path).unwrap();
                out.insert(name, format!("link {}", to.display()));
            } else {
                let text = std::fs::read_to_string(&path).unwrap();
                out.insert(name, format!("file {mode:o} {text:?}"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Runs `policy` on two copies of the tree `setup` makes, incrementally
/// and with full passes; both runs must be observed the same. Returns the
/// incremental run's report.
fn differential(policy: &str, setup: &dyn Fn(&Path)) -> Result<RunReport, TestCaseError> {
    compare(&compile(policy), policy, setup)
}

/// [`differential`] for a compiled bundle.
fn compare(bytes: &[u8], policy: &str, setup: &dyn Fn(&Path)) -> Result<RunReport, TestCaseError> {
    let bundle = verified(bytes);
    let incremental = tempfile::tempdir().unwrap();
    let full = tempfile::tempdir().unwrap();
    setup(incremental.path());
    setup(full.path());
    let a = run(&bundle, &options(incremental.path())).unwrap();
    let b = run_full_passes(&bundle, &options(full.path())).unwrap();
    prop_assert_eq!(b.checks_skipped, 0);
    prop_assert_eq!(
        observed(&a, incremental.path()),
        observed(&b, full.path()),
        "{}",
        policy
    );
    prop_assert_eq!(tree(incremental.path()), tree(full.path()), "{}", policy);
    Ok(a)
}

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A 1% drift of 200 files: the second pass counts every file as kept
/// without reading it (198 were kept and untouched, 2 were rewritten and
/// read back at the write).
#[test]
fn a_drift_run_checks_again_only_what_it_repaired() {
    let mut policy = String::from("bundle files {\n");
    for i in 0..200 {
        policy.push_str(&format!(
            "  file \"/data/d{}/f{i}\" {{ content = \"content {i}\\n\"; mode = 0o644; }}\n",
            i % 4
        ));
    }
    policy.push_str("}\npolicy { files(); }\n");
    let setup = |root: &Path| {
        for i in 0..200 {
            let text = if i % 100 == 0 {
                "drifted\n".to_owned()
            } else {
                format!("content {i}\n")
            };
            write(root, &format!("/data/d{}/f{i}", i % 4), &text);
            let path = root.join(format!("data/d{}/f{i}", i % 4));
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    };
    let r = differential(&policy, &setup).unwrap();
    assert_eq!(r.passes, 2);
    assert!(r.converged);
    assert_eq!(r.checks_skipped, 200, "{r:?}");
}

/// A kept file that a later promise of the same pass changes is checked
/// again in the next pass, and so on: the file and the line fight, and the
/// run ends not converged, naming both, exactly as with full passes.
#[test]
fn a_change_after_a_kept_promise_makes_it_checked_again() {
    let policy = r#"bundle b {
  file "/etc/app.conf" { content = "${sys.hostname}\n"; }
  line "/etc/app.conf" { present = "two"; }
  file "/etc/other" { content = "other\n"; }
}
policy { b(); }"#;
    let setup = |root: &Path| {
        write(root, "/etc/hostname", "box\n");
        write(root, "/etc/app.conf", "box\n");
        write(root, "/etc/other", "other\n");
    };
    let r = differential(policy, &setup).unwrap();
    assert!(!r.converged, "{r:?}");
    assert_eq!(r.oscillating.len(), 1, "{:?}", r.oscillating);
    // Only the untouched `/etc/other` is ever counted as kept unchecked.
    assert_eq!(u64::from(r.passes - 1), r.checks_skipped, "{r:?}");
}

/// A command that repairs makes the next pass a full pass: what it changed
/// cannot be bounded. Here it rewrites a file the first pass found kept.
#[test]
fn a_command_makes_the_next_pass_check_everything() {
    let policy = r#"bundle b {
  file "/etc/a" { content = "a\n"; }
  file "/etc/b" { content = "b\n"; }
  command "spoil" { run = ["/bin/sh", "-c", "echo spoilt > \"$CONVERGE_ROOT/etc/a\""]; host = true; }
}
policy { b(); }"#;
    let setup = |root: &Path| {
        write(root, "/etc/a", "a\n");
        write(root, "/etc/b", "b\n");
    };
    let r = differential(policy, &setup).unwrap();
    // Pass 2 checks both files again (the command ran) and repairs
    // `/etc/a`; a third pass, if the pass limit allows it, counts both as
    // kept (`/etc/b` untouched since, `/etc/a` read back at its write).
    assert!(r.passes >= 2, "{r:?}");
    assert_eq!(r.checks_skipped, 2 * (u64::from(r.passes) - 2), "{r:?}");
    assert_eq!(r.promises[0].repaired_passes(), 1, "{r:?}");
}

/// An instance whose value changes with a class set on repair (a template
/// that reads the class) is checked again in the next pass even though
/// nothing touched its file; one whose value does not change is not.
#[test]
fn an_instance_whose_value_changed_is_checked_again() {
    let policy = r#"class c0;
bundle b {
  file "/etc/a" { content = "a\n"; on_repaired = c0; }
  file "/etc/t" { template = "t.tmpl"; }
  file "/etc/u" { content = "u\n"; }
}
policy { b(); }"#;
    let bytes = compile_files(&[
        ("policy.policy", policy),
        ("t.tmpl", "{% if c0 %}yes{% else %}no{% endif %}\n"),
    ]);
    let setup = |root: &Path| {
        write(root, "/etc/t", "no\n");
        write(root, "/etc/u", "u\n");
    };
    let r = compare(&bytes, policy, &setup).unwrap();
    let t = r.promises.iter().find(|p| p.promiser == "/etc/t").unwrap();
    assert_eq!(t.repaired_passes(), 1, "{r:?}");
    assert!(r.checks_skipped >= 1, "{r:?}");
}

/// A generated promise: on a small tree of two directories with three
/// files each, with guards and outcome classes over three classes.
#[derive(Clone, Debug)]
enum Gen {
    File {
        at: (u8, u8),
        content: u8,
        absent: bool,
        sets: Option<u8>,
        notify: Option<u8>,
    },
    Line {
        at: (u8, u8),
        text: u8,
    },
    Directory {
        dir: u8,
        purge: bool,
        sets: Option<u8>,
    },
    Link {
        at: (u8, u8),
        to: u8,
    },
    Command {
        id: u8,
        at: (u8, u8),
        text: u8,
        creates: bool,
    },
}

fn at() -> impl Strategy<Value = (u8, u8)> {
    (0u8..2, 0u8..3)
}

fn class() -> impl Strategy<Value = Option<u8>> {
    prop::option::weighted(0.3, 0u8..3)
}

fn gen() -> impl Strategy<Value = (Option<u8>, Gen)> {
    let promise = prop_oneof![
        5 => (at(), 0u8..5, prop::bool::weighted(0.15), class(), prop::option::weighted(0.2, 0u8..2))
            .prop_map(|(at, content, absent, sets, notify)| Gen::File { at, content, absent, sets, notify }),
        3 => (at(), 0u8..3).prop_map(|(at, text)| Gen::Line { at, text }),
        1 => (0u8..2, any::<bool>(), class()).prop_map(|(dir, purge, sets)| Gen::Directory { dir, purge, sets }),
        1 => (at(), 0u8..3).prop_map(|(at, to)| Gen::Link { at, to }),
        1 => (0u8..2, at(), 0u8..3, prop::bool::weighted(0.6))
            .prop_map(|(id, at, text, creates)| Gen::Command { id, at, text, creates }),
    ];
    (class(), promise)
}

fn path((d, f): (u8, u8)) -> String {
    format!("/t/d{d}/f{f}")
}

/// The policy text of generated promises: a promise on an object an
/// earlier one names with the same type is left out (a contradiction the
/// compiler refuses, or two commands of one name), and so is a `notify` of
/// a command that is not there.
fn policy(promises: &[(Option<u8>, Gen)]) -> String {
    let commands: Vec<u8> = promises
        .iter()
        .filter_map(|(_, p)| match p {
            Gen::Command { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    let mut body = String::new();
    for (guard, p) in promises {
        let set = |c: &Option<u8>| c.map_or(String::new(), |c| format!(" on_repaired = c{c};"));
        let (object, text) = match p {
            Gen::File {
                at,
                content,
                absent,
                sets,
                notify,
            } => {
                // Content from a fact: the compiler cannot see that a
                // `line` on the same file contradicts it, so the two fight
                // at run time.
                let what = if *absent {
                    "ensure = absent;".to_owned()
                } else if *content >= 3 {
                    "content = \"${sys.hostname}\\n\";".to_owned()
                } else {
                    format!("content = \"c{content}\\n\";")
                };
                let notify = notify
                    .filter(|n| commands.contains(n))
                    .map_or(String::new(), |n| format!(" notify = [command \"k{n}\"];"));
                (
                    format!("path {}", path(*at)),
                    format!("file \"{}\" {{ {what}{}{notify} }}", path(*at), set(sets)),
                )
            }
            Gen::Line { at, text } => (
                format!("line {} {text}", path(*at)),
                format!("line \"{}\" {{ present = \"l{text}\"; }}", path(*at)),
            ),
            Gen::Directory { dir, purge, sets } => (
                format!("path /t/d{dir}"),
                format!(
                    "directory \"/t/d{dir}\" {{ purge = {purge};{} }}",
                    set(sets)
                ),
            ),
            Gen::Link { at, to } => (
                format!("path {}", path(*at)),
                format!("link \"{}\" {{ target = \"/t/x{to}\"; }}", path(*at)),
            ),
            Gen::Command {
                id,
                at,
                text,
                creates,
            } => {
                let creates = if *creates {
                    format!(" creates = \"{}\";", path(*at))
                } else {
                    String::new()
                };
                (
                    format!("command k{id}"),
                    format!(
                        "command \"k{id}\" {{ run = [\"/bin/sh\", \"-c\", \"mkdir -p \\\"$CONVERGE_ROOT/t/d{}\\\" && echo m{text} >> \\\"$CONVERGE_ROOT{}\\\"\"]; host = true;{creates} }}",
                        at.0,
                        path(*at)
                    ),
                )
            }
        };
        if !seen.insert(object) {
            continue;
        }
        match guard {
            Some(c) => body.push_str(&format!("  when c{c} {{ {text} }}\n")),
            None => body.push_str(&format!("  {text}\n")),
        }
    }
    format!("class c0;\nclass c1;\nclass c2;\nbundle b {{\n{body}}}\npolicy {{ b(); }}\n")
}

/// The tree a generated run starts from: each of the six files absent,
/// with a promised content (most often `c0`, which `${sys.hostname}` is),
/// with lines, or with something else.
fn start() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0u8..6, 6)
}

fn setup(start: &[u8]) -> impl Fn(&Path) + '_ {
    move |root: &Path| {
        // `${sys.hostname}` is `c0`: a file holding `c0` keeps it.
        write(root, "/etc/hostname", "c0\n");
        for (i, s) in start.iter().enumerate() {
            let (d, f) = (i / 3, i % 3);
            let at = format!("/t/d{d}/f{f}");
            match s {
                0 => {}
                1 | 2 => write(root, &at, "c0\n"),
                3 => write(root, &at, "c1\n"),
                4 => write(root, &at, "c0\nl0\n"),
                _ => write(root, &at, "l1\n"),
            }
        }
    }
}

/// Generated policies (files, lines, directories with and without purge,
/// links, commands that write files promised elsewhere, guards and
/// outcome classes, `notify`): the incremental run and the full-pass run
/// are observed the same, and the rule does skip checks in some of them.
#[test]
fn incremental_passes_find_what_full_passes_find() {
    let mut runner = TestRunner::new(Config {
        cases: 160,
        failure_persistence: None,
        ..Config::default()
    });
    let skipped = std::cell::Cell::new(0u64);
    let several = std::cell::Cell::new(0u64);
    let strategy = (prop::collection::vec(gen(), 2..=12), start());
    runner
        .run(&strategy, |(promises, start)| {
            let text = policy(&promises);
            let errors = check_text(&text)
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .count();
            if errors > 0 {
                return Ok(());
            }
            let r = differential(&text, &setup(&start))?;
            skipped.set(skipped.get() + r.checks_skipped);
            if r.passes > 1 {
                several.set(several.get() + 1);
            }
            Ok(())
        })
        .unwrap();
    assert!(
        several.get() > 20,
        "too few runs of several passes: {}",
        several.get()
    );
    assert!(skipped.get() > 0, "the rule never skipped a check");
}
