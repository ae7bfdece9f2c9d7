//! The run's side of staged writes (issue 22, items 1-2; the files' side
//! is [`crate::rootfs`]'s batch): which promises may leave their new
//! content staged, when the batch must be flushed, and what a promise
//! whose staged write failed at the flush becomes.
//!
//! A promise whose operator staged a write is *pending*: its outcome, its
//! classes, its notifications and its report entry wait for the flush
//! ([`settle`]); so does every promise after it until the flush (with
//! nothing staged it cannot fail there), so that the report keeps the
//! promises' order. The pass flushes
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
//! ([`crate::rootfs::MAX_STAGED_FILES`], [`crate::rootfs::MAX_STAGED_BYTES`],
//! [`crate::rootfs::MAX_STAGED_DIRS`])
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
pub(super) struct Pending {
    pub key: InstanceKey,
    pub inst: Instance,
    pub applied: Applied,
    /// The notifications it owes if the repair holds.
    pub incurred: Vec<Debt>,
    /// Its staged writes ([`RootFs::next_ticket`] before and after it).
    pub tickets: Range<u64>,
    /// Its position among the instances of the pass.
    pub position: usize,
}

/// Whether the batch must be flushed before `inst` (of promise `p`) is
/// applied, `pending` being the promises waiting for it.
pub(super) fn flush_before(
    fs: &RootFs,
    inst: &Instance,
    p: Option<&Promise>,
    pending: &[Pending],
) -> bool {
    if pending.is_empty() && !fs.has_staged() {
        return false;
    }
    !STAGED_KINDS.contains(&inst.kind)
        || p.is_some_and(|p| {
            p.after()
                .iter()
                .any(|a| pending.iter().any(|w| w.inst.index == *a as usize))
        })
        || fs.touches_staged(&inst.promiser)
}

/// Flushes the batch and returns every pending promise with its final
/// outcome: a promise one of whose writes failed (the file system could
/// not be synced, its directory was moved, the rename failed) fails with
/// the reason, and the changes those writes were to make are dropped.
pub(super) fn settle(fs: &RootFs, pending: &mut Vec<Pending>) -> Vec<Pending> {
    let failures: HashMap<u64, FsError> = fs.flush().into_iter().collect();
    let mut settled: Vec<Pending> = std::mem::take(pending);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::format::{FixedList, Item};

    fn instance(index: usize, kind: &'static str, path: &str) -> Instance {
        Instance {
            index,
            kind,
            promiser: path.into(),
            attrs: Vec::new(),
        }
    }

    fn promise(after: Vec<u32>) -> Promise {
        Promise::from(converge_format::bundle::format::PromiseParts {
            after: FixedList::from(after),
            ..converge_format::bundle::format::PromiseParts::new(0, Item::Const(0))
        })
    }

    fn change(what: &str) -> Change {
        Change {
            what: what.into(),
            before: "absent".into(),
            after: "new".into(),
            diff: None,
        }
    }

    /// The barrier rules: flushed before a promise of another kind, one
    /// that comes after a pending promise, one on a staged path, below or
    /// above one; not before an unrelated file promise.
    #[test]
    fn the_batch_is_flushed_before_what_could_observe_it() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RootFs::open(dir.path()).unwrap();
        fs.set_staging(true);
        let staged = instance(0, "file", "/etc/app/app.conf");
        let before = fs.next_ticket();
        fs.write_file("/etc/app/app.conf", b"new\n", 0o644, None)
            .unwrap();
        let pending = vec![Pending {
            key: (0, Vec::new()),
            inst: staged.clone(),
            applied: Applied::from_changes(vec![change("created")]),
            incurred: Vec::new(),
            tickets: before..fs.next_ticket(),
            position: 0,
        }];
        let free = promise(Vec::new());
        let waits = promise(vec![0]);
        let flush = |kind, path: &str, p: &Promise| {
            flush_before(&fs, &instance(1, kind, path), Some(p), &pending)
        };
        assert!(!flush("file", "/etc/other.conf", &free));
        assert!(!flush("block", "/etc/app/other.conf", &free));
        assert!(flush("file", "/etc/other.conf", &waits), "after");
        assert!(flush("command", "reload", &free), "another kind");
        assert!(flush("directory", "/srv", &free), "another kind");
        assert!(flush("line", "/etc/app/app.conf", &free), "the staged path");
        assert!(flush("file", "/etc/app", &free), "above it");
        assert!(flush("file", "/etc/app/app.conf/x", &free), "below it");
        fs.flush();
        assert!(!flush_before(
            &fs,
            &instance(1, "command", "reload"),
            Some(&free),
            &[]
        ));
    }

    /// A staged write whose directory is moved away before the flush is
    /// not renamed through it: its promise fails with the reason, its
    /// changes but the stale temporaries' removal are dropped, and no
    /// temporary is left; a write of the same batch elsewhere lands.
    #[test]
    fn a_write_that_fails_at_the_flush_fails_its_promise() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc/app")).unwrap();
        std::fs::create_dir_all(dir.path().join("srv")).unwrap();
        let fs = RootFs::open(dir.path()).unwrap();
        fs.set_staging(true);
        let moved = instance(0, "file", "/etc/app/app.conf");
        let fine = instance(1, "file", "/srv/ok");
        let first = fs.next_ticket();
        fs.write_file("/etc/app/app.conf", b"new\n", 0o600, None)
            .unwrap();
        let second = fs.next_ticket();
        fs.write_file("/srv/ok", b"ok\n", 0o644, None).unwrap();
        // Staged: the run sees the new content, the disk does not have it.
        assert_eq!(
            fs.read_file("/etc/app/app.conf").unwrap().as_deref(),
            Some(&b"new\n"[..])
        );
        assert_eq!(fs.lstat("/etc/app/app.conf").unwrap().unwrap().mode, 0o600);
        assert!(!dir.path().join("etc/app/app.conf").exists());
        std::fs::rename(dir.path().join("etc/app"), dir.path().join("moved")).unwrap();
        let mut pending = vec![
            Pending {
                key: (0, Vec::new()),
                inst: moved.clone(),
                applied: Applied::from_changes(vec![
                    change("removed stale temporary"),
                    change("created"),
                ]),
                incurred: Vec::new(),
                tickets: first..second,
                position: 0,
            },
            Pending {
                key: (1, Vec::new()),
                inst: fine.clone(),
                applied: Applied::from_changes(vec![change("created")]),
                incurred: Vec::new(),
                tickets: second..fs.next_ticket(),
                position: 1,
            },
        ];
        let settled = settle(&fs, &mut pending);
        assert!(pending.is_empty());
        let [bad, good] = settled.as_slice() else {
            panic!("two promises settled: {settled:?}");
        };
        match &bad.applied.outcome {
            Outcome::Failed(why) => assert!(why.contains("moved or replaced"), "{why}"),
            other => panic!("not failed: {other:?}"),
        }
        let kept: Vec<&str> = bad
            .applied
            .changes
            .iter()
            .map(|c| c.what.as_str())
            .collect();
        assert_eq!(kept, ["removed stale temporary"]);
        assert_eq!(good.applied.outcome, Outcome::Repaired);
        assert_eq!(std::fs::read(dir.path().join("srv/ok")).unwrap(), b"ok\n");
        let left: Vec<_> = std::fs::read_dir(dir.path().join("moved"))
            .unwrap()
            .collect();
        assert!(
            left.is_empty(),
            "nothing written through the moved directory"
        );
        assert!(!fs.has_staged());
    }
}
