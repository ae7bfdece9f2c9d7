//! Files stored beside the bundle instead of in it (format 2.6, issue 22
//! item 5): a `source` file, or a file of a `directory source`, over
//! [`INLINE_MAX`] bytes is streamed into the blob directory beside the
//! bundle being built ([`converge_format::blobs`], `OUT/../blobs/<sha256>`)
//! and the bundle holds only its digest and size. `policyc publish` copies
//! the blobs to the hub, where hosts fetch the ones they do not have.
//!
//! Smaller files stay inline: fetching a 200-byte configuration file would
//! cost a request worth more than its bytes, and a policy of small files
//! stays one self-contained file. A file is read once, in chunks: its
//! first [`INLINE_MAX`] bytes decide, and the rest is streamed into the
//! blob with its digest, so a file that changes while it is read is either
//! stored as read or inline, never a digest of other bytes.

use std::io::Read;
use std::path::{Path, PathBuf};

use converge_format::blobs;
use converge_format::bundle::format::BlobRef;
use converge_format::bundle::limits::{INLINE_MAX, MAX_BLOB};

use crate::policy_tree::{PolicyTree, TreeError};

/// Where a build stores the blobs of its bundle.
#[derive(Clone, Debug)]
pub struct BlobSink {
    pub dir: PathBuf,
}

impl BlobSink {
    /// The blob directory beside `bundle` (the build's `--output`).
    pub fn beside(bundle: &Path) -> BlobSink {
        BlobSink {
            dir: blobs::dir_beside(bundle),
        }
    }
}

/// What a file becomes in the bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Embedded {
    Inline(Vec<u8>),
    Stored(BlobRef),
}

/// Reads `path` (inside `tree`) for a bundle: inline when it is at most
/// `inline_limit` bytes or there is no `sink`, else stored into the sink.
/// Without a sink, a file over `max_inline` bytes is refused.
pub fn embed_file(
    tree: &PolicyTree,
    path: &Path,
    sink: Option<&BlobSink>,
    max_inline: usize,
) -> Result<Embedded, TreeError> {
    let Some(sink) = sink else {
        return tree.read(path, max_inline).map(Embedded::Inline);
    };
    let mut file = tree.open(path)?;
    let mut head = Vec::with_capacity(INLINE_MAX.saturating_add(1));
    (&mut file)
        .take(INLINE_MAX as u64 + 1)
        .read_to_end(&mut head)
        .map_err(TreeError::Io)?;
    if head.len() <= INLINE_MAX {
        return Ok(Embedded::Inline(head));
    }
    let whole = std::io::Cursor::new(head).chain(file);
    match blobs::store(&sink.dir, whole, MAX_BLOB, None) {
        Ok((blob, _)) => Ok(Embedded::Stored(blob)),
        Err(blobs::StoreError::Read(e)) => Err(TreeError::Io(e)),
        Err(blobs::StoreError::TooLong { .. }) => Err(TreeError::TooLarge {
            limit: usize::try_from(MAX_BLOB).unwrap_or(usize::MAX),
        }),
        Err(e) => Err(TreeError::Io(std::io::Error::other(format!(
            "cannot store it in {}: {e}",
            sink.dir.display()
        )))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn small_files_stay_inline_and_large_ones_are_stored_once() {
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("policy");
        std::fs::create_dir_all(&policy).unwrap();
        std::fs::write(policy.join("small"), vec![1u8; INLINE_MAX]).unwrap();
        std::fs::write(policy.join("large"), vec![2u8; INLINE_MAX + 1]).unwrap();
        let tree = PolicyTree::new(&policy);
        let sink = BlobSink::beside(&dir.path().join("out/site.bundle"));
        let small = embed_file(&tree, &policy.join("small"), Some(&sink), 1 << 20).unwrap();
        assert_eq!(small, Embedded::Inline(vec![1u8; INLINE_MAX]));
        let Embedded::Stored(blob) =
            embed_file(&tree, &policy.join("large"), Some(&sink), 1 << 20).unwrap()
        else {
            panic!("stored")
        };
        assert_eq!(blob.size, INLINE_MAX as u64 + 1);
        let stored = std::fs::read(dir.path().join("out/blobs").join(blob.name())).unwrap();
        assert_eq!(stored, vec![2u8; INLINE_MAX + 1]);
        // Without a sink (policyc test, plan): inline, whatever the size.
        let inline = embed_file(&tree, &policy.join("large"), None, 1 << 20).unwrap();
        assert_eq!(inline, Embedded::Inline(vec![2u8; INLINE_MAX + 1]));
    }
}
