//! `policyvm verify` and `policyvm inspect`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::exit::NO_INPUT as EXIT_NO_INPUT;
use super::out;
use crate::bundle::disasm::disassemble;
use crate::bundle::error::hex;
use crate::bundle::keys::{load_trust_dir, PublicKey};
use crate::bundle::{open, open_unsigned, BundleError, Verified};

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The bundle file.
    bundle: PathBuf,
    /// The directory of trusted public keys (`*.pub`).
    #[arg(long, value_name = "DIR")]
    trust: PathBuf,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The bundle file.
    bundle: PathBuf,
    /// Also check the signature against these trusted keys.
    #[arg(long, value_name = "DIR")]
    trust: Option<PathBuf>,
}

fn read(path: &Path) -> Result<Vec<u8>, ExitCode> {
    std::fs::read(path).map_err(|e| {
        eprintln!("error: cannot read `{}`: {e}", path.display());
        ExitCode::from(EXIT_NO_INPUT)
    })
}

fn trust(dir: &Path) -> Result<Vec<PublicKey>, ExitCode> {
    load_trust_dir(dir).map_err(|e| {
        eprintln!("error: cannot load trusted keys: {e}");
        ExitCode::from(EXIT_NO_INPUT)
    })
}

fn refused(path: &Path, e: &BundleError) -> ExitCode {
    eprintln!("refused {}: {e}", path.display());
    ExitCode::from(e.exit_code())
}

fn summary(path: &Path, v: &Verified) -> String {
    let h = &v.body.header;
    format!(
        "ok {}: bundle {:?} serial {}, format {}.{}, {} promises, {} bytes, signed by key {}, sha256 {}",
        path.display(),
        h.name,
        h.serial,
        v.version.0,
        v.version.1,
        v.body.promises.len(),
        v.len,
        hex(&v.key_id),
        hex(&v.digest)
    )
}

pub fn verify(args: VerifyArgs) -> ExitCode {
    let keys = match trust(&args.trust) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let bytes = match read(&args.bundle) {
        Ok(b) => b,
        Err(code) => return code,
    };
    match open(&bytes, &keys) {
        Ok(v) => {
            out(format!("{}\n", summary(&args.bundle, &v)));
            ExitCode::SUCCESS
        }
        Err(e) => refused(&args.bundle, &e),
    }
}

pub fn inspect(args: InspectArgs) -> ExitCode {
    let bytes = match read(&args.bundle) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let opened = match &args.trust {
        Some(dir) => match trust(dir) {
            Ok(keys) => open(&bytes, &keys),
            Err(code) => return code,
        },
        None => open_unsigned(&bytes),
    };
    match opened {
        Ok(v) => {
            if args.trust.is_none() {
                out("# signature not checked (no --trust)\n");
            }
            out(disassemble(&v.body, v.version));
            ExitCode::SUCCESS
        }
        Err(e) => refused(&args.bundle, &e),
    }
}
