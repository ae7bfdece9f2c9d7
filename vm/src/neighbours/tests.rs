//! The `neighbours` operator on reports signed here, in a temporary state
//! directory: consistent histories pass and move the seen head; a
//! rewrite, a truncation, a bad signature and a replayed older report are
//! alarms that leave it where it was; a host with no report yet is
//! `unavailable` and one without history `no history`, neither an alarm.

#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::collections::BTreeMap;

use converge_format::chain::{format_digest, link, ChainReport, GENESIS};
use converge_format::inventory::format_report_key;
use converge_format::report::{Report, SignedReport, Status, REPORT_FORMAT};
use ed25519_dalek::SigningKey;

use super::*;
use crate::instance::Value;

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn chain(bodies: &[u8]) -> ChainReport {
    let head = bodies.iter().fold(GENESIS, |h, b| link(&h, &[*b; 32]));
    ChainReport {
        length: bodies.len() as u64,
        head: format_digest(&head),
        tail: bodies.iter().map(|b| format_digest(&[*b; 32])).collect(),
    }
}

fn report(host: &str, sequence: u64, history: Option<&[u8]>) -> Report {
    let mut extensions = BTreeMap::new();
    if let Some(bodies) = history {
        extensions.insert(
            converge_format::chain::EXTENSION.to_owned(),
            serde_json::to_value(chain(bodies)).unwrap(),
        );
    }
    Report {
        format: REPORT_FORMAT.into(),
        host: host.into(),
        run_id: format!("{sequence:032x}"),
        sequence,
        started_at: "2026-11-24T01:00:00Z".into(),
        finished_at: "2026-11-24T01:00:01Z".into(),
        status: Status::Kept,
        bundle: None,
        summary: Default::default(),
        promises: vec![],
        owed_notifications: vec![],
        facts: Default::default(),
        timings: Default::default(),
        error: None,
        truncated: false,
        extensions,
    }
}

struct Host {
    _dir: tempfile::TempDir,
    state: StateDir,
}

impl Host {
    fn new() -> Host {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(&dir.path().join("state")).unwrap();
        Host { _dir: dir, state }
    }

    /// Stores `report` signed with `signer` as the agent's fetch would.
    fn store(&self, host: &str, report: &Report, signer: &SigningKey) {
        let dir = self.state.subdir(DIR, 0o700).unwrap();
        let body = serde_json::to_vec(&SignedReport::sign(report, signer)).unwrap();
        dir.write(&format!("{host}.report"), &body, 0o600).unwrap();
    }

    fn check(&self, hosts: &[&str]) -> (Applied, Vec<Entry>) {
        let inst = Instance {
            index: 3,
            kind: "neighbours",
            promiser: "fleet".into(),
            attrs: vec![
                (
                    "hosts",
                    Value::List(hosts.iter().map(|h| (*h).to_owned()).collect()),
                ),
                ("on_rewrite", Value::Str("neighbour_rewrote".into())),
                (
                    "report_keys",
                    Value::List(vec![
                        format!("n-b {}", format_report_key(&key(2).verifying_key())),
                        format!(
                            "n-c {} {}",
                            format_report_key(&key(3).verifying_key()),
                            format_report_key(&key(13).verifying_key())
                        ),
                    ]),
                ),
            ],
        };
        let mut entries = Vec::new();
        let applied = check(Some(&self.state), false, &inst, &mut entries);
        (applied, entries)
    }
}

fn verdicts(entries: &[Entry]) -> Vec<(&str, &str, bool)> {
    entries
        .iter()
        .map(|e| (e.host.as_str(), e.verdict.as_str(), e.alarm))
        .collect()
}

#[test]
fn consistent_histories_pass_and_a_rewrite_is_an_alarm_until_it_extends_again() {
    let h = Host::new();
    let (applied, entries) = h.check(&["n-b", "n-c"]);
    assert_eq!(applied.outcome, Outcome::Kept);
    assert_eq!(
        verdicts(&entries),
        [("n-b", "unavailable", false), ("n-c", "unavailable", false)]
    );

    h.store("n-b", &report("n-b", 1, Some(&[1, 2])), &key(2));
    h.store("n-c", &report("n-c", 1, None), &key(13));
    let (applied, entries) = h.check(&["n-b", "n-c"]);
    assert_eq!(applied.outcome, Outcome::Kept);
    assert_eq!(
        verdicts(&entries),
        [("n-b", "first", false), ("n-c", "no history", false)]
    );

    h.store("n-b", &report("n-b", 2, Some(&[1, 2, 3])), &key(2));
    let (_, entries) = h.check(&["n-b"]);
    assert_eq!(verdicts(&entries), [("n-b", "extends", false)]);
    assert_eq!(entries[0].seen.as_ref().unwrap().length, 2);
    assert_eq!(entries[0].new.as_ref().unwrap().length, 3);

    // Record 2 edited: an alarm, the promise fails, the seen head stays.
    h.store("n-b", &report("n-b", 3, Some(&[1, 9, 3, 4])), &key(2));
    for _ in 0..2 {
        let (applied, entries) = h.check(&["n-b"]);
        assert_eq!(verdicts(&entries), [("n-b", "rewritten", true)]);
        assert_eq!(entries[0].seen.as_ref().unwrap().length, 3);
        let Outcome::Failed(why) = applied.outcome else {
            panic!("{applied:?}")
        };
        assert!(why.contains("n-b: rewritten"), "{why}");
        assert!(alarmed(&entries, 3));
    }

    // Truncated, then a history dropped altogether.
    h.store("n-b", &report("n-b", 4, Some(&[1, 2])), &key(2));
    assert_eq!(verdicts(&h.check(&["n-b"]).1), [("n-b", "backwards", true)]);
    h.store("n-b", &report("n-b", 5, None), &key(2));
    assert_eq!(verdicts(&h.check(&["n-b"]).1), [("n-b", "missing", true)]);
}

#[test]
fn forged_replayed_and_unknown_reports_are_alarms() {
    let h = Host::new();
    h.store("n-b", &report("n-b", 5, Some(&[1])), &key(2));
    assert_eq!(verdicts(&h.check(&["n-b"]).1), [("n-b", "first", false)]);
    // Signed by another key (a collector forging it): an alarm.
    h.store("n-b", &report("n-b", 6, Some(&[1, 2])), &key(9));
    assert_eq!(
        verdicts(&h.check(&["n-b"]).1),
        [("n-b", "bad signature", true)]
    );
    // A genuine but older report (a collector replaying it).
    h.store("n-b", &report("n-b", 4, Some(&[1])), &key(2));
    assert_eq!(
        verdicts(&h.check(&["n-b"]).1),
        [("n-b", "older report", true)]
    );
    // Another host's report under this name.
    h.store("n-b", &report("n-c", 7, Some(&[1])), &key(3));
    assert_eq!(
        verdicts(&h.check(&["n-b"]).1),
        [("n-b", "bad report", true)]
    );
    // A host the bundle has no key for.
    assert_eq!(
        verdicts(&h.check(&["n-z"]).1),
        [("n-z", "unknown host", true)]
    );
}

#[test]
fn the_watched_hosts_are_recorded_for_the_next_fetch() {
    let h = Host::new();
    h.check(&["n-c", "n-b"]);
    let wanted = h
        .state
        .subdir(DIR, 0o700)
        .unwrap()
        .read(WANTED, 1024)
        .unwrap();
    assert_eq!(wanted.unwrap(), b"n-b\nn-c\n");
}
