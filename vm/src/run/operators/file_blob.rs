//! A `file` whose `source` is stored beside the bundle (format 2.6, issue
//! 22 item 5): converged without holding the file in memory.
//!
//! The file on the host is compared by size and a streamed SHA-256 with
//! the digest the signed bundle gives, so a converged run reads the
//! target once and never opens the blob. A repair streams the blob from
//! the host's blob directories ([`crate::blobs::open`]) into the atomic
//! write's temporary, hashing it on the way; bytes that are not the
//! bundle's fail the write before the rename ([`converge_format::blobs::Verifier`]), so the target is its old
//! content or the promised one, never part of one. Mode, owner, `backup`
//! and `validate` behave as for an inline `source`.

use converge_format::blobs::digest_of;
use converge_format::bundle::format::BlobRef;

use super::{
    attributes, current_gid, current_uid, fs_failed, validate_staged, Applied, Change, Ctx, Outcome,
};
use crate::rootfs::{FsError, Meta, MAX_READ};
use crate::run::resolve::Instance;

/// Converges the file of `inst` to the stored `blob` (the caller handled
/// `ensure = absent` and refused links, directories and other objects).
pub(super) fn converge(
    ctx: &Ctx<'_>,
    inst: &Instance,
    blob: &BlobRef,
    meta: Option<Meta>,
    (want_uid, want_gid): (Option<u32>, Option<u32>),
) -> Applied {
    let path = inst.promiser.as_str();
    let promised_mode = inst.int("mode").and_then(|m| u32::try_from(m).ok());
    let after = format!("sha256:{}", short(&blob.sha256));
    let Some(meta) = meta else {
        if inst.bool("create") == Some(false) {
            return Applied {
                outcome: Outcome::Skipped("absent and create = false".into()),
                changes: Vec::new(),
                output: None,
            };
        }
        let mode = promised_mode.unwrap_or(0o644);
        let owner = match (want_uid, want_gid) {
            (None, None) => None,
            (u, g) => Some((u.unwrap_or_else(current_uid), g.unwrap_or_else(current_gid))),
        };
        if let Err(failed) = write(ctx, inst, blob, mode, owner) {
            return failed;
        }
        return Applied::from_changes(vec![Change {
            what: "created".into(),
            before: "absent".into(),
            after: format!("{after} mode 0o{mode:o}"),
            diff: None,
        }]);
    };
    let mut changes = Vec::new();
    let current = match current_digest(ctx, path, &meta, blob) {
        Ok(current) => current,
        Err(e) => return fs_failed(e),
    };
    if current.as_ref() != Some(blob) {
        let mode = promised_mode.unwrap_or(meta.mode);
        if inst.bool("backup") == Some(true) && !ctx.dry_run {
            if let Err(failed) = backup(ctx, path) {
                return failed;
            }
        }
        let owner = Some((want_uid.unwrap_or(meta.uid), want_gid.unwrap_or(meta.gid)));
        if let Err(failed) = write(ctx, inst, blob, mode, owner) {
            return failed;
        }
        changes.push(Change {
            what: "content".into(),
            before: current.map_or_else(
                || format!("{} bytes", meta.len),
                |c| format!("sha256:{}", short(&c.sha256)),
            ),
            after,
            diff: None,
        });
    }
    let meta = if changes.is_empty() || ctx.dry_run {
        meta
    } else {
        match ctx.lstat(path) {
            Ok(Some(m)) => m,
            Ok(None) => return Applied::failed(format!("`{path}` vanished while it was written")),
            Err(e) => return fs_failed(e),
        }
    };
    match attributes(ctx, inst, path, meta.mode, meta.uid, meta.gid) {
        Ok(more) => changes.extend(more),
        Err(failed) => return failed,
    }
    Applied::from_changes(changes)
}

/// The digest of the file at `path`, streamed; `None` when its size alone
/// says it differs (nothing is read then).
fn current_digest(
    ctx: &Ctx<'_>,
    path: &str,
    meta: &Meta,
    blob: &BlobRef,
) -> Result<Option<BlobRef>, FsError> {
    if meta.len != blob.size {
        return Ok(None);
    }
    let Some(file) = ctx.fs.open_file(path)? else {
        return Ok(None);
    };
    digest_of(file)
        .map(Some)
        .map_err(|e| FsError::Rejected(format!("cannot read `{path}`: {e}")))
}

