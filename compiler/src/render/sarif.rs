//! `--format sarif`: SARIF 2.1.0, as read by GitHub code scanning and most
//! CI dashboards. One run, one result per diagnostic; secondary labels become
//! `relatedLocations`; every registered code is a rule of the driver.

use serde_json::{json, Value};

use super::location::{locate, Location};
use crate::diagnostic::{Code, Diagnostic, Severity};
use crate::source::SourceDb;

pub fn render_sarif(db: &SourceDb, diagnostics: &[Diagnostic]) -> String {
    let rules: Vec<Value> = Code::ALL
        .iter()
        .map(|code| {
            json!({
                "id": code.as_str(),
                "name": code.title(),
                "shortDescription": { "text": code.title() },
                "defaultConfiguration": { "level": level(code.severity()) },
            })
        })
        .collect();
    let results: Vec<Value> = diagnostics.iter().map(|d| result(db, d)).collect();
    let sarif = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "policyc",
                    "version": env!("CARGO_PKG_VERSION"),
                    "rules": rules,
                }
            },
            "columnKind": "unicodeCodePoints",
            "results": results,
        }]
    });
    serde_json::to_string_pretty(&sarif).unwrap_or_default()
}

fn result(db: &SourceDb, d: &Diagnostic) -> Value {
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
    let locations: Vec<Value> = d
        .labels
        .iter()
        .filter(|l| l.primary)
        .map(|l| physical(&locate(db, l.span), &l.message))
        .collect();
    let related: Vec<Value> = d
        .labels
        .iter()
        .filter(|l| !l.primary)
        .enumerate()
        .map(|(i, l)| {
            let mut loc = physical(&locate(db, l.span), &l.message);
            if let Some(obj) = loc.as_object_mut() {
                obj.insert("id".to_owned(), json!(i));
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

fn physical(loc: &Location, message: &str) -> Value {
    json!({
        "physicalLocation": {
            "artifactLocation": { "uri": uri(&loc.file) },
            "region": {
                "startLine": loc.line,
                "startColumn": loc.column,
                "endLine": loc.end_line,
                "endColumn": loc.end_column,
            }
        },
        "message": { "text": message },
    })
}

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// A relative URI reference for a path: forward slashes, and the characters
/// that are not allowed unescaped in a URI percent-encoded.
fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.replace('\\', "/").bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(byte as char)
            }
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::uri;

    #[test]
    fn uris_are_escaped() {
        assert_eq!(uri("examples/site.policy"), "examples/site.policy");
        assert_eq!(uri("my dir/é.policy"), "my%20dir/%C3%A9.policy");
    }
}
