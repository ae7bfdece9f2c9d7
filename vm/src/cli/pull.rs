//! `policyvm pull BASE_URL [--name site] --trust DIR [--state DIR]
//! [--timeout 60s] [--ca-file PEM]`: one pull, no run (see `crate::pull`).
//!
//! Exit codes: 0 a new bundle was installed or the one in force is
//! current; 3 what the hub served was refused (the line says which check);
//! 4 the hub's stamp has expired (stale: nothing installed); 66 the trust
//! directory cannot be read; 69 the hub cannot be reached or has no such
//! file; 73 the state directory cannot be written; 75 another agent or
//! pull holds the state directory ([`super::exit`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;

use super::exit::{
    BUSY as EXIT_BUSY, CANT_CREATE as EXIT_STATE, NO_INPUT as EXIT_NO_INPUT,
    REFUSED as EXIT_REFUSED, STALE as EXIT_STALE, UNAVAILABLE as EXIT_UNAVAILABLE,
    USAGE as EXIT_USAGE,
};
use super::out;
use crate::bundle::keys::load_trust_dir;
use crate::pull::fetch::{FetchError, HttpOptions, HttpSource};
use crate::pull::{pull as pull_from, PullError, Pulled};
use crate::run::lock::LockError;
use crate::stamp::time::{format_utc, parse_duration};
use crate::state::{StateDir, CURRENT};

#[derive(Debug, Args)]
pub struct PullArgs {
    /// The hub's base URL: `BASE_URL/NAME.stamp` and `BASE_URL/NAME.bundle`
    /// are fetched.
    base_url: String,
    /// The bundle's name.
    #[arg(long, default_value = "site")]
    name: String,
    /// The directory of trusted public keys (`*.pub`).
    #[arg(long, value_name = "DIR")]
    trust: PathBuf,
    /// The host's state directory.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/converge")]
    state: PathBuf,
    /// The most one request may take, body included (`30s`, `2m`).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    timeout: u64,
    /// PEM certificates of the authority that signed a private hub's TLS
    /// certificate.
    #[arg(long, value_name = "PEM")]
    ca_file: Option<PathBuf>,
}

pub fn pull(args: PullArgs) -> ExitCode {
    if let Some(why) = crate::stamp::name_problem(&args.name) {
        eprintln!("error: `--name {}` cannot name a bundle: {why}", args.name);
        return ExitCode::from(EXIT_USAGE);
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let trusted = match load_trust_dir(&args.trust) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("error: cannot load trusted keys: {e}");
            return ExitCode::from(EXIT_NO_INPUT);
        }
    };
    let options = HttpOptions {
        timeout: Duration::from_secs(args.timeout.max(1)),
        ca_file: args.ca_file.clone(),
        ..HttpOptions::default()
    };
    let source = match HttpSource::new(&args.base_url, &options) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let state = match StateDir::open(&args.state) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "error: cannot create the state directory `{}`: {e}",
                args.state.display()
            );
            return ExitCode::from(EXIT_STATE);
        }
    };
    let _lock = match state.lock() {
        Ok(l) => l,
        Err(LockError::Busy) => {
            eprintln!(
                "busy: an agent or another pull holds `{}`; nothing was done",
                args.state.display()
            );
            return ExitCode::from(EXIT_BUSY);
        }
        Err(LockError::Io(e)) => {
            eprintln!("error: cannot lock `{}`: {e}", args.state.display());
            return ExitCode::from(EXIT_STATE);
        }
    };
    let current = match state.load(CURRENT, &trusted) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("warning: {e}; it will be replaced");
            None
        }
    };
    let host = crate::pull::rollout::host_name(&state, std::path::Path::new("/"));
    match pull_from(
        &source,
        &args.name,
        &host,
        &trusted,
        &state,
        current.as_ref(),
        now,
    ) {
        Ok(Pulled::Unchanged { stamp, serial }) => {
            out(format!(
                "serial {serial} is current (stamp expires {})\n",
                format_utc(stamp.expires)
            ));
            // An expired stamp is never current: `pull` refused it above
            // (PullError::Expired, exit 4).
            ExitCode::SUCCESS
        }
        Ok(Pulled::Installed {
            serial, previous, ..
        }) => {
            out(format!(
                "installed serial {serial} as {}{}\n",
                state.path(CURRENT).display(),
                previous.map_or(String::new(), |p| format!(
                    " (serial {p} kept as last-good)"
                ))
            ));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(match e {
                PullError::Fetch(FetchError::Unreachable { .. } | FetchError::Status { .. }) => {
                    EXIT_UNAVAILABLE
                }
                PullError::Expired { .. } => EXIT_STALE,
                PullError::State(_) => EXIT_STATE,
                _ => EXIT_REFUSED,
            })
        }
    }
}
