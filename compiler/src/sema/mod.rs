//! Semantic analysis of one program: global names ([`symbols`]), name
//! resolution and type checking ([`check`]), which records what every name
//! refers to ([`names`]), and expansion into the flat promise list that the
//! analyses and the bundle writer read ([`expand`]).

pub mod bodies;
pub mod check;
pub mod expand;
pub mod functions;
pub mod inventory;
pub mod let_order;
pub mod names;
pub mod neighbours;
pub mod secrets;
pub mod symbols;
pub mod types;

use converge_grammar::FileId;

use crate::analysis;
use crate::diagnostic::{Code, Diagnostic};
use crate::ir;
use crate::workspace::Workspace;

/// The result of analysing one program.
#[derive(Debug, Default)]
pub struct Analysis {
    pub diagnostics: Vec<Diagnostic>,
    /// The expanded program, when it has a `policy` block and no errors.
    pub program: Option<ir::Program>,
    /// Promises counted for the summary line: expanded promises when there
    /// is a `policy` block, promise statements otherwise.
    pub promises: usize,
    /// What every name of the program refers to.
    pub names: names::Names,
}

/// A program after the first half of its analysis ([`expand_program`]):
/// nothing here borrows the workspace, so that a caller that owns it may
/// free the syntax trees before the second half ([`analyze_expanded`]),
/// whose analyses read only the expanded program. At 1,000,000 promises
/// the trees are about 1 GB, and the analyses' peak would stack on them
/// (issue 22, item 4).
#[derive(Debug, Default)]
pub struct Expanded {
    /// The diagnostics of the symbols, the checker and expansion.
    diagnostics: Vec<Diagnostic>,
    /// The expanded program, when there is a `policy` block and no errors.
    program: Option<ir::Program>,
    /// Promise statements, counted for a program without an expansion.
    promise_statements: usize,
    /// What every name of the program refers to.
    pub names: names::Names,
}

/// Analyses the program made of `files` (a root and its imports).
pub fn analyze(ws: &Workspace, files: &[FileId]) -> Analysis {
    analyze_expanded(expand_program(ws, files, bodies::Bodies::default()))
}

/// The half of [`analyze`] that reads the syntax trees: global names, name
/// resolution and type checking, and expansion. The bundles' statements
/// are in the trees, or in `bodies` when the caller moved them out, and
/// then expansion frees them as it goes ([`bodies`]).
pub fn expand_program(ws: &Workspace, files: &[FileId], mut bodies: bodies::Bodies) -> Expanded {
    let mut diagnostics = Vec::new();
    let symbols = symbols::Symbols::collect(ws, files, &mut diagnostics);
    let mut checker = check::Checker::new(&symbols);
    checker.check_program(&bodies);
    diagnostics.append(&mut checker.diagnostics);
    // After an error, "unused" is often an echo of it (a misspelt call
    // leaves its bundle unused): report unused definitions on clean programs.
    if !diagnostics.iter().any(Diagnostic::is_error) {
        unused_warnings(&symbols, &checker, &mut diagnostics);
    }
    let mut program = None;
    let has_errors = diagnostics.iter().any(Diagnostic::is_error);
    if let (Some(policy), false) = (symbols.policy, has_errors) {
        let source_bytes = files
            .iter()
            .filter_map(|f| ws.db.get(*f))
            .map(|f| f.text.len())
            .sum();
        bodies.plan_release(&symbols);
        let mut expansion =
            expand::expand(&ws.db, &symbols, &mut checker, bodies, policy, source_bytes);
        diagnostics.append(&mut expansion.diagnostics);
        program = Some(expansion.program);
    }
    Expanded {
        diagnostics,
        program,
        promise_statements: checker.promise_statements,
        names: std::mem::take(&mut checker.names),
    }
}

/// The half of [`analyze`] that reads only the expanded program: missing
/// lookups, references, dead promises, contradictions, unmanaged objects
/// and ordering. Without a program (no `policy` block, or errors) there is
/// nothing to add.
pub fn analyze_expanded(expanded: Expanded) -> Analysis {
    let Expanded {
        mut diagnostics,
        program,
        promise_statements,
        names,
    } = expanded;
    let program = program.map(|program| analyze_program(program, &mut diagnostics));
    Analysis {
        promises: program
            .as_ref()
            .map_or(promise_statements, |p| p.promises.len()),
        diagnostics,
        program,
        names,
    }
}

