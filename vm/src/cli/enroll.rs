//! `policyvm enroll [--state DIR] [--root DIR] [--name NAME] [--rotate]`:
//! makes this host's identity (`crate::identity`) and prints its
//! `[[host]]` entry for the inventory on standard output.
//!
//! Exit codes: 0 enrolled (the entry is printed); 64 a bad `--name`; 73
//! already enrolled without `--rotate`, an unsafe identity, or the state
//! directory cannot be written; 75 an agent holds the state directory
//! ([`super::exit`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::exit::{BUSY, CANT_CREATE, USAGE};
use super::out;
use crate::identity::{enroll as make_identity, EnrollError};
use crate::run::lock::LockError;
use crate::state::StateDir;

#[derive(Debug, Args)]
pub struct EnrollArgs {
    /// The host's state directory (default: ROOT/var/lib/converge).
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// The root whose hostname is the default name (and whose state
    /// directory is the default one).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// The name this host reports under (default: its hostname; on
    /// `--rotate`, the name it has).
    #[arg(long)]
    name: Option<String>,
    /// Replace an existing identity with new keys, keeping the old report
    /// key as `identity/report.key.previous` (printed as
    /// `previous_report_keys`) until the spool has drained.
    #[arg(long)]
    rotate: bool,
}

pub fn enroll(args: EnrollArgs) -> ExitCode {
    let dir = args
        .state
        .clone()
        .unwrap_or_else(|| crate::state::default_dir(&args.root));
    let state = match StateDir::open_under(&args.root, &dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "error: cannot create the state directory `{}`: {e}",
                dir.display()
            );
            return ExitCode::from(CANT_CREATE);
        }
    };
    let _lock = match state.lock() {
        Ok(l) => l,
        Err(LockError::Busy) => {
            eprintln!(
                "busy: a policyvm agent or run holds `{}`; enroll again when it is done",
                state.path(crate::state::LOCK).display()
            );
            return ExitCode::from(BUSY);
        }
        Err(LockError::Io(e)) => {
            eprintln!("error: cannot lock `{}`: {e}", dir.display());
            return ExitCode::from(CANT_CREATE);
        }
    };
    let hostname = crate::facts::hostname(&args.root);
    match make_identity(&state, args.name.as_deref(), &hostname, args.rotate) {
        Ok(identity) => {
            out(identity.inventory_entry());
            if identity.previous_report_key.is_some() {
                eprintln!(
                    "rotated: replace this host's entry in inventory.toml with the one above; \
                     remove `previous_report_keys` once its spool has drained (`{}` is empty)",
                    state.path(crate::upload::spool::SPOOL).display()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e @ EnrollError::BadName(_)) => {
            eprintln!("error: {e}");
            ExitCode::from(USAGE)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(CANT_CREATE)
        }
    }
}
