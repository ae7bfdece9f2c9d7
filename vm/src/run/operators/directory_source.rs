//! `directory source` (LANGUAGE.md section 13): the tree embedded in the
//! bundle ([`converge_format::tree`]) is copied below the promised
//! directory, binary files byte for byte, each file written atomically
//! through [`crate::rootfs::RootFs::write_file`].
//!
//! Modes: a directory gets `mode_dirs` (by default `mode`, else 0o755); a
//! file gets `mode_files`, or else 0o644, 0o755 when its source has an
//! executable bit (rsync's and Puppet's `source` keep the executable bit
//! too; other bits of the build machine, such as a 0600 umask, are not
//! carried to hosts). `owner` and `group` apply to every copied entry.
//! Entries the source does not have are unmanaged: listed, or removed with
//! `purge = true` (`purge` in `run/mod.rs`, through [`source_dirs`]). An
//! entry another promise manages is left to it (the more specific promise
//! wins, [`super::Others`]).

use std::collections::HashSet;

use converge_format::tree::{self, Content, TreeEntry};

use super::directory_tree::{Others, Tally};
use super::{current_gid, current_uid, owner_ids, Applied, Change, Ctx, Outcome};
use crate::rootfs::{FsError, Kind, Meta};
use crate::run::resolve::{Instance, Value};

/// The embedded tree of `inst`, if it has a `source`.
fn entries(inst: &Instance) -> Option<Result<Vec<TreeEntry>, String>> {
    match inst.get("source") {
        Some(Value::Bytes(blob)) => Some(tree::decode(blob)),
        _ => None,
    }
}

/// Every directory of the copied tree (the promised one first) with the
/// names the source has in it: what is not among them is unmanaged.
pub fn source_dirs(inst: &Instance) -> Vec<(String, HashSet<Vec<u8>>)> {
    let Some(Ok(entries)) = entries(inst) else {
        return Vec::new();
    };
    let base = inst.promiser.trim_end_matches('/');
    let mut dirs: Vec<(String, HashSet<Vec<u8>>)> = vec![(base.to_owned(), HashSet::new())];
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    index.insert(String::new(), 0);
    for e in &entries {
        let (parent, name) = e.path.rsplit_once('/').unwrap_or(("", e.path.as_str()));
        if let Some(slot) = index.get(parent).and_then(|i| dirs.get_mut(*i)) {
            slot.1.insert(name.as_bytes().to_vec());
        }
        if e.content.is_none() {
            index.insert(e.path.clone(), dirs.len());
            dirs.push((format!("{base}/{}", e.path), HashSet::new()));
        }
    }
    dirs
}

/// Copies the source tree of `inst` (if any) after the directory itself
/// (`top`) was converged.
pub(super) fn converge_source(
    ctx: &Ctx<'_>,
    inst: &Instance,
    others: &Others,
    mut top: Applied,
) -> Applied {
    let entries = match entries(inst) {
        None => return top,
        Some(Ok(entries)) => entries,
        Some(Err(why)) => return Applied::failed(format!("the embedded source tree: {why}")),
    };
    let (want_uid, want_gid) = match owner_ids(ctx, inst) {
        Ok(ids) => ids,
        Err(e) => return Applied::failed(e),
    };
    let mode_of = |name: &str| inst.int(name).and_then(|m| u32::try_from(m).ok());
    let dir_mode = mode_of("mode_dirs")
        .or_else(|| mode_of("mode"))
        .unwrap_or(0o755);
    let file_mode = |source: u32| {
        mode_of("mode_files").unwrap_or(if source & 0o111 != 0 { 0o755 } else { 0o644 })
    };
    let base = inst.promiser.trim_end_matches('/');
    let mut tally = Tally::default();
    for e in &entries {
        let path = format!("{base}/{}", e.path);
        if others.manages(&path) {
            continue;
        }
        let want = Want {
            mode: match e.content {
                None => dir_mode,
                Some(_) => file_mode(e.mode),
            },
            uid: want_uid,
            gid: want_gid,
        };
        if let Err(reason) = copy_entry(ctx, &path, e.content.as_ref(), want, &mut tally) {
            tally.fail(reason);
        }
    }
    tally.into_applied(&mut top);
    top
}

/// What one copied entry should look like.
#[derive(Clone, Copy)]
struct Want {
    mode: u32,
    uid: Option<u32>,
    gid: Option<u32>,
}

