//! `policyc fleet status|hosts|host|failures|promise|changes|facts|silent|tampered|rollout --collector URL`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};

use super::{exit, fail_with, out};
use crate::fleet::curl::{Client, FetchError};
use crate::fleet::{self, FleetError, Query};

#[derive(Debug, Args)]
pub struct FleetArgs {
    #[command(subcommand)]
    command: FleetCommand,
    #[command(flatten)]
    common: Common,
}

/// How to reach the collector and what to print; accepted before or after
/// the subcommand.
#[derive(Debug, Args)]
struct Common {
    /// The collector's URL (`https://collector.example.org:8470`).
    #[arg(long, global = true, value_name = "URL")]
    collector: Option<String>,
    /// Tables for people, or the collector's JSON for scripts.
    #[arg(long, global = true, value_enum, default_value_t = FleetFormat::Human)]
    format: FleetFormat,
    /// The CA certificate (PEM) that signed the collector's certificate,
    /// when the system's CAs did not.
    #[arg(long, global = true, value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// A file holding the collector's read token (its `--token-file`).
    /// Sent as `Authorization: Bearer`, never on a command line.
    #[arg(long, global = true, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Seconds the whole request may take.
    #[arg(long, global = true, default_value_t = 30, value_name = "SECONDS")]
    timeout: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum FleetFormat {
    Human,
    Json,
}

#[derive(Debug, Subcommand)]
enum FleetCommand {
    /// Hosts by the status of their last report, and how many are silent.
    Status,
    /// Every host: status, age of its last report, bundle serial.
    Hosts,
    /// Failing promises of the hosts' last reports, with the hosts.
    Failures,
    /// What the hosts changed in a time window.
    Changes {
        /// The start of the window: a duration back from now (`1h`, `7d`)
        /// or an RFC 3339 time. Default: the last day.
        #[arg(long, value_name = "1h|RFC3339")]
        since: Option<String>,
        /// Only this host's changes.
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
    },
    /// Facts of the hosts: the inventory's, `sys.*` and probes.
    Facts {
        /// Only this host.
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
    },
    /// One host: its recent runs and what its last report did not keep.
    Host {
        /// The host's name in the inventory.
        name: String,
    },
    /// One promise on every host: repaired, failed, skipped, kept (or not
    /// the host's), never reported.
    Promise {
        /// The promise type (`file`, `package`).
        #[arg(long = "type", value_name = "TYPE")]
        kind: String,
        /// The promiser (`/etc/motd`, `nginx`).
        #[arg(long, value_name = "PROMISER")]
        promiser: String,
    },
    /// Hosts whose watch history was rewritten, went backwards, cannot be
    /// verified or vanished, with the last head the collector trusts.
    Tampered,
    /// During a staged rollout: the serial every host runs, and the
    /// failure rate of each serial (docs/rollout.md).
    Rollout,
    /// Hosts with no report for more than N run intervals.
    Silent {
        /// How many intervals (default: the collector's, 3).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
        intervals: Option<u32>,
    },
}

/// The longest token file read.
const MAX_TOKEN_BYTES: u64 = 4096;

pub fn run(args: FleetArgs) -> ExitCode {
    match prepare(args) {
        Ok((client, query, json)) => match fleet::run(&client, &query, json) {
            Ok(text) => {
                out(text);
                ExitCode::SUCCESS
            }
            Err(err) => fail_with(code(&err), err),
        },
        Err(code) => code,
    }
}

/// The exit code of a failed query (docs/exit-codes.md).
fn code(err: &FleetError) -> u8 {
    match err {
        FleetError::Fetch(FetchError::Garbled { .. }) | FleetError::NotAView { .. } => {
            exit::PROTOCOL
        }
        FleetError::Fetch(_) => exit::UNAVAILABLE,
    }
}

fn prepare(args: FleetArgs) -> Result<(Client, Query, bool), ExitCode> {
    let common = args.common;
    let Some(collector) = common.collector else {
        return Err(fail_with(
            exit::USAGE,
            "name the collector: `policyc fleet status --collector https://collector.example.org:8470`",
        ));
    };
    let base = collector_url(&collector).map_err(|e| fail_with(exit::USAGE, e))?;
    if let Some(ca) = &common.ca_file {
        if let Err(e) = std::fs::File::open(ca) {
            return Err(fail_with(
                exit::NO_INPUT,
                format!("cannot read the CA file `{}`: {e}", ca.display()),
            ));
        }
    }
    let token = match &common.token_file {
        Some(path) => Some(read_token(path).map_err(|e| fail_with(exit::NO_INPUT, e))?),
        None => None,
    };
    if common.timeout == 0 {
        return Err(fail_with(
            exit::USAGE,
            "`--timeout` must be at least 1 second",
        ));
    }
    let query = match args.command {
        FleetCommand::Status => Query::Status,
        FleetCommand::Hosts => Query::Hosts,
        FleetCommand::Failures => Query::Failures,
        FleetCommand::Tampered => Query::Tampered,
        FleetCommand::Rollout => Query::Rollout,
        FleetCommand::Changes { since, host } => Query::Changes {
            since: match since {
                Some(text) => {
                    Some(fleet::since(&text, now()).map_err(|e| fail_with(exit::USAGE, e))?)
                }
                None => None,
            },
            host,
        },
        FleetCommand::Facts { host } => Query::Facts { host },
        FleetCommand::Silent { intervals } => Query::Silent { intervals },
        FleetCommand::Host { name } => {
            if !converge_format::inventory::is_host_name(&name) {
                return Err(fail_with(
                    exit::USAGE,
                    format!(
                        "`{}` is not a host name (letters, digits, `-`, `.` and `_`)",
                        crate::fleet::tables::clean(&name)
                    ),
                ));
            }
            Query::Host { name }
        }
        FleetCommand::Promise { kind, promiser } => Query::Promise { kind, promiser },
    };
    let client = Client {
        base,
        ca_file: common.ca_file,
        token,
        timeout: common.timeout,
        program: "curl".into(),
    };
    Ok((client, query, common.format == FleetFormat::Json))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `--collector`: an `http` or `https` URL without a query, with no
/// character that could be read as something else on curl's command line.
pub(super) fn collector_url(text: &str) -> Result<String, String> {
    let scheme_ok = text.starts_with("http://") || text.starts_with("https://");
    let clean = text.bytes().all(|b| b.is_ascii_graphic()) && !text.contains(['?', '#']);
    if !scheme_ok || !clean {
        return Err(format!(
            "`--collector {}`: give the collector's base URL, `http://HOST:PORT` or `https://HOST:PORT`",
            crate::fleet::tables::clean(text)
        ));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// The token: the file's one line, without its line break. Anything else
/// would end the header curl sends it in and start another.
pub(super) fn read_token(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_TOKEN_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| format!("cannot read the token file `{}`: {e}", path.display()))?;
    let token = text.trim_end_matches(['\n', '\r']);
    if token.is_empty()
        || text.len() as u64 > MAX_TOKEN_BYTES
        || !token.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(format!(
            "the token file `{}` must hold one token: printable characters without spaces, on one line",
            path.display()
        ));
    }
    Ok(token.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn the_collector_is_an_http_url() {
        assert_eq!(
            collector_url("https://c.example:8470/").unwrap(),
            "https://c.example:8470"
        );
        for bad in [
            "c.example:8470",
            "file:///etc/passwd",
            "-o/tmp/x",
            "http://a b",
            "http://a/?x=1",
            "http://a\n",
        ] {
            assert!(collector_url(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_token_is_one_line_of_printable_characters() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "abc123\n").unwrap();
        assert_eq!(read_token(&path).unwrap(), "abc123");
        for bad in ["", "\n", "a\nX-Evil: 1\n", "a b\n"] {
            std::fs::write(&path, bad).unwrap();
            assert!(read_token(&path).is_err(), "{bad:?}");
        }
        assert!(read_token(&dir.path().join("missing")).is_err());
    }
}
