//! From an upload's bytes to a verified report, or a refusal with a reason.
//!
//! Order matters (THREATS.md T29): the envelope is parsed (size first),
//! the host it names is looked up in the inventory (unknown, revoked:
//! refused), the signature is checked against each key the inventory lists
//! for that host, and only then is any of the report read. Nothing is
//! stored on any refusal.

use axum::http::StatusCode;
use base64::Engine as _;
use converge_format::report::{Report, ReportError, SignedReport};

use crate::inventory::Hosts;

/// A verified report, the exact bytes its host signed and the signature
/// (base64, as uploaded).
#[derive(Debug)]
pub struct Verified {
    pub report: Report,
    pub raw: Vec<u8>,
    pub signature: String,
}

/// Why an upload was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Report(ReportError),
    UnknownHost(String),
    Revoked(String),
    /// A sequence past 2^63 cannot be ordered in the database.
    SequenceOutOfRange(u64),
}

impl Refusal {
    /// The label counted in metrics (see [`crate::metrics::REFUSAL_REASONS`]).
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Report(e) => e.reason(),
            Refusal::UnknownHost(_) => "unknown_host",
            Refusal::Revoked(_) => "revoked",
            Refusal::SequenceOutOfRange(_) => "sequence_out_of_range",
        }
    }

    /// The HTTP status: 413 too large, 403 not this host's key or no such
    /// host, 400 anything else wrong with the bytes.
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::Report(ReportError::TooLarge(_)) => StatusCode::PAYLOAD_TOO_LARGE,
            Refusal::Report(ReportError::BadSignature)
            | Refusal::UnknownHost(_)
            | Refusal::Revoked(_) => StatusCode::FORBIDDEN,
            Refusal::Report(_) | Refusal::SequenceOutOfRange(_) => StatusCode::BAD_REQUEST,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Report(e) => e.fmt(f),
            Refusal::UnknownHost(h) => write!(
                f,
                "host {h:?} is not in the inventory (add the entry `policyvm enroll` printed on it)"
            ),
            Refusal::Revoked(h) => write!(f, "host {h:?} is revoked in the inventory"),
            Refusal::SequenceOutOfRange(n) => {
                write!(f, "the report's sequence {n} is past 2^63")
            }
        }
    }
}

/// Verifies an upload body against the inventory.
pub fn verify(body: &[u8], hosts: &Hosts) -> Result<Verified, Refusal> {
    let envelope = SignedReport::parse(body).map_err(Refusal::Report)?;
    let host = hosts
        .host(&envelope.host)
        .ok_or_else(|| Refusal::UnknownHost(envelope.host.clone()))?;
    if host.revoked {
        return Err(Refusal::Revoked(envelope.host.clone()));
    }
    let mut refusal = Refusal::Report(ReportError::BadSignature);
    for key in host.report_keys() {
        match envelope.open(&key) {
            Ok(report) => return accept(&envelope, report),
            Err(ReportError::BadSignature) => {}
            // Size and encoding problems do not depend on the key.
            Err(e) => {
                refusal = Refusal::Report(e);
                break;
            }
        }
    }
    Err(refusal)
}

fn accept(envelope: &SignedReport, report: Report) -> Result<Verified, Refusal> {
    if i64::try_from(report.sequence).is_err() {
        return Err(Refusal::SequenceOutOfRange(report.sequence));
    }
    // `open` decoded these bytes already; decoding again is cheaper than
    // re-serializing and keeps exactly what the host signed.
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&envelope.report)
        .map_err(|e| Refusal::Report(ReportError::Malformed(e.to_string())))?;
    Ok(Verified {
        report,
        raw,
        signature: envelope.signature.clone(),
    })
}
