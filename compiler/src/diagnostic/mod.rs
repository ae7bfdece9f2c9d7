//! The one diagnostic type every phase of `policyc` produces, and the CLI,
//! the JSON/SARIF writers and the language server consume.
//!
//! A diagnostic is plain data: a stable [`Code`], a severity, a message, and
//! labelled spans. Wording is decided by the phase that finds the problem
//! (see `syntax.rs`); drawing it is the business of `render/` alone, so the
//! same diagnostic looks right in a terminal, in CI and in an editor.

mod codes;

pub use codes::Code;

use converge_grammar::Span;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// A span with a short explanation. Exactly one label of a diagnostic is
/// primary: the place the problem is; secondary labels show related places
/// (the other definition, the other promise, the next step of a cycle).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
    pub primary: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub labels: Vec<Label>,
    pub notes: Vec<String>,
    pub help: Option<String>,
}

/// `noun` with its indefinite article: "an int", "a string", "an `Endpoint`".
/// The one place messages choose between "a" and "an": by the first letter
/// (after any backtick), which is right for every type and word the
/// compiler names.
pub fn with_article(noun: &str) -> String {
    let first = noun.trim_start_matches('`').chars().next();
    let vowel =
        first.is_some_and(|c| matches!(c.to_ascii_lowercase(), 'a' | 'e' | 'i' | 'o' | 'u'));
    if vowel {
        format!("an {noun}")
    } else {
        format!("a {noun}")
    }
}

impl Diagnostic {
    /// A diagnostic with the code's own severity and a primary label.
    pub fn new(
        code: Code,
        message: impl Into<String>,
        span: Span,
        label: impl Into<String>,
    ) -> Self {
        Diagnostic {
            code,
            severity: code.severity(),
            message: message.into(),
            labels: vec![Label {
                span,
                message: label.into(),
                primary: true,
            }],
            notes: Vec::new(),
            help: None,
        }
    }

    /// A diagnostic about no place in the sources (an analysis thread
    /// failed, a cycle with no step): it has no labels, so no renderer
    /// points at the first byte of the first file.
    pub fn unlocated(code: Code, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            severity: code.severity(),
            message: message.into(),
            labels: Vec::new(),
            notes: Vec::new(),
            help: None,
        }
    }

    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            span,
            message: message.into(),
            primary: false,
        });
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// The primary label's span; `None` for an [unlocated](Self::unlocated)
    /// diagnostic.
    pub fn primary_span(&self) -> Option<Span> {
        self.labels
            .iter()
            .find(|l| l.primary)
            .or(self.labels.first())
            .map(|l| l.span)
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Sorts diagnostics by file and position, errors before warnings at the
/// same place, so output is stable and reads top to bottom.
pub fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by_key(|d| {
        let span = d.primary_span().unwrap_or_default();
        (span.file, span.start, std::cmp::Reverse(d.severity), d.code)
    });
}

#[cfg(test)]
mod article_tests {
    use super::with_article;

    #[test]
    fn vowels_take_an() {
        assert_eq!(with_article("int"), "an int");
        assert_eq!(with_article("any"), "an any");
        assert_eq!(with_article("`Site`"), "a `Site`");
        assert_eq!(with_article("`Item`"), "an `Item`");
        assert_eq!(with_article("string"), "a string");
        assert_eq!(with_article("list<int>"), "a list<int>");
    }
}
