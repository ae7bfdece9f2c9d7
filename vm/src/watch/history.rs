//! The history: an append-only file of records, one line each,
//!
//! ```text
//! sha256:DIGEST sha256:PREV {"seq":1,"time":...}\n
//! ```
//!
//! where the body is canonical JSON (fields in a fixed order, maps
//! sorted), `DIGEST = format::chain::link(PREV, sha256(body))` and `PREV`
//! is the digest of the record before (`GENESIS` for the first). The body
//! holds the record's number, time, the bundle serial, the SHA-256 of each
//! watched path's entries database after the run, and the changes (at most
//! [`MAX_RECORD_CHANGES`], then their count and the digest of the full
//! list).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use converge_format::chain::{
    format_digest, link, parse_digest, ChainReport, Digest, GENESIS, MAX_TAIL,
};

use super::bounds::MAX_RECORD_CHANGES;
use super::compare::WatchChange;

/// What a record is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordKind {
    /// A watch took its first baseline (no earlier database).
    Baseline,
    /// A watch saw changes (or took a new baseline after its selection
    /// changed).
    Changes,
    /// The history or a database was found broken; every database was
    /// rebuilt from a fresh baseline.
    Break,
}

/// The body of a record (its canonical JSON is what is hashed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Body {
    pub seq: u64,
    /// Seconds since the epoch.
    pub time: i64,
    pub serial: u64,
    pub kind: RecordKind,
    /// Watched path -> `sha256:` of its entries database after the run.
    pub databases: BTreeMap<String, String>,
    pub changes: Vec<WatchChange>,
    pub changes_total: u64,
    /// When `changes` was cut: the digest of the full list (each change's
    /// JSON, one per line).
    pub changes_digest: Option<String>,
    /// For a [`RecordKind::Break`]: what was found.
    pub broken: Option<String>,
}

impl Body {
    /// A body whose change list is bounded.
    pub fn new(
        seq: u64,
        time: i64,
        serial: u64,
        kind: RecordKind,
        databases: BTreeMap<String, String>,
        all: &[WatchChange],
        broken: Option<String>,
    ) -> Body {
        let (changes, changes_digest) = if all.len() > MAX_RECORD_CHANGES {
            let mut h = Sha256::new();
            for c in all {
                h.update(serde_json::to_vec(c).unwrap_or_default());
                h.update(b"\n");
            }
            (
                all.iter().take(MAX_RECORD_CHANGES).cloned().collect(),
                Some(format_digest(&h.finalize().into())),
            )
        } else {
            (all.to_vec(), None)
        };
        Body {
            seq,
            time,
            serial,
            kind,
            databases,
            changes,
            changes_total: all.len() as u64,
            changes_digest,
            broken,
        }
    }
}

/// One record as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub digest: Digest,
    pub body_digest: Digest,
    pub body: Body,
}

/// The line of a new record after `prev`.
pub fn line(prev: &Digest, body: &Body) -> Result<(Vec<u8>, Record), String> {
    let json = serde_json::to_vec(body).map_err(|e| format!("cannot encode a record: {e}"))?;
    let body_digest: Digest = Sha256::digest(&json).into();
    let digest = link(prev, &body_digest);
    let mut out = format!("{} {} ", format_digest(&digest), format_digest(prev)).into_bytes();
    out.extend_from_slice(&json);
    out.push(b'\n');
    Ok((
        out,
        Record {
            digest,
            body_digest,
            body: body.clone(),
        },
    ))
}

/// Where and why a history does not hold together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broken {
    /// The 1-based number of the first record that is wrong (one past the
    /// last for a history that lost records at its end).
    pub at: u64,
    pub why: String,
}

/// The records of `text`, checked: each line parses, links to the one
/// before, and is numbered in order. On the first bad record: the good
/// ones before it and what is wrong.
pub fn parse(text: &[u8]) -> (Vec<Record>, Option<Broken>) {
    let mut records: Vec<Record> = Vec::new();
    let mut prev = GENESIS;
    let mut rest = text;
    while !rest.is_empty() {
        let at = (records.len() as u64).saturating_add(1);
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return (
                records,
                Some(Broken {
                    at,
                    why: "the last record is cut short (no line end)".into(),
                }),
            );
        };
        let (one, tail) = rest.split_at(end);
        rest = tail.get(1..).unwrap_or_default();
        match check_line(one, &prev, at) {
            Ok(record) => {
                prev = record.digest;
                records.push(record);
            }
            Err(why) => return (records, Some(Broken { at, why })),
        }
    }
    (records, None)
}

