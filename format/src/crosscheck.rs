//! What a watcher of a host's history (the collector, a neighbour host)
//! concludes from one report of that host, given the head it kept from
//! the reports before: the one reading of a report's `watch` extension,
//! shared by `collector/` and the VM's neighbour watch. The rules
//! themselves are [`crate::chain::check`]; this adds only what the chain
//! module leaves to its callers: a report without the extension, a first
//! head, an extension that is not a [`ChainReport`].

use std::collections::BTreeMap;

use serde::Deserialize as _;
use serde_json::Value;

use crate::chain::{check, ChainReport, Head, Verdict, EXTENSION};

/// The result of [`cross_check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CrossCheck {
    /// The report shows no history and none was seen: the host keeps no
    /// `watch` history (yet). Not an alarm.
    NoHistory,
    /// The first head seen of this host, well formed: trusted on first
    /// use, it becomes the seen head.
    First(Head),
    /// The report was checked against the seen head.
    Checked {
        verdict: Verdict,
        /// The head the report shows (absent when the extension is not a
        /// chain report at all).
        new: Option<Head>,
    },
    /// A head was seen before but this report shows none: the history was
    /// dropped (or the watch promises with it). An alarm: a host that
    /// stopped showing its history would otherwise hide any rewrite.
    Missing,
}

impl CrossCheck {
    /// One word for reports, the API and the CLI: `no history`, `first`,
    /// [`Verdict::as_str`], or `missing`.
    pub fn word(&self) -> &'static str {
        match self {
            CrossCheck::NoHistory => "no history",
            CrossCheck::First(_) => "first",
            CrossCheck::Checked { verdict, .. } => verdict.as_str(),
            CrossCheck::Missing => "missing",
        }
    }

    /// Whether this is a sign of tampering: a rewrite, a truncation, a
    /// history that cannot be verified or is malformed, or a missing one.
    pub fn is_alarm(&self) -> bool {
        match self {
            CrossCheck::NoHistory | CrossCheck::First(_) => false,
            CrossCheck::Checked { verdict, .. } => !verdict.is_consistent(),
            CrossCheck::Missing => true,
        }
    }

    /// What the watcher should keep as the seen head from now on, when it
    /// changes: only a first head or one that extends the seen head.
    pub fn next_seen(&self) -> Option<&Head> {
        match self {
            CrossCheck::First(head) => Some(head),
            CrossCheck::Checked {
                verdict,
                new: Some(head),
            } if verdict.is_consistent() => Some(head),
            _ => None,
        }
    }

    /// The head the report showed, if it showed one.
    pub fn shown(&self) -> Option<&Head> {
        match self {
            CrossCheck::First(head) => Some(head),
            CrossCheck::Checked { new, .. } => new.as_ref(),
            CrossCheck::NoHistory | CrossCheck::Missing => None,
        }
    }

    /// What is wrong, in words, for a malformed or unverifiable chain.
    pub fn detail(&self) -> Option<String> {
        match self {
            CrossCheck::Checked {
                verdict: Verdict::Malformed(why),
                ..
            } => Some(why.clone()),
            CrossCheck::Checked {
                verdict: Verdict::Unverifiable { appended },
                ..
            } => Some(format!(
                "{appended} records were appended since the seen head, more than the report carries"
            )),
            _ => None,
        }
    }
}

/// What the report whose extensions are `extensions` says about its
/// host's history, for a watcher that saw `seen` last (`None`: never saw
/// a head of this host).
pub fn cross_check(seen: Option<&Head>, extensions: &BTreeMap<String, Value>) -> CrossCheck {
    let Some(value) = extensions.get(EXTENSION) else {
        return match seen {
            Some(_) => CrossCheck::Missing,
            None => CrossCheck::NoHistory,
        };
    };
    let chain = match ChainReport::deserialize(value) {
        Ok(chain) => chain,
        Err(e) => {
            return CrossCheck::Checked {
                verdict: Verdict::Malformed(format!("the {EXTENSION:?} extension: {e}")),
                new: None,
            }
        }
    };
    let new = Some(chain.head());
    match seen {
        Some(seen) => CrossCheck::Checked {
            verdict: check(seen, &chain),
            new,
        },
        // A chain checked against its own head is `Same` exactly when it
        // is well formed: the well-formedness rules stay in `chain`.
        None => match check(&chain.head(), &chain) {
            Verdict::Same => CrossCheck::First(chain.head()),
            verdict => CrossCheck::Checked { verdict, new },
        },
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::chain::{format_digest, link, Digest, GENESIS};
    use sha2::{Digest as _, Sha256};

    fn chain(bodies: &[u8]) -> ChainReport {
        let bodies: Vec<Digest> = bodies.iter().map(|b| Sha256::digest([*b]).into()).collect();
        let head = bodies.iter().fold(GENESIS, |h, b| link(&h, b));
        ChainReport {
            length: bodies.len() as u64,
            head: format_digest(&head),
            tail: bodies.iter().map(format_digest).collect(),
        }
    }

    fn extensions(chain: &ChainReport) -> BTreeMap<String, Value> {
        BTreeMap::from([(EXTENSION.to_owned(), serde_json::to_value(chain).unwrap())])
    }

    #[test]
    fn no_extension_is_no_history_until_a_head_was_seen() {
        let empty = BTreeMap::new();
        assert_eq!(cross_check(None, &empty), CrossCheck::NoHistory);
        assert!(!cross_check(None, &empty).is_alarm());
        let seen = chain(&[1, 2]).head();
        let missing = cross_check(Some(&seen), &empty);
        assert_eq!(missing, CrossCheck::Missing);
        assert!(missing.is_alarm());
        assert_eq!(missing.word(), "missing");
    }

    #[test]
    fn a_first_head_is_trusted_only_when_well_formed() {
        let first = cross_check(None, &extensions(&chain(&[1, 2, 3])));
        assert_eq!(first, CrossCheck::First(chain(&[1, 2, 3]).head()));
        assert_eq!(first.next_seen(), Some(&chain(&[1, 2, 3]).head()));
        let mut bad = chain(&[1, 2]);
        bad.head = "sha256:nope".into();
        let verdict = cross_check(None, &extensions(&bad));
        assert!(verdict.is_alarm());
        assert_eq!(verdict.word(), "malformed");
        assert_eq!(verdict.next_seen(), None);
    }

    #[test]
    fn checked_verdicts_move_the_seen_head_only_when_consistent() {
        let seen = chain(&[1, 2]).head();
        let extends = cross_check(Some(&seen), &extensions(&chain(&[1, 2, 3])));
        assert_eq!(extends.word(), "extends");
        assert_eq!(extends.next_seen(), Some(&chain(&[1, 2, 3]).head()));
        let rewritten = cross_check(Some(&seen), &extensions(&chain(&[9, 2, 3])));
        assert_eq!(rewritten.word(), "rewritten");
        assert!(rewritten.is_alarm());
        assert_eq!(rewritten.next_seen(), None);
        assert_eq!(rewritten.shown(), Some(&chain(&[9, 2, 3]).head()));
        let backwards = cross_check(Some(&seen), &extensions(&chain(&[1])));
        assert_eq!(backwards.word(), "backwards");
    }

    #[test]
    fn an_extension_that_is_not_a_chain_report_is_malformed() {
        let seen = chain(&[1]).head();
        let ext = BTreeMap::from([(EXTENSION.to_owned(), Value::from("rewritten? never"))]);
        let verdict = cross_check(Some(&seen), &ext);
        assert_eq!(verdict.word(), "malformed");
        assert!(verdict.detail().unwrap().contains("watch"));
        assert_eq!(verdict.shown(), None);
    }
}
