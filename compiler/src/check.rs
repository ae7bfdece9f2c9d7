//! `policyc check`: everything that can be said about policy source without
//! running it. Pure apart from the file reading done by the [`Workspace`]:
//! parse, resolve imports, then analyse each program.

use converge_grammar::ast::Item;
use converge_grammar::FileId;

use crate::diagnostic::{self, Diagnostic, Severity};
use crate::ir;
use crate::sema;
use crate::sema::bodies::Bodies;
use crate::source::SourceDb;
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
    let mut outcome = start(ws);
    for files in ws.programs() {
        if let Some(expanded) = expand(ws, &files, Bodies::default(), &mut outcome) {
            analyze(&ws.db, files, expanded, &mut outcome);
        }
    }
    finish(outcome)
}

/// [`check`] for a caller that owns the workspace and reads neither its
/// syntax trees nor the name tables afterwards (`policyc check` and
/// `policyc build`): the trees are freed once the last program is
/// expanded, before its analyses, whose peak would otherwise stack on
/// them (about 1 GB of trees at 1,000,000 promises, issue 22, item 4), and
/// [`CheckOutcome::names`] stays empty. The outcome is otherwise the same.
///
/// Only after the last expansion: the analyses of one program can find
/// errors in a file it shares with the next, which then is not analysed,
/// so every program is analysed before the next is expanded, as in
/// [`check`].
pub fn check_releasing_syntax(ws: &mut Workspace) -> CheckOutcome {
    let mut outcome = start(ws);
    let mut programs = ws.programs();
    let last = programs.pop();
    for files in programs {
        if let Some(expanded) = expand(ws, &files, Bodies::default(), &mut outcome) {
            analyze(&ws.db, files, expanded, &mut outcome);
        }
    }
    if let Some(files) = last {
        // Expansion frees each bundle's statements after its last call
        // once they are out of the trees (`sema::bodies`).
        let bodies = Bodies::moved(ws.take_bundle_bodies(&files));
        let mut expanded = expand(ws, &files, bodies, &mut outcome);
        let mut names = std::mem::take(&mut outcome.names);
        names.extend(expanded.as_mut().map(|e| std::mem::take(&mut e.names)));
        free(ws.take_syntax(), names);
        if let Some(expanded) = expanded {
            analyze(&ws.db, files, expanded, &mut outcome);
        }
    }
    outcome.names = Vec::new();
    finish(outcome)
}

/// Frees syntax trees and name tables on two threads: at 1,000,000
/// promises they are millions of small allocations, and freeing them one
/// by one on one core is a noticeable part of the check.
fn free(mut trees: Vec<Vec<Item>>, names: Vec<sema::names::Names>) {
    let halves: Vec<Vec<Item>> = trees
        .iter_mut()
        .map(|items| items.split_off(items.len() / 2))
        .collect();
    std::thread::scope(|scope| {
        scope.spawn(move || drop(halves));
        drop((trees, names));
    });
}

/// An outcome holding the workspace's own diagnostics: syntax, imports and
/// import cycles.
fn start(ws: &Workspace) -> CheckOutcome {
    let mut outcome = CheckOutcome {
        files: ws.db.len(),
        ..CheckOutcome::default()
    };
    outcome.diagnostics.extend(ws.diagnostics.iter().cloned());
    outcome.diagnostics.extend(ws.import_cycles());
    outcome
}

/// The half of a program's check that reads its syntax trees. A program
/// with errors in its files (syntax errors, or errors that the analyses
/// of an earlier program found in a shared file) only has its names
/// resolved, and `None` is returned.
fn expand(
    ws: &Workspace,
    files: &[FileId],
    bodies: Bodies,
    outcome: &mut CheckOutcome,
) -> Option<sema::Expanded> {
    let broken = outcome
        .diagnostics
        .iter()
        .any(|d| d.is_error() && d.primary_span().is_some_and(|s| files.contains(&s.file)));
    if broken {
        outcome.names.push(sema::resolve_names(ws, files, &bodies));
        return None;
    }
    Some(sema::expand_program(ws, files, bodies))
}

/// The half of a program's check that reads only its expanded program.
fn analyze(
    db: &SourceDb,
    files: Vec<FileId>,
    expanded: sema::Expanded,
    outcome: &mut CheckOutcome,
) {
    let analysis = sema::analyze_expanded(expanded);
    outcome.names.push(analysis.names);
    outcome.promises += analysis.promises;
    outcome.diagnostics.extend(analysis.diagnostics);
    if let Some(program) = &analysis.program {
        outcome
            .diagnostics
            .extend(crate::bundle::embed::check_embeds(db, program));
    }
    outcome.programs.extend(
        analysis
            .program
            .map(|program| CheckedProgram { files, program }),
    );
}

/// Sorts the diagnostics of every program and reports each problem once.
fn finish(mut outcome: CheckOutcome) -> CheckOutcome {
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
