//! `policyc check [FILES...] [--format human|json|sarif] [--deny-warnings]
//! [--sarif-root DIR]`

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::{fail, inputs, out, use_color, EXIT_ERRORS};
use crate::check::{check_releasing_syntax, summary};
use crate::diagnostic::Severity;
use crate::render::{
    render_human, render_json, render_sarif, render_sarif_failure, Format, SarifRoot,
};

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

    /// `--format sarif`: the directory file locations are relative to
    /// (`%SRCROOT%`). Defaults to the top of the git work tree around the
    /// current directory, else the current directory.
    #[arg(long, value_name = "DIR")]
    sarif_root: Option<PathBuf>,

    #[command(flatten)]
    tree: inputs::TreeArgs,
}

/// The SARIF root of this invocation, relative to the current directory.
fn sarif_root(args: &CheckArgs) -> SarifRoot {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    SarifRoot::new(&cwd, args.sarif_root.as_deref().map(Path::new))
}

pub fn run(args: CheckArgs) -> ExitCode {
    let mut ws = match inputs::load(&args.files, &args.tree) {
        Ok(ws) => ws,
        Err(err) => {
            // A dashboard reading the SARIF log must learn why it is
            // empty: the error goes into the log as well as to stderr.
            if args.format == Format::Sarif {
                out(format!(
                    "{}\n",
                    render_sarif_failure(&err.to_string(), &sarif_root(&args))
                ));
            }
            return fail(err);
        }
    };
    let outcome = check_releasing_syntax(&mut ws);
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
        Format::Sarif => out(format!(
            "{}\n",
            render_sarif(db, &outcome.diagnostics, &sarif_root(&args))
        )),
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
