//! `directory recurse` (LANGUAGE.md sections 13 and 18): the tree below a
//! promised directory gets `mode_dirs` (by default `mode`) on every
//! directory, `mode_files` on every regular file, and `owner`/`group` on
//! both, down to `depth` levels (1 = the direct children only).
//!
//! A symbolic link in the tree is never followed and never changed (its
//! target keeps its mode and owner); a FIFO, socket or device is left
//! alone (opening one to change it could block or have side effects); a
//! regular file with other hard links is not changed in place (its other
//! names may be outside the tree) and fails the promise, naming it, as a
//! `file` promise on it would. The walk is iterative with a bounded number
//! of descriptors ([`crate::rootfs::RootFs::walk_tree`]).

use std::collections::HashSet;

use super::{fs_failed, owner_ids, Applied, Change, Ctx};
use crate::rootfs::{FsError, Kind, TreeEntry, Visit};
use crate::run::resolve::Instance;

/// The paths below a recursed directory that other promises manage: the
/// more specific promise wins, as a resource declared on its own wins over
/// the children Puppet's `recurse` generates. A `file`, `link` or
/// `directory` promise on an entry takes that entry out of the tree's
/// hands (its mode, owner and group are that promise's business, managed
/// or not); a `directory` with `recurse` of its own takes its whole tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Others {
    entries: HashSet<String>,
    trees: HashSet<String>,
}

impl Others {
    /// What the active `others` manage below `dir`.
    pub fn below<'a>(dir: &Instance, others: impl Iterator<Item = &'a Instance>) -> Others {
        let base = dir.promiser.trim_end_matches('/');
        let mut out = Others::default();
        for other in others {
            if !matches!(other.kind, "file" | "link" | "directory") {
                continue;
            }
            let path = other.promiser.trim_end_matches('/');
            let inside = path
                .strip_prefix(base)
                .is_some_and(|rest| rest.starts_with('/'));
            if !inside {
                continue;
            }
            out.entries.insert(path.to_owned());
            if other.kind == "directory" && other.bool("recurse") == Some(true) {
                out.trees.insert(path.to_owned());
            }
        }
        out
    }

    /// Whether another promise manages `path` (or a tree holding it).
    pub fn manages(&self, path: &str) -> bool {
        self.entries.contains(path)
            || self.trees.iter().any(|t| {
                path.strip_prefix(t.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
            })
    }
}

/// Changes listed one by one in the report; beyond, they are counted.
const LISTED_CHANGES: usize = 50;
/// Failures named one by one in the reason; beyond, they are counted.
const LISTED_FAILURES: usize = 10;

/// What a recursed tree should look like (`None`: not managed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TreeWant {
    pub dirs: Option<u32>,
    pub files: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub depth: Option<u32>,
}

fn mode_attr(inst: &Instance, name: &str) -> Option<u32> {
    inst.int(name).and_then(|m| u32::try_from(m).ok())
}

impl TreeWant {
    /// What `inst` promises for its tree, or `Ok(None)` without `recurse`.
    pub(super) fn of(ctx: &Ctx<'_>, inst: &Instance) -> Result<Option<TreeWant>, String> {
        if inst.bool("recurse") != Some(true) {
            return Ok(None);
        }
        let depth = match inst.int("depth") {
            None => None,
            Some(d) => match u32::try_from(d) {
                Ok(d) if d >= 1 => Some(d),
                _ => return Err(format!("`depth` must be at least 1, not {d}")),
            },
        };
        let (uid, gid) = owner_ids(ctx, inst)?;
        Ok(Some(TreeWant {
            dirs: mode_attr(inst, "mode_dirs").or_else(|| mode_attr(inst, "mode")),
            files: mode_attr(inst, "mode_files"),
            uid,
            gid,
            depth,
        }))
    }

