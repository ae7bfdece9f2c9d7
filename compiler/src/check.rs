//! `policyc check`: everything that can be said about policy source without
//! running it. Pure: takes files already loaded into a [`SourceDb`] and
//! returns diagnostics; reading files is the CLI's job.

use converge_grammar::ast::Module;
use converge_grammar::FileId;

use crate::diagnostic::{self, Diagnostic, Severity};
use crate::source::SourceDb;
use crate::syntax;

/// The outcome of checking a set of files.
#[derive(Debug, Default)]
pub struct CheckOutcome {
    pub modules: Vec<Module>,
    pub diagnostics: Vec<Diagnostic>,
}

impl CheckOutcome {
    pub fn count(&self, severity: Severity) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == severity)
            .count()
    }
}

/// Parses every file of the database and collects their diagnostics,
/// sorted by position.
pub fn check(db: &SourceDb) -> CheckOutcome {
    let mut outcome = CheckOutcome::default();
    for (id, file) in db.iter() {
        let (module, errors) = parse_file(id, &file.text);
        outcome.modules.push(module);
        outcome
            .diagnostics
            .extend(errors.iter().map(syntax::to_diagnostic));
    }
    diagnostic::sort(&mut outcome.diagnostics);
    outcome
}

fn parse_file(id: FileId, text: &str) -> (Module, Vec<converge_grammar::SyntaxError>) {
    converge_grammar::parse(id, text)
}

/// `checked 3 files: no errors`, `checked 3 files: 2 errors, 1 warning`.
pub fn summary(files: usize, outcome: &CheckOutcome) -> String {
    let plural = |n: usize, word: &str| {
        if n == 1 {
            format!("{n} {word}")
        } else {
            format!("{n} {word}s")
        }
    };
    let errors = outcome.count(Severity::Error);
    let warnings = outcome.count(Severity::Warning);
    let found = match (errors, warnings) {
        (0, 0) => "no errors".to_owned(),
        (e, 0) => plural(e, "error"),
        (0, w) => format!("no errors, {}", plural(w, "warning")),
        (e, w) => format!("{}, {}", plural(e, "error"), plural(w, "warning")),
    };
    format!("checked {}: {found}", plural(files, "file"))
}
