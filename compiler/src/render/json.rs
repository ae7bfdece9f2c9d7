//! `--format json`: `{"format": "converge-check/1", "diagnostics": [...]}`
//! with 1-based lines and columns (docs/schemas/converge-check-1.schema.json).

use serde::Serialize;

use super::location::locate;
use crate::diagnostic::Diagnostic;
use crate::source::SourceDb;

/// The `format` of `policyc check --format json`.
pub const CHECK_FORMAT: &str = "converge-check/1";

#[derive(Serialize)]
struct Output<'a> {
    format: &'static str,
    diagnostics: Vec<JsonDiagnostic<'a>>,
}

#[derive(Serialize)]
struct JsonDiagnostic<'a> {
    code: &'static str,
    severity: &'static str,
    message: &'a str,
    help: Option<&'a str>,
    notes: &'a [String],
    labels: Vec<JsonLabel<'a>>,
}

#[derive(Serialize)]
struct JsonLabel<'a> {
    file: String,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    message: &'a str,
    primary: bool,
}

pub fn render_json(db: &SourceDb, diagnostics: &[Diagnostic]) -> String {
    let output = Output {
        format: CHECK_FORMAT,
        diagnostics: diagnostics
            .iter()
            .map(|d| JsonDiagnostic {
                code: d.code.as_str(),
                severity: d.severity.as_str(),
                message: &d.message,
                help: d.help.as_deref(),
                notes: &d.notes,
                labels: d
                    .labels
                    .iter()
                    .map(|label| {
                        let loc = locate(db, label.span);
                        JsonLabel {
                            file: loc.file,
                            line: loc.line,
                            column: loc.column,
                            end_line: loc.end_line,
                            end_column: loc.end_column,
                            message: &label.message,
                            primary: label.primary,
                        }
                    })
                    .collect(),
            })
            .collect(),
    };
    // Serializing plain structs of strings and integers cannot fail.
    serde_json::to_string_pretty(&output).unwrap_or_default()
}