fn check_line(line: &[u8], prev: &Digest, at: u64) -> Result<Record, String> {
    let text = std::str::from_utf8(line).map_err(|_| "the record is not UTF-8".to_owned())?;
    let mut parts = text.splitn(3, ' ');
    let (Some(digest), Some(claimed_prev), Some(json)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err("the record is not `DIGEST PREV BODY`".into());
    };
    let digest = parse_digest(digest)?;
    let claimed_prev = parse_digest(claimed_prev)?;
    if claimed_prev != *prev {
        return Err("it does not link to the record before it".into());
    }
    let body_digest: Digest = Sha256::digest(json.as_bytes()).into();
    if link(prev, &body_digest) != digest {
        return Err("its digest does not match its content (the record was edited)".into());
    }
    let body: Body =
        serde_json::from_str(json).map_err(|e| format!("its body is not a record: {e}"))?;
    if body.seq != at {
        return Err(format!(
            "it is numbered {} where {at} was expected",
            body.seq
        ));
    }
    Ok(Record {
        digest,
        body_digest,
        body,
    })
}

/// The chain section of a report for these records.
pub fn chain_report(records: &[Record]) -> ChainReport {
    let start = records.len().saturating_sub(MAX_TAIL);
    ChainReport {
        length: records.len() as u64,
        head: format_digest(&records.last().map_or(GENESIS, |r| r.digest)),
        tail: records
            .iter()
            .skip(start)
            .map(|r| format_digest(&r.body_digest))
            .collect(),
    }
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects
)]
mod tests {
    use super::*;
    use converge_format::chain::{check, Verdict};

    fn history(n: u64) -> (Vec<u8>, Vec<Record>) {
        let mut text = Vec::new();
        let mut prev = GENESIS;
        let mut records = Vec::new();
        for seq in 1..=n {
            let body = Body::new(seq, 100, 1, RecordKind::Changes, BTreeMap::new(), &[], None);
            let (bytes, record) = line(&prev, &body).unwrap();
            prev = record.digest;
            text.extend(bytes);
            records.push(record);
        }
        (text, records)
    }

    #[test]
    fn a_history_reads_back_and_its_report_extends_earlier_heads() {
        let (text, records) = history(5);
        let (read, broken) = parse(&text);
        assert_eq!(broken, None);
        assert_eq!(read, records);
        let seen = chain_report(&read[..3]).head();
        assert_eq!(check(&seen, &chain_report(&read)), Verdict::Extends);
    }

    #[test]
    fn an_edited_record_is_found_at_its_number() {
        let (text, _) = history(4);
        let text = String::from_utf8(text).unwrap();
        let edited = text.replacen("\"time\":100", "\"time\":101", 1);
        let (good, broken) = parse(edited.as_bytes());
        assert!(good.is_empty());
        assert_eq!(broken.map(|b| b.at), Some(1));
        let mut lines: Vec<&str> = text.lines().collect();
        lines.remove(2);
        let (good, broken) = parse((lines.join("\n") + "\n").as_bytes());
        assert_eq!(good.len(), 2);
        assert_eq!(broken.map(|b| b.at), Some(3));
    }

    #[test]
    fn a_cut_record_is_found() {
        let (text, _) = history(3);
        let (good, broken) = parse(&text[..text.len() - 5]);
        assert_eq!(good.len(), 2);
        assert_eq!(broken.map(|b| b.at), Some(3));
    }

    #[test]
    fn long_change_lists_are_cut_with_a_digest() {
        let all: Vec<WatchChange> = (0..MAX_RECORD_CHANGES + 3)
            .map(|i| WatchChange {
                path: format!("/f{i}"),
                what: "added".into(),
                before: String::new(),
                after: "file".into(),
            })
            .collect();
        let body = Body::new(1, 0, 1, RecordKind::Changes, BTreeMap::new(), &all, None);
        assert_eq!(body.changes.len(), MAX_RECORD_CHANGES);
        assert_eq!(body.changes_total, all.len() as u64);
        assert!(body.changes_digest.is_some());
    }
}
