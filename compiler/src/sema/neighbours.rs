//! Neighbour watch in the compiler (LANGUAGE.md section 15, docs/language.md
//! `neighbours()`, docs/promise-types.md `neighbours`).
//!
//! `neighbours(inventory, k)` picks, for the host running the bundle, `k`
//! other hosts of the inventory: the hosts (revoked ones left out) sorted
//! by the SHA-256 of their name form a ring, and a host's neighbours are
//! the `k` hosts that follow it on the ring. Every host is then watched by
//! exactly `k` others (the `k` before it), the choice moves little when a
//! host joins or leaves, and it does not follow names (`web-01` does not
//! watch `web-02` just because they sort together). `k` is capped at the
//! number of other hosts.
//!
//! It is a value only the host knows (its hostname picks its row), so it
//! is expanded as a lookup keyed by `sys.hostname` ([`ir::Choice`]): one
//! instance of the promise per host, each with that host's constant list,
//! guarded `sys.hostname == "NAME"`; a host not in the inventory watches
//! none. Each instance then carries the report keys of exactly the hosts
//! it names ([`report_keys`]), so a bundle grows with hosts times `k`, not
//! with hosts squared.

use std::collections::BTreeMap;

use sha2::{Digest as _, Sha256};

use super::inventory::InventoryClasses;
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{self, Choice, Value};
use crate::suggest::did_you_mean;
use converge_format::schema::NEIGHBOUR_KEYS_ATTR;
use converge_grammar::Span;

/// The function's name.
pub const FUNCTION: &str = "neighbours";

/// The hosts `neighbours(inventory, k)` gives each of `hosts`.
pub fn ring(hosts: &[&str], k: usize) -> BTreeMap<String, Vec<String>> {
    let mut ring: Vec<([u8; 32], &str)> = hosts
        .iter()
        .map(|h| (Sha256::digest(h.as_bytes()).into(), *h))
        .collect();
    ring.sort_unstable();
    ring.dedup_by(|a, b| a.1 == b.1);
    let n = ring.len();
    let k = k.min(n.saturating_sub(1));
    let mut out = BTreeMap::new();
    for (i, (_, host)) in ring.iter().enumerate() {
        let chosen = (1..=k)
            .filter_map(|step| ring.get((i + step) % n).map(|(_, h)| (*h).to_owned()))
            .collect();
        out.insert((*host).to_owned(), chosen);
    }
    out
}

/// The hosts `neighbours(inventory, k)` can name: the inventory's, revoked
/// ones left out (they report nothing anyone may trust).
fn watchable(inventory: &InventoryClasses) -> Vec<&str> {
    inventory
        .report_keys
        .iter()
        .filter(|(_, keys)| !keys.is_empty())
        .map(|(name, _)| name.as_str())
        .collect()
}

/// The value of `neighbours(inventory, k)`.
pub fn value(inventory: &InventoryClasses, k: usize) -> Value {
    let cases = ring(&watchable(inventory), k)
        .into_iter()
        .map(|(host, chosen)| {
            (
                host,
                Value::List(chosen.into_iter().map(Value::Str).collect()),
            )
        })
        .collect();
    Value::Choice(Box::new(Choice {
        on: Value::Fact("sys.hostname".to_owned()),
        cases,
        default: Value::List(Vec::new()),
    }))
}

/// The error for neighbour watch without an inventory.
pub fn without_inventory(span: Span, what: &str) -> Diagnostic {
    Diagnostic::new(
        Code::NeighboursWithoutInventory,
        format!("{what} needs an inventory: the hosts to watch and the keys their reports are signed with come from it"),
        span,
        "no inventory",
    )
    .with_help("put `inventory.toml` in the policy tree (or pass `--inventory FILE`), listing each host with the entry `policyvm enroll` printed on it")
}

