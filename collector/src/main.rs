//! `converge-collector`: see the library's documentation and docs/fleet.md.

use std::process::ExitCode;

use converge_collector::cli::{Cli, Command};
use converge_collector::run;

fn main() -> ExitCode {
    let cli = Cli::from_process();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CONVERGE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("converge-collector: error: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => run::serve(*args).await,
            Command::Prune(args) => run::prune(args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("converge-collector: error: {e}");
            ExitCode::from(2)
        }
    }
}
