//! `policyc check [FILES...] [--format human|json|sarif] [--deny-warnings]`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{fail, inputs, out, use_color, EXIT_ERRORS};
use crate::check::{check, summary};
use crate::diagnostic::Severity;
use crate::render::{render_human, render_json, render_sarif, Format};

/// How many diagnostics `--format human` draws before summarising the rest.
const MAX_HUMAN_DIAGNOSTICS: usize = 200;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Policy files, or directories to search for `*.policy` files.
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,

    /// How to print diagnostics.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,

    /// Treat warnings as errors (exit 1 if there are any).
    #[arg(long)]
    deny_warnings: bool,

    #[command(flatten)]
    tree: inputs::TreeArgs,
}

pub fn run(args: CheckArgs) -> ExitCode {
    let ws = match inputs::load(&args.files, &args.tree) {
        Ok(ws) => ws,
        Err(err) => return fail(err),
    };
    let outcome = check(&ws);
    let db = &ws.db;
    match args.format {
        Format::Human => {
            // A generated file with one mistake repeated thousands of times
            // must not flood the terminal: show the first ones.
            let shown = outcome.diagnostics.len().min(MAX_HUMAN_DIAGNOSTICS);
            let first = outcome.diagnostics.get(..shown).unwrap_or_default();
            out(render_human(db, first, use_color()));
            if shown < outcome.diagnostics.len() {
                out(format!(
                    "... and {} more diagnostics (`--format json` lists them all)\n",
                    outcome.diagnostics.len() - shown
                ));
            }
            out(format!("{}\n", summary(&outcome)));
        }
        Format::Json => out(format!("{}\n", render_json(db, &outcome.diagnostics))),
        Format::Sarif => out(format!("{}\n", render_sarif(db, &outcome.diagnostics))),
    }
    let failing = outcome.count(Severity::Error) > 0
        || (args.deny_warnings && outcome.count(Severity::Warning) > 0);
    // The process ends here: freeing a large syntax tree and program piece
    // by piece would only delay the exit.
    std::mem::forget(outcome);
    std::mem::forget(ws);
    if failing {
        ExitCode::from(EXIT_ERRORS)
    } else {
        ExitCode::SUCCESS
    }
}
