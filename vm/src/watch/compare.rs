//! What changed between two databases of one watched path: every entry
//! added, removed or modified, with the attribute and its old and new
//! value. The type of an entry and a link's target are always compared;
//! the other attributes as the promise selects them.

use serde::{Deserialize, Serialize};

use super::entry::{Content, Entry};

/// One change of one entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchChange {
    pub path: String,
    /// `added`, `removed`, `type`, `target`, or an attribute name.
    pub what: String,
    pub before: String,
    pub after: String,
}

/// The changes from `old` to `new` (both sorted by path), comparing the
/// attributes in `selected`.
pub fn changes(old: &[Entry], new: &[Entry], selected: &[String]) -> Vec<WatchChange> {
    let mut out = Vec::new();
    let (mut a, mut b) = (old.iter().peekable(), new.iter().peekable());
    loop {
        match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some(o), Some(n)) if o.path == n.path => {
                modified(o, n, selected, &mut out);
                a.next();
                b.next();
            }
            (Some(o), Some(n)) if o.path < n.path => {
                out.push(removed(o));
                a.next();
            }
            (Some(o), None) => {
                out.push(removed(o));
                a.next();
            }
            (_, Some(n)) => {
                out.push(WatchChange {
                    path: n.path.clone(),
                    what: "added".to_owned(),
                    before: String::new(),
                    after: describe(n),
                });
                b.next();
            }
        }
    }
    out
}

fn removed(o: &Entry) -> WatchChange {
    WatchChange {
        path: o.path.clone(),
        what: "removed".to_owned(),
        before: describe(o),
        after: String::new(),
    }
}

/// An entry in one line: type, mode, owner, group, size, content.
pub fn describe(e: &Entry) -> String {
    let mut s = format!(
        "{} {:04o} uid {} gid {} {} bytes",
        e.kind.word(),
        e.mode,
        e.uid,
        e.gid,
        e.size
    );
    if e.content != Content::None {
        s.push(' ');
        s.push_str(&e.content.describe());
    }
    s
}

fn modified(o: &Entry, n: &Entry, selected: &[String], out: &mut Vec<WatchChange>) {
    let mut push = |what: &str, before: String, after: String| {
        out.push(WatchChange {
            path: n.path.clone(),
            what: what.to_owned(),
            before,
            after,
        })
    };
    if o.kind != n.kind {
        push("type", describe(o), describe(n));
        return;
    }
    let has = |a: &str| selected.iter().any(|s| s == a);
    match (&o.content, &n.content) {
        (Content::Target(x), Content::Target(y)) if x != y => {
            push("target", x.clone(), y.clone());
        }
        (x, y) if has("content") && x != y => {
            push("content", x.describe(), y.describe());
        }
        _ => {}
    }
    if has("mode") && o.mode != n.mode {
        push("mode", format!("{:04o}", o.mode), format!("{:04o}", n.mode));
    }
    if has("owner") && o.uid != n.uid {
        push("owner", o.uid.to_string(), n.uid.to_string());
    }
    if has("group") && o.gid != n.gid {
        push("group", o.gid.to_string(), n.gid.to_string());
    }
    if has("links") && o.nlink != n.nlink {
        push("links", o.nlink.to_string(), n.nlink.to_string());
    }
    if has("size") && o.size != n.size {
        push("size", o.size.to_string(), n.size.to_string());
    }
    if has("mtime") && (o.mtime, o.mtime_nsec) != (n.mtime, n.mtime_nsec) {
        push(
            "mtime",
            format!("{}.{:09}", o.mtime, o.mtime_nsec),
            format!("{}.{:09}", n.mtime, n.mtime_nsec),
        );
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::super::entry::EntryKind;
    use super::*;

    fn file(path: &str, digest: u8, mode: u32) -> Entry {
        Entry {
            path: path.to_owned(),
            kind: EntryKind::File,
            mode,
            uid: 0,
            gid: 0,
            nlink: 1,
            size: 3,
            mtime: 1,
            mtime_nsec: 0,
            content: Content::Digest([digest; 32]),
        }
    }

    fn all() -> Vec<String> {
        ["content", "mode", "owner", "group"]
            .map(String::from)
            .to_vec()
    }

    #[test]
    fn added_removed_and_modified_entries_are_each_reported() {
        let old = vec![
            file("/a", 1, 0o644),
            file("/b", 1, 0o644),
            file("/c", 1, 0o644),
        ];
        let new = vec![
            file("/a", 2, 0o644),
            file("/c", 1, 0o600),
            file("/d", 1, 0o644),
        ];
        let found = changes(&old, &new, &all());
        let whats: Vec<(&str, &str)> = found
            .iter()
            .map(|c| (c.path.as_str(), c.what.as_str()))
            .collect();
        assert_eq!(
            whats,
            [
                ("/a", "content"),
                ("/b", "removed"),
                ("/c", "mode"),
                ("/d", "added")
            ]
        );
        assert_eq!(found[2].before, "0644");
        assert_eq!(found[2].after, "0600");
    }

    #[test]
    fn unselected_attributes_are_not_compared_but_targets_always_are() {
        let old = vec![file("/a", 1, 0o644)];
        let new = vec![file("/a", 2, 0o600)];
        assert!(changes(&old, &new, &["owner".to_owned()]).is_empty());
        let mut l1 = file("/l", 0, 0o777);
        l1.kind = EntryKind::Link;
        l1.content = Content::Target("x".into());
        let mut l2 = l1.clone();
        l2.content = Content::Target("y".into());
        let found = changes(&[l1], &[l2], &[]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].what, "target");
    }

    #[test]
    fn nothing_changed_is_no_change() {
        let old = vec![file("/a", 1, 0o644)];
        assert!(changes(&old, &old.clone(), &all()).is_empty());
    }
}
