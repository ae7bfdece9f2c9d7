//! `policyc publish`: build a bundle and write it, with its signed stamp,
//! into a directory any static HTTP server can serve to hosts; and the
//! staged rollout of a new serial (`--rollout`, `--promote`, `--halt`:
//! [`super::rollout`], docs/rollout.md).
//!
//! Every file is written atomically (temporary file, sync, rename),
//! bundles first and the stamp last, so a host that reads the new stamp
//! always finds the bundles it names. A serial not greater than the one
//! already published is refused: hosts would refuse it as a rollback.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use ed25519_dalek::Signer as _;

use super::atomic::{write_atomically, Existing};
use super::build::{build_bundle, default_name, now};
use super::rollout::{parse_target, read_inventory, resolve, widens, PublishDir, Target};
use super::{exit, fail, fail_with, out};
use crate::bundle::embed_blob::BlobSink;
use crate::bundle::keys::{read_secret_key, SecretKey};
use crate::bundle::seal;
use converge_format::bundle::error::hex;
use converge_format::bundle::keys::{encode_key_file, PublicKey, PUBLIC_TAG};
use converge_format::bundle::{open, open_unsigned, Verified};
use converge_format::inventory::Inventory;
use converge_format::stamp::rollout::{Rollout, Who};
use converge_format::stamp::{time::format_utc, Stamp, MAX_STAMP_LEN};

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The policy file with the `policy` block (not with `--promote` or
    /// `--halt`, which publish no new policy).
    #[arg(required_unless_present_any = ["promote", "halt", "gc"], conflicts_with_all = ["promote", "halt"])]
    file: Option<PathBuf>,
    /// The secret key to sign the bundle and the stamp with.
    #[arg(long, value_name = "NAME.key")]
    key: PathBuf,
    /// The publish directory (what the HTTP server serves).
    #[arg(long, value_name = "PUBDIR")]
    dir: PathBuf,
    /// The bundle's name: hosts pull `NAME.stamp` and `NAME.bundle`.
    /// Defaults to the file stem (`site` with `--promote` or `--halt`).
    #[arg(long)]
    name: Option<String>,
    /// The serial; must be greater than the one already published. Defaults
    /// to the current UNIX time, or one more than the published serial if
    /// that is later. With `--halt`: the serial the previous policy is
    /// published again under.
    #[arg(long, conflicts_with = "promote")]
    serial: Option<u64>,
    /// How long the stamp is fresh (`30m`, `12h`, `7d`, `2w`): a host that
    /// still sees it after that reports its policy source as stale.
    #[arg(long, default_value = "7d", value_parser = parse_duration)]
    expires: u64,
    /// Stage the new serial: only these hosts take it, the others keep the
    /// serial published now. `5%` (the same hosts on every run, from a
    /// hash of their names), `hosts=web-01,web-02`, or `groups=canary`
    /// (the inventory's hosts of those groups).
    #[arg(long, value_name = "WHO", value_parser = parse_target, conflicts_with_all = ["promote", "halt"])]
    rollout: Option<Target>,
    /// Widen the rollout in progress (`50%`, more hosts or groups); `100%`
    /// gives everyone the new serial (a plain stamp).
    #[arg(long, value_name = "WHO", value_parser = parse_target, conflicts_with = "halt")]
    promote: Option<Target>,
    /// Stop the rollout in progress (or the last one, promoted to 100%):
    /// every host goes back to the previous serial's policy, published
    /// again under a new serial (the hosts' rollback mark never goes back).
    #[arg(long)]
    halt: bool,
    /// Afterwards (or alone, without a policy file), remove the blobs of
    /// the publish directory (`PUBDIR/blobs/`) that no bundle in it names:
    /// neither a `NAME.bundle` nor a release a rollout keeps in
    /// `NAME.bundles/`. Run it when no other publish to the directory is
    /// under way (one could be writing blobs for a bundle not yet there).
    #[arg(long)]
    gc: bool,
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

/// What one `policyc publish` writes, in order (the stamp last).
#[derive(Default)]
struct Files(Vec<(PathBuf, Vec<u8>)>);

impl Files {
    fn add(&mut self, path: PathBuf, bytes: impl Into<Vec<u8>>) {
        self.0.push((path, bytes.into()));
    }

    fn write(self) -> Result<(), ExitCode> {
        for (path, bytes) in self.0 {
            let parent = path.parent().unwrap_or(Path::new("."));
            if let Err(e) = std::fs::create_dir_all(parent) {
                return Err(fail_with(
                    exit::CANT_CREATE,
                    format!("cannot create `{}`: {e}", parent.display()),
                ));
            }
            if let Err(e) = write_atomically(&path, &bytes, 0o644, Existing::Replace) {
                return Err(fail_with(
                    exit::CANT_CREATE,
                    format!("cannot write `{}`: {e}", path.display()),
                ));
            }
        }
        Ok(())
    }
}

/// The signing key, with its public half.
struct Signer {
    key: SecretKey,
    public: PublicKey,
    expires: u64,
}

impl Signer {
    /// The stamp file for `stamp`, signed with this key; refused when it
    /// is longer than hosts read (a rollout to very many named hosts).
    fn sign(&self, stamp: &Stamp) -> Result<String, ExitCode> {
        let text = stamp.encode(&self.key.signing.sign(&stamp.signing_digest()).to_bytes());
        if text.len() > MAX_STAMP_LEN {
            return Err(fail_with(
                exit::USAGE,
                format!(
                    "the stamp would be {} bytes, over the {MAX_STAMP_LEN} bytes hosts read: \
                     name fewer hosts, or roll out to a percentage",
                    text.len()
                ),
            ));
        }
        Ok(text)
    }

    /// A stamp for `bundle` published now.
    fn stamp(&self, bundle: &Verified, rollout: Option<Rollout>) -> Stamp {
        let published = now();
        Stamp {
            rollout,
            ..Stamp::for_bundle(bundle, published, published.saturating_add(self.expires))
        }
    }

    /// `stamp` again, published now and signed by this key: a promotion.
    fn restamp(&self, stamp: &Stamp, rollout: Option<Rollout>) -> Stamp {
        let published = now();
        Stamp {
            published,
            expires: published.saturating_add(self.expires),
            key_id: self.key.id,
            rollout,
            ..stamp.clone()
        }
    }

    /// `bundle` read back exactly as a host will.
    fn verify(&self, bytes: &[u8]) -> Result<Verified, ExitCode> {
        open(bytes, std::slice::from_ref(&self.public)).map_err(|e| {
            fail_with(
                exit::CANT_CREATE,
                format!("the new bundle does not verify: {e}"),
            )
        })
    }

    /// The public key file, for `policyvm bootstrap --trust-fingerprint`
    /// (a host trusts it only when its fingerprint is the one the
    /// operator passed). Written before the stamp that names it.
    fn key_file(&self, dir: &Path, files: &mut Files) {
        files.add(
            dir.join(format!("keys/{}.pub", hex(&self.key.id))),
            encode_key_file("public", PUBLIC_TAG, self.public.id, &self.public.key),
        );
    }
}

pub fn run(args: PublishArgs) -> ExitCode {
    let key = match read_secret_key(&args.key) {
        Ok(key) => key,
        Err(e) => return fail(e),
    };
    let signer = Signer {
        public: PublicKey {
            id: key.id,
            key: key.signing.verifying_key().to_bytes(),
        },
        key,
        expires: args.expires,
    };
    let name = match (&args.name, &args.file) {
        (Some(name), _) => name.clone(),
        (None, Some(file)) => default_name(file),
        (None, None) => "site".to_owned(),
    };
    if let Some(why) = converge_format::stamp::name_problem(&name) {
        return fail_with(
            exit::USAGE,
            format!("`{name}` cannot name a bundle: {why}; pass `--name` with a name like `site`"),
        );
    }
    let dir = PublishDir {
        dir: args.dir.clone(),
        name,
    };
    let current = match PublishDir::read_stamp(&dir.stamp()) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let result = match (&args.promote, args.halt) {
        (Some(target), _) => promote(&args, &signer, &dir, current, target),
        (None, true) => halt(&args, &signer, &dir, current),
        (None, false) if args.file.is_none() && args.gc => Ok(String::new()),
        (None, false) => publish(&args, &signer, &dir, current),
    };
    let result = match result {
        Ok(message) if args.gc => gc(&args.dir).map(|gc| format!("{message}{gc}")),
        other => other,
    };
    match result {
        Ok(message) => {
            out(message);
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// The inventory groups and host names are checked against: `--inventory`,
/// else `inventory.toml` at the root of the policy tree, if there is one.
fn inventory(args: &PublishArgs) -> Result<Option<Inventory>, ExitCode> {
    let tree_root = args.tree.policy_root.clone().or_else(|| {
        args.file
            .as_ref()
            .and_then(|f| f.parent().map(Path::to_path_buf))
    });
    let path = match (&args.tree.inventory, tree_root) {
        (Some(path), _) => path.clone(),
        (None, Some(root)) if root.join("inventory.toml").is_file() => root.join("inventory.toml"),
        _ => return Ok(None),
    };
    read_inventory(&path)
        .map(Some)
        .map_err(|e| fail_with(exit::NO_INPUT, e))
}

/// The rollout `target` asks for, resolved against the inventory.
fn who(args: &PublishArgs, target: &Target) -> Result<Option<Who>, ExitCode> {
    let inventory = inventory(args)?;
    resolve(target, inventory.as_ref()).map_err(|e| fail_with(exit::USAGE, e))
}

/// A new serial above `published`: `--serial`, checked, or the time.
fn next_serial(args: &PublishArgs, published: Option<u64>) -> Result<u64, ExitCode> {
    match (args.serial, published) {
        (Some(s), Some(p)) if s <= p => Err(fail_with(
            exit::USAGE,
            format!(
                "serial {s} is not greater than the published serial {p}; hosts would \
                 refuse it as a rollback. Pass a larger --serial, or leave it out"
            ),
        )),
        (Some(s), _) => Ok(s),
        (None, Some(p)) => Ok(now().max(p.saturating_add(1))),
        (None, None) => Ok(now()),
    }
}

/// A new policy: to everyone, or staged with `--rollout`.
fn publish(
    args: &PublishArgs,
    signer: &Signer,
    dir: &PublishDir,
    current: Option<Stamp>,
) -> Result<String, ExitCode> {
    let Some(file) = &args.file else {
        return Err(fail_with(exit::USAGE, "name the policy file to publish"));
    };
    let staged = match &args.rollout {
        None => None,
        Some(target) => {
            let Some(current) = &current else {
                return Err(fail_with(
                    exit::USAGE,
                    format!(
                        "nothing is published at `{}` yet, so there is no serial to roll out \
                         from: publish without --rollout first",
                        dir.stamp().display()
                    ),
                ));
            };
            if let Some(r) = &current.rollout {
                return Err(fail_with(
                    exit::USAGE,
                    format!(
                        "the rollout of serial {} (from {}, to {}) is in progress: \
                         `--promote 100%` or `--halt` it first",
                        current.serial, r.previous.serial, r.who
                    ),
                ));
            }
            who(args, target)?.map(|who| (who, current.release()))
        }
    };
    let serial = next_serial(args, current.as_ref().map(|s| s.serial))?;
    let identities = args
        .secrets
        .read()
        .map_err(|e| fail_with(exit::NO_INPUT, e))?;
    // Blobs first (format 2.6): a host that reads the new stamp finds
    // every blob its bundle names.
    let built = build_bundle(
        file,
        &args.tree,
        &signer.key,
        Some(&dir.name),
        serial,
        &identities,
        &BlobSink::beside(&dir.bundle()),
    )?;
    let verified = signer.verify(&built.bytes)?;
    let mut files = Files::default();
    let mut rollout = None;
    if let Some((who, previous)) = staged {
        let previous_bytes = dir
            .release_bytes(&previous)
            .map_err(|e| fail_with(exit::NO_INPUT, e))?;
        files.add(dir.release(previous.serial), previous_bytes);
        files.add(dir.release(serial), built.bytes.clone());
        rollout = Some(Rollout { previous, who });
    }
    files.add(dir.bundle(), built.bytes.clone());
    signer.key_file(&dir.dir, &mut files);
    let stamp = signer.stamp(&verified, rollout);
    let stamp_text = signer.sign(&stamp)?;
    if stamp.rollout.is_some() {
        files.add(dir.record(), stamp_text.clone());
    }
    files.add(dir.stamp(), stamp_text);
    files.write()?;
    let staged = match &stamp.rollout {
        Some(r) => format!(
            "; rollout to {}, the other hosts stay on serial {}",
            r.who, r.previous.serial
        ),
        None => String::new(),
    };
    Ok(format!(
        "published {} and {}: bundle {:?}, {} promises, {} bytes, serial {serial}, key id {}, fresh until {}{staged}\n",
        dir.bundle().display(),
        dir.stamp().display(),
        dir.name,
        built.promises,
        built.bytes.len(),
        hex(&signer.key.id),
        format_utc(stamp.expires),
    ))
}

/// `--gc`: removes the blobs of the publish directory that no bundle in
/// it names (`NAME.bundle`, and the releases of `NAME.bundles/` a rollout
/// or `--halt` may go back to). A bundle that cannot be read stops it
/// before anything is removed: what it names is unknown.
fn gc(pubdir: &Path) -> Result<String, ExitCode> {
    let mut bundles: Vec<PathBuf> = Vec::new();
    let list = |dir: &Path| -> Result<Vec<PathBuf>, ExitCode> {
        let entries = std::fs::read_dir(dir).map_err(|e| {
            fail_with(
                exit::NO_INPUT,
                format!("cannot list `{}`: {e}", dir.display()),
            )
        })?;
        Ok(entries.filter_map(Result::ok).map(|e| e.path()).collect())
    };
    for path in list(pubdir)? {
        let named = |ext: &str| path.extension().is_some_and(|e| e == ext);
        if named("bundle") && path.is_file() {
            bundles.push(path);
        } else if named("bundles") && path.is_dir() {
            bundles.extend(
                list(&path)?
                    .into_iter()
                    .filter(|p| p.extension().is_some_and(|e| e == "bundle")),
            );
        }
    }
    let mut keep = std::collections::HashSet::new();
    for path in &bundles {
        let body = std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| open_unsigned(&bytes).map_err(|e| e.to_string()))
            .map_err(|e| {
                fail_with(
                    exit::NO_INPUT,
                    format!(
                        "--gc: cannot read `{}` ({e}); no blob removed, since the blobs it \
                         names are unknown. Remove or republish it, then run --gc again",
                        path.display()
                    ),
                )
            })?
            .body;
        keep.extend(body.blobs().map(|b| b.sha256));
    }
    let blobs = pubdir.join(converge_format::blobs::DIR);
    let removed = converge_format::blobs::collect_garbage(&blobs, &keep).map_err(|e| {
        fail_with(
            exit::CANT_CREATE,
            format!("--gc: cannot remove from `{}`: {e}", blobs.display()),
        )
    })?;
    Ok(format!(
        "gc: removed {} blobs of {} that no bundle names ({} bundles, {} blobs kept)\n",
        removed.len(),
        blobs.display(),
        bundles.len(),
        keep.len()
    ))
}

/// `--promote`: the rollout in progress, to more hosts or to everyone.
fn promote(
    args: &PublishArgs,
    signer: &Signer,
    dir: &PublishDir,
    current: Option<Stamp>,
    target: &Target,
) -> Result<String, ExitCode> {
    let Some((current, rollout)) = current.and_then(|s| s.rollout.clone().map(|r| (s, r))) else {
        return Err(fail_with(
            exit::USAGE,
            format!(
                "no rollout is in progress at `{}`: start one with `policyc publish FILE \
                 --rollout 5%`",
                dir.stamp().display()
            ),
        ));
    };
    let who = who(args, target)?;
    if let Some(who) = &who {
        widens(&rollout.who, who).map_err(|e| fail_with(exit::USAGE, e))?;
    }
    let stamp = signer.restamp(
        &current,
        who.map(|who| Rollout {
            previous: rollout.previous,
            who,
        }),
    );
    let mut files = Files::default();
    signer.key_file(&dir.dir, &mut files);
    files.add(dir.stamp(), signer.sign(&stamp)?);
    files.write()?;
    Ok(match &stamp.rollout {
        Some(r) => format!(
            "promoted serial {} of {:?} to {}; the other hosts stay on serial {}\n",
            stamp.serial, dir.name, r.who, r.previous.serial
        ),
        None => format!(
            "promoted serial {} of {:?} to every host (a plain stamp); `--halt` still returns \
             them to serial {}'s policy\n",
            stamp.serial, dir.name, rollout.previous.serial
        ),
    })
}

/// `--halt`: the previous release's policy, published again under a new
/// serial, for everyone. Hosts that took the new serial have raised their
/// rollback mark to it and refuse anything older; a higher serial with the
/// old content takes every host back without touching that mark.
fn halt(
    args: &PublishArgs,
    signer: &Signer,
    dir: &PublishDir,
    current: Option<Stamp>,
) -> Result<String, ExitCode> {
    let Some(current) = current else {
        return Err(fail_with(
            exit::USAGE,
            format!(
                "nothing is published at `{}`: there is no rollout to halt",
                dir.stamp().display()
            ),
        ));
    };
    let rollout = dir
        .halted(&current)
        .map_err(|e| fail_with(exit::USAGE, e))?;
    let previous = dir
        .release_bytes(&rollout.previous)
        .map_err(|e| fail_with(exit::NO_INPUT, e))?;
    let serial = next_serial(args, Some(current.serial))?;
    let mut body = open_unsigned(&previous)
        .map_err(|e| {
            fail_with(
                exit::NO_INPUT,
                format!(
                    "the bundle of serial {} is refused: {e}",
                    rollout.previous.serial
                ),
            )
        })?
        .body;
    body.header.serial = serial;
    body.header.key_id = signer.key.id;
    let bytes = seal(&body, &signer.key).map_err(|e| fail_with(exit::CANT_CREATE, e))?;
    let verified = signer.verify(&bytes)?;
    let stamp = signer.stamp(&verified, None);
    let mut files = Files::default();
    files.add(dir.release(serial), bytes.clone());
    files.add(dir.bundle(), bytes);
    signer.key_file(&dir.dir, &mut files);
    files.add(dir.stamp(), signer.sign(&stamp)?);
    files.write()?;
    Ok(format!(
        "halted the rollout of serial {} of {:?}: every host goes to serial {serial}, serial {}'s \
         policy published again (a new serial, so no host's rollback mark goes back)\n",
        current.serial, dir.name, rollout.previous.serial
    ))
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