/// Runs the analyses of an expanded program, adding their diagnostics to
/// `diagnostics` (which holds expansion's), and returns the program with
/// its ordering.
fn analyze_program(mut program: ir::Program, diagnostics: &mut Vec<Diagnostic>) -> ir::Program {
    // The reference check reads the program as expansion left it. The
    // missing-lookup analysis removes marked instances; without any it
    // changes nothing, and the reference check can run beside the
    // analyses (its diagnostics still go right after expansion's).
    let marked = program.promises.iter().any(|p| p.missing().is_some());
    if marked {
        diagnostics.extend(expand::check_references(&program));
    }
    diagnostics.extend(analysis::missing::missing_lookups(&mut program));
    // The three analyses and the reference check only read the program:
    // run them side by side. Contradictions, ordering and references
    // share the promises grouped by object, grouped while the
    // dead-promise analysis starts.
    let (references, dead, contradictions, ordering) = std::thread::scope(|scope| {
        let dead = scope.spawn(|| analysis::dead::dead_promises(&program));
        let objects = analysis::objects::Objects::new(&program);
        let (references, contradictions, ordering) = std::thread::scope(|inner| {
            let references = (!marked)
                .then(|| inner.spawn(|| expand::check_references_with(&program, Some(&objects))));
            let contradictions =
                inner.spawn(|| analysis::contradictions::contradictions_with(&program, &objects));
            let ordering = analysis::ordering::ordering_with(
                &program,
                analysis::ordering::DEFAULT_MAX_PASSES,
                &objects,
            );
            let references = references.map(join).unwrap_or_default();
            (references, join(contradictions), ordering)
        });
        (references, join(dead), contradictions, ordering)
    });
    diagnostics.extend(references);
    diagnostics.extend(dead);
    diagnostics.extend(contradictions);
    diagnostics.extend(analysis::unmanaged::unmanaged(&program));
    match ordering {
        Ok(ordering) => {
            program.edges = ordering.edges;
            program.order = ordering.order;
            program.pass_limit = ordering.pass_limit;
            program.feedback_chain = ordering.feedback_chain;
        }
        Err(cycles) => diagnostics.extend(cycles),
    }
    program
}

/// The name table of a program that is not analysed (it has syntax
/// errors): the checker resolves what the parser recovered, and its
/// diagnostics, echoes of the syntax errors, are dropped. The language
/// server navigates a file that is being typed with it.
pub fn resolve_names(ws: &Workspace, files: &[FileId], bodies: &bodies::Bodies) -> names::Names {
    let symbols = symbols::Symbols::collect(ws, files, &mut Vec::new());
    let mut checker = check::Checker::new(&symbols);
    checker.check_program(bodies);
    checker.names
}

/// The diagnostics of an analysis thread. A panic there is a compiler bug;
/// it is reported as such instead of taking the whole check down.
fn join(handle: std::thread::ScopedJoinHandle<'_, Vec<Diagnostic>>) -> Vec<Diagnostic> {
    handle.join().unwrap_or_else(|_| {
        vec![
            Diagnostic::unlocated(Code::InternalError, "internal error: an analysis failed")
                .with_note(
                    "this is a bug in policyc; please report it with the policy that triggers it",
                ),
        ]
    })
}

/// Lets, bodies and bundles that nothing uses. Only reported for a program
/// with a `policy` block (a file of definitions checked on its own is a
/// library), and never for the standard library, whose definitions are
/// there to be picked from.
fn unused_warnings(
    symbols: &symbols::Symbols,
    checker: &check::Checker,
    out: &mut Vec<Diagnostic>,
) {
    if symbols.policy.is_none() {
        return;
    }
    for (name, def) in &symbols.lets.defs {
        if !checker.used_lets.contains(name) && !symbols.is_stdlib(def.span) {
            out.push(
                Diagnostic::new(
                    Code::UnusedLet,
                    format!("let `{name}` is never used"),
                    def.name.span,
                    "defined here",
                )
                .with_help("remove it, or use it in a promise"),
            );
        }
    }
    for (name, def) in &symbols.bodies.defs {
        if !checker.used_bodies.contains(name) && !symbols.is_stdlib(def.span) {
            out.push(
                Diagnostic::new(
                    Code::UnusedBody,
                    format!("body `{name}` is never used"),
                    def.name.span,
                    "defined here",
                )
                .with_help(format!(
                    "splice it into a promise with `use {name};`, or remove it"
                )),
            );
        }
    }
    {
        for (name, def) in &symbols.bundles.defs {
            if !checker.used_bundles.contains(name) && !symbols.is_stdlib(def.span) {
                out.push(
                    Diagnostic::new(
                        Code::UnusedBundle,
                        format!("bundle `{name}` is never called"),
                        def.name.span,
                        "defined here",
                    )
                    .with_help(format!(
                        "call it from the policy block (`{name}();`), or remove it"
                    )),
                );
            }
        }
    }
}
