//! The command line.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// The database when `--database` is not given: a file in the current
/// directory, created when missing.
pub const DEFAULT_DATABASE: &str = "sqlite://converge-collector.db";

#[derive(Debug, Parser)]
#[command(
    name = "converge-collector",
    version,
    about = "Receives the hosts' signed run reports and answers fleet queries (docs/fleet.md)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the upload endpoint, the fleet API and /metrics.
    Serve(Box<ServeArgs>),
    /// Apply retention once (what `serve` does every hour) and exit.
    Prune(PruneArgs),
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The inventory (`inventory.toml`): the hosts and their report keys.
    /// Re-read whenever the file changes.
    #[arg(long)]
    pub inventory: PathBuf,
    /// `sqlite:///path/collector.db` or `postgres://user@host/db`.
    #[arg(long, default_value = DEFAULT_DATABASE)]
    pub database: String,
    /// Address to listen on; port 0 picks a free one. Any address but a
    /// loopback one needs --token-file.
    #[arg(long, default_value = "127.0.0.1:8470")]
    pub listen: SocketAddr,
    /// Certificate chain (PEM) for HTTPS; needs --tls-key.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) for HTTPS; needs --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A file holding the bearer token the read endpoints require.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// The agents' run interval (`300s`, `5m`): a host is silent after
    /// three of them without a report.
    #[arg(long, default_value = "300s")]
    pub interval: String,
    /// Keep every report this many days, then only daily summaries
    /// (0: keep everything).
    #[arg(long, default_value_t = 30)]
    pub retention_days: u32,
    /// Open connections at most; more are closed at once.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// A client that has not sent a request's headers within this time
    /// loses its connection (slowloris).
    #[arg(long, default_value = "10s")]
    pub header_timeout: String,
    /// A request (body included) not answered within this time gets 408.
    #[arg(long, default_value = "30s")]
    pub request_timeout: String,
}

#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    #[arg(long, default_value = DEFAULT_DATABASE)]
    pub database: String,
    #[arg(long, default_value_t = 30)]
    pub retention_days: u32,
}

impl Cli {
    /// Parses the process's command line, exiting on a usage error as
    /// clap's `parse` does, with clap's colours following
    /// `converge_format::terminal` (no colour for `TERM=dumb` or
    /// `NO_COLOR`, even where clap alone would colour, e.g. with `CI` set on
    /// a terminal).
    pub fn from_process() -> Self {
        let colour = if converge_format::terminal::env_allows_colour() {
            clap::ColorChoice::Auto
        } else {
            clap::ColorChoice::Never
        };
        let mut command = Self::command().color(colour);
        let parsed = command
            .try_get_matches_from_mut(std::env::args_os())
            .and_then(|matches| Self::from_arg_matches(&matches))
            .map_err(|e| e.format(&mut command));
        match parsed {
            Ok(cli) => cli,
            Err(e) => e.exit(),
        }
    }
}
