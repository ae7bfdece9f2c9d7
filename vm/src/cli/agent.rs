//! `policyvm agent --config FILE [--no-splay]`: one agent cycle (see
//! `crate::agent`), for cron or a systemd timer.
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
use crate::agent::agent as cycle;
use crate::agent::config::Config;

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The agent's configuration (TOML).
    #[arg(long, value_name = "FILE", default_value = "/etc/converge/agent.toml")]
    config: PathBuf,
    /// Start at once instead of after this host's splay.
    #[arg(long)]
    no_splay: bool,
}

pub fn agent(args: AgentArgs) -> ExitCode {
    let config = match Config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(exit::NO_INPUT);
        }
    };
    let result = cycle(&config, args.no_splay);
    out(&result.out);
    for line in &result.warnings {
        eprintln!("{line}");
    }
    ExitCode::from(result.code)
}
