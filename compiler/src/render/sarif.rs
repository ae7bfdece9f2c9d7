//! `--format sarif`: SARIF 2.1.0, as read by GitHub code scanning and most
//! CI dashboards. One run, one result per diagnostic; secondary labels become
//! `relatedLocations`; every registered code is a rule of the driver, with
//! its description and help taken from the diagnostics chapter of the book
//! ([`rule_docs`](super::rule_docs)). Where files are is
//! [`sarif_paths`](super::sarif_paths)' business.

use serde_json::{json, Value};

use super::location::{locate, Location};
use super::rule_docs::rule_doc;
use super::sarif_paths::SarifRoot;
use crate::diagnostic::{Code, Diagnostic, Label, Severity};
use crate::source::SourceDb;

/// The schema every log names (and the tests validate against).
const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// The log of a check that ran: one result per diagnostic.
pub fn render_sarif(db: &SourceDb, diagnostics: &[Diagnostic], root: &SarifRoot) -> String {
    let results: Vec<Value> = diagnostics.iter().map(|d| result(db, d, root)).collect();
    log(results, json!({ "executionSuccessful": true }), root)
}

/// The log of a check that could not run (an input that cannot be read):
/// no results, and the reason as a tool execution notification.
pub fn render_sarif_failure(message: &str, root: &SarifRoot) -> String {
    let invocation = json!({
        "executionSuccessful": false,
        "toolExecutionNotifications": [{
            "level": "error",
            "message": { "text": message },
        }],
    });
    log(Vec::new(), invocation, root)
}

fn log(results: Vec<Value>, invocation: Value, root: &SarifRoot) -> String {
    let sarif = json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "policyc",
                    "version": env!("CARGO_PKG_VERSION"),
                    "informationUri": env!("CARGO_PKG_REPOSITORY"),
                    "rules": Code::ALL.iter().map(|c| rule(*c)).collect::<Vec<_>>(),
                }
            },
            "invocations": [invocation],
            "originalUriBaseIds": root.base_ids(),
            "columnKind": "unicodeCodePoints",
            "results": results,
        }]
    });
    // Serializing a `Value` cannot fail.
    serde_json::to_string_pretty(&sarif).unwrap_or_default()
}

fn rule(code: Code) -> Value {
    let mut rule = json!({
        "id": code.as_str(),
        "name": code.title(),
        "shortDescription": { "text": code.title() },
        "defaultConfiguration": { "level": level(code.severity()) },
    });
    if let (Some(doc), Some(obj)) = (rule_doc(code), rule.as_object_mut()) {
        obj.insert("fullDescription".to_owned(), json!({ "text": doc.summary }));
        obj.insert(
            "help".to_owned(),
            json!({ "text": doc.text, "markdown": doc.markdown }),
        );
        obj.insert("helpUri".to_owned(), json!(doc.uri));
    }
    rule
}

/// Whether a label is in the embedded standard library, which is not in the
/// user's repository.
fn in_stdlib(db: &SourceDb, label: &Label) -> bool {
    db.get(label.span.file)
        .is_some_and(|f| f.tree.is_none() && converge_stdlib::source(&f.name).is_some())
}

fn result(db: &SourceDb, d: &Diagnostic, root: &SarifRoot) -> Value {
    let mut text = d.message.clone();
    for note in &d.notes {
        text.push_str("\nnote: ");
        text.push_str(note);
    }
    if let Some(help) = &d.help {
        text.push_str("\nhelp: ");
        text.push_str(help);
    }
    let rule_index = Code::ALL.iter().position(|c| *c == d.code).unwrap_or(0);
    // The result's location is the primary label, unless that is in the
    // standard library: then the first label in the user's files (the call
    // that brought the library's promise in) takes its place, and the
    // library's place becomes a related location.
    let primary = d
        .labels
        .iter()
        .position(|l| l.primary)
        .or(if d.labels.is_empty() { None } else { Some(0) });
    let shown = match primary {
        Some(p) if d.labels.get(p).is_some_and(|l| in_stdlib(db, l)) => {
            d.labels.iter().position(|l| !in_stdlib(db, l)).or(Some(p))
        }
        other => other,
    };
    let physical_of = |l: &Label| physical(db, root, l);
    let locations: Vec<Value> = match shown.and_then(|i| d.labels.get(i)) {
        Some(label) => vec![physical_of(label)],
        None => unlocated(db, root).into_iter().collect(),
    };
    let related: Vec<Value> = d
        .labels
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != shown)
        .enumerate()
        .map(|(id, (_, l))| {
            let mut loc = physical_of(l);
            if let Some(obj) = loc.as_object_mut() {
                obj.insert("id".to_owned(), json!(id));
            }
            loc
        })
        .collect();
    json!({
        "ruleId": d.code.as_str(),
        "ruleIndex": rule_index,
        "level": level(d.severity),
        "message": { "text": text },
        "locations": locations,
        "relatedLocations": related,
    })
}

/// A diagnostic without any label (an import cycle, an internal error) is
/// placed at the top of the first of the user's files: code scanning
/// drops a result without a location.
fn unlocated(db: &SourceDb, root: &SarifRoot) -> Option<Value> {
    let (_, file) = db.iter().find(|(_, f)| f.tree.is_some())?;
    Some(json!({
        "physicalLocation": {
            "artifactLocation": root.artifact(&file.name, false),
            "region": { "startLine": 1, "startColumn": 1 },
        }
    }))
}

fn physical(db: &SourceDb, root: &SarifRoot, label: &Label) -> Value {
    let loc: Location = locate(db, label.span);
    json!({
        "physicalLocation": {
            "artifactLocation": root.artifact(&loc.file, in_stdlib(db, label)),
            "region": {
                "startLine": loc.line,
                "startColumn": loc.column,
                "endLine": loc.end_line,
                "endColumn": loc.end_column,
            }
        },
        "message": { "text": label.message },
    })
}

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}
