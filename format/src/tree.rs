//! A directory tree embedded in a bundle (`directory source`): the one
//! encoding `policyc` writes into a blob constant and `policyvm` reads.
//!
//! The blob is a count (`u32`, little-endian) followed by that many
//! entries, each `kind: u8` (1 directory, 2 file), `mode: u16` (the
//! permission bits of the source, `0o777` at most), `path_len: u32`, the
//! path (UTF-8, relative to the tree's top, `/`-separated, no empty, `.`
//! or `..` component), and for a file `len: u64` and its bytes. A
//! directory comes before everything in it. Both sides enforce the same
//! bounds ([`MAX_ENTRIES`], [`MAX_BYTES`]): the compiler refuses a bigger
//! source tree with a diagnostic, the VM a bigger blob.
//!
//! Format 2.6 (issue 22 item 5) adds kind 3, a file stored beside the
//! bundle: instead of `len` and bytes, its SHA-256 (32 bytes) and `size:
//! u64` ([`BlobRef`]); the bundle also holds each such blob as a
//! `blob_ref` constant, so the bundle's constants list every blob it
//! needs. Only inline bytes count towards [`MAX_BYTES`]: a stored file
//! costs the bundle 40 bytes, and changing it changes one blob.

/// The most entries (files and directories) a source tree may have.
pub const MAX_ENTRIES: usize = 10_000;
/// The most bytes the files of a source tree may hold together: 64 MiB.
pub const MAX_BYTES: u64 = 64 << 20;

const DIR: u8 = 1;
const FILE: u8 = 2;
const FILE_REF: u8 = 3;

use crate::bundle::format::BlobRef;

/// One entry of an embedded tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeEntry {
    /// Relative to the top of the tree, `/`-separated.
    pub path: String,
    /// Permission bits of the source (`0o777` at most).
    pub mode: u32,
    /// `None` for a directory, else what the file holds.
    pub content: Option<Content>,
}

/// What a file of a tree holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Content {
    /// Its bytes, in the tree.
    Inline(Vec<u8>),
    /// A blob stored beside the bundle (format 2.6).
    Blob(BlobRef),
}

/// Why a relative path cannot be an entry of a tree, if it cannot.
pub fn relative_path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("it is empty");
    }
    if path.contains('\0') {
        return Some("it contains a NUL character");
    }
    if path.len() > crate::paths::MAX_PATH {
        return Some("it is longer than 4096 bytes");
    }
    path.split('/').find_map(|c| match c {
        "" => Some("it has an empty component"),
        "." => Some("it has a `.` component"),
        ".." => Some("it has a `..` component"),
        _ => None,
    })
}

