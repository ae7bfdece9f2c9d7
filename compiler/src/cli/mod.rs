//! The `policyc` command line. Each subcommand lives in its own module and
//! returns an exit code; `main` only parses arguments and dispatches.
//!
//! Exit codes: one table for every subcommand, in [`exit`]
//! (docs/exit-codes.md).

pub(crate) mod atomic;
mod build;
mod check;
pub mod exit;
mod fleet;
mod fmt;
pub(crate) mod inputs;
mod plan;
mod program;
mod publish;
mod rollout;
mod secret;
mod test;

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// The Converge policy compiler.
///
/// Checks policy source and reports every problem with its location; later
/// stages compile it into signed bundles that `policyvm` runs on hosts.
#[derive(Debug, Parser)]
#[command(name = "policyc", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check policy files and report every problem found.
    ///
    /// Exits 0 when there are no errors, 1 when there are, 64 when the
    /// arguments are wrong, 66 when a file cannot be read.
    Check(check::CheckArgs),
    /// Show what the compiler concluded about a program: each object with
    /// its promises and guards, the order of application, and the pass
    /// limit with the chain of outcome classes that sets it.
    Explain(program::ExplainArgs),
    /// Print the ordering graph (after, notify, outcome classes,
    /// containment) of a program.
    Graph(program::GraphArgs),
    /// Generate a signing key pair (NAME.key and NAME.pub).
    Keygen(build::KeygenArgs),
    /// Compile a policy into a signed bundle for `policyvm`.
    ///
    /// Refuses a policy with errors. The same sources, compiler, key,
    /// serial and name give a byte-identical bundle.
    Build(build::BuildArgs),
    /// Build a bundle and publish it, with its signed stamp, into a
    /// directory served over HTTP to the hosts that pull it.
    ///
    /// Writes NAME.bundle, then NAME.stamp, each atomically. Refuses a
    /// serial not greater than the one already published. `--rollout`
    /// stages a new serial for some hosts, `--promote` widens it, `--halt`
    /// sends every host back (docs/rollout.md).
    Publish(publish::PublishArgs),
    /// Rewrite policy files in the canonical layout.
    ///
    /// With `--check`, change nothing: list the files that would change and
    /// exit 1 if there are any. A file with syntax errors is reported and
    /// left untouched (exit 1).
    Fmt(fmt::FmtArgs),
    /// Run the language server on standard input and output (for editors).
    Lsp(inputs::TreeArgs),
    /// Ask the collector about the fleet: hosts by status, failures,
    /// changes, facts, silent hosts (docs/fleet.md).
    ///
    /// Runs `curl` to reach the collector. Exits 69 when the collector
    /// cannot be reached or answers with an error (or curl is missing), 76
    /// when its answer is not a fleet view.
    Fleet(fleet::FleetArgs),
    /// Preview a policy change on every host of the inventory: what each
    /// host would get added, removed and changed, hosts with the same
    /// changes grouped (docs/plan.md).
    ///
    /// Exits 0 when nothing changes, 2 when something changes (or cannot
    /// be known without a fact a host lacks), 1 when a policy has errors.
    Plan(plan::PlanArgs),
    /// Create, edit and re-encrypt the age-encrypted secret files of the
    /// policy tree (`secrets/NAME.age`, read with `secret(...)`).
    ///
    /// The plaintext comes from standard input or an editor, never from
    /// the command line (docs/secrets.md).
    Secret(secret::SecretArgs),
    /// Run the policy's tests (`*.test.policy`): resolve the policy for
    /// each test's facts and classes, as the VM would, and check what it
    /// expects.
    ///
    /// Exits 0 when every test passes, 1 when one fails (or the policy or
    /// the tests have errors), 66 when no test file can be read, 69 when
    /// `--run` cannot find policyvm (docs/testing-policy.md).
    Test(test::TestArgs),
}

/// Exit status for "the input has errors".
pub const EXIT_ERRORS: u8 = exit::ERRORS;

/// The stack of the thread every command runs on. The passes over long
/// inputs are iterative or bounded (issue 14, item 21), so this is a second
/// line of defence, not the first: a recursion the bounds missed gets room
/// instead of the main thread's 8 MiB. Reserved, not committed: untouched
/// pages cost nothing.
pub const STACK_BYTES: usize = 512 << 20;

pub fn main() -> ExitCode {
    // clap's own exit status for a usage error is 2; policyc's is 64, as
    // policyvm's.
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
    let worker = std::thread::Builder::new()
        .name("policyc".to_owned())
        .stack_size(STACK_BYTES)
        .spawn(move || dispatch(cli));
    match worker.map(std::thread::JoinHandle::join) {
        Ok(Ok(code)) => code,
        // A panic is a compiler bug; its message is already on stderr. 101
        // is what a panic on the main thread exits with.
        Ok(Err(_)) => ExitCode::from(101),
        Err(e) => fail_with(
            exit::IO_ERROR,
            format!("cannot start the compiler thread: {e}"),
        ),
    }
}

fn dispatch(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Check(args) => check::run(args),
        Command::Explain(args) => program::explain(args),
        Command::Graph(args) => program::graph(args),
        Command::Keygen(args) => build::run_keygen(args),
        Command::Build(args) => build::run_build(args),
        Command::Publish(args) => publish::run(args),
        Command::Fmt(args) => fmt::run(args),
        Command::Lsp(tree) if tree.inventory.is_some() => fail_with(
            exit::USAGE,
            "`policyc lsp` reads the `inventory.toml` at the root of each policy tree; `--inventory` is for check, build and explain",
        ),
        Command::Lsp(tree) => crate::lsp::run(tree.policy_root),
        Command::Fleet(args) => fleet::run(args),
        Command::Secret(args) => secret::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Test(args) => test::run(args),
    }
}

/// Prints a one-line error for an input that cannot be read (a missing
/// file, an unreadable directory, a bad key file) and returns
/// [`exit::NO_INPUT`].
fn fail(message: impl std::fmt::Display) -> ExitCode {
    fail_with(exit::NO_INPUT, message)
}

/// Prints a one-line error for a problem outside the policy and returns
/// `code` (one of [`exit`]).
fn fail_with(code: u8, message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}

/// Whether `--format human` output should be coloured: only on a terminal
/// that can show colour (docs/diagnostics.md; the rule is
/// `converge_format::terminal`'s, shared with clap's messages).
fn use_color() -> bool {
    use std::io::IsTerminal;
    converge_format::terminal::colour_wanted(
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
        std::env::var_os("TERM").as_deref(),
    )
}

/// Writes to standard output. A reader that went away (`... | head`) is not
/// an error worth a panic: what is left is dropped quietly.
fn out(text: impl AsRef<str>) {
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
