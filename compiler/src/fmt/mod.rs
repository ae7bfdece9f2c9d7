//! `policyc fmt` and the language server's formatting: one canonical layout
//! for policy source.
//!
//! The layout (see [`layout`]): two-space indentation; one attribute per
//! line with `=` aligned across a run of attributes (and of class
//! definitions) not broken by a blank line; a promise, body or block
//! written on one line stays on one line when it holds no comment and fits
//! in [`layout::WIDTH`] columns; lists and maps break one element per line
//! when written with a trailing comma, holding a comment, or too long; one
//! blank line around bundles, bodies and the policy block and between items
//! of different kinds, and where the author left one (never more than one);
//! comments stay where they were.
//!
//! Formatting only changes whitespace, the optional `;` after `exclusive`,
//! redundant parentheses and the empty parameter list `()`. Every result is
//! checked before it is returned: it must parse to the same tree (spans
//! aside) and keep every comment, in order. A file with syntax errors is
//! refused, since its tree does not hold all of its text.

mod flat;
/// The layout rules and the printer; public for [`layout::WIDTH`].
pub mod layout;

use converge_grammar::spanless::SpanlessEq;
use converge_grammar::{FileId, SyntaxError};

use crate::diagnostic::Diagnostic;

/// Why a text was not formatted.
#[derive(Debug)]
pub enum FormatError {
    /// The text does not parse; formatting it could lose what the parser
    /// skipped.
    Syntax(Vec<SyntaxError>),
    /// The formatter would have changed the meaning or lost a comment (a bug
    /// in the formatter); the text is left as it was.
    NotPreserved(String),
}

impl FormatError {
    /// The syntax errors as diagnostics (empty for other errors).
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        match self {
            FormatError::Syntax(errors) => {
                errors.iter().map(crate::syntax::to_diagnostic).collect()
            }
            FormatError::NotPreserved(_) => Vec::new(),
        }
    }
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatError::Syntax(errors) => write!(
                f,
                "has {} syntax error{}; fix {} first (`policyc check` shows where)",
                errors.len(),
                if errors.len() == 1 { "" } else { "s" },
                if errors.len() == 1 { "it" } else { "them" }
            ),
            FormatError::NotPreserved(what) => write!(
                f,
                "cannot be formatted without changing it ({what}); this is a bug in `policyc fmt`, \
                 please report it with the file"
            ),
        }
    }
}

/// The canonical layout of `src`.
pub fn format(src: &str) -> Result<String, FormatError> {
    let (module, errors) = converge_grammar::parse(FileId(0), src);
    if !errors.is_empty() {
        return Err(FormatError::Syntax(errors));
    }
    let comments = converge_grammar::comments(src);
    let out = layout::Printer::new(src, &comments).module(&module);
    let (formatted, errors) = converge_grammar::parse(FileId(0), &out);
    if !errors.is_empty() {
        return Err(FormatError::NotPreserved(
            "the result does not parse".to_owned(),
        ));
    }
    if !module.spanless_eq(&formatted) {
        return Err(FormatError::NotPreserved(
            "the result parses to a different tree".to_owned(),
        ));
    }
    let texts = |cs: &[converge_grammar::Comment]| -> Vec<String> {
        cs.iter().map(|c| c.text.trim_end().to_owned()).collect()
    };
    if texts(&comments) != texts(&converge_grammar::comments(&out)) {
        return Err(FormatError::NotPreserved(
            "a comment would be lost or reordered".to_owned(),
        ));
    }
    Ok(out)
}
