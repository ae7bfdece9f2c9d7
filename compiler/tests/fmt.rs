//! `policyc fmt`: the layout of small inputs (one snapshot per file in
//! `tests/fmt_cases/`: add a case by adding a file), the properties every
//! input must have (idempotent, same tree, same comments), the repository's
//! own policy files being formatted, and the command line.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use converge_compiler::fmt::format;
use converge_grammar::ast::Module;
use converge_grammar::spanless::SpanlessEq;
use converge_grammar::FileId;
use logos::Logos;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.policy` file of the examples and the standard library.
fn repository_policies() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["examples", "stdlib/std", "stdlib/tests"] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "policy") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() > 15, "found {files:?}");
    files
}

fn tree(src: &str) -> Module {
    let (module, errors) = converge_grammar::parse(FileId(0), src);
    assert!(errors.is_empty(), "{errors:?}");
    module
}

fn comments(src: &str) -> Vec<String> {
    converge_grammar::comments(src)
        .into_iter()
        .map(|c| c.text)
        .collect()
}

/// The properties of `policyc fmt` on one input.
fn assert_properties(name: &str, src: &str) {
    let once = format(src).unwrap_or_else(|e| panic!("{name}: {e}"));
    let twice = format(&once).unwrap_or_else(|e| panic!("{name} (second pass): {e}"));
    assert_eq!(once, twice, "{name}: fmt(fmt(x)) != fmt(x)");
    assert!(
        tree(src).spanless_eq(&tree(&once)),
        "{name}: the tree changed"
    );
    assert_eq!(comments(src), comments(&once), "{name}: comments changed");
    assert!(once.ends_with('\n') && !once.ends_with("\n\n"), "{name}");
    assert!(
        !once.lines().any(|l| l.ends_with(' ')),
        "{name}: trailing spaces"
    );
}

/// The same tokens with different whitespace between them: each run of
/// whitespace (not one holding a comment) becomes a space, a line break
/// with odd indentation, or two spaces, in turn.
fn scramble(src: &str) -> String {
    let mut out = String::new();
    let mut last = 0;
    for (i, (_, span)) in converge_grammar::token::Token::lexer(src)
        .spanned()
        .enumerate()
    {
        let gap = &src[last..span.start];
        if gap.is_empty() || gap.contains('/') {
            out.push_str(gap);
        } else {
            out.push_str(["   ", "\n     ", " "][i % 3]);
        }
        out.push_str(&src[span.clone()]);
        last = span.end;
    }
    out.push_str(&src[last..]);
    out
}

#[test]
fn layout_of_each_case() {
    insta::glob!("fmt_cases/*.policy", |path| {
        let src = std::fs::read_to_string(path).unwrap();
        let formatted = format(&src).unwrap();
        assert_properties(&path.display().to_string(), &src);
        insta::assert_snapshot!(formatted);
    });
}

#[test]
fn repository_policies_are_formatted() {
    let unformatted: Vec<PathBuf> = repository_policies()
        .into_iter()
        .filter(|p| {
            let src = std::fs::read_to_string(p).unwrap();
            format(&src).unwrap() != src
        })
        .collect();
    assert!(
        unformatted.is_empty(),
        "run `policyc fmt` on {unformatted:?}"
    );
}

#[test]
fn properties_hold_on_repository_policies_and_scrambled_copies() {
    for path in repository_policies() {
        let src = std::fs::read_to_string(&path).unwrap();
        let name = path.display().to_string();
        assert_properties(&name, &src);
        let scrambled = scramble(&src);
        assert_ne!(scrambled, src);
        assert!(
            tree(&scrambled).spanless_eq(&tree(&src)),
            "{name}: scramble changed the tree"
        );
        assert_properties(&format!("{name} (scrambled)"), &scrambled);
    }
}

/// The test corpus of the diagnostics and fuzz suites: odd but valid
/// inputs (files with syntax errors are skipped; fmt refuses them).
#[test]
fn properties_hold_on_the_test_corpus() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "policy") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&repo().join("tests/ui"), &mut files);
    walk(&repo().join("fuzz/seeds"), &mut files);
    walk(&repo().join("fuzz/regressions"), &mut files);
    let mut formatted = 0;
    for path in files {
        let src = std::fs::read_to_string(&path).unwrap();
        if !converge_grammar::parse(FileId(0), &src).1.is_empty() {
            assert!(format(&src).is_err());
            continue;
        }
        assert_properties(&path.display().to_string(), &src);
        formatted += 1;
    }
    assert!(formatted > 40, "only {formatted} files");
}

#[test]
fn syntax_errors_are_refused() {
    let err = format("bundle b { file \"/x\" { mode = ; } }\n").unwrap_err();
    assert!(err.to_string().contains("1 syntax error"), "{err}");
    assert_eq!(err.diagnostics().len(), 1);
}

fn policyc() -> Command {
    Command::cargo_bin("policyc").unwrap()
}

#[test]
fn check_lists_files_that_would_change_and_fmt_rewrites_them() {
    let dir = tempfile::tempdir().unwrap();
    let messy = dir.path().join("messy.policy");
    let clean = dir.path().join("clean.policy");
    std::fs::write(&messy, "class  a=b;\n").unwrap();
    std::fs::write(&clean, "class a = b;\n").unwrap();

    let out = policyc()
        .args(["fmt", "--check"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.trim(), messy.display().to_string());
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 file would be reformatted"));
    assert_eq!(
        std::fs::read_to_string(&messy).unwrap(),
        "class  a=b;\n",
        "--check writes nothing"
    );

    let out = policyc()
        .arg("fmt")
        .arg(&messy)
        .arg(&clean)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(std::fs::read_to_string(&messy).unwrap(), "class a = b;\n");

    let out = policyc()
        .args(["fmt", "--check"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
}

#[test]
fn a_file_with_syntax_errors_is_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.policy");
    let text = "bundle  b { file \"/x\" { mode = ; } }\n";
    std::fs::write(&broken, text).unwrap();
    let out = policyc().arg("fmt").arg(&broken).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("has 1 syntax error"), "{stderr}");
    assert!(stderr.contains("left unchanged"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&broken).unwrap(), text);
}

#[test]
fn a_missing_file_is_an_io_error() {
    let out = policyc()
        .args(["fmt", "/nonexistent/x.policy"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(66));
}