/// Streams the blob into the file, through `validate` if promised. A dry
/// run opens the blob (a missing one is reported as the real run would
/// fail) and writes nothing.
fn write(
    ctx: &Ctx<'_>,
    inst: &Instance,
    blob: &BlobRef,
    mode: u32,
    owner: Option<(u32, u32)>,
) -> Result<(), Applied> {
    let path = inst.promiser.as_str();
    let mut source = crate::blobs::open(ctx.blobs, blob)
        .map_err(|why| Applied::failed(format!("`{path}` was not written: {why}")))?;
    if ctx.dry_run {
        return ctx.fs.check_change(path).map_err(fs_failed);
    }
    let validate = inst.list("validate");
    if let Some(validate) = validate {
        if !validate.iter().any(|a| a == "%s") {
            return Err(Applied::failed(
                "`validate` has no argument that is exactly `%s` (the staged copy's path); not written",
            ));
        }
    }
    // The digest is checked at the end of the copy, before the staged
    // copy is validated or takes the name ([`converge_format::blobs::Verifier`]'s read): a blob
    // whose bytes are not the bundle's never replaces anything, and
    // `validate` never runs on bytes nobody signed.
    let mut output = String::new();
    let written = ctx
        .fs
        .write_file_from(path, &mut source, mode, owner, |staged| match validate {
            Some(v) => validate_staged(ctx, inst, v, staged, false, &mut output),
            None => Ok(()),
        });
    match (written, source.finish()) {
        (Ok(()), _) => Ok(()),
        (Err(e), Err(why)) => Err(Applied::failed(format!(
            "`{path}` was not written: {why} ({e})"
        ))),
        (Err(e), Ok(())) => Err(Applied {
            outcome: Outcome::Failed(e.to_string()),
            changes: Vec::new(),
            output: (!output.is_empty()).then_some(output),
        }),
    }
}

/// Whether the file at `path` (an existing regular file, `meta`) holds
/// exactly the stored `blob` (a file of a `directory source`).
pub(super) fn holds(
    ctx: &Ctx<'_>,
    path: &str,
    meta: &Meta,
    blob: &BlobRef,
) -> Result<bool, FsError> {
    Ok(current_digest(ctx, path, meta, blob)?.as_ref() == Some(blob))
}

/// Writes the stored `blob` to `path` (a file of a `directory source`),
/// streamed and checked as [`converge`] does; a dry run only checks that
/// the blob is there and the path may change.
pub(super) fn write_stored(
    ctx: &Ctx<'_>,
    path: &str,
    blob: &BlobRef,
    mode: u32,
    owner: Option<(u32, u32)>,
) -> Result<(), FsError> {
    let mut source = crate::blobs::open(ctx.blobs, blob)
        .map_err(|why| FsError::Rejected(format!("`{path}` was not written: {why}")))?;
    if ctx.dry_run {
        return ctx.fs.check_change(path);
    }
    let written = ctx
        .fs
        .write_file_from(path, &mut source, mode, owner, |_| Ok(()));
    match (written, source.finish()) {
        (Ok(()), _) => Ok(()),
        (Err(e), Err(why)) => Err(FsError::Rejected(format!(
            "`{path}` was not written: {why} ({e})"
        ))),
        (Err(e), Ok(())) => Err(e),
    }
}

/// A copy of the file in the state directory before it is replaced
/// (`backup = true`), read whole: at most the VM's read bound.
fn backup(ctx: &Ctx<'_>, path: &str) -> Result<(), Applied> {
    let Some(state) = ctx.state else {
        return Err(Applied::failed(
            "`backup = true` needs the VM's state directory (`--state`), where backups are kept; not rewritten",
        ));
    };
    let current = match ctx.fs.read_file_limited(path, MAX_READ) {
        Ok(c) => c.unwrap_or_default(),
        Err(e) => {
            return Err(Applied::failed(format!(
                "cannot back it up: {e}; not rewritten"
            )))
        }
    };
    state
        .backup(path, &current)
        .map(|_| ())
        .map_err(|e| Applied::failed(format!("cannot back it up: {e}")))
}

fn short(sha256: &[u8; 32]) -> String {
    crate::bundle::error::hex(sha256.get(..8).unwrap_or_default())
}
