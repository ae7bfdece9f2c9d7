//! What changes on one host between the two policies: promises added,
//! removed, attributes changed, and what cannot be known without a fact the
//! host lacks. Promises are matched by type and promiser; a promise whose
//! hash is the same on both sides is unchanged without a value compared.
//!
//! A [`ChangeSet`] holds values, not rendered text: hosts are grouped by
//! equal change sets first, and each group's diffs are drawn once
//! (`super::render`).

use rustc_hash::FxHashMap;

use super::resolved::{HostPromises, PromiseKey, Resolved, Shown, Unresolved};

/// One attribute that differs: `None` on the side that does not set it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AttrChange {
    pub name: &'static str,
    pub before: Option<Shown>,
    pub after: Option<Shown>,
}

/// One change on a host.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Change {
    /// Only the new policy has it: with all its attributes.
    Added(Resolved),
    /// Only the old policy has it.
    Removed(PromiseKey),
    /// Both have it, with these differences (a changed condition counts:
    /// it is compared as the attribute `when run sets`).
    Changed {
        key: PromiseKey,
        attrs: Vec<AttrChange>,
        conditional: (Option<String>, Option<String>),
    },
    /// A promise of either policy that needs a fact the host's known facts
    /// lack (whether and how it changes is unknown, never guessed), or
    /// that would fail on the host.
    Unknown { side: Side, promise: Unresolved },
}

/// Which policy an unknown promise belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    Old,
    New,
    Both,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Old => "old",
            Side::New => "new",
            Side::Both => "both",
        }
    }
}

/// Every change of one host, in a canonical order (by promise), so equal
/// sets compare and hash equal whatever order the policies list them in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ChangeSet {
    pub changes: Vec<Change>,
}

impl ChangeSet {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Whether anything is unknown (the plan cannot promise "no change").
    pub fn has_unknown(&self) -> bool {
        self.changes
            .iter()
            .any(|c| matches!(c, Change::Unknown { .. }))
    }

    /// Counts: added, removed, changed, unknown.
    pub fn counts(&self) -> [usize; 4] {
        let mut n = [0; 4];
        for c in &self.changes {
            let i = match c {
                Change::Added(_) => 0,
                Change::Removed(_) => 1,
                Change::Changed { .. } => 2,
                Change::Unknown { .. } => 3,
            };
            if let Some(slot) = n.get_mut(i) {
                *slot += 1;
            }
        }
        n
    }
}

/// The changes on one host from `old` to `new`.
pub fn compare(old: &HostPromises, new: &HostPromises) -> ChangeSet {
    let mut changes = Vec::new();
    // Fast path: the same promises in the same order with the same hashes.
    let same = old.promises.len() == new.promises.len()
        && old
            .promises
            .iter()
            .zip(&new.promises)
            .all(|(a, b)| a.hash == b.hash && a.key == b.key);
    if !same {
        matched(old, new, &mut changes);
    }
    unknowns(old, new, &mut changes);
    changes.sort_by(|a, b| order(a).cmp(&order(b)));
    ChangeSet { changes }
}

/// How far past the next unmatched promise of `old` a promise of `new` is
/// looked for before all of `old` is indexed by key: a few promises
/// removed in a row are found so.
const LOOKAHEAD: usize = 4;

/// Matches `new`'s promises with `old`'s by key. Both lists are in the
/// policies' order, which a change mostly keeps: each is first compared
/// with the next few unmatched ones of `old` ([`LOOKAHEAD`]), and only on a
/// miss looked up by key (the walk then goes on after the one found).
fn matched(old: &HostPromises, new: &HostPromises, changes: &mut Vec<Change>) {
    let mut by_key: Option<FxHashMap<&PromiseKey, usize>> = None;
    let mut used = vec![false; old.promises.len()];
    let mut next: usize = 0;
    for after in &new.promises {
        let near = (next..next.saturating_add(LOOKAHEAD)).find(|&i| {
            !used.get(i).copied().unwrap_or(true)
                && old.promises.get(i).is_some_and(|b| b.key == after.key)
        });
        let found = match near {
            Some(i) => Some(i),
            None => by_key
                .get_or_insert_with(|| {
                    old.promises
                        .iter()
                        .enumerate()
                        .map(|(i, p)| (&p.key, i))
                        .collect()
                })
                .get(&after.key)
                .copied(),
        };
        let Some(i) = found else {
            changes.push(Change::Added(after.clone()));
            continue;
        };
        next = i.saturating_add(1);
        if let Some(slot) = used.get_mut(i) {
            *slot = true;
        }
        match old.promises.get(i) {
            Some(before) if before.hash != after.hash => {
                if let Some(change) = changed(before, after) {
                    changes.push(change);
                }
            }
            _ => {}
        }
    }
    for (before, used) in old.promises.iter().zip(used) {
        if !used {
            changes.push(Change::Removed(before.key.clone()));
        }
    }
}

fn order(change: &Change) -> (u8, &str, &str, u32, &str) {
    match change {
        Change::Unknown { promise, .. } => (0, "", &promise.what, 0, &promise.reason),
        Change::Added(r) => (1, r.key.kind, &r.key.promiser, r.key.occurrence, ""),
        Change::Removed(k) | Change::Changed { key: k, .. } => {
            (1, k.kind, &k.promiser, k.occurrence, "")
        }
    }
}

