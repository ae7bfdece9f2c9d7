//! The uploaded run report (`converge-report/1`): what `policyvm agent`
//! signs with the host key and POSTs to `converge-collector`, and what the
//! collector verifies against the inventory before it stores a byte.
//!
//! One representation on both sides: the agent builds a [`Report`], signs
//! its JSON bytes ([`SignedReport::sign`]); the collector opens the
//! envelope ([`SignedReport::open`]) with the key the inventory lists for
//! the host the envelope names. The signature covers the exact bytes that
//! are parsed, under a domain-separation prefix, so a bundle or stamp
//! signature can never pass for a report signature, nor the reverse.
//!
//! Replays: every report carries a random `run_id` and a `sequence` that
//! the host increases by one per run (kept in its state directory). The
//! collector stores a `(host, run_id)` once and never lets a lower
//! sequence overwrite a higher one.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use serde::{Deserialize, Serialize};

/// The value of [`Report::format`]; a collector refuses any other.
pub const REPORT_FORMAT: &str = "converge-report/1";

/// The [`Report::extensions`] key of two-way verification (LANGUAGE.md
/// section 17, Bcfg2's "extra entries"): `{"counts": {TYPE: N},
/// "entries": [{"type", "name", "action", "source"}]}`, names escaped; the
/// entries are cut first when a report is too large, the counts stay.
pub const EXTRA_EXTENSION: &str = "extra";

/// Prepended to the report bytes before signing (domain separation).
pub const SIGNING_CONTEXT: &[u8] = b"converge report v1\0";

/// The extension (`"dry_run": true`) of the report of an audit, `policyvm
/// agent --dry-run`: what the run would have changed, none of it done. A
/// collector stores it apart from the host's real runs.
pub const DRY_RUN_EXTENSION: &str = "dry_run";

impl Report {
    /// Whether this is the report of a dry run ([`DRY_RUN_EXTENSION`]).
    pub fn is_dry_run(&self) -> bool {
        self.extensions.get(DRY_RUN_EXTENSION) == Some(&serde_json::Value::Bool(true))
    }
}

/// The largest report a collector accepts and an agent sends (the JSON
/// bytes, before base64). A run with more to say is cut by the agent (see
/// [`Report::truncated`]), never refused whole.
pub const MAX_REPORT_BYTES: usize = 4 * 1024 * 1024;

/// The largest envelope body (base64 grows by 4/3, plus the other fields).
pub const MAX_ENVELOPE_BYTES: usize = MAX_REPORT_BYTES / 3 * 4 + 64 * 1024;

/// What a run came to, worst first wins: `refused` (no bundle could be
/// trusted, nothing ran), `failed` (a promise failed), `repaired`
/// (something was changed), `kept` (nothing needed changing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Kept,
    Repaired,
    Failed,
    Refused,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Kept => "kept",
            Status::Repaired => "repaired",
            Status::Failed => "failed",
            Status::Refused => "refused",
        }
    }
}

/// One agent cycle, as the collector stores it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`REPORT_FORMAT`].
    pub format: String,
    /// The host's name in the inventory (not necessarily its hostname).
    pub host: String,
    /// 32 lowercase hex digits, random per run.
    pub run_id: String,
    /// Increases by one per run on this host; survives restarts.
    pub sequence: u64,
    /// RFC 3339, UTC (`2026-11-24T01:02:03Z`).
    pub started_at: String,
    pub finished_at: String,
    pub status: Status,
    /// The bundle that ran; `None` when none could be trusted.
    pub bundle: Option<BundleRef>,
    pub summary: Summary,
    /// Every promise that was not kept (repaired, failed, skipped), with its
    /// policy source location. Kept promises are only counted.
    pub promises: Vec<PromiseResult>,
    pub owed_notifications: Vec<OwedNotification>,
    pub facts: Facts,
    pub timings: Timings,
    /// Why nothing ran (`status = refused`), or another run-level problem.
    pub error: Option<String>,
    /// The agent dropped promises or diffs to stay under
    /// [`MAX_REPORT_BYTES`]; the summary still counts everything.
    #[serde(default)]
    pub truncated: bool,
    /// Sections added by later issues (`watch` history heads, …) live here
    /// under their own key, so this version can carry them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extensions: BTreeMap<String, serde_json::Value>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleRef {
    pub name: String,
    pub serial: u64,
    /// SHA-256 of the bundle file, lowercase hex.
    pub digest: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub kept: u64,
    pub repaired: u64,
    pub failed: u64,
    pub skipped: u64,
    pub unmanaged: u64,
    pub owed_notifications: u64,
    pub passes: u32,
    pub converged: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromiseResult {
    /// The promise type (`file`, `package`, …).
    #[serde(rename = "type")]
    pub kind: String,
    pub promiser: String,
    /// `repaired`, `failed` or `skipped`.
    pub outcome: String,
    /// `file:line:col` in the policy.
    pub source: String,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub changes: Vec<Change>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub what: String,
    pub before: String,
    pub after: String,
    #[serde(default)]
    pub diff: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwedNotification {
    #[serde(rename = "type")]
    pub kind: String,
    pub promiser: String,
    pub notified_by: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    /// `sys.*` facts by name without the prefix (`hostname`, `os_family`, …).
    pub sys: BTreeMap<String, serde_json::Value>,
    /// Probe facts (`facts.*`) by name.
    #[serde(default)]
    pub probes: BTreeMap<String, ProbeFact>,
    /// The classes that were set.
    #[serde(default)]
    pub classes: Vec<String>,
}

/// A probe's value, or why it is unknown.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeFact {
    pub value: Option<serde_json::Value>,
    pub error: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    /// Fetching the stamp (and the bundle when it changed); 0 without a hub.
    pub pull_ms: u64,
    /// Running probes and converging.
    pub run_ms: u64,
    pub total_ms: u64,
}

