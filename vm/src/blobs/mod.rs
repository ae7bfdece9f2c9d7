//! The host's side of content-addressed files (format 2.6, issue 22 item
//! 5): where a run finds the blobs its bundle names, how the agent fetches
//! the missing ones ([`fetch`]) and forgets the unused ones.
//!
//! A run looks for a blob in its blob directories, in order: the agent's
//! cache (`STATE/blobs/`, inside the 0700 state directory), or the
//! `blobs/` directory beside a bundle run from a file. A blob is opened
//! only when a file must be written from it; its size is checked when it
//! is opened and its SHA-256 while it is copied, before the copy replaces
//! anything ([`converge_format::blobs::Verifier`]): a damaged or swapped
//! blob fails its promise and leaves the file as it was.

pub mod fetch;

use std::collections::HashSet;
use std::path::PathBuf;

use converge_format::blobs::{self, OpenError, Verifier};
use converge_format::bundle::format::{BlobRef, Body};

use crate::state::StateDir;

/// The host's blob cache, in the state directory.
pub fn cache_dir(state: &StateDir) -> PathBuf {
    state.path(blobs::DIR)
}

/// Opens blob `blob` from the first of `dirs` that has it, as a reader
/// that checks its digest ([`Verifier::finish`]). The error says which
/// blob, where it was looked for, and what to do.
pub fn open(dirs: &[PathBuf], blob: &BlobRef) -> Result<Verifier<std::fs::File>, String> {
    for dir in dirs {
        match blobs::open(dir, blob) {
            Ok(file) => return Ok(Verifier::new(file, *blob)),
            Err(OpenError::Missing) => continue,
            Err(OpenError::Corrupt(why) | OpenError::Io(why)) => {
                return Err(format!("stored file sha256:{}: {why}", blob.name()))
            }
        }
    }
    let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    Err(format!(
        "the stored file sha256:{} ({} bytes) is not on this host (looked in {}); nothing was \
         written. `policyvm agent` fetches it from the hub; for a bundle run from a file, copy \
         the `blobs/` directory `policyc build` wrote beside it",
        blob.name(),
        blob.size,
        if looked.is_empty() {
            "no blob directory".to_owned()
        } else {
            looked.join(", ")
        }
    ))
}

/// The digests of every blob the given bundles name.
pub fn named_by<'b>(bodies: impl IntoIterator<Item = &'b Body>) -> HashSet<[u8; 32]> {
    bodies
        .into_iter()
        .flat_map(|b| b.blobs().map(|blob| blob.sha256))
        .collect()
}

/// Removes from the cache every blob neither `keep` (the blobs of the
/// bundle the run just enforced) nor the state directory's current and last good bundles
/// name (the agent's garbage collection, after a successful run: a
/// fallback to the last good bundle still finds its files). A bundle file
/// that cannot be read keeps nothing of its own; it is not run either.
pub fn collect_garbage(
    state: &StateDir,
    trusted: &[crate::bundle::keys::PublicKey],
    mut keep: HashSet<[u8; 32]>,
) -> std::io::Result<Vec<String>> {
    for file in [crate::state::CURRENT, crate::state::LAST_GOOD] {
        if let Ok(Some(local)) = state.load(file, trusted) {
            keep.extend(named_by([&local.bundle.body]));
        }
    }
    blobs::collect_garbage(&cache_dir(state), &keep)
}
