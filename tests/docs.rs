//! The documentation stays in step with the code.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use converge_compiler::diagnostic::Code;

fn doc(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every diagnostic code has a section `## CODE: title` in diagnostics.md.
#[test]
fn every_code_is_documented() {
    let page = doc("diagnostics.md");
    for code in Code::ALL {
        let heading = format!("## {}: {}", code.as_str(), code.title());
        assert!(
            page.contains(&heading),
            "docs/diagnostics.md lacks `{heading}`"
        );
    }
}

/// Every chapter named in SUMMARY.md exists, and every chapter is named.
#[test]
fn book_summary_matches_the_files() {
    let summary = doc("SUMMARY.md");
    let linked: Vec<&str> = summary
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .collect();
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    for link in &linked {
        assert!(
            docs.join(link).is_file(),
            "SUMMARY.md links to missing {link}"
        );
    }
    for entry in std::fs::read_dir(&docs).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && name != "SUMMARY.md" {
            assert!(
                linked.contains(&name.as_str()),
                "docs/{name} is not in SUMMARY.md"
            );
        }
    }
}

/// All `.rs` files under `dir`, recursively, skipping build output.
fn rust_sources(dir: &Path, out: &mut String) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() && name != "target" && !name.starts_with('.') {
            rust_sources(&path, out);
        } else if name.ends_with(".rs") {
            out.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// Every test docs/security.md points at as evidence exists: a claim whose
/// test was renamed or deleted must not keep citing it.
#[test]
fn every_test_security_md_cites_exists() {
    let page = doc("security.md");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = String::new();
    for dir in [
        "tests",
        "format",
        "vm",
        "compiler",
        "grammar",
        "fuzz",
        "collector",
    ] {
        rust_sources(&root.join(dir), &mut sources);
    }
    let cited: Vec<&str> = page
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            s.matches('_').count() >= 3
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .collect();
    assert!(cited.len() > 20, "found only {cited:?}");
    for name in cited {
        assert!(
            sources.contains(&format!("fn {name}(")),
            "docs/security.md cites `{name}`, which is no test or function"
        );
    }
}

/// The book stands alone: it never sends a reader to the project's
/// specification files, which are not in the repository.
#[test]
fn the_book_cites_no_document_outside_it() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&docs).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            for outside in [
                "LANGUAGE.md",
                "ARCHITECTURE.md",
                "THREATS.md",
                "STYLE-ANCHORS.md",
            ] {
                if line.contains(outside) {
                    found.push(format!("{}:{}: {line}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
