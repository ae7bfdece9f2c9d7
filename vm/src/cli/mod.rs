//! The `policyvm` command line.
//!
//! Exit codes: one table for every subcommand, in [`exit`]
//! (docs/exit-codes.md).

mod agent;
mod bootstrap;
mod capture;
mod enroll;
pub mod exit;
mod facts;
mod prompt;
mod pull;
mod run;
mod verify;

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// The Converge on-host VM: verifies signed policy bundles and converges
/// this host to them.
#[derive(Debug, Parser)]
#[command(name = "policyvm", version = crate::VERSION, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a bundle's signature and structure against trusted keys.
    ///
    /// Prints one line and exits 0 when the bundle is good; otherwise one
    /// line saying why and a distinct exit code (10-15).
    Verify(verify::VerifyArgs),
    /// Print a bundle as readable disassembly, with the source line of each
    /// promise.
    Inspect(verify::InspectArgs),
    /// Print every `sys.*` fact and every hard class of this host.
    Facts(facts::FactsArgs),
    /// Verify a bundle, then converge this host (or `--root DIR`) to it.
    ///
    /// Exits 0 when converged without failures, 1 when a promise failed,
    /// 2 when not converged within the pass limit, 3 when the bundle is
    /// refused.
    Run(run::RunArgs),
    /// Fetch the hub's stamp and, only when it changed, the bundle; verify
    /// both and install the bundle as the state directory's
    /// `current.bundle`.
    ///
    /// Exits 0 when installed or already current, 3 when what the hub
    /// served is refused, 4 when its stamp has expired, 69 when the hub
    /// cannot be reached, 75 when an agent holds the state directory.
    Pull(pull::PullArgs),
    /// One agent cycle, for cron or a systemd timer: lock, splay, pull from
    /// the hubs in order, run the bundle in force, write the report and
    /// metrics.
    ///
    /// Exits like `run` (0, 1, 2); 5 when there is no bundle to run, 75
    /// when another agent is running.
    Agent(agent::AgentArgs),
    /// Make this host's identity (a report signing key and an age key for
    /// secrets) in the state directory, and print its inventory entry.
    ///
    /// Exits 0 when enrolled, 73 when already enrolled (use `--rotate`) or
    /// the identity is unsafe, 75 when an agent is running.
    Enroll(enroll::EnrollArgs),
    /// Put this host under management in one command: trust the hub's key,
    /// write agent.toml, enroll, enable the agent's timer.
    ///
    /// Idempotent: a second run changes nothing and says so. Exits 0; 3
    /// when the hub's key does not have the fingerprint; 64; 66 when the
    /// key file cannot be read; 69 when the hub cannot be reached; 73 when
    /// a file cannot be written or agent.toml configures something else
    /// (`--force`); 75 when an agent is running.
    Bootstrap(bootstrap::BootstrapArgs),
    /// Print promises, in policy syntax, for the current state of files,
    /// directories, links, packages, services, users or groups of this
    /// host (or `--root DIR`), like `puppet resource`.
    ///
    /// Exits 0; 64 for an unknown TYPE or a NAME no promise can have; 66
    /// when a NAME does not exist or cannot be described; 73 when `--out`
    /// cannot be written. Nothing is printed on failure.
    Capture(capture::CaptureArgs),
}

pub fn main() -> ExitCode {
    let cli = match parse_command_line() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Verify(args) => verify::verify(args),
        Command::Inspect(args) => verify::inspect(args),
        Command::Facts(args) => facts::facts(args),
        Command::Run(args) => run::run(args),
        Command::Pull(args) => pull::pull(args),
        Command::Agent(args) => agent::agent(args),
        Command::Enroll(args) => enroll::enroll(args),
        Command::Bootstrap(args) => bootstrap::bootstrap(args),
        Command::Capture(args) => capture::capture(args),
    }
}

/// Writes to standard output. A reader that went away (`... | head`) is not
/// an error worth a panic: what is left is dropped quietly.
pub(crate) fn out(text: impl AsRef<str>) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_ref().as_bytes())
        .and_then(|()| stdout.flush());
}

/// Parses the command line, with clap's colours following
/// `converge_format::terminal` (no colour for `TERM=dumb` or `NO_COLOR`,
/// even where clap alone would colour, e.g. with `CI` set on a terminal).
fn parse_command_line() -> Result<Cli, clap::Error> {
    let colour = if converge_format::terminal::env_allows_colour() {
        clap::ColorChoice::Auto
    } else {
        clap::ColorChoice::Never
    };
    let mut command = Cli::command().color(colour);
    let matches = command.try_get_matches_from_mut(std::env::args_os())?;
    Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut command))
}