    /// The mode an entry of this kind should have, `None` if not managed
    /// (links, special files, or no mode promised for the kind).
    fn mode_for(&self, kind: Kind) -> Option<u32> {
        match kind {
            Kind::Dir => self.dirs,
            Kind::File => self.files,
            Kind::Symlink | Kind::Other => None,
        }
    }
}

/// Converges the tree below the promise's directory after the directory
/// itself (`top` is how that went) was converged.
pub(super) fn converge_tree(
    ctx: &Ctx<'_>,
    inst: &Instance,
    others: &Others,
    mut top: Applied,
) -> Applied {
    let want = match TreeWant::of(ctx, inst) {
        Ok(Some(want)) => want,
        Ok(None) => return top,
        Err(reason) => return Applied::failed(reason),
    };
    let path = inst.promiser.trim_end_matches('/');
    // A dry run of a directory that is not there yet has no tree to see.
    if ctx.dry_run && ctx.fs.lstat(path).ok().flatten().is_none() {
        return top;
    }
    let mut tally = Tally::default();
    let walked = ctx.fs.walk_tree(path, want.depth, &mut |entry| {
        if !others.entries.is_empty() {
            let at = entry.path();
            if others.entries.contains(&at) {
                return Ok(if others.trees.contains(&at) {
                    Visit::Skip
                } else {
                    Visit::Enter
                });
            }
        }
        converge_entry(ctx.dry_run, &want, entry, &mut tally);
        Ok(Visit::Enter)
    });
    if let Err(e) = walked {
        return fs_failed(e);
    }
    tally.into_applied(&mut top);
    top
}

/// Changes and failures of one walk, bounded for the report.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) changes: Vec<Change>,
    pub(super) unlisted: u64,
    pub(super) failures: Vec<String>,
    pub(super) unnamed_failures: u64,
}

impl Tally {
    pub(super) fn change(&mut self, change: Change) {
        if self.changes.len() < LISTED_CHANGES {
            self.changes.push(change);
        } else {
            self.unlisted = self.unlisted.saturating_add(1);
        }
    }

    pub(super) fn fail(&mut self, e: FsError) {
        if self.failures.len() < LISTED_FAILURES {
            self.failures.push(e.to_string());
        } else {
            self.unnamed_failures = self.unnamed_failures.saturating_add(1);
        }
    }
}

/// One entry: owner first, then the mode (`chown` clears setuid and setgid
/// bits, which are put back when no mode is promised).
fn converge_entry(dry_run: bool, want: &TreeWant, entry: &TreeEntry<'_>, tally: &mut Tally) {
    let m = entry.meta;
    if !matches!(m.kind, Kind::File | Kind::Dir) {
        return;
    }
    let new_uid = want.uid.unwrap_or(m.uid);
    let new_gid = want.gid.unwrap_or(m.gid);
    let owner_changes = (new_uid, new_gid) != (m.uid, m.gid);
    let want_mode = want.mode_for(m.kind);
    let mode_changes = want_mode.is_some_and(|w| w != m.mode);
    if !owner_changes && !mode_changes {
        return;
    }
    if !dry_run {
        let done = (|| {
            if owner_changes {
                entry.set_owner(new_uid, new_gid)?;
            }
            let target = want_mode.unwrap_or(m.mode);
            if mode_changes || (owner_changes && m.mode & 0o6000 != 0) {
                entry.set_mode(target)?;
            }
            Ok(())
        })();
        if let Err(e) = done {
            tally.fail(e);
            return;
        }
    }
    let path = entry.path();
    if let Some(w) = want_mode.filter(|_| mode_changes) {
        tally.change(Change {
            what: format!("mode of {path}"),
            before: format!("0o{:o}", m.mode),
            after: format!("0o{w:o}"),
            diff: None,
        });
    }
    if owner_changes {
        tally.change(Change {
            what: format!("owner of {path}"),
            before: format!("{}:{}", m.uid, m.gid),
            after: format!("{new_uid}:{new_gid}"),
            diff: None,
        });
    }
}
