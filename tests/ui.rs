//! Diagnostic snapshot tests: every `tests/ui/**/*.policy` file is checked by
//! the compiler, and its human and JSON renderings are snapshotted together
//! with the source. Add a test by adding a file.
//!
//! The first line of each file says what it must produce:
//! `// expect: ok` or `// expect: E0001 E0004@7` (the codes of all
//! diagnostics in source order, each optionally with the line of its primary
//! label). That line is asserted independently of the snapshot, so accepting
//! a wrong snapshot cannot hide a missing, extra or misplaced diagnostic.

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

        let expected = expected_codes(&src);
        let json: serde_json::Value =
            serde_json::from_str(&render_json(db, &outcome.diagnostics)).unwrap();
        let found: Vec<String> = json["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .zip(
                expected
                    .iter()
                    .map(|e| e.contains('@'))
                    .chain(std::iter::repeat(false)),
            )
            .map(|(d, with_line)| {
                let code = d["code"].as_str().unwrap().to_owned();
                let primary = d["labels"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|l| l["primary"] == true)
                    .unwrap();
                if with_line {
                    format!("{code}@{}", primary["line"])
                } else {
                    code
                }
            })
            .collect();
        assert_eq!(found, expected, "diagnostics of {name}");

        let human = render_human(db, &outcome.diagnostics, false);
        let json = render_json(db, &outcome.diagnostics);
        insta::assert_snapshot!(format!(
            "----- SOURCE\n{src}----- HUMAN\n{human}----- JSON\n{json}\n"
        ));
    });
}
