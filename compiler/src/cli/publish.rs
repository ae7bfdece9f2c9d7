//! `policyc publish`: build a bundle and write it, with its signed stamp,
//! into a directory any static HTTP server can serve to hosts.
//!
//! Both files are written atomically (temporary file, sync, rename), the
//! bundle first and the stamp last, so a host that reads the new stamp
//! always finds the bundle it describes. A serial not greater than the one
//! already published is refused: hosts would refuse it as a rollback.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use ed25519_dalek::Signer as _;

use super::atomic::{write_atomically, Existing};
use super::build::{build_bundle, default_name, now};
use super::{exit, fail, fail_with, out};
use crate::bundle::keys::read_secret_key;
use converge_format::bundle::error::hex;
use converge_format::bundle::keys::{encode_key_file, PublicKey, PUBLIC_TAG};
use converge_format::bundle::open;
use converge_format::stamp::{time::format_utc, Stamp};

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The policy file with the `policy` block.
    file: PathBuf,
    /// The secret key to sign the bundle and the stamp with.
    #[arg(long, value_name = "NAME.key")]
    key: PathBuf,
    /// The publish directory (what the HTTP server serves).
    #[arg(long, value_name = "PUBDIR")]
    dir: PathBuf,
    /// The bundle's name: hosts pull `NAME.stamp` and `NAME.bundle`.
    /// Defaults to the file stem.
    #[arg(long)]
    name: Option<String>,
    /// The serial; must be greater than the one already published. Defaults
    /// to the current UNIX time, or one more than the published serial if
    /// that is later.
    #[arg(long)]
    serial: Option<u64>,
    /// How long the stamp is fresh (`30m`, `12h`, `7d`, `2w`): a host that
    /// still sees it after that reports its policy source as stale.
    #[arg(long, default_value = "7d", value_parser = parse_duration)]
    expires: u64,
    #[command(flatten)]
    tree: super::inputs::TreeArgs,
    #[command(flatten)]
    secrets: super::build::IdentityArgs,
}

/// Seconds of a positive duration: `30m`, `12h`, `7d`.
fn parse_duration(text: &str) -> Result<u64, String> {
    match converge_format::stamp::time::parse_duration(text)? {
        0 => Err(format!(
            "`{text}` is not a positive duration like `12h` or `7d`"
        )),
        secs => Ok(secs),
    }
}

/// The serial of the stamp already in the publish directory, if any.
fn published_serial(stamp: &Path) -> Result<Option<u64>, String> {
    match std::fs::read(stamp) {
        Ok(bytes) => Stamp::parse_unverified(&bytes)
            .map(|(s, _)| Some(s.serial))
            .map_err(|e| {
                format!(
                    "`{}` is there but unreadable ({e}); move it away if it is not yours",
                    stamp.display()
                )
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read `{}`: {e}", stamp.display())),
    }
}

pub fn run(args: PublishArgs) -> ExitCode {
    let key = match read_secret_key(&args.key) {
        Ok(key) => key,
        Err(e) => return fail(e),
    };
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| default_name(&args.file));
    let stamp_path = args.dir.join(format!("{name}.stamp"));
    let bundle_path = args.dir.join(format!("{name}.bundle"));
    let previous = match published_serial(&stamp_path) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let serial = match (args.serial, previous) {
        (Some(s), Some(p)) if s <= p => {
            return fail_with(
                exit::USAGE,
                format!(
                    "serial {s} is not greater than the published serial {p}; hosts would \
                     refuse it as a rollback. Pass a larger --serial, or leave it out"
                ),
            )
        }
        (Some(s), _) => s,
        (None, Some(p)) => now().max(p.saturating_add(1)),
        (None, None) => now(),
    };
    let identities = match args.secrets.read() {
        Ok(identities) => identities,
        Err(e) => return fail_with(exit::NO_INPUT, e),
    };
    let built = match build_bundle(
        &args.file,
        &args.tree,
        &key,
        Some(&name),
        serial,
        &identities,
    ) {
        Ok(built) => built,
        Err(code) => return code,
    };
    // Read back what was just signed, exactly as a host will.
    let public = PublicKey {
        id: key.id,
        key: key.signing.verifying_key().to_bytes(),
    };
    let verified = match open(&built.bytes, std::slice::from_ref(&public)) {
        Ok(v) => v,
        Err(e) => {
            return fail_with(
                exit::CANT_CREATE,
                format!("the new bundle does not verify: {e}"),
            )
        }
    };
    let published = now();
    let stamp = Stamp::for_bundle(&verified, published, published.saturating_add(args.expires));
    let signature = key.signing.sign(&stamp.signing_digest()).to_bytes();
    if let Err(e) = std::fs::create_dir_all(&args.dir) {
        return fail_with(
            exit::CANT_CREATE,
            format!("cannot create `{}`: {e}", args.dir.display()),
        );
    }
    let stamp_text = stamp.encode(&signature);
    // The signing key's public half, for `policyvm bootstrap
    // --trust-fingerprint` (a host trusts it only when its fingerprint is
    // the one the operator passed). Written before the stamp that names it.
    let key_path = args.dir.join(format!("keys/{}.pub", hex(&key.id)));
    let key_text = encode_key_file("public", PUBLIC_TAG, public.id, &public.key);
    if let Err(e) = std::fs::create_dir_all(args.dir.join("keys")) {
        return fail_with(
            exit::CANT_CREATE,
            format!("cannot create `{}`: {e}", args.dir.join("keys").display()),
        );
    }
    for (path, bytes) in [
        (&bundle_path, built.bytes.as_slice()),
        (&key_path, key_text.as_bytes()),
        (&stamp_path, stamp_text.as_bytes()),
    ] {
        if let Err(e) = write_atomically(path, bytes, 0o644, Existing::Replace) {
            return fail_with(
                exit::CANT_CREATE,
                format!("cannot write `{}`: {e}", path.display()),
            );
        }
    }
    out(format!(
        "published {} and {}: bundle {name:?}, {} promises, {} bytes, serial {serial}, key id {}, fresh until {}\n",
        bundle_path.display(),
        stamp_path.display(),
        built.promises,
        built.bytes.len(),
        hex(&key.id),
        format_utc(stamp.expires),
    ));
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(30));
        assert_eq!(parse_duration("12h"), Ok(43_200));
        assert_eq!(parse_duration("7d"), Ok(604_800));
        assert_eq!(parse_duration("2w"), Ok(1_209_600));
        for bad in [
            "",
            "7",
            "d",
            "0d",
            "7y",
            "-1d",
            "1.5d",
            "99999999999999999999w",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
