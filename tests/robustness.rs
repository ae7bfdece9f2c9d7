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

// ------------------------------------------------ long chains (issue 14, items 21-23)

/// How long the chains of the tests below are. 100,000 is what the issue
/// asks; the debug build checks that in a few seconds when every pass is
/// linear (a quadratic pass would take minutes, a recursive one overflows
/// the test thread's 2 MiB stack long before).
const CHAIN: usize = 100_000;
/// Classes cost more per link (every guard is solved with the definitions
/// it depends on); the debug test uses 20,000 and `bench/chains.sh`
/// times 100,000 in release (docs/performance.md).
const CLASS_CHAIN: usize = 20_000;

fn checked_program(text: String) -> (CheckOutcome, converge_compiler::ir::Program) {
    let mut outcome = check_text(text);
    let errors: Vec<String> = outcome
        .diagnostics
        .iter()
        .map(|d| format!("{} {}", d.code, d.message))
        .take(5)
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let program = outcome.programs.pop().unwrap().program;
    (outcome, program)
}

#[test]
fn a_long_chain_of_lets_checks_in_either_order() {
    for reversed in [false, true] {
        let mut lets: Vec<String> = vec!["let l0 = \"deep\";".to_owned()];
        lets.extend((1..CHAIN).map(|i| format!("let l{i} = l{};", i - 1)));
        if reversed {
            lets.reverse();
        }
        let text = format!(
            "{}\nbundle b {{ file \"/etc/x\" {{ content = l{}; }} }}\npolicy {{ b(); }}\n",
            lets.join("\n"),
            CHAIN - 1
        );
        let (_, program) = checked_program(text);
        let content = program.promises[0].attr("content").unwrap();
        assert_eq!(content.as_str(), Some("deep"), "reversed: {reversed}");
    }
}

#[test]
fn a_long_chain_of_bodies_checks() {
    let mut text = String::from("body b0 { mode = 0o640; }\n");
    for i in 1..CHAIN {
        text.push_str(&format!("body b{i} {{ use b{}; }}\n", i - 1));
    }
    text.push_str(&format!(
        "bundle x {{ file \"/etc/x\" {{ content = \"x\"; use b{}; }} }}\npolicy {{ x(); }}\n",
        CHAIN - 1
    ));
    let (_, program) = checked_program(text);
    let mode = program.promises[0].attr("mode").unwrap();
    assert_eq!(*mode, converge_compiler::ir::Value::Int(0o640));
}

#[test]
fn a_long_chain_of_classes_checks_and_orders() {
    // c0 is set by an outcome; the last class of the chain guards a promise,
    // which must therefore come after the promise that sets c0.
    let mut text = String::from("class c0;\n");
    for i in 1..CLASS_CHAIN {
        text.push_str(&format!(
            "class c{i} = c{} || sys.hostname == \"h{i}\";\n",
            i - 1
        ));
    }
    text.push_str(&format!(
        "bundle b {{\n  when c{} {{ file \"/etc/y\" {{ content = \"y\"; }} }}\n  file \"/etc/x\" {{ content = \"x\"; on_repaired = c0; }}\n}}\npolicy {{ b(); }}\n",
        CLASS_CHAIN - 1
    ));
    let (_, program) = checked_program(text);
    let x = program
        .promises
        .iter()
        .position(|p| p.promiser.as_str() == Some("/etc/x"))
        .unwrap();
    let y = program
        .promises
        .iter()
        .position(|p| p.promiser.as_str() == Some("/etc/y"))
        .unwrap();
    let pos = |i| program.order.iter().position(|&o| o == i).unwrap();
    assert!(
        pos(x) < pos(y),
        "the outcome edge through the chain is lost"
    );
    assert_eq!(program.pass_limit, 3);
}

#[test]
fn a_long_chain_of_bundle_calls_is_a_diagnostic_not_a_crash() {
    let mut text = String::new();
    for i in 0..CHAIN - 1 {
        text.push_str(&format!(
            "bundle b{i} {{ file \"/etc/x{i}\" {{ content = \"x\"; }} b{}(); }}\n",
            i + 1
        ));
    }
    text.push_str(&format!(
        "bundle b{} {{ }}\npolicy {{ b0(); }}\n",
        CHAIN - 1
    ));
    let outcome = check_text(text);
    assert_eq!(codes(&outcome), vec!["E0601"]);
}
