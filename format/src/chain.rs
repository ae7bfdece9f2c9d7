//! The hash chain of a host's `watch` history (LANGUAGE.md section 15),
//! and the one check that tells whether a chain a host shows now extends a
//! head someone saw earlier.
//!
//! The VM appends records to its local history; each record's digest links
//! the previous record's digest with the digest of the record's own body:
//!
//! ```text
//! digest(0)  = 32 zero bytes                       (the empty history)
//! digest(n)  = SHA-256("converge-watch-chain/1\0" || digest(n-1) || body(n))
//! ```
//!
//! where `body(n)` is the SHA-256 of record `n`'s canonical bytes (what a
//! record holds is the VM's business, `vm/src/watch/`). Every report a host
//! uploads carries a [`ChainReport`] under the extension key
//! [`EXTENSION`]: the length, the head, and the body digests of its last
//! records. Whoever kept an earlier [`Head`] of that host (the collector,
//! a neighbour host) runs [`check`]: a history that was edited, truncated
//! or rebuilt no longer leads from the old head to the new one, whatever
//! the host's root user does, because SHA-256 has no known second
//! preimages. What it cannot show: records appended after the last head
//! anyone saw are only as honest as the host that wrote them.
//!
//! The collector (`collector/`) and the VM (neighbour watch) both call
//! [`check`]; neither has its own copy of these rules.

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The key of a report's `extensions` map that holds its [`ChainReport`].
pub const EXTENSION: &str = "watch";

/// Domain separation: a chain digest is never the digest of anything else.
const DOMAIN: &[u8] = b"converge-watch-chain/1\0";

/// How many body digests a [`ChainReport`] carries at most: a verifier
/// that saw a head at most this many records ago can check the extension.
/// One record per run that saw a change (or a break), so 256 covers days
/// of runs between two reports that reach anyone.
pub const MAX_TAIL: usize = 256;

/// A SHA-256 digest.
pub type Digest = [u8; 32];

/// The digest of the empty history.
pub const GENESIS: Digest = [0; 32];

/// The digest of record `n` from the digest of record `n-1` and the
/// digest of record `n`'s body.
pub fn link(previous: &Digest, body: &Digest) -> Digest {
    let mut h = Sha256::new();
    h.update(DOMAIN);
    h.update(previous);
    h.update(body);
    h.finalize().into()
}

/// A point in a host's history: how many records it had and the digest of
/// the last one (`sha256:` and 64 lowercase hex digits).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub length: u64,
    pub head: String,
}

/// What every report carries about the history (extension [`EXTENSION`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainReport {
    /// How many records the history has.
    pub length: u64,
    /// The digest of the last record ([`GENESIS`] when empty), as
    /// `sha256:HEX`.
    pub head: String,
    /// The body digests (`sha256:HEX`) of the last `min(length,
    /// MAX_TAIL)` records, oldest first.
    pub tail: Vec<String>,
}

impl ChainReport {
    /// The point in history this report shows.
    pub fn head(&self) -> Head {
        Head {
            length: self.length,
            head: self.head.clone(),
        }
    }
}

/// What [`check`] found when comparing a chain with a head seen earlier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The same head: nothing was appended.
    Same,
    /// The chain leads from the seen head to the new one: only appends.
    Extends,
    /// The chain is shorter than what was seen: history was truncated.
    Backwards,
    /// The chain does not lead from the seen head: history was edited,
    /// deleted or rebuilt.
    Rewritten,
    /// More records were appended since the seen head than the report
    /// carries: the extension cannot be checked either way. Never read as
    /// consistent: a rewrite padded with new records looks the same.
    Unverifiable { appended: u64 },
    /// The report itself is not well formed (a bad digest, a tail longer
    /// than the history or than [`MAX_TAIL`]).
    Malformed(String),
}

impl Verdict {
    /// Whether the new chain may replace the seen head as the last
    /// consistent one.
    pub fn is_consistent(&self) -> bool {
        matches!(self, Verdict::Same | Verdict::Extends)
    }

    /// One word for reports, metrics and the API.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Extends => "extends",
            Verdict::Backwards => "backwards",
            Verdict::Rewritten => "rewritten",
            Verdict::Unverifiable { .. } => "unverifiable",
            Verdict::Malformed(_) => "malformed",
        }
    }
}

/// Whether `now` extends `seen` (see the module documentation).
pub fn check(seen: &Head, now: &ChainReport) -> Verdict {
    if let Err(problem) = well_formed(now) {
        return Verdict::Malformed(problem);
    }
    let Ok(seen_head) = parse_digest(&seen.head) else {
        return Verdict::Malformed(format!("the seen head {:?} is not a digest", seen.head));
    };
    if now.length < seen.length {
        return Verdict::Backwards;
    }
    let appended = now.length.saturating_sub(seen.length);
    if appended == 0 {
        return if now.head == seen.head {
            Verdict::Same
        } else {
            Verdict::Rewritten
        };
    }
    let Ok(appended_usize) = usize::try_from(appended) else {
        return Verdict::Unverifiable { appended };
    };
    if appended_usize > now.tail.len() {
        return Verdict::Unverifiable { appended };
    }
    let start = now.tail.len().saturating_sub(appended_usize);
    let mut digest = seen_head;
    for body in now.tail.iter().skip(start) {
        match parse_digest(body) {
            Ok(body) => digest = link(&digest, &body),
            Err(e) => return Verdict::Malformed(e),
        }
    }
    if format_digest(&digest) == now.head {
        Verdict::Extends
    } else {
        Verdict::Rewritten
    }
}

