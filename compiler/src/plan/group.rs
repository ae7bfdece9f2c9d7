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

/// The hosts grouped by change set: the groups that change (largest first,
/// then in the order of their first host) and the hosts that do not.
pub fn group(per_host: Vec<(String, ChangeSet)>) -> (Vec<Group>, Vec<String>) {
    let mut unchanged = Vec::new();
    let mut index: FxHashMap<ChangeSet, usize> = FxHashMap::default();
    let mut groups: Vec<Group> = Vec::new();
    for (host, changes) in per_host {
        if changes.is_empty() {
            unchanged.push(host);
            continue;
        }
        match index.get(&changes) {
            Some(&i) => {
                if let Some(g) = groups.get_mut(i) {
                    g.hosts.push(host);
                }
            }
            None => {
                index.insert(changes.clone(), groups.len());
                groups.push(Group {
                    changes,
                    hosts: vec![host],
                });
            }
        }
    }
    // Stable: equal sizes keep the order of their first host.
    groups.sort_by(|a, b| b.hosts.len().cmp(&a.hosts.len()));
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
        let hosts = vec![
            ("a".to_owned(), removed("/x")),
            ("b".to_owned(), removed("/y")),
            ("c".to_owned(), ChangeSet::default()),
            ("d".to_owned(), removed("/y")),
            ("e".to_owned(), removed("/x")),
            ("f".to_owned(), removed("/y")),
        ];
        let (groups, unchanged) = group(hosts);
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
