//! Reading the directory a `directory source` names, to embed it
//! ([`converge_format::tree`]).
//!
//! Every read stays inside the **policy tree** ([`PolicyTree`]: the
//! directory of the root policy file, or `--policy-root`): the source
//! directory must lie inside it by name and after resolving links, and
//! each file is read through [`PolicyTree::read`]. Inside the source, a
//! symbolic link is refused, not copied and not followed: followed, it
//! could read any file of the build machine into a bundle (`../../../root/
//! .ssh/id_ed25519`); copied verbatim, it would plant on every host a link
//! whose meaning depends on the host, which a `link` promise says openly.
//! FIFOs, sockets and devices are refused too (reading one could block
//! the build). The tree's size is bounded ([`tree::MAX_ENTRIES`] entries,
//! [`tree::MAX_BYTES`] bytes inline); entries are sorted by name, so the same
//! tree always gives the same bundle. With a blob directory (`policyc
//! build`, format 2.6), each file over 4 KiB is stored beside the bundle
//! (`super::embed_blob`) and the tree holds its digest: changing one file
//! of a large tree changes one blob.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use converge_format::tree::{self, Content, TreeEntry};

use super::embed_blob::{embed_file, BlobSink, Embedded};
use crate::policy_tree::PolicyTree;

/// The entries of the source directory `top` (already resolved against
/// `tree` by name), or why it cannot be embedded, said to the author.
pub fn read_source_tree(
    tree_of: &PolicyTree,
    top: &Path,
    sink: Option<&BlobSink>,
) -> Result<Vec<TreeEntry>, String> {
    let shown = |p: &Path| p.display().to_string();
    tree_of
        .check(top)
        .map_err(|e| format!("{}: {e}", shown(top)))?;
    let meta =
        std::fs::symlink_metadata(top).map_err(|e| format!("cannot read {}: {e}", shown(top)))?;
    if !meta.is_dir() {
        return Err(format!(
            "{} is not a directory (a link to one is not followed)",
            shown(top)
        ));
    }
    let real = top.to_path_buf();
    let mut entries = Vec::new();
    let mut total: u64 = 0;
    // Directories still to read: (path on disk, path in the tree).
    let mut pending: Vec<(PathBuf, String)> = vec![(real, String::new())];
    while let Some((dir, rel)) = pending.pop() {
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot list {}: {e}", shown(&dir)))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("cannot list {}: {e}", shown(&dir)))?;
        names.sort();
        let mut subdirs = Vec::new();
        for name in names {
            let Some(text) = name.to_str() else {
                return Err(format!(
                    "{} has a name that is not UTF-8: {:?}",
                    shown(&dir),
                    name
                ));
            };
            let inner = if rel.is_empty() {
                text.to_owned()
            } else {
                format!("{rel}/{text}")
            };
            let path = dir.join(&name);
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| format!("cannot read {}: {e}", shown(&path)))?;
            let kind = meta.file_type();
            if kind.is_symlink() {
                return Err(format!(
                    "`{inner}` in the source tree is a symbolic link; links are neither copied \
                     nor followed (copy the file into the tree, or promise a `link`)"
                ));
            }
            if entries.len() >= tree::MAX_ENTRIES {
                return Err(format!(
                    "the source tree has more than {} entries",
                    tree::MAX_ENTRIES
                ));
            }
            let mode = meta.permissions().mode() & 0o777;
            if kind.is_dir() {
                entries.push(TreeEntry {
                    path: inner.clone(),
                    mode,
                    content: None,
                });
                subdirs.push((path, inner));
            } else if kind.is_file() {
                // Read through the tree: containment checked again, no
                // link followed, nothing that blocks. Only inline bytes
                // count towards the bound: a stored file is 40 bytes here.
                let left = tree::MAX_BYTES.saturating_sub(total);
                let content = tree_read(tree_of, &path, left, sink)?;
                if let Content::Inline(bytes) = &content {
                    total = total.saturating_add(bytes.len() as u64);
                }
                entries.push(TreeEntry {
                    path: inner,
                    mode,
                    content: Some(content),
                });
            } else {
                return Err(format!(
                    "`{inner}` in the source tree is not a regular file or directory"
                ));
            }
        }
        // Depth first, in name order: a directory's entries follow it.
        pending.extend(subdirs.into_iter().rev());
    }
    Ok(entries)
}

/// One file of the source through the policy tree: inline (at most
/// `limit` bytes), or stored into `sink`.
fn tree_read(
    policy: &PolicyTree,
    path: &Path,
    limit: u64,
    sink: Option<&BlobSink>,
) -> Result<Content, String> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    match embed_file(policy, path, sink, limit) {
        Ok(Embedded::Inline(bytes)) => Ok(Content::Inline(bytes)),
        Ok(Embedded::Stored(blob)) => Ok(Content::Blob(blob)),
        Err(crate::policy_tree::TreeError::TooLarge { .. }) => Err(format!(
            "the files of the source tree hold more than {} MiB (at {})",
            tree::MAX_BYTES >> 20,
            path.display()
        )),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    #[test]
    fn a_tree_is_read_sorted_with_modes_and_binary_content() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("files");
        std::fs::create_dir_all(src.join("b")).unwrap();
        std::fs::write(src.join("b/bin"), [0u8, 255, 1]).unwrap();
        std::fs::write(src.join("a.txt"), "a").unwrap();
        std::fs::set_permissions(src.join("b/bin"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let entries = read_source_tree(&PolicyTree::new(dir.path()), &src, None).unwrap();
        let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["a.txt", "b", "b/bin"]);
        assert_eq!(entries[2].content, Some(Content::Inline(vec![0u8, 255, 1])));
        assert_eq!(entries[2].mode, 0o755);
    }

    #[test]
    fn with_a_blob_directory_only_large_files_are_stored() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("files");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("big"), vec![9u8; 10_000]).unwrap();
        std::fs::write(src.join("small"), "s").unwrap();
        let sink = BlobSink::beside(&dir.path().join("out/x.bundle"));
        let entries = read_source_tree(&PolicyTree::new(dir.path()), &src, Some(&sink)).unwrap();
        let Some(Content::Blob(blob)) = &entries[0].content else {
            panic!("{:?}", entries[0]);
        };
        assert_eq!(blob.size, 10_000);
        assert!(sink.dir.join(blob.name()).is_file());
        assert_eq!(entries[1].content, Some(Content::Inline(b"s".to_vec())));
    }

    #[test]
    fn links_inside_and_sources_outside_the_policy_tree_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let policies = dir.path().join("policies");
        let src = policies.join("files");
        std::fs::create_dir_all(&src).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.join("passwd")).unwrap();
        let tree = PolicyTree::new(&policies);
        let err = read_source_tree(&tree, &src, None).unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        let err = read_source_tree(&tree, &policies.join("../outside"), None).unwrap_err();
        assert!(err.contains("out of the policy tree"), "{err}");
        std::os::unix::fs::symlink(dir.path().join("outside"), policies.join("via-link")).unwrap();
        let err = read_source_tree(&tree, &policies.join("via-link"), None).unwrap_err();
        assert!(err.contains("out of the policy tree"), "{err}");
    }
}
