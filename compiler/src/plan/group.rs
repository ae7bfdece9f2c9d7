//! Hosts with identical change sets, together: 10,000 hosts that get the
//! same change print it once, with their count and names. Groups are keyed
//! by the change set itself (hashed, then compared), so two sets that only
//! hash alike never share a group.

use rustc_hash::FxHashMap;

use super::changes::ChangeSet;

/// Hosts with one change set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub changes: ChangeSet,
    /// In inventory order.
    pub hosts: Vec<String>,
}

/// Each distinct change set once, with its number: hosts keep the number,
/// so 10,000 hosts with one change hold it once (resolving a host makes
/// its change set; interning it right away keeps memory to the distinct
/// sets, not the hosts).
#[derive(Debug, Default)]
pub struct ChangeSets {
    index: FxHashMap<ChangeSet, usize>,
    sets: Vec<ChangeSet>,
}

impl ChangeSets {
    /// The number of `set`, added if new.
    pub fn intern(&mut self, set: ChangeSet) -> usize {
        if let Some(&i) = self.index.get(&set) {
            return i;
        }
        let i = self.sets.len();
        self.index.insert(set.clone(), i);
        self.sets.push(set);
        i
    }

    /// Another thread's sets merged in: what each of its numbers is here.
    pub fn merge(&mut self, other: ChangeSets) -> Vec<usize> {
        other.sets.into_iter().map(|set| self.intern(set)).collect()
    }
}

/// The hosts grouped by change set: the groups that change (largest first,
/// then in the order of their first host) and the hosts that do not.
/// `per_host` is each host with the number of its set in `sets`.
pub fn group(per_host: Vec<(String, usize)>, sets: ChangeSets) -> (Vec<Group>, Vec<String>) {
    let mut unchanged = Vec::new();
    let mut hosts: Vec<Vec<String>> = vec![Vec::new(); sets.sets.len()];
    let mut first: Vec<usize> = Vec::new();
    for (host, i) in per_host {
        let changes = sets.sets.get(i);
        if changes.is_none_or(ChangeSet::is_empty) {
            unchanged.push(host);
            continue;
        }
        if let Some(list) = hosts.get_mut(i) {
            if list.is_empty() {
                first.push(i);
            }
            list.push(host);
        }
    }
    let mut sets: Vec<Option<ChangeSet>> = sets.sets.into_iter().map(Some).collect();
    let mut groups: Vec<Group> = first
        .into_iter()
        .filter_map(|i| {
            Some(Group {
                changes: sets.get_mut(i)?.take()?,
                hosts: std::mem::take(hosts.get_mut(i)?),
            })
        })
        .collect();
    // Stable: equal sizes keep the order of their first host.
    groups.sort_by_key(|g| std::cmp::Reverse(g.hosts.len()));
    (groups, unchanged)
}

/// `web-01, web-02, web-03 and 9997 more`: the first `shown` names.
pub fn host_list(hosts: &[String], shown: usize) -> String {
    let first: Vec<&str> = hosts.iter().take(shown).map(String::as_str).collect();
    let rest = hosts.len().saturating_sub(first.len());
    let mut text = first.join(", ");
    if rest > 0 {
        text.push_str(&format!(" and {rest} more"));
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::plan::changes::Change;
    use crate::plan::resolved::PromiseKey;

    fn removed(path: &str) -> ChangeSet {
        ChangeSet {
            changes: vec![Change::Removed(PromiseKey {
                kind: "file",
                promiser: path.into(),
                occurrence: 0,
            })],
        }
    }

    #[test]
    fn hosts_with_equal_change_sets_share_a_group_largest_first() {
        // Two threads' worth, merged as `plan` merges them.
        let mut sets = ChangeSets::default();
        let mut per_host: Vec<(String, usize)> = [
            ("a", removed("/x")),
            ("b", removed("/y")),
            ("c", ChangeSet::default()),
        ]
        .into_iter()
        .map(|(h, set)| (h.to_owned(), sets.intern(set)))
        .collect();
        let mut other = ChangeSets::default();
        let theirs: Vec<(String, usize)> = [
            ("d", removed("/y")),
            ("e", removed("/x")),
            ("f", removed("/y")),
        ]
        .into_iter()
        .map(|(h, set)| (h.to_owned(), other.intern(set)))
        .collect();
        assert_eq!(other.sets.len(), 2);
        let map = sets.merge(other);
        per_host.extend(theirs.into_iter().map(|(h, i)| (h, map[i])));
        assert_eq!(sets.sets.len(), 3, "the empty set and two others");
        let (groups, unchanged) = group(per_host, sets);
        assert_eq!(unchanged, ["c"]);
        let shape: Vec<(Vec<&str>, &ChangeSet)> = groups
            .iter()
            .map(|g| (g.hosts.iter().map(String::as_str).collect(), &g.changes))
            .collect();
        assert_eq!(
            shape,
            vec![
                (vec!["b", "d", "f"], &removed("/y")),
                (vec!["a", "e"], &removed("/x"))
            ]
        );
    }

    #[test]
    fn a_long_host_list_names_the_first_and_counts_the_rest() {
        let hosts: Vec<String> = (1..=12).map(|i| format!("h{i}")).collect();
        assert_eq!(host_list(&hosts, 3), "h1, h2, h3 and 9 more");
        assert_eq!(host_list(&hosts[..2], 3), "h1, h2");
    }
}
