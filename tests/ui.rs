//! Diagnostic snapshot tests: every `tests/ui/**/*.policy` file is checked by
//! the compiler, and its human and JSON renderings are snapshotted together
//! with the source. Add a test by adding a file.
//!
//! The first line of each file says what it must produce:
//! `// expect: ok` or `// expect: E0001 E0004` (the codes of all diagnostics,
//! in source order). That line is asserted independently of the snapshot,
//! so accepting a wrong snapshot cannot hide a missing or extra diagnostic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use converge_compiler::check::check;
use converge_compiler::render::{render_human, render_json};
use converge_compiler::workspace::{FileSystem, Workspace};

fn expected_codes(src: &str) -> Vec<String> {
    let first = src.lines().next().unwrap_or_default();
    let spec = first
        .strip_prefix("// expect:")
        .unwrap_or_else(|| panic!("first line must be `// expect: ...`, got {first:?}"))
        .trim();
    if spec == "ok" {
        Vec::new()
    } else {
        spec.split_whitespace().map(str::to_owned).collect()
    }
}

#[test]
fn ui() {
    let ui_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    insta::glob!("ui/**/*.policy", |path| {
        let src = std::fs::read_to_string(path).unwrap();
        // Relative to the package root (the test's working directory), so
        // file names in the snapshots are the same on every machine.
        let relative = Path::new("tests/ui").join(path.strip_prefix(&ui_dir).unwrap());
        let name = relative.to_string_lossy().replace('\\', "/");
        let mut ws = Workspace::new(FileSystem::new());
        ws.add_root(&relative).unwrap();
        let outcome = check(&ws);
        let db = &ws.db;

        let codes: Vec<String> = outcome
            .diagnostics
            .iter()
            .map(|d| d.code.to_string())
            .collect();
        assert_eq!(codes, expected_codes(&src), "diagnostic codes of {name}");

        let human = render_human(db, &outcome.diagnostics, false);
        let json = render_json(db, &outcome.diagnostics);
        insta::assert_snapshot!(format!(
            "----- SOURCE\n{src}----- HUMAN\n{human}----- JSON\n{json}\n"
        ));
    });
}
