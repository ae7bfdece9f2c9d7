//! `policyc explain` and `policyc graph`: commands that need one clean,
//! expanded program.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::{fail, inputs, out, use_color, EXIT_ERRORS};
use crate::check::{check, summary};
use crate::diagnostic::Severity;
use crate::host_facts::HostFacts;
use crate::ir::Program;
use crate::render::render_human;
use crate::workspace::Workspace;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The policy file whose program to explain (it must have a `policy` block).
    file: PathBuf,
    /// Show only what a host with this fact value can get, e.g.
    /// `--facts hostname=web01` (repeat for more facts). Guards are
    /// evaluated with the given facts; classes and other facts stay open.
    #[arg(long = "facts", value_name = "NAME=VALUE")]
    facts: Vec<String>,
    /// Show which inventory host gets which secret, and why (the promise
    /// and guard that entitle it), instead of the promises.
    #[arg(long)]
    secrets: bool,
    /// Output format (`json` with `--secrets`).
    #[arg(long, value_enum, default_value_t = ExplainFormat::Text)]
    format: ExplainFormat,
    #[command(flatten)]
    tree: inputs::TreeArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExplainFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// The policy file whose ordering graph to print.
    file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
    format: GraphFormat,
    #[command(flatten)]
    tree: inputs::TreeArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// Graphviz DOT (`dot -Tsvg graph.dot > graph.svg`).
    Dot,
}

pub fn explain(args: ExplainArgs) -> ExitCode {
    if args.format == ExplainFormat::Json && !args.secrets {
        return super::fail_with(
            super::exit::USAGE,
            "`--format json` is for `--secrets`; `policyc explain` alone prints text",
        );
    }
    match load_checked(&args.file, &args.tree) {
        Ok((ws, checked)) if args.secrets => {
            let inventory = ws.inventory(&checked.files).map(|(_, i)| i);
            let program = &checked.program;
            match args.format {
                ExplainFormat::Json => out(format!(
                    "{:#}\n",
                    crate::explain_secrets::secrets_json(&ws.db, program, inventory)
                )),
                ExplainFormat::Text => out(crate::explain_secrets::secrets_text(
                    &ws.db, program, inventory,
                )),
            }
            ExitCode::SUCCESS
        }
        Ok((ws, checked)) => {
            let program = checked.program;
            // After loading: `facts.NAME` values are typed by the program's
            // own `fact` declarations.
            let host = match HostFacts::parse(&args.facts, &program.probes) {
                Ok(host) => host,
                Err(message) => return super::fail_with(super::exit::USAGE, message),
            };
            out(crate::explain::explain(&ws.db, &program, &host));
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

pub fn graph(args: GraphArgs) -> ExitCode {
    match load(&args.file, &args.tree) {
        Ok((ws, program)) => {
            match args.format {
                GraphFormat::Dot => out(crate::dot::dot(&ws.db, &program)),
            }
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// Checks the file; on errors prints them (to stderr, so stdout stays the
/// requested output) and returns exit code 1.
fn load(file: &std::path::Path, tree: &inputs::TreeArgs) -> Result<(Workspace, Program), ExitCode> {
    load_checked(file, tree).map(|(ws, checked)| (ws, checked.program))
}

/// [`load`], keeping the program's files (to find its inventory).
fn load_checked(
    file: &std::path::Path,
    tree: &inputs::TreeArgs,
) -> Result<(Workspace, crate::check::CheckedProgram), ExitCode> {
    let ws = inputs::load(&[file.to_path_buf()], tree).map_err(fail)?;
    let mut outcome = check(&ws);
    if outcome.count(Severity::Error) > 0 {
        eprint!(
            "{}",
            render_human(&ws.db, &outcome.diagnostics, use_color())
        );
        eprintln!("{}", summary(&outcome));
        return Err(ExitCode::from(EXIT_ERRORS));
    }
    match outcome.programs.pop() {
        Some(checked) => Ok((ws, checked)),
        None => {
            eprintln!(
                "error: `{}` has no `policy` block, so there is no program to show; name the file that has it",
                file.display()
            );
            Err(ExitCode::from(EXIT_ERRORS))
        }
    }
}
