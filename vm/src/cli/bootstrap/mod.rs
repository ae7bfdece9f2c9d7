//! `policyvm bootstrap --hub URL (--trust KEYFILE | --trust-fingerprint FP)
//! [--collector URL]... [--root DIR] [--name BUNDLE] [--host-name NAME]
//! [--ca-file PEM] [--force] [--no-timer]`: puts this host under
//! management in one command, after the package is installed
//! (docs/operations.md, "Bringing a new host under management"):
//!
//! 1. obtain the hub's key ([`hub_key`]) and install it in the trust
//!    directory `ROOT/etc/converge/trusted`;
//! 2. write `ROOT/etc/converge/agent.toml` ([`files`]);
//! 3. enroll the host (`crate::identity`, as `policyvm enroll`) and print
//!    its inventory entry;
//! 4. enable the agent's timer ([`timer`]).
//!
//! Idempotent: a step whose result is already there changes nothing, and a
//! second run says that nothing changed. An `agent.toml` that configures
//! something else is refused (before anything is written) unless
//! `--force`.
//!
//! With `--root DIR` (not `/`), the files are written for a sandbox root
//! that a `policyvm agent` outside it manages, as `policyvm run --root`
//! does: `agent.toml` names `root = DIR` and the trust directory by its
//! path from outside.
//!
//! Exit codes: 0 bootstrapped (or nothing to change); 3 the hub's key does
//! not have the fingerprint (or does not sign its stamp); 64 usage; 66 the
//! key file cannot be read; 69 the hub cannot be reached; 73 a file cannot
//! be written, `agent.toml` configures something else (`--force`), or the
//! identity is unsafe; 75 an agent holds the state directory
//! ([`super::exit`]).

mod files;
mod hub_key;
mod timer;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::exit;
use super::out;
use crate::bundle::keys::{fingerprint, parse_fingerprint, PublicKey};
use crate::identity::{self, EnrollError};
use crate::pull::fetch::{HttpOptions, HttpSource};
use crate::run::lock::LockError;
use crate::state::StateDir;
use files::{AgentSettings, Step};
use hub_key::KeyError;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("hub_key").required(true).args(["trust", "trust_fingerprint"])))]
pub struct BootstrapArgs {
    /// The hub's base URL, as `policyvm pull` takes it.
    #[arg(long, value_name = "URL")]
    hub: String,
    /// The hub's public key file (`NAME.pub` from `policyc keygen`),
    /// copied to this host.
    #[arg(long, value_name = "KEYFILE")]
    trust: Option<PathBuf>,
    /// Fetch the hub's public key from the hub and trust it only if its
    /// fingerprint is this (`SHA256:` and 64 hex digits, as `policyc
    /// keygen` prints it).
    #[arg(long, value_name = "FINGERPRINT")]
    trust_fingerprint: Option<String>,
    /// A collector to upload signed run reports to (repeatable).
    #[arg(long = "collector", value_name = "URL")]
    collectors: Vec<String>,
    /// Bootstrap this sandbox root instead of the host (files under it, the
    /// timer enabled as `systemctl --root` does).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// The bundle the host pulls (`NAME.stamp`, `NAME.bundle`).
    #[arg(long, default_value = "site")]
    name: String,
    /// The name the host reports under (default: its hostname).
    #[arg(long, value_name = "NAME")]
    host_name: Option<String>,
    /// PEM certificates of the authority that signed a private hub's TLS
    /// certificate (written to agent.toml as `ca_file`).
    #[arg(long, value_name = "PEM")]
    ca_file: Option<PathBuf>,
    /// Replace an agent.toml that configures something else.
    #[arg(long)]
    force: bool,
    /// Do not enable the systemd timer (the agent runs from cron).
    #[arg(long)]
    no_timer: bool,
}

/// A failed step: its exit code and message.
struct Failed(u8, String);

pub fn bootstrap(args: BootstrapArgs) -> ExitCode {
    match steps(&args) {
        Ok(changed) => {
            out(if changed {
                "bootstrapped: the agent runs on its timer; add the entry above to the \
                 inventory (inventory.toml) and publish\n"
            } else {
                "nothing to change: this host is already bootstrapped with these settings\n"
            });
            ExitCode::SUCCESS
        }
        Err(Failed(code, message)) => {
            eprintln!("error: {message}");
            ExitCode::from(code)
        }
    }
}

