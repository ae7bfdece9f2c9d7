//! Architecture invariants that a refactoring must not break silently.
//!
//! The dependency rules are checked on the real, resolved dependency graph
//! (`cargo metadata`), not on the text of the manifests: a crate pulled in
//! through another crate counts as much as one named directly.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeSet, HashMap};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// The workspace's resolved dependency graph, read once.
fn metadata() -> &'static Value {
    static META: OnceLock<Value> = OnceLock::new();
    META.get_or_init(|| {
        let output = Command::new(env!("CARGO"))
            .args(["metadata", "--format-version", "1", "--locked"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("cargo metadata runs");
        assert!(
            output.status.success(),
            "cargo metadata: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    })
}

/// The names of every package that `krate` links in a normal build (build
/// scripts and dev-dependencies excluded), found by walking the resolved
/// graph of `cargo metadata`.
fn linked_packages(krate: &str) -> BTreeSet<String> {
    let meta = metadata();
    let names: HashMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let nodes: HashMap<&str, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let start = names
        .iter()
        .find(|(_, name)| **name == krate)
        .map(|(id, _)| *id)
        .unwrap_or_else(|| panic!("no package {krate}"));
    let mut seen = BTreeSet::new();
    let mut todo = vec![start];
    while let Some(id) = todo.pop() {
        if !seen.insert(names[id].to_owned()) && id != start {
            continue;
        }
        for dep in nodes[id]["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            if normal {
                todo.push(dep["pkg"].as_str().unwrap());
            }
        }
    }
    seen.remove(krate);
    seen
}

fn assert_links_none(krate: &str, forbidden: &[&str]) {
    let linked = linked_packages(krate);
    let found: Vec<&&str> = forbidden.iter().filter(|f| linked.contains(**f)).collect();
    assert!(found.is_empty(), "{krate} links {found:?}");
}

/// The on-host VM must not link the compiler or the grammar: it stays small,
/// and its bundle reader is the trust boundary.
#[test]
fn vm_does_not_link_the_compiler() {
    assert_links_none(
        "converge-vm",
        &[
            "converge-grammar",
            "converge-compiler",
            "converge-stdlib",
            "lalrpop-util",
            "ariadne",
            "logos",
            "lsp-server",
        ],
    );
}

/// `policyc` links no HTTP or TLS stack and no VM: it shares only the format
/// crate and the pure evaluator (`converge-eval`) with the hosts.
#[test]
fn compiler_links_no_http_tls_or_vm() {
    assert_links_none(
        "converge-compiler",
        &[
            "converge-vm",
            "ureq",
            "rustls",
            "ring",
            "jiff",
            "webpki-roots",
        ],
    );
}

/// The format crate is what both sides share: it links neither side, and no
/// network or clock. It does parse TOML: the inventory (LANGUAGE.md §16) is
/// a contract of `policyc` and the collector, read by one parser.
#[test]
fn format_links_neither_side() {
    assert_links_none(
        "converge-format",
        &[
            "converge-vm",
            "converge-compiler",
            "converge-grammar",
            "ureq",
            "rustls",
            "jiff",
        ],
    );
}

/// The evaluator is what `policyc test` and `policyc plan` share with the
/// VM, so a preview resolves a policy exactly as a host does: it is pure
/// (no clock, no network, no TLS, no age decryption) and links neither
/// side's command line.
#[test]
fn eval_links_neither_side_nor_io() {
    assert_links_none(
        "converge-eval",
        &[
            "converge-vm",
            "converge-compiler",
            "converge-grammar",
            "converge-stdlib",
            "clap",
            "ureq",
            "rustls",
            "ring",
            "jiff",
            "tokio",
            "age",
        ],
    );
    let eval = linked_packages("converge-eval");
    assert!(
        eval.contains("converge-format"),
        "converge-eval should link converge-format"
    );
    for side in ["converge-vm", "converge-compiler"] {
        assert!(
            linked_packages(side).contains("converge-eval"),
            "{side} should link converge-eval: one evaluator for both"
        );
    }
}

/// The collector is a server of its own: it shares the format crate with
/// the hosts and `policyc` (the report and inventory contracts) and links
/// neither the compiler nor the VM.
#[test]
fn collector_links_neither_compiler_nor_vm() {
    assert_links_none(
        "converge-collector",
        &[
            "converge-compiler",
            "converge-vm",
            "converge-grammar",
            "converge-stdlib",
        ],
    );
    let collector = linked_packages("converge-collector");
    for expected in ["converge-format", "axum", "sqlx"] {
        assert!(
            collector.contains(expected),
            "converge-collector should link {expected}"
        );
    }
}

/// `policyc fleet` queries the collector with curl; the compiler itself
/// links no HTTP client or server stack (nor the collector).
#[test]
fn compiler_links_no_http_stack() {
    assert_links_none(
        "converge-compiler",
        &[
            "converge-collector",
            "hyper",
            "axum",
            "reqwest",
            "tokio",
            "sqlx",
        ],
    );
}

/// The grammar crate knows nothing of the compiler (the language server and
/// fuzzers parse without linking the back end).
#[test]
fn grammar_does_not_link_the_compiler_or_vm() {
    assert_links_none(
        "converge-grammar",
        &["converge-compiler", "converge-vm", "converge-format"],
    );
}

/// The checker really sees the graph: the VM does link the format crate and
/// its HTTP client, so an empty walk cannot pass the tests above.
#[test]
fn the_walk_finds_real_dependencies() {
    let vm = linked_packages("converge-vm");
    for expected in ["converge-format", "ureq", "rustls", "sha2"] {
        assert!(vm.contains(expected), "converge-vm should link {expected}");
    }
}

/// The system backends sit below the run: they produce outcomes
/// (`converge_vm::outcome`) for resolved instances (`converge_vm::instance`)
/// and never reach into `run`, which calls them (issue 15 item 6: the
/// `run` <-> `backend` cycle).
#[test]
fn vm_backends_do_not_depend_on_the_run() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("vm/src/backend");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            seen += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                !text.contains("crate::run"),
                "{} depends on crate::run",
                path.display()
            );
        }
    }
    assert!(seen > 5, "the backend directory was not found");
}