/// Fills `report_keys` of an instance of a `neighbours` promise from the
/// inventory: the keys of each host its (constant) `hosts` names, or of
/// every host when the list is only known on the host. An unknown name is
/// an error with the closest host's name; a policy that sets
/// `report_keys` is refused (the keys are the inventory's, never the
/// policy's).
pub fn report_keys(
    inventory: Option<&InventoryClasses>,
    promise: &mut ir::Promise,
) -> Vec<Diagnostic> {
    let mut errors = Vec::new();
    if let Some(written) = promise.attrs.iter().find(|a| a.name == NEIGHBOUR_KEYS_ATTR) {
        errors.push(
            Diagnostic::new(
                Code::NeighbourKeysWritten,
                format!("`{NEIGHBOUR_KEYS_ATTR}` is filled by the compiler from the inventory"),
                written.span,
                "set here",
            )
            .with_help("remove it: each watched host's report keys come from its inventory entry"),
        );
        return errors;
    }
    let Some(inventory) = inventory else {
        errors.push(without_inventory(promise.span, "a `neighbours` promise"));
        return errors;
    };
    let hosts = promise.attrs.iter().find(|a| a.name == "hosts");
    let names: Vec<(String, Span)> = match hosts.map(|a| (&a.value, a.span)) {
        Some((Value::List(items), span)) if items.iter().all(Value::is_constant) => items
            .iter()
            .filter_map(|i| match i {
                Value::Str(s) => Some((s.clone(), span)),
                _ => None,
            })
            .collect(),
        // Known only on the host: every host's keys.
        _ => inventory
            .report_keys
            .keys()
            .map(|h| (h.clone(), promise.span))
            .collect(),
    };
    let mut lines = Vec::new();
    for (name, span) in names {
        match inventory.report_keys.get(&name) {
            Some(keys) if !keys.is_empty() => {
                let mut line = name.clone();
                for k in keys {
                    line.push(' ');
                    line.push_str(k);
                }
                lines.push(Value::Str(line));
            }
            Some(_) => errors.push(
                Diagnostic::new(
                    Code::UnknownHost,
                    format!("`{name}` is revoked in the inventory: its reports are not trusted"),
                    span,
                    "a revoked host",
                )
                .with_help("watch another host, or restore the host's entry"),
            ),
            None => {
                let known = inventory.report_keys.keys().map(String::as_str);
                let d = Diagnostic::new(
                    Code::UnknownHost,
                    format!("`{name}`: no host of the inventory is named so"),
                    span,
                    "not a host of the inventory",
                );
                errors.push(match did_you_mean(&name, known) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help(
                        "name hosts of the inventory (`neighbours(inventory, 3)` picks them), or add the host (`policyvm enroll` on it prints its entry)",
                    ),
                });
            }
        }
    }
    if errors.is_empty() {
        promise.attrs.push(ir::Attr {
            name: NEIGHBOUR_KEYS_ATTR,
            value: Value::List(lines),
            span: promise.span,
            default: None,
        });
    }
    errors
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_host_watches_k_others_and_is_watched_by_k() {
        let hosts: Vec<String> = (0..20).map(|i| format!("h-{i:02}")).collect();
        let names: Vec<&str> = hosts.iter().map(String::as_str).collect();
        let ring = ring(&names, 3);
        assert_eq!(ring.len(), 20);
        let mut watched_by: BTreeMap<&str, usize> = BTreeMap::new();
        for (host, chosen) in &ring {
            assert_eq!(chosen.len(), 3, "{host}");
            assert!(!chosen.contains(host), "{host} watches itself");
            for c in chosen {
                *watched_by.entry(c.as_str()).or_default() += 1;
            }
        }
        assert!(watched_by.values().all(|n| *n == 3), "{watched_by:?}");
        // Deterministic, whatever the order the inventory lists them in.
        let mut reversed = names.clone();
        reversed.reverse();
        assert_eq!(super::ring(&reversed, 3), ring);
    }

    #[test]
    fn k_is_capped_at_the_other_hosts() {
        let ring = ring(&["a", "b", "c"], 10);
        assert!(ring.values().all(|c| c.len() == 2));
        assert_eq!(super::ring(&["alone"], 4)["alone"], Vec::<String>::new());
    }
}