/// Runs every step in order; `Ok(true)` when one of them changed
/// something.
fn steps(args: &BootstrapArgs) -> Result<bool, Failed> {
    let usage = |m: String| Failed(exit::USAGE, m);
    let cant_create = |m: String| Failed(exit::CANT_CREATE, m);
    let root = &args.root;
    let in_root = |path: &str| root.join(path);
    let etc = in_root("etc/converge");
    let config_path = etc.join("agent.toml");
    let trust_dir = etc.join("trusted");
    let sandbox = root != Path::new("/");

    // Everything that can be refused is checked before anything is written.
    let settings = AgentSettings {
        hub: &args.hub,
        name: &args.name,
        trust: &trust_dir,
        root: sandbox.then_some(root.as_path()),
        collectors: &args.collectors,
        ca_file: args.ca_file.as_deref(),
    };
    let config_text = files::agent_toml(&settings).map_err(usage)?;
    if let Ok(old) = std::fs::read(&config_path) {
        if old != config_text.as_bytes()
            && !args.force
            && !files::sets_nothing(&String::from_utf8_lossy(&old))
        {
            // The same refusal write_agent_toml gives, before the key is
            // fetched or installed.
            return files::write_agent_toml(&config_path, &config_text, false)
                .map(|_| false)
                .map_err(cant_create);
        }
    }
    let key = hub_key(args)?;
    let mut changed = false;
    let mut report = |what: String, step: Step| {
        changed |= step == Step::Done;
        let verb = match step {
            Step::Done => "done     ",
            Step::Unchanged => "unchanged",
        };
        out(format!("{verb} {what}\n"));
    };

    let step = files::install_key(&trust_dir, &key).map_err(cant_create)?;
    report(
        format!(
            "trust {} ({})",
            trust_dir.join(files::key_file_name(&key)).display(),
            fingerprint(&key.key)
        ),
        step,
    );
    let step =
        files::write_agent_toml(&config_path, &config_text, args.force).map_err(cant_create)?;
    report(format!("configuration {}", config_path.display()), step);
    let (step, entry) = enroll(root, args.host_name.as_deref())?;
    report(
        "enroll this host (its inventory entry follows)".to_owned(),
        step,
    );
    out(entry);
    if args.no_timer {
        out("skipped   the timer (--no-timer): run `policyvm agent` from cron\n");
    } else if sandbox {
        let step = timer::enable_under(root).map_err(cant_create)?;
        report(
            format!(
                "enable {}",
                root.join(timer::WANTS).join(timer::TIMER).display()
            ),
            step,
        );
    } else {
        let step = timer::enable_now().map_err(cant_create)?;
        report(format!("enable --now {}", timer::TIMER), step);
    }
    Ok(changed)
}

/// The hub's key, from `--trust` or fetched and checked against
/// `--trust-fingerprint`.
fn hub_key(args: &BootstrapArgs) -> Result<PublicKey, Failed> {
    let failed = |e: KeyError| match e {
        KeyError::Unreadable(m) => Failed(exit::NO_INPUT, m),
        KeyError::Unavailable(m) => Failed(exit::UNAVAILABLE, m),
        KeyError::Refused(m) => Failed(exit::REFUSED, m),
    };
    match (&args.trust, &args.trust_fingerprint) {
        (Some(file), None) => hub_key::from_file(file).map_err(failed),
        (None, Some(text)) => {
            let expected = parse_fingerprint(text).map_err(|e| Failed(exit::USAGE, e))?;
            let options = HttpOptions {
                ca_file: args.ca_file.clone(),
                ..HttpOptions::default()
            };
            let source =
                HttpSource::new(&args.hub, &options).map_err(|e| Failed(exit::USAGE, e))?;
            hub_key::fetch(&source, &args.name, &expected).map_err(failed)
        }
        // clap's group makes exactly one of them required.
        _ => Err(Failed(
            exit::USAGE,
            "give exactly one of --trust KEYFILE and --trust-fingerprint FINGERPRINT".to_owned(),
        )),
    }
}

/// Enrolls the host as `policyvm enroll --root ROOT [--name NAME]` does; an
/// identity already there is kept (and its entry printed again).
fn enroll(root: &Path, name: Option<&str>) -> Result<(Step, String), Failed> {
    let dir = crate::state::default_dir(root);
    let cant_create = |m: String| Failed(exit::CANT_CREATE, m);
    let state = StateDir::open_under(root, &dir).map_err(|e| {
        cant_create(format!(
            "cannot create the state directory `{}`: {e}",
            dir.display()
        ))
    })?;
    let _lock = state.lock().map_err(|e| match e {
        LockError::Busy => Failed(
            exit::BUSY,
            format!(
                "a policyvm agent or run holds `{}`; bootstrap again when it is done",
                state.path(crate::state::LOCK).display()
            ),
        ),
        LockError::Io(e) => cant_create(format!("cannot lock `{}`: {e}", dir.display())),
    })?;
    let hostname = crate::facts::hostname(root);
    match identity::enroll(&state, name, &hostname, false) {
        Ok(made) => Ok((Step::Done, made.inventory_entry())),
        Err(EnrollError::Enrolled { name: enrolled }) => {
            if let Some(wanted) = name.filter(|n| *n != enrolled) {
                return Err(cant_create(format!(
                    "this host is already enrolled as {enrolled:?}, not {wanted:?}; nothing was \
                     changed. `policyvm enroll --rotate --name {wanted}` renames it"
                )));
            }
            match identity::load(&state) {
                Ok(Some(existing)) => Ok((Step::Unchanged, existing.inventory_entry())),
                Ok(None) => Err(cant_create(
                    "the identity vanished while reading it".to_owned(),
                )),
                Err(e) => Err(cant_create(e)),
            }
        }
        Err(e @ EnrollError::BadName(_)) => Err(Failed(exit::USAGE, e.to_string())),
        Err(e) => Err(cant_create(e.to_string())),
    }
}