/// The HTTP body of an upload: the report bytes and their signature.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedReport {
    /// The inventory name whose key signed (must equal the report's `host`).
    pub host: String,
    /// Base64 (standard, padded) of the report's JSON bytes.
    pub report: String,
    /// Base64 of the Ed25519 signature over
    /// [`SIGNING_CONTEXT`] followed by the report's JSON bytes.
    pub signature: String,
}

/// Why an envelope was refused; [`ReportError::reason`] is the label the
/// collector counts refusals by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportError {
    TooLarge(usize),
    Malformed(String),
    BadSignature,
    WrongFormat(String),
    HostMismatch { envelope: String, report: String },
}

impl ReportError {
    /// A short, stable label (`too_large`, `malformed`, `bad_signature`,
    /// `wrong_format`, `host_mismatch`) for metrics and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            ReportError::TooLarge(_) => "too_large",
            ReportError::Malformed(_) => "malformed",
            ReportError::BadSignature => "bad_signature",
            ReportError::WrongFormat(_) => "wrong_format",
            ReportError::HostMismatch { .. } => "host_mismatch",
        }
    }
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::TooLarge(n) => write!(
                f,
                "the report is {n} bytes, more than the {MAX_REPORT_BYTES} accepted"
            ),
            ReportError::Malformed(e) => write!(f, "the report is malformed: {e}"),
            ReportError::BadSignature => f.write_str(
                "the signature does not match the host's key in the inventory \
                 (forged, corrupted, or signed by a key not enrolled)",
            ),
            ReportError::WrongFormat(v) => write!(
                f,
                "the report says format {v:?}; this collector reads {REPORT_FORMAT:?}"
            ),
            ReportError::HostMismatch { envelope, report } => write!(
                f,
                "the envelope names host {envelope:?} but the report is for {report:?}"
            ),
        }
    }
}

impl std::error::Error for ReportError {}

impl Report {
    /// The report's JSON bytes, as signed and sent.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serializing plain structs of strings, numbers and JSON values
        // cannot fail; an empty body would be refused by the collector.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

fn signed_message(report: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(SIGNING_CONTEXT.len().saturating_add(report.len()));
    message.extend_from_slice(SIGNING_CONTEXT);
    message.extend_from_slice(report);
    message
}

impl SignedReport {
    /// Signs `report` with the host key.
    pub fn sign(report: &Report, key: &SigningKey) -> SignedReport {
        let bytes = report.to_bytes();
        let signature = key.sign(&signed_message(&bytes));
        SignedReport {
            host: report.host.clone(),
            report: STANDARD.encode(&bytes),
            signature: STANDARD.encode(signature.to_bytes()),
        }
    }

    /// Parses an HTTP body into an envelope (size checked first).
    pub fn parse(body: &[u8]) -> Result<SignedReport, ReportError> {
        if body.len() > MAX_ENVELOPE_BYTES {
            return Err(ReportError::TooLarge(body.len()));
        }
        serde_json::from_slice(body).map_err(|e| ReportError::Malformed(e.to_string()))
    }

