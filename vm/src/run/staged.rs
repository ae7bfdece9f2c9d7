//! The run's side of staged writes (issue 22, items 1-2; the files' side
//! is [`crate::rootfs`]'s batch): which promises may leave their new
//! content staged, when the batch must be flushed, and what a promise
//! whose staged write failed at the flush becomes.
//!
//! A promise whose operator staged a write is *pending*: its outcome, its
//! classes, its notifications and its report entry wait for the flush
//! ([`settle`]). The pass flushes
//! - before every promise that is not a file edit (`file`, `line`,
//!   `setting`, `block`): a command, service, package, user, link or
//!   directory promise could observe the files;
//! - before a promise that comes `after` a pending one: it must see that
//!   promise done and durable, or skip when it failed;
//! - before a promise on a staged path, below one or above one (a `line`
//!   after the `file` that creates it);
//! - at the end of every pass, before the outcome classes are evaluated.
//!
//! The batch also flushes itself at its bound
//! ([`crate::rootfs::MAX_STAGED_FILES`], [`crate::rootfs::MAX_STAGED_BYTES`])
//! and before a change that could disturb a staged write; the failures of
//! those flushes wait, by ticket, for the next [`settle`].

use std::collections::HashMap;
use std::ops::Range;

use super::operators::{Applied, Change, Outcome};
use super::resolve::Instance;
use super::InstanceKey;
use crate::bundle::format::Promise;
use crate::rootfs::{FsError, RootFs};
use crate::state::Debt;

/// The kinds of promise whose writes are staged rather than waited for.
const STAGED_KINDS: [&str; 4] = ["file", "line", "setting", "block"];

/// A promise whose new content is staged: what it did, waiting for the
/// flush to be final.
#[derive(Debug)]
pub(super) struct Pending<'i> {
    pub key: InstanceKey,
    pub inst: &'i Instance,
    pub applied: Applied,
    /// The notifications it owes if the repair holds.
    pub incurred: Vec<Debt>,
    /// Its staged writes ([`RootFs::next_ticket`] before and after it).
    pub tickets: Range<u64>,
}

/// Whether the batch must be flushed before `inst` (of promise `p`) is
/// applied, `pending` being the promises waiting for it.
pub(super) fn flush_before(
    fs: &RootFs,
    inst: &Instance,
    p: Option<&Promise>,
    pending: &[Pending<'_>],
) -> bool {
    if pending.is_empty() && !fs.has_staged() {
        return false;
    }
    !STAGED_KINDS.contains(&inst.kind)
        || p.is_some_and(|p| {
            p.after
                .iter()
                .any(|a| pending.iter().any(|w| w.inst.index == *a as usize))
        })
        || fs.touches_staged(&inst.promiser)
}

/// Flushes the batch and returns every pending promise with its final
/// outcome: a promise one of whose writes failed (the file system could
/// not be synced, its directory was moved, the rename failed) fails with
/// the reason, and the changes those writes were to make are dropped.
pub(super) fn settle<'i>(fs: &RootFs, pending: &mut Vec<Pending<'i>>) -> Vec<Pending<'i>> {
    let failures: HashMap<u64, FsError> = fs.flush().into_iter().collect();
    let mut settled: Vec<Pending<'i>> = std::mem::take(pending);
    if failures.is_empty() {
        return settled;
    }
    for p in &mut settled {
        let failed: Vec<&FsError> = p.tickets.clone().filter_map(|t| failures.get(&t)).collect();
        if failed.is_empty() {
            continue;
        }
        let reasons: Vec<String> = failed.iter().map(|e| e.to_string()).collect();
        let paths: Vec<&str> = failed.iter().filter_map(|e| failed_path(e)).collect();
        let tree = p.inst.kind == "directory";
        p.applied.changes.retain(|c| !undone(c, tree, &paths));
        p.applied.outcome = Outcome::Failed(reasons.join("; "));
    }
    settled
}

/// The path a failed staged write was for.
fn failed_path(e: &FsError) -> Option<&str> {
    match e {
        FsError::Io { path, .. } | FsError::Moved(path) => Some(path),
        _ => None,
    }
}

/// Whether `change` reported something that did not happen: every change
/// of a promise on one file (its content, and the mode and owner the
/// temporary was given) but the removal of stale temporaries; a tree's
/// changes of a failed path (`created PATH`, `content of PATH`).
fn undone(change: &Change, tree: bool, paths: &[&str]) -> bool {
    if !tree {
        return change.what != "removed stale temporary";
    }
    paths.iter().any(|p| {
        change
            .what
            .strip_suffix(p)
            .is_some_and(|head| head.ends_with(' '))
    })
}
