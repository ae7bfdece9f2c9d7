//! `policyc check`: everything that can be said about policy source without
//! running it. Pure apart from the file reading done by the [`Workspace`]:
//! parse, resolve imports, then analyse each program.

use crate::diagnostic::{self, Diagnostic, Severity};
use crate::ir;
use crate::sema;
use crate::workspace::Workspace;

/// An expanded program and the files it was read from (root first).
#[derive(Debug)]
pub struct CheckedProgram {
    pub files: Vec<converge_grammar::FileId>,
    pub program: ir::Program,
}

/// The outcome of checking everything a workspace loaded.
#[derive(Debug, Default)]
pub struct CheckOutcome {
    pub diagnostics: Vec<Diagnostic>,
    /// Files read, imports and the standard library included.
    pub files: usize,
    /// Promises of all programs (expanded where there is a `policy` block).
    pub promises: usize,
    /// The expanded programs that had no errors, with their files.
    pub programs: Vec<CheckedProgram>,
    /// The name table of every program (for the language server).
    pub names: Vec<sema::names::Names>,
}

impl CheckOutcome {
    pub fn count(&self, severity: Severity) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == severity)
            .count()
    }
}

/// Checks every program of the workspace. A program with syntax errors is
/// not analysed further: its tree has holes, and names defined in a broken
/// item would be reported as undefined everywhere else.
pub fn check(ws: &Workspace) -> CheckOutcome {
    let mut outcome = CheckOutcome {
        files: ws.db.len(),
        ..CheckOutcome::default()
    };
    outcome.diagnostics.extend(ws.diagnostics.iter().cloned());
    outcome.diagnostics.extend(ws.import_cycles());
    for files in ws.programs() {
        let broken = outcome
            .diagnostics
            .iter()
            .any(|d| d.is_error() && d.primary_span().is_some_and(|s| files.contains(&s.file)));
        if broken {
            outcome.names.push(sema::resolve_names(ws, &files));
            continue;
        }
        let analysis = sema::analyze(ws, &files);
        outcome.names.push(analysis.names);
        outcome.promises += analysis.promises;
        outcome.diagnostics.extend(analysis.diagnostics);
        if let Some(program) = &analysis.program {
            outcome
                .diagnostics
                .extend(crate::bundle::embed::check_embeds(&ws.db, program));
        }
        outcome.programs.extend(
            analysis
                .program
                .map(|program| CheckedProgram { files, program }),
        );
    }
    diagnostic::sort(&mut outcome.diagnostics);
    // Programs share files (two roots importing one library): report each
    // problem once.
    outcome.diagnostics.dedup();
    outcome
}

/// `checked 12 files, 340 promises: no errors`.
pub fn summary(outcome: &CheckOutcome) -> String {
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
    format!(
        "checked {}, {}: {found}",
        plural(outcome.files, "file"),
        plural(outcome.promises, "promise")
    )
}