    /// Checks the signature with `key` (the inventory's key for
    /// [`SignedReport::host`]), then parses the signed bytes. Nothing of the
    /// report is read before the signature holds.
    pub fn open(&self, key: &VerifyingKey) -> Result<Report, ReportError> {
        let bytes = STANDARD
            .decode(&self.report)
            .map_err(|e| ReportError::Malformed(format!("report is not base64: {e}")))?;
        if bytes.len() > MAX_REPORT_BYTES {
            return Err(ReportError::TooLarge(bytes.len()));
        }
        let signature = STANDARD
            .decode(&self.signature)
            .ok()
            .and_then(|s| <[u8; 64]>::try_from(s.as_slice()).ok())
            .ok_or(ReportError::BadSignature)?;
        key.verify(&signed_message(&bytes), &Signature::from_bytes(&signature))
            .map_err(|_| ReportError::BadSignature)?;
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| ReportError::Malformed(e.to_string()))?;
        match value.get("format").and_then(|f| f.as_str()) {
            Some(REPORT_FORMAT) => {}
            other => {
                return Err(ReportError::WrongFormat(
                    other.unwrap_or("(none)").to_owned(),
                ))
            }
        }
        let report: Report =
            serde_json::from_value(value).map_err(|e| ReportError::Malformed(e.to_string()))?;
        if report.host != self.host {
            return Err(ReportError::HostMismatch {
                envelope: self.host.clone(),
                report: report.host,
            });
        }
        if !is_run_id(&report.run_id) {
            return Err(ReportError::Malformed(
                "run_id must be 32 lowercase hex digits".to_owned(),
            ));
        }
        Ok(report)
    }
}

/// Whether `s` is a run id: 32 lowercase hex digits.
pub fn is_run_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report {
            format: REPORT_FORMAT.to_owned(),
            host: "web-01".to_owned(),
            run_id: "0123456789abcdef0123456789abcdef".to_owned(),
            sequence: 7,
            started_at: "2026-11-24T01:00:00Z".to_owned(),
            finished_at: "2026-11-24T01:00:01Z".to_owned(),
            status: Status::Repaired,
            bundle: Some(BundleRef {
                name: "site".to_owned(),
                serial: 3,
                digest: "ab".repeat(32),
            }),
            summary: Summary {
                kept: 19,
                repaired: 1,
                passes: 2,
                converged: true,
                ..Summary::default()
            },
            promises: vec![PromiseResult {
                kind: "file".to_owned(),
                promiser: "/etc/motd".to_owned(),
                outcome: "repaired".to_owned(),
                source: "site.policy:3:5".to_owned(),
                error: None,
                changes: vec![],
            }],
            owed_notifications: vec![],
            facts: Facts::default(),
            timings: Timings::default(),
            error: None,
            truncated: false,
            extensions: BTreeMap::new(),
        }
    }

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    #[test]
    fn a_signed_report_opens_with_the_hosts_key() {
        let signed = SignedReport::sign(&report(), &key(1));
        let body = serde_json::to_vec(&signed).unwrap_or_default();
        let parsed = SignedReport::parse(&body);
        assert_eq!(
            parsed.and_then(|s| s.open(&key(1).verifying_key())),
            Ok(report())
        );
    }

    #[test]
    fn another_key_a_changed_byte_or_a_changed_host_is_refused() {
        let signed = SignedReport::sign(&report(), &key(1));
        assert_eq!(
            signed.open(&key(2).verifying_key()),
            Err(ReportError::BadSignature)
        );
        let mut bytes = STANDARD.decode(&signed.report).unwrap_or_default();
        if let Some(b) = bytes.iter_mut().find(|b| **b == b'7') {
            *b = b'8';
        }
        let tampered = SignedReport {
            report: STANDARD.encode(&bytes),
            ..signed.clone()
        };
        assert_eq!(
            tampered.open(&key(1).verifying_key()),
            Err(ReportError::BadSignature)
        );
        let renamed = SignedReport {
            host: "db-01".to_owned(),
            ..signed
        };
        assert_eq!(
            renamed
                .open(&key(1).verifying_key())
                .map_err(|e| e.reason()),
            Err("host_mismatch")
        );
    }

    #[test]
    fn an_oversized_body_is_refused_before_parsing() {
        let body = vec![b' '; MAX_ENVELOPE_BYTES + 1];
        assert_eq!(
            SignedReport::parse(&body).map_err(|e| e.reason()),
            Err("too_large")
        );
    }

    #[test]
    fn a_report_of_another_format_is_refused_by_name() {
        let mut r = report();
        r.format = "converge-report/9".to_owned();
        let signed = SignedReport::sign(&r, &key(1));
        assert_eq!(
            signed.open(&key(1).verifying_key()).map_err(|e| e.reason()),
            Err("wrong_format")
        );
    }
}