/// The attribute differences of one promise (`None` when the hashes
/// differed but the values do not: a hash collision is not a change).
fn changed(before: &Resolved, after: &Resolved) -> Option<Change> {
    let mut attrs = Vec::new();
    for (name, value) in after.attrs.iter() {
        match before.get(name) {
            Some(old) if old == value => {}
            old => attrs.push(AttrChange {
                name,
                before: old.cloned(),
                after: Some(value.clone()),
            }),
        }
    }
    for (name, value) in before.attrs.iter() {
        if after.get(name).is_none() {
            attrs.push(AttrChange {
                name,
                before: Some(value.clone()),
                after: None,
            });
        }
    }
    if attrs.is_empty() && before.conditional == after.conditional {
        return None;
    }
    Some(Change::Changed {
        key: after.key.clone(),
        attrs,
        conditional: (before.conditional.clone(), after.conditional.clone()),
    })
}

/// Unknown promises of either side, once each: one unknown on both sides
/// for the same reason is one entry.
fn unknowns(old: &HostPromises, new: &HostPromises, changes: &mut Vec<Change>) {
    for promise in &new.unresolved {
        let side = if old.unresolved.contains(promise) {
            Side::Both
        } else {
            Side::New
        };
        changes.push(Change::Unknown {
            side,
            promise: promise.clone(),
        });
    }
    for promise in &old.unresolved {
        if !new.unresolved.contains(promise) {
            changes.push(Change::Unknown {
                side: Side::Old,
                promise: promise.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn file(path: &str, content: &str) -> Resolved {
        Resolved::new(
            PromiseKey {
                kind: "file",
                promiser: path.into(),
                occurrence: 0,
            },
            vec![
                ("content", Shown::Text(content.into())),
                ("mode", Shown::Int(0o644)),
            ],
            None,
        )
    }

    fn host(promises: Vec<Resolved>) -> HostPromises {
        HostPromises {
            promises,
            unresolved: Vec::new(),
        }
    }

    #[test]
    fn the_same_promises_are_no_change_in_any_order() {
        let a = host(vec![file("/a", "1"), file("/b", "2")]);
        let b = host(vec![file("/b", "2"), file("/a", "1")]);
        assert!(compare(&a, &b).is_empty());
        assert!(compare(&a, &a).is_empty());
    }

    #[test]
    fn added_removed_and_changed_attributes_are_found() {
        let old = host(vec![file("/a", "1"), file("/gone", "x")]);
        let changed = file("/a", "2");
        let mut attrs = changed.attrs.to_vec();
        attrs.push(("owner", Shown::Text("root".into())));
        let changed = Resolved::new(changed.key.clone(), attrs, None);
        let new = host(vec![changed, file("/new", "n")]);
        let set = compare(&old, &new);
        assert_eq!(set.counts(), [1, 1, 1, 0]);
        let Change::Changed { key, attrs, .. } = &set.changes[0] else {
            panic!("{set:?}")
        };
        assert_eq!(&*key.promiser, "/a");
        let names: Vec<_> = attrs.iter().map(|a| a.name).collect();
        assert_eq!(names, ["content", "owner"]);
        assert_eq!(attrs[1].before, None);
        // In promise order, whatever the action.
        assert!(matches!(&set.changes[1], Change::Removed(k) if &*k.promiser == "/gone"));
        assert!(matches!(&set.changes[2], Change::Added(r) if &*r.key.promiser == "/new"));
    }

    #[test]
    fn equal_change_sets_hash_equal_whatever_the_order() {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let build = BuildHasherDefault::<rustc_hash::FxHasher>::default();
        let old = host(vec![file("/a", "1"), file("/b", "1")]);
        let one = compare(&old, &host(vec![file("/a", "2"), file("/b", "2")]));
        let two = compare(&old, &host(vec![file("/b", "2"), file("/a", "2")]));
        assert_eq!(one, two);
        assert_eq!(build.hash_one(&one), build.hash_one(&two));
        let other = compare(&old, &host(vec![file("/a", "3"), file("/b", "2")]));
        assert_ne!(one, other);
    }

    #[test]
    fn unknowns_are_reported_once_per_side() {
        let need = Unresolved::unknown(
            "file \"/etc/dc\"".into(),
            "fact `facts.datacenter` is not given".into(),
        );
        let mut old = host(vec![]);
        old.unresolved.push(need.clone());
        let mut new = host(vec![]);
        new.unresolved.push(need.clone());
        let set = compare(&old, &new);
        assert_eq!(
            set.changes,
            vec![Change::Unknown {
                side: Side::Both,
                promise: need.clone()
            }]
        );
        assert!(set.has_unknown());
        let set = compare(&host(vec![]), &new);
        assert!(matches!(
            set.changes[0],
            Change::Unknown {
                side: Side::New,
                ..
            }
        ));
    }

    #[test]
    fn a_changed_condition_is_a_change() {
        let a = file("/a", "1");
        let b = Resolved::new(
            a.key.clone(),
            a.attrs.clone(),
            Some("nginx_repaired".into()),
        );
        let set = compare(&host(vec![a]), &host(vec![b]));
        assert!(
            matches!(&set.changes[0], Change::Changed { attrs, conditional: (None, Some(_)), .. } if attrs.is_empty())
        );
    }
}
