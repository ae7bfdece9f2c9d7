use std::process::ExitCode;

fn main() -> ExitCode {
    converge_compiler::cli::main()
}
