//! `policyvm agent --config FILE [--no-splay] [--dry-run] [--define
//! CLASS]...`: one agent cycle (see `crate::agent`), for cron or a systemd
//! timer; with `--dry-run`, an audit that reports what would change and
//! changes nothing.
//!
//! Exit codes: 0 converged (the hub may have been down: see the warnings),
//! 1 a promise failed, 2 not converged, 5 no bundle to run, 66 the
//! configuration or trust directory cannot be read, 73 the state directory
//! cannot be written, 75 another agent is running ([`super::exit`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::exit;
use super::out;
use crate::agent::config::Config;
use crate::agent::{agent as cycle, AgentOptions};

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The agent's configuration (TOML).
    #[arg(long, value_name = "FILE", default_value = "/etc/converge/agent.toml")]
    config: PathBuf,
    /// Start at once instead of after this host's splay.
    #[arg(long)]
    no_splay: bool,
    /// Audit: pull and verify as usual, then report what the run would
    /// change, and change nothing (the report says `dry_run: true`).
    #[arg(long)]
    dry_run: bool,
    /// Set a class for this run (it must be declared in the policy).
    #[arg(long = "define", value_name = "CLASS")]
    defines: Vec<String>,
}

pub fn agent(args: AgentArgs) -> ExitCode {
    let config = match Config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(exit::NO_INPUT);
        }
    };
    let options = AgentOptions {
        no_splay: args.no_splay,
        dry_run: args.dry_run,
        defines: args.defines,
    };
    let result = cycle(&config, &options);
    out(&result.out);
    for line in &result.warnings {
        eprintln!("{line}");
    }
    ExitCode::from(result.code)
}