/// Converges one entry: a directory (`content` is `None`) or a file,
/// inline or stored beside the bundle (format 2.6, streamed:
/// `super::file_blob`).
fn copy_entry(
    ctx: &Ctx<'_>,
    path: &str,
    content: Option<&Content>,
    want: Want,
    tally: &mut Tally,
) -> Result<(), FsError> {
    let meta = ctx.lstat(path)?;
    let new_owner = |m: Option<&Meta>| {
        (
            want.uid
                .unwrap_or_else(|| m.map_or_else(current_uid, |m| m.uid)),
            want.gid
                .unwrap_or_else(|| m.map_or_else(current_gid, |m| m.gid)),
        )
    };
    match (content, meta) {
        (_, Some(m)) if m.kind == Kind::Symlink => Err(FsError::Symlink(path.to_owned())),
        (None, Some(m)) if m.kind != Kind::Dir => Err(FsError::NotADirectory(path.to_owned())),
        (Some(_), Some(m)) if m.kind != Kind::File => Err(FsError::NotAFile(path.to_owned())),
        (None, None) => {
            ctx.create_dir(path, want.mode)?;
            if want.uid.is_some() || want.gid.is_some() {
                let (uid, gid) = new_owner(None);
                ctx.set_owner(path, uid, gid)?;
                ctx.set_mode(path, want.mode)?;
            }
            tally.change(created(path, "directory", want.mode));
            Ok(())
        }
        (Some(Content::Blob(blob)), None) => {
            let owner = (want.uid.is_some() || want.gid.is_some()).then(|| new_owner(None));
            super::file_blob::write_stored(ctx, path, blob, want.mode, owner)?;
            tally.change(created(path, "file", want.mode));
            Ok(())
        }
        (Some(Content::Blob(blob)), Some(m)) => {
            if !super::file_blob::holds(ctx, path, &m, blob)? {
                super::file_blob::write_stored(
                    ctx,
                    path,
                    blob,
                    want.mode,
                    Some(new_owner(Some(&m))),
                )?;
                tally.change(Change {
                    what: format!("content of {path}"),
                    before: format!("{} bytes", m.len),
                    after: format!("{} bytes", blob.size),
                    diff: None,
                });
                return Ok(());
            }
            fix_attributes(ctx, path, &m, want, tally)
        }
        (Some(Content::Inline(bytes)), None) => {
            let owner = (want.uid.is_some() || want.gid.is_some()).then(|| new_owner(None));
            ctx.write_file(path, bytes, want.mode, owner)?;
            tally.change(created(path, "file", want.mode));
            Ok(())
        }
        (Some(Content::Inline(bytes)), Some(m)) => {
            let now = ctx.read_file(path)?;
            if now.as_deref() != Some(bytes.as_slice()) {
                ctx.write_file(path, bytes, want.mode, Some(new_owner(Some(&m))))?;
                tally.change(Change {
                    what: format!("content of {path}"),
                    before: format!("{} bytes", m.len),
                    after: format!("{} bytes", bytes.len()),
                    diff: None,
                });
                return Ok(());
            }
            fix_attributes(ctx, path, &m, want, tally)
        }
        (None, Some(m)) => fix_attributes(ctx, path, &m, want, tally),
    }
}

/// Mode and owner of an existing entry (owner first: `chown` clears the
/// setuid and setgid bits).
fn fix_attributes(
    ctx: &Ctx<'_>,
    path: &str,
    m: &Meta,
    want: Want,
    tally: &mut Tally,
) -> Result<(), FsError> {
    let uid = want.uid.unwrap_or(m.uid);
    let gid = want.gid.unwrap_or(m.gid);
    let owner_changes = (uid, gid) != (m.uid, m.gid);
    if owner_changes {
        ctx.set_owner(path, uid, gid)?;
    }
    if owner_changes || m.mode != want.mode {
        ctx.set_mode(path, want.mode)?;
    }
    if m.mode != want.mode {
        tally.change(Change {
            what: format!("mode of {path}"),
            before: format!("0o{:o}", m.mode),
            after: format!("0o{:o}", want.mode),
            diff: None,
        });
    }
    if owner_changes {
        tally.change(Change {
            what: format!("owner of {path}"),
            before: format!("{}:{}", m.uid, m.gid),
            after: format!("{uid}:{gid}"),
            diff: None,
        });
    }
    Ok(())
}

fn created(path: &str, what: &str, mode: u32) -> Change {
    Change {
        what: format!("created {path}"),
        before: "absent".into(),
        after: format!("{what} mode 0o{mode:o}"),
        diff: None,
    }
}

impl Tally {
    /// Adds the tally to the promise's outcome: its changes, and its
    /// failures, which fail the promise.
    pub(super) fn into_applied(self, top: &mut Applied) {
        top.changes.extend(self.changes);
        if self.unlisted > 0 {
            top.changes.push(Change {
                what: "tree".into(),
                before: format!("{} more entries differed", self.unlisted),
                after: "converged".into(),
                diff: None,
            });
        }
        if !self.failures.is_empty() || self.unnamed_failures > 0 {
            let mut reason = self.failures.join("; ");
            if self.unnamed_failures > 0 {
                reason.push_str(&format!("; and {} more", self.unnamed_failures));
            }
            top.outcome = Outcome::Failed(reason);
        } else if top.outcome == Outcome::Kept && !top.changes.is_empty() {
            top.outcome = Outcome::Repaired;
        }
    }
}
