//! The compiler's [`Diagnostic`] as an LSP diagnostic: the primary label is
//! the range; when there are several labels, every one with something to
//! say becomes related information (for a contradiction both promises, with
//! the value each sets; for a cycle every step; for a duplicate both
//! definitions), so an editor lists them all with links; notes and help are
//! appended to the message.

use lsp_types::{DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString, Url};

use crate::diagnostic::{Diagnostic, Severity};

use super::analysis::Analysis;
use super::position::span_range;

/// Converts one diagnostic of an analysis (primary label in a file of that
/// analysis).
pub fn to_lsp(analysis: &Analysis, d: &Diagnostic) -> Option<lsp_types::Diagnostic> {
    let primary = d.primary_span()?;
    let range = span_range(analysis, primary);
    let mut message = d.message.clone();
    for note in &d.notes {
        message.push_str("\nnote: ");
        message.push_str(note);
    }
    if let Some(help) = &d.help {
        message.push_str("\nhelp: ");
        message.push_str(help);
    }
    let related: Vec<DiagnosticRelatedInformation> = d
        .labels
        .iter()
        .filter(|l| !l.primary || (!l.message.is_empty() && d.labels.len() > 1))
        .filter_map(|l| {
            let uri = Url::from_file_path(analysis.path(l.span.file)?).ok()?;
            Some(DiagnosticRelatedInformation {
                location: Location::new(uri, span_range(analysis, l.span)),
                message: if l.message.is_empty() {
                    "related".to_owned()
                } else {
                    l.message.clone()
                },
            })
        })
        .collect();
    Some(lsp_types::Diagnostic {
        range,
        severity: Some(match d.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(d.code.as_str().to_owned())),
        source: Some("policyc".to_owned()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        ..lsp_types::Diagnostic::default()
    })
}
