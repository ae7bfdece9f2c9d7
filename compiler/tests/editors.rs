//! The editor integrations in `editors/` stay in step with the language:
//! the files parse, refer to files that exist, start `policyc lsp`, and the
//! VS Code grammar highlights every keyword and promise type.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use serde_json::Value;

fn editors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../editors")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(editors().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn json(path: &str) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn vscode_extension_is_complete() {
    let package = json("vscode/package.json");
    let dir = editors().join("vscode");
    assert!(dir.join(package["main"].as_str().unwrap()).is_file());
    let language = &package["contributes"]["languages"][0];
    assert_eq!(language["id"], "policy");
    assert_eq!(language["extensions"][0], ".policy");
    assert!(dir
        .join(language["configuration"].as_str().unwrap())
        .is_file());
    let grammar = &package["contributes"]["grammars"][0];
    assert!(dir.join(grammar["path"].as_str().unwrap()).is_file());
    json("vscode/language-configuration.json");
    let extension = read("vscode/extension.js");
    assert!(extension.contains(r#"args: ["lsp"]"#));
}

#[test]
fn textmate_grammar_covers_keywords_and_promise_types() {
    let grammar = json("vscode/syntaxes/policy.tmLanguage.json");
    assert_eq!(grammar["scopeName"], "source.policy");
    let keywords = grammar["repository"]["keywords"].to_string();
    for keyword in converge_grammar::token::KEYWORDS {
        assert!(
            keywords.contains(keyword),
            "keyword {keyword} not highlighted"
        );
    }
    let types = grammar["repository"]["promise-types"]["match"]
        .as_str()
        .unwrap()
        .to_owned();
    for t in converge_format::schema::PROMISE_TYPES {
        assert!(
            types.contains(&format!("|{}|", t.name))
                || types.contains(&format!("({}|", t.name))
                || types.contains(&format!("|{})", t.name)),
            "promise type {} not highlighted",
            t.name
        );
    }
}

#[test]
fn neovim_and_helix_start_the_server() {
    let nvim = read("neovim/policy.lua");
    assert!(nvim.contains(r#"cmd = { "policyc", "lsp" }"#));
    assert!(nvim.contains("policy = \"policy\""));
    let helix = read("helix/languages.toml");
    assert!(helix.contains("command = \"policyc\""));
    assert!(helix.contains("args = [\"lsp\"]"));
    assert!(helix.contains("file-types = [\"policy\"]"));
}

/// The v0.2 syntax is highlighted: `??`, function calls, and template tags
/// and comments inside strings (LANGUAGE.md sections 11 and 12), with
/// `${...}` holding any expression.
#[test]
fn textmate_grammar_covers_records_lookups_and_templates() {
    let grammar = json("vscode/syntaxes/policy.tmLanguage.json");
    let repo = &grammar["repository"];
    let operators = repo["operators"]["match"].as_str().unwrap();
    assert!(operators.starts_with(r"\?\?|"), "{operators}");
    let calls = repo["function-calls"]["match"].as_str().unwrap();
    assert!(calls.contains(r"(?=\()"), "{calls}");
    assert_eq!(
        repo["template-tag"]["begin"].as_str().unwrap().get(..4),
        Some(r"\{%\")
    );
    assert_eq!(repo["template-tag"]["end"], r"%\}");
    assert_eq!(repo["template-comment"]["begin"], r"\{#");
    assert_eq!(repo["interpolation"]["begin"], r"\$\{");
    assert_eq!(
        repo["interpolation"]["patterns"][0]["include"],
        "#expression"
    );
    // Both interpolating string forms include tags, comments and `${...}`.
    for form in [0, 2] {
        let inner = repo["strings"]["patterns"][form]["patterns"].to_string();
        for part in [
            "#template-tag",
            "#template-comment",
            "#interpolation",
            "#escapes",
        ] {
            assert!(inner.contains(part), "string form {form} lacks {part}");
        }
    }
    // The raw string form has none of them.
    assert!(repo["strings"]["patterns"][1].get("patterns").is_none());
    let definitions = repo["definitions"]["patterns"][0]["match"]
        .as_str()
        .unwrap();
    assert!(definitions.contains("|type)"), "{definitions}");
}

/// `defaults { ... }` and `defaults TYPE { ... }` (LANGUAGE.md section 17):
/// the word as a keyword and the type as a promise type, only before a
/// block (`defaults` stays an ordinary name elsewhere).
#[test]
fn textmate_grammar_highlights_defaults() {
    let grammar = json("vscode/syntaxes/policy.tmLanguage.json");
    let patterns = grammar["repository"]["keywords"]["patterns"]
        .as_array()
        .unwrap();
    let rule = patterns
        .iter()
        .find(|p| p["captures"]["1"]["name"] == "keyword.control.defaults.policy")
        .expect("a rule for `defaults`");
    assert_eq!(
        rule["captures"]["2"]["name"],
        "entity.name.type.promise.policy"
    );
    // The Rust regex crate has no lookahead: match the `{` instead.
    let pattern = rule["match"].as_str().unwrap();
    assert!(pattern.ends_with(r"(?=\s*\{)"), "{pattern}");
    let re = regex::Regex::new(&pattern.replace(r"(?=\s*\{)", r"\s*\{")).unwrap();
    let typed = re.captures("  defaults file { mode = 0o644; }").unwrap();
    assert_eq!(&typed[1], "defaults");
    assert_eq!(typed.get(2).map(|m| m.as_str()), Some("file"));
    let untyped = re.captures("defaults { notify = [];}").unwrap();
    assert!(untyped.get(2).is_none());
    assert!(!re.is_match("let defaults = 1;"));
    assert!(!re.is_match("content = defaults;"));
}
