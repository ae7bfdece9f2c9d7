//! `POST /api/v1/reports`: verify, then store.
//!
//! Answers: 201 `{"stored":true}`; 200 `{"stored":false,"reason":"duplicate"|"older"}`;
//! 4xx `{"stored":false,"reason":…,"error":…}` for a refusal (the reasons
//! of [`crate::ingest::Refusal::reason`]); 503 `database_error` when the
//! database fails (the agent keeps the report spooled and retries).

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::json;

use super::json::json_response;
use super::App;
use crate::ingest::{self, Refusal};
use crate::metrics::METRICS;
use crate::store::IngestOutcome;

/// What became of an upload, for [`account`] to count.
#[derive(Clone, Copy, Debug)]
struct Outcome(&'static str);

pub(super) async fn upload(
    State(app): State<Arc<App>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let reason = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                "too_large"
            } else {
                "malformed"
            };
            tracing::warn!(reason, "report refused: {}", rejection.body_text());
            return answer(
                rejection.status(),
                reason,
                json!({"stored": false, "reason": reason, "error": rejection.body_text()}),
            );
        }
    };
    let hosts = app.inventory.current();
    let verified = match ingest::verify(&body, &hosts) {
        Ok(verified) => verified,
        Err(refusal) => return refuse(&refusal),
    };
    let received_at = jiff::Timestamp::now().as_second();
    match app
        .store
        .ingest_signed(
            &verified.report,
            &verified.raw,
            Some(&verified.signature),
            received_at,
        )
        .await
    {
        Ok(IngestOutcome::Stored) => answer(StatusCode::CREATED, "stored", json!({"stored": true})),
        Ok(outcome) => {
            let reason = outcome.reason().unwrap_or("duplicate");
            tracing::info!(
                host = verified.report.host,
                run_id = verified.report.run_id,
                sequence = verified.report.sequence,
                reason,
                "report not stored"
            );
            answer(
                StatusCode::OK,
                reason,
                json!({"stored": false, "reason": reason}),
            )
        }
        Err(e) => {
            tracing::error!(host = verified.report.host, "storing a report: {e}");
            answer(
                StatusCode::SERVICE_UNAVAILABLE,
                "database_error",
                json!({"stored": false, "reason": "database_error", "error": "the collector cannot store reports right now; retry later"}),
            )
        }
    }
}

fn refuse(refusal: &Refusal) -> Response {
    let reason = refusal.reason();
    // `{:?}` on the host name: it is the sender's text, so it is logged
    // escaped, on one line.
    let host = match refusal {
        Refusal::UnknownHost(h) | Refusal::Revoked(h) => Some(truncated(h)),
        _ => None,
    };
    tracing::warn!(reason, host = ?host, "report refused: {}", truncated(&refusal.to_string()));
    answer(
        refusal.status(),
        reason,
        json!({"stored": false, "reason": reason, "error": refusal.to_string()}),
    )
}

fn truncated(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", text.get(..at).unwrap_or_default()),
        None => text.to_owned(),
    }
}

fn answer(status: StatusCode, outcome: &'static str, body: serde_json::Value) -> Response {
    let mut response = json_response(status, &body);
    response.extensions_mut().insert(Outcome(outcome));
    response
}

/// Counts every upload by outcome and times it; a body refused by the
/// size cap before the handler ran (413 from the body limit) counts as
/// `too_large`.
pub(super) async fn account(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let response = next.run(request).await;
    let outcome = match response.extensions().get::<Outcome>() {
        Some(Outcome(o)) => *o,
        None if response.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            tracing::warn!(reason = "too_large", "report refused by the body cap");
            "too_large"
        }
        None => "",
    };
    match outcome {
        "stored" => METRICS.ingested(),
        "duplicate" | "older" => METRICS.ignored(outcome),
        "" => {}
        reason => METRICS.refused(reason),
    }
    METRICS.observe_ingest(started.elapsed());
    response
}
