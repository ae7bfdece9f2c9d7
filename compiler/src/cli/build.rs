//! `policyc keygen` and `policyc build`.

use std::path::{Path, PathBuf};

use super::atomic::{write_atomically, Existing};
use std::process::ExitCode;

use clap::Args;

use super::{exit, fail, fail_with, inputs, out, use_color, EXIT_ERRORS};
use crate::bundle::embed_blob::BlobSink;
use crate::bundle::keys::{keygen, read_secret_key, SecretKey};
use crate::bundle::lower::{lower_storing, BuildInfo};
use crate::bundle::seal;
use crate::bundle::secrets::{read_secret, seal_secrets, Identities};
use crate::check::{check_releasing_syntax, summary};
use crate::diagnostic::Severity;
use crate::render::render_human;
use converge_format::bundle::error::hex;
use converge_format::bundle::keys::fingerprint;
use converge_format::stamp::name_problem;

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Where to write the pair: `--out keys/hub` writes `keys/hub.key`
    /// (secret, mode 0600) and `keys/hub.pub` (public, for the hosts'
    /// trust directory).
    #[arg(long, value_name = "DIR/NAME")]
    out: PathBuf,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The policy file with the `policy` block.
    file: PathBuf,
    /// The bundle file to write.
    #[arg(short = 'o', long = "output", value_name = "OUT.bundle")]
    output: PathBuf,
    /// The secret key to sign with (from `policyc keygen`).
    #[arg(long, value_name = "NAME.key")]
    key: PathBuf,
    /// The bundle's serial; hosts refuse a serial older than the last they
    /// accepted. Defaults to the current UNIX time.
    #[arg(long)]
    serial: Option<u64>,
    /// The bundle's name, which hosts pull it by. Defaults to the file stem.
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    tree: inputs::TreeArgs,
    #[command(flatten)]
    secrets: IdentityArgs,
}

/// `--identity`, for the commands that build a bundle.
#[derive(Debug, Args)]
pub struct IdentityArgs {
    /// An age identity file (`AGE-SECRET-KEY-1...`) that decrypts the
    /// policy's `secret("x.age")` files, which are then sealed to the
    /// hosts entitled to them (docs/secrets.md). May be given several
    /// times; not needed by a policy without secrets.
    #[arg(long = "identity", value_name = "FILE")]
    pub identities: Vec<PathBuf>,
}

impl IdentityArgs {
    /// The identities, read; `Err` says which file is wrong.
    pub fn read(&self) -> Result<Identities, String> {
        Identities::read(&self.identities)
    }
}

pub fn run_keygen(args: KeygenArgs) -> ExitCode {
    if let Err(e) = create_key_dir(&args.out) {
        return fail_with(exit::CANT_CREATE, e);
    }
    match keygen(&args.out) {
        Ok((secret, public_path, public)) => {
            out(format!(
                "wrote {} (secret, keep it safe) and {} (install it in the hosts' trust directory); key id {}\nfingerprint {}\n",
                secret.display(),
                public_path.display(),
                hex(&public.id),
                fingerprint(&public.key),
            ));
            ExitCode::SUCCESS
        }
        Err(e) => fail_with(exit::CANT_CREATE, e),
    }
}

/// Creates the directory of `--out DIR/NAME` when it is missing, mode 0700
/// (and any missing parent with it): it is about to hold a secret key. An
/// existing directory is used as it is.
fn create_key_dir(out: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt as _;
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => return Ok(()),
    };
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create the key directory `{}`: {e}", dir.display()))
}