/// Encodes `entries` (directories before what is in them).
pub fn encode(entries: &[TreeEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(
        &u32::try_from(entries.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    for e in entries {
        out.push(match &e.content {
            None => DIR,
            Some(Content::Inline(_)) => FILE,
            Some(Content::Blob(_)) => FILE_REF,
        });
        out.extend_from_slice(&u16::try_from(e.mode & 0o777).unwrap_or(0).to_le_bytes());
        out.extend_from_slice(
            &u32::try_from(e.path.len())
                .unwrap_or(u32::MAX)
                .to_le_bytes(),
        );
        out.extend_from_slice(e.path.as_bytes());
        match &e.content {
            None => {}
            Some(Content::Inline(content)) => {
                out.extend_from_slice(
                    &u64::try_from(content.len())
                        .unwrap_or(u64::MAX)
                        .to_le_bytes(),
                );
                out.extend_from_slice(content);
            }
            Some(Content::Blob(blob)) => {
                out.extend_from_slice(&blob.sha256);
                out.extend_from_slice(&blob.size.to_le_bytes());
            }
        }
    }
    out
}

/// A reader over the blob that never reads past its end.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.rest.len() {
            return Err("the embedded tree is cut short".to_owned());
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
}

/// Decodes an embedded tree, checking its bounds, its paths and that every
/// entry's directory comes before it.
pub fn decode(blob: &[u8]) -> Result<Vec<TreeEntry>, String> {
    let mut r = Reader { rest: blob };
    let count = u32::from_le_bytes(r.array()?);
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if count > MAX_ENTRIES {
        return Err(format!(
            "the embedded tree has {count} entries; at most {MAX_ENTRIES} are allowed"
        ));
    }
    let mut entries: Vec<TreeEntry> = Vec::with_capacity(count);
    let mut dirs: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut total: u64 = 0;
    for _ in 0..count {
        let [kind] = r.array::<1>()?;
        let mode = u32::from(u16::from_le_bytes(r.array()?));
        if mode > 0o777 {
            return Err(format!("an embedded entry has mode 0o{mode:o}"));
        }
        let len = usize::try_from(u32::from_le_bytes(r.array()?)).unwrap_or(usize::MAX);
        let path = std::str::from_utf8(r.take(len)?)
            .map_err(|_| "an embedded path is not UTF-8".to_owned())?
            .to_owned();
        if let Some(why) = relative_path_problem(&path) {
            return Err(format!("embedded path `{}`: {why}", path.escape_debug()));
        }
        if let Some((parent, _)) = path.rsplit_once('/') {
            if !dirs.contains(parent) {
                return Err(format!("embedded path `{path}` comes before its directory"));
            }
        }
        let content = match kind {
            DIR => {
                dirs.insert(path.clone());
                None
            }
            FILE => {
                let len = u64::from_le_bytes(r.array()?);
                total = total.saturating_add(len);
                if total > MAX_BYTES {
                    return Err(format!(
                        "the embedded tree holds more than {} MiB",
                        MAX_BYTES >> 20
                    ));
                }
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                Some(Content::Inline(r.take(len)?.to_vec()))
            }
            FILE_REF => {
                let sha256 = r.array::<32>()?;
                let size = u64::from_le_bytes(r.array()?);
                if size > crate::bundle::limits::MAX_BLOB {
                    return Err(format!(
                        "embedded path `{path}` names a blob of {size} bytes"
                    ));
                }
                Some(Content::Blob(BlobRef { sha256, size }))
            }
            other => return Err(format!("an embedded entry has unknown kind {other}")),
        };
        entries.push(TreeEntry {
            path,
            mode,
            content,
        });
    }
    if !r.rest.is_empty() {
        return Err("the embedded tree has trailing bytes".to_owned());
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    fn sample() -> Vec<TreeEntry> {
        vec![
            TreeEntry {
                path: "bin".into(),
                mode: 0o755,
                content: None,
            },
            TreeEntry {
                path: "bin/run".into(),
                mode: 0o755,
                content: Some(Content::Inline(vec![0, 255, 10, 13])),
            },
            TreeEntry {
                path: "README".into(),
                mode: 0o644,
                content: Some(Content::Inline(b"hi\n".to_vec())),
            },
            TreeEntry {
                path: "bin/large".into(),
                mode: 0o755,
                content: Some(Content::Blob(BlobRef {
                    sha256: [7; 32],
                    size: 1 << 33,
                })),
            },
        ]
    }

    #[test]
    fn a_tree_survives_encoding_byte_exact() {
        assert_eq!(decode(&encode(&sample())).unwrap(), sample());
    }

    #[test]
    fn every_cut_of_a_blob_is_refused_not_a_panic() {
        let blob = encode(&sample());
        for n in 0..blob.len() {
            assert!(decode(&blob[..n]).is_err(), "cut at {n}");
        }
        let mut longer = blob.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }

    #[test]
    fn escaping_paths_and_orphans_are_refused() {
        for bad in ["../etc/passwd", "a/../../x", "", "a//b", "./a"] {
            let blob = encode(&[TreeEntry {
                path: bad.into(),
                mode: 0o644,
                content: Some(Content::Inline(Vec::new())),
            }]);
            assert!(decode(&blob).is_err(), "{bad:?}");
        }
        let orphan = encode(&[TreeEntry {
            path: "missing/file".into(),
            mode: 0o644,
            content: Some(Content::Inline(Vec::new())),
        }]);
        assert!(decode(&orphan)
            .unwrap_err()
            .contains("before its directory"));
    }

    #[test]
    fn a_stored_file_over_the_blob_limit_is_refused() {
        let blob = encode(&[TreeEntry {
            path: "big".into(),
            mode: 0o644,
            content: Some(Content::Blob(BlobRef {
                sha256: [0; 32],
                size: crate::bundle::limits::MAX_BLOB + 1,
            })),
        }]);
        assert!(decode(&blob).unwrap_err().contains("names a blob"));
    }

    #[test]
    fn a_count_past_the_bound_is_refused_before_reading() {
        let blob = u32::MAX.to_le_bytes();
        assert!(decode(&blob).unwrap_err().contains("at most"));
    }
}
