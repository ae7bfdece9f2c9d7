//! Hostile or machine-generated input must produce diagnostics, never a
//! crash: deep nesting, very long chains, many errors. These run on the test
//! harness's threads, whose stacks are smaller than a main thread's, so a
//! recursion that could overflow in `policyc` overflows here first.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use converge_compiler::check::{check, CheckOutcome};
use converge_compiler::workspace::{FileSystem, Workspace};

fn check_text(text: String) -> CheckOutcome {
    let mut fs = FileSystem::new();
    fs.insert("big.policy", text);
    let mut ws = Workspace::new(fs);
    ws.add_root(std::path::Path::new("big.policy")).unwrap();
    check(&ws)
}

fn codes(outcome: &CheckOutcome) -> Vec<String> {
    let mut codes: Vec<String> = outcome
        .diagnostics
        .iter()
        .map(|d| d.code.to_string())
        .collect();
    codes.dedup();
    codes
}

#[test]
fn long_or_chains_are_flat() {
    let terms: Vec<String> = (0..20_000)
        .map(|i| format!("sys.hostname == \"h{i}\""))
        .collect();
    let text = format!(
        "class many = {};\nbundle b {{ when many {{ file \"/etc/x\" {{ content = \"x\"; }} }} }}\npolicy {{ b(); }}\n",
        terms.join(" || ")
    );
    let outcome = check_text(text);
    assert!(outcome.diagnostics.is_empty(), "{:?}", codes(&outcome));
}

#[test]
fn long_and_chains_of_undefined_classes_report_each() {
    let terms: Vec<String> = (0..5_000).map(|i| format!("c{i}")).collect();
    let text = format!("class many = {};\n", terms.join(" && "));
    let outcome = check_text(text);
    assert_eq!(codes(&outcome), vec!["E0105"]);
    assert_eq!(outcome.diagnostics.len(), 5_000);
}

#[test]
fn deep_brackets_are_refused() {
    for (open, close) in [("[", "]"), ("(", ")"), ("{", "}")] {
        let depth = 100_000;
        let text = format!("let x = {}1{};\n", open.repeat(depth), close.repeat(depth));
        let outcome = check_text(text);
        assert_eq!(codes(&outcome), vec!["E0012"], "{open}");
    }
}

#[test]
fn deep_negation_and_type_arguments_are_refused() {
    let text = format!("class x = {}any;\n", "!".repeat(100_000));
    assert_eq!(codes(&check_text(text)), vec!["E0012"]);
    let text = format!(
        "let x: {}string{} = [];\n",
        "list<".repeat(100_000),
        ">".repeat(100_000)
    );
    assert_eq!(codes(&check_text(text)), vec!["E0012"]);
}

#[test]
fn nesting_up_to_the_limit_is_fine() {
    let depth = 200;
    let text = format!(
        "class x = {}any{};\nlet l: list<string> = [\"a\"];\n",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    let outcome = check_text(text);
    assert!(outcome.diagnostics.is_empty(), "{:?}", codes(&outcome));
}

#[test]
fn deeply_nested_when_blocks_within_the_limit() {
    let depth = 200;
    let mut text = String::from("bundle b {\n");
    for i in 0..depth {
        text.push_str(&format!("when c{} {{\n", i % 2));
    }
    text.push_str("file \"/etc/x\" { content = \"x\"; }\n");
    text.push_str(&"}\n".repeat(depth));
    text.push_str("}\nclass c0;\nclass c1;\npolicy { b(); }\n");
    let outcome = check_text(text);
    assert!(outcome.diagnostics.is_empty(), "{:?}", codes(&outcome));
}
