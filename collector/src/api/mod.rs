//! The HTTP API: `POST /api/v1/reports` (the agents), the read-only fleet
//! queries under `/api/v1/`, a host's latest signed report for its
//! neighbours ([`latest`]), `/metrics`, and the dashboard pages
//! ([`crate::web`], behind the same read rule). See docs/fleet.md.
//!
//! Layers, outermost first: a concurrency limit (requests wait, then time
//! out), a whole-request timeout (a body trickled slowly cannot hold a
//! slot past it), `X-Content-Type-Options: nosniff`; the upload route adds
//! the body cap before anything reads the body; the read routes add the
//! bearer token check when a token is configured. No GET changes state.

mod auth;
mod json;
mod latest;
mod read;
mod reports;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware;
use axum::routing::{get, post};
use axum::Router;
use converge_format::report::MAX_ENVELOPE_BYTES;
use tower::limit::ConcurrencyLimitLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;

use crate::fleet::Clock;
use crate::inventory::InventoryFile;
use crate::store::Store;

pub use json::json_response;

/// What every handler shares.
#[derive(Debug)]
pub struct App {
    pub store: Store,
    pub inventory: InventoryFile,
    /// The agents' run interval in seconds (`--interval`).
    pub interval: i64,
    /// The bearer token read endpoints require, when set (`--token-file`).
    pub token: Option<String>,
}

/// How many intervals without a report make a host silent, unless a
/// request says otherwise.
pub const DEFAULT_SILENT_INTERVALS: i64 = 3;

impl App {
    /// The clock for views built now.
    pub fn clock(&self, intervals: i64) -> Clock {
        Clock {
            now: jiff::Timestamp::now().as_second(),
            interval: self.interval,
            intervals,
        }
    }
}

/// Limits of the HTTP layer (T30).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Requests handled at once; more wait for a slot.
    pub concurrent_requests: usize,
    /// From the request's headers to the end of its answer.
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            concurrent_requests: 256,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// The collector's routes.
pub fn router(app: Arc<App>, limits: Limits) -> Router {
    let reads = Router::new()
        .route("/api/v1/status", get(read::status))
        .route("/api/v1/hosts", get(read::hosts))
        .route("/api/v1/hosts/{name}", get(read::host))
        .route("/api/v1/failures", get(read::failures))
        .route("/api/v1/changes", get(read::changes))
        .route("/api/v1/facts", get(read::facts))
        .route("/api/v1/silent", get(read::silent))
        .route("/api/v1/promises", get(read::promises))
        .route("/api/v1/tampered", get(read::tampered))
        .route("/api/v1/rollout", get(read::rollout))
        .route("/metrics", get(read::metrics))
        .merge(crate::web::routes())
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&app),
            auth::require_token,
        ));
    // A neighbour's latest report: the operator's token, or an enrolled
    // host's signed request (the agents have no token).
    let neighbour = Router::new()
        .route(
            "/api/v1/hosts/{name}/report/latest",
            get(latest::latest_report),
        )
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&app),
            auth::require_token_or_host,
        ));
    let upload = Router::new()
        .route("/api/v1/reports", post(reports::upload))
        .layer(RequestBodyLimitLayer::new(MAX_ENVELOPE_BYTES))
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn(reports::account));
    Router::new()
        .merge(reads)
        .merge(neighbour)
        .merge(upload)
        .fallback(not_found)
        .with_state(app)
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            limits.request_timeout,
        ))
        .layer(ConcurrencyLimitLayer::new(limits.concurrent_requests))
}

async fn not_found() -> axum::response::Response {
    json::error(
        StatusCode::NOT_FOUND,
        "no such endpoint (see docs/fleet.md)",
    )
}