pub fn run_build(args: BuildArgs) -> ExitCode {
    let key = match read_secret_key(&args.key) {
        Ok(key) => key,
        Err(e) => return fail(e),
    };
    let serial = args.serial.unwrap_or_else(now);
    let identities = match args.secrets.read() {
        Ok(identities) => identities,
        Err(e) => return fail_with(exit::NO_INPUT, e),
    };
    // Files over 4 KiB go to `blobs/` beside the bundle (format 2.6).
    let blobs = BlobSink::beside(&args.output);
    let built = match build_bundle(
        &args.file,
        &args.tree,
        &key,
        args.name.as_deref(),
        serial,
        &identities,
        &blobs,
    ) {
        Ok(built) => built,
        Err(code) => return code,
    };
    if let Err(e) = write_atomically(&args.output, &built.bytes, 0o644, Existing::Replace) {
        return fail_with(
            exit::CANT_CREATE,
            format!("cannot write `{}`: {e}", args.output.display()),
        );
    }
    let stored = match built.stored {
        0 => String::new(),
        n => format!(", {n} files stored in {}", blobs.dir.display()),
    };
    out(format!(
        "built {}: bundle {:?}, {} promises, {} bytes, serial {serial}, key id {}{stored}\n",
        args.output.display(),
        built.name,
        built.promises,
        built.bytes.len(),
        hex(&key.id)
    ));
    ExitCode::SUCCESS
}

/// The current UNIX time in seconds: the default serial, so that a later
/// build outranks an earlier one without anyone counting.
pub(super) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A signed bundle, ready to write.
pub(super) struct Built {
    pub name: String,
    pub promises: usize,
    pub bytes: Vec<u8>,
    /// How many files are stored beside it as blobs (format 2.6).
    pub stored: usize,
}

/// The bundle name a policy file gets unless one is given: its file stem.
pub(super) fn default_name(file: &Path) -> String {
    file.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "policy".to_owned())
}

/// Checks, lowers and signs `file`; on failure the diagnostics or the error
/// are already printed and the exit code is returned.
pub(super) fn build_bundle(
    file: &Path,
    tree: &inputs::TreeArgs,
    key: &SecretKey,
    name: Option<&str>,
    serial: u64,
    identities: &Identities,
    blobs: &BlobSink,
) -> Result<Built, ExitCode> {
    let name = name.map_or_else(|| default_name(file), str::to_owned);
    if let Some(why) = name_problem(&name) {
        return Err(fail_with(
            exit::USAGE,
            format!("`{name}` cannot name a bundle: {why}; pass `--name` with a name like `site`"),
        ));
    }
    let mut ws = inputs::load(&[file.to_path_buf()], tree).map_err(fail)?;
    let mut outcome = check_releasing_syntax(&mut ws);
    if !outcome.diagnostics.is_empty() {
        eprint!(
            "{}",
            render_human(&ws.db, &outcome.diagnostics, use_color())
        );
    }
    if outcome.count(Severity::Error) > 0 {
        eprintln!("{}", summary(&outcome));
        eprintln!("error: not building a bundle from a policy with errors");
        return Err(ExitCode::from(EXIT_ERRORS));
    }
    let Some(checked) = outcome.programs.pop() else {
        eprintln!(
            "error: `{}` has no `policy` block; build the file that has it",
            file.display()
        );
        return Err(ExitCode::from(EXIT_ERRORS));
    };
    let info = BuildInfo {
        name: name.clone(),
        key_id: key.id,
        serial,
    };
    let shown = |diagnostics: Vec<crate::diagnostic::Diagnostic>| {
        eprint!("{}", render_human(&ws.db, &diagnostics, use_color()));
        ExitCode::from(EXIT_ERRORS)
    };
    let mut body = lower_storing(&ws.db, &checked.files, &checked.program, &info, Some(blobs))
        .map_err(shown)?;
    let inventory = ws.inventory(&checked.files).map(|(_, inventory)| inventory);
    let read = |secret: &crate::ir::SecretRef| read_secret(&ws.db, secret);
    seal_secrets(&mut body, &checked.program, inventory, identities, &read).map_err(shown)?;
    let bytes = seal(&body, key).map_err(fail)?;
    let promises = body.promises.len();
    let stored = body.blobs().count();
    // The process ends after this (build and publish): freeing the syntax
    // trees, the program and the bundle piece by piece would only delay
    // the exit, as in `policyc check` (a quarter of the difference between
    // the two on 100,000 promises, issue 22 item 4).
    std::mem::forget(body);
    std::mem::forget(checked);
    std::mem::forget(outcome);
    std::mem::forget(ws);
    Ok(Built {
        name,
        promises,
        bytes,
        stored,
    })
}