/// The problem with a report's chain section, if any.
fn well_formed(now: &ChainReport) -> Result<(), String> {
    parse_digest(&now.head)?;
    if now.tail.len() > MAX_TAIL {
        return Err(format!(
            "a tail of {} records, more than {MAX_TAIL}",
            now.tail.len()
        ));
    }
    if u64::try_from(now.tail.len()).map_or(true, |t| t > now.length) {
        return Err(format!(
            "a tail of {} records in a history of {}",
            now.tail.len(),
            now.length
        ));
    }
    if now.length == 0 && now.head != format_digest(&GENESIS) {
        return Err("an empty history whose head is not the genesis digest".into());
    }
    Ok(())
}

/// `sha256:` and 64 lowercase hex digits.
pub fn format_digest(digest: &Digest) -> String {
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    out.push_str(&crate::bundle::error::hex(digest));
    out
}

/// The digest written as by [`format_digest`].
pub fn parse_digest(text: &str) -> Result<Digest, String> {
    let bad = || format!("{text:?} is not a digest (sha256: and 64 lowercase hex digits)");
    let hex = text.strip_prefix("sha256:").ok_or_else(bad)?;
    if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
        *byte = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    fn body(n: u8) -> Digest {
        Sha256::digest([n]).into()
    }

    /// The chain of `bodies`, and its report (the whole tail).
    fn chain(bodies: &[Digest]) -> ChainReport {
        let mut head = GENESIS;
        for b in bodies {
            head = link(&head, b);
        }
        let tail_start = bodies.len().saturating_sub(MAX_TAIL);
        ChainReport {
            length: bodies.len() as u64,
            head: format_digest(&head),
            tail: bodies[tail_start..].iter().map(format_digest).collect(),
        }
    }

    #[test]
    fn appending_extends_and_nothing_new_is_the_same() {
        let bodies: Vec<Digest> = (0..10).map(body).collect();
        let seen = chain(&bodies[..4]).head();
        assert_eq!(check(&seen, &chain(&bodies)), Verdict::Extends);
        assert_eq!(check(&seen, &chain(&bodies[..4])), Verdict::Same);
        let empty = chain(&[]).head();
        assert_eq!(check(&empty, &chain(&bodies)), Verdict::Extends);
    }

    #[test]
    fn an_edited_record_before_the_seen_head_is_a_rewrite() {
        let bodies: Vec<Digest> = (0..10).map(body).collect();
        let seen = chain(&bodies[..6]).head();
        let mut edited = bodies.clone();
        edited[2] = body(200);
        assert_eq!(check(&seen, &chain(&edited)), Verdict::Rewritten);
        // Same length, different head.
        assert_eq!(check(&seen, &chain(&edited[..6])), Verdict::Rewritten);
    }

    #[test]
    fn a_deleted_record_is_a_rewrite_or_goes_backwards() {
        let bodies: Vec<Digest> = (0..10).map(body).collect();
        let seen = chain(&bodies).head();
        assert_eq!(check(&seen, &chain(&bodies[..7])), Verdict::Backwards);
        let mut deleted = bodies.clone();
        deleted.remove(3);
        deleted.push(body(99));
        assert_eq!(check(&seen, &chain(&deleted)), Verdict::Rewritten);
    }

    #[test]
    fn a_rewrite_padded_past_the_tail_is_never_consistent() {
        let bodies: Vec<Digest> = (0..5).map(body).collect();
        let seen = chain(&bodies).head();
        let padded: Vec<Digest> = (100..=255).chain(0..=200).map(body).collect();
        let verdict = check(&seen, &chain(&padded));
        assert!(
            matches!(verdict, Verdict::Unverifiable { .. }),
            "{verdict:?}"
        );
        assert!(!verdict.is_consistent());
    }

    #[test]
    fn malformed_reports_are_refused() {
        let seen = chain(&[body(1)]).head();
        let mut bad = chain(&[body(1), body(2)]);
        bad.head = "sha256:XYZ".into();
        assert!(matches!(check(&seen, &bad), Verdict::Malformed(_)));
        let mut long = chain(&[body(1), body(2)]);
        long.tail.push(format_digest(&body(3)));
        assert!(matches!(check(&seen, &long), Verdict::Malformed(_)));
    }

    #[test]
    fn digests_round_trip() {
        let d = body(7);
        assert_eq!(parse_digest(&format_digest(&d)), Ok(d));
        assert!(parse_digest("sha256:").is_err());
        assert!(parse_digest(&format_digest(&d).to_uppercase()).is_err());
    }
}
