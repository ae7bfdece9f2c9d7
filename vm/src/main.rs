//! `policyvm`: verifies and runs Converge bundles on a host.

use std::process::ExitCode;

fn main() -> ExitCode {
    converge_vm::cli::main()
}
