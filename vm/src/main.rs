//! `policyvm`: verifies and runs Converge bundles on a host.
//!
//! Subcommands arrive with the bundle format and the interpreter; for now the
//! binary answers `--version` and `--help` so packaging and fleet inventory
//! can already detect it.

use clap::Parser;

/// The Converge on-host VM: verifies signed policy bundles and converges
/// this host to them.
#[derive(Debug, Parser)]
#[command(name = "policyvm", version = converge_vm::VERSION, about, long_about = None)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
