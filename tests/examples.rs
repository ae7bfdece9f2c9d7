//! Every policy the project ships — `examples/`, the standard library and
//! its test policies — checks clean. Add an example by adding a file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use converge_compiler::check::check;
use converge_compiler::render::render_human;
use converge_compiler::workspace::{FileSystem, Workspace};

fn policy_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            policy_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "policy") {
            out.push(path);
        }
    }
}

fn assert_all_clean(dir: &str, at_least: usize) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    policy_files(&root.join(dir), &mut files);
    assert!(
        files.len() >= at_least,
        "expected at least {at_least} policies in {dir}, found {}",
        files.len()
    );
    let mut ws = Workspace::new(FileSystem::new());
    for file in &files {
        ws.add_root(file.strip_prefix(root).unwrap()).unwrap();
    }
    let outcome = check(&ws);
    assert!(
        outcome.diagnostics.is_empty(),
        "{dir} does not check clean:\n{}",
        render_human(&ws.db, &outcome.diagnostics, false)
    );
}

#[test]
fn examples_check_clean() {
    assert_all_clean("examples", 8);
}

#[test]
fn stdlib_checks_clean() {
    assert_all_clean("stdlib/std", 4);
}

#[test]
fn stdlib_test_policies_check_clean() {
    assert_all_clean("stdlib/tests", 4);
}

/// `examples/demo.sh` runs `examples/sandbox.policy` for real on a sandbox
/// root. Commands are never chrooted, so that policy must have none.
#[test]
fn the_sandbox_example_runs_no_command() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut ws = Workspace::new(FileSystem::new());
    ws.add_root(&root.join("examples/sandbox.policy")).unwrap();
    let outcome = check(&ws);
    let program = &outcome.programs.first().expect("a program").program;
    assert!(program.promises.len() > 20);
    let commands: Vec<_> = program
        .promises
        .iter()
        .filter(|p| p.kind == "command")
        .collect();
    assert!(
        commands.is_empty(),
        "sandbox.policy would run commands on the machine: {commands:?}"
    );
}
