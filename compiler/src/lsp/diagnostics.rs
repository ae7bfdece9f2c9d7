//! The compiler's [`Diagnostic`] as an LSP diagnostic: the primary label is
//! the range; when there are several labels, every one with something to
//! say becomes related information (for a contradiction both promises, with
//! the value each sets; for a cycle every step; for a duplicate both
//! definitions), so an editor lists them all with links; notes and help are
//! appended to the message.

use lsp_types::{DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString, Url};

use converge_grammar::FileId;

use crate::diagnostic::{Diagnostic, Severity};

use super::analysis::Analysis;
use super::position::span_range;

/// The file a diagnostic is shown in: its primary label's, or the root
/// document for one without a location (E0900 from a failed analysis), so
/// the editor still shows it.
pub fn shown_in(analysis: &Analysis, d: &Diagnostic) -> FileId {
    d.primary_span().map_or(analysis.root, |s| s.file)
}

/// Converts one diagnostic of an analysis (primary label in a file of that
/// analysis; one without a location at the top of the root document).
pub fn to_lsp(analysis: &Analysis, d: &Diagnostic) -> Option<lsp_types::Diagnostic> {
    let range = match d.primary_span() {
        Some(primary) => span_range(analysis, primary),
        None => lsp_types::Range::default(),
    };
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::HashMap;
    use std::path::PathBuf;

    use super::*;
    use crate::diagnostic::Code;
    use crate::lsp::analysis::Settings;

    #[test]
    fn a_diagnostic_without_a_location_is_shown_at_the_top_of_the_root() {
        let root = PathBuf::from("/nonexistent/converge-lsp-test/site.policy");
        let open = HashMap::from([(root.clone(), "policy { }\n".to_owned())]);
        let analysis = Analysis::run(&root, &open, &Settings::default()).unwrap();
        let d = Diagnostic::unlocated(Code::InternalError, "the analysis failed: boom");
        assert_eq!(shown_in(&analysis, &d), analysis.root);
        let shown = to_lsp(&analysis, &d).expect("an unlocated diagnostic is shown");
        assert_eq!(shown.range.start.line, 0);
        assert!(shown.message.contains("the analysis failed: boom"));
    }
}
