//! The read-only fleet endpoints: parse the query, build the view
//! ([`crate::fleet`]), answer JSON. A bad parameter is a 400 saying which
//! and what is expected.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::json::{error, json_response};
use super::{App, DEFAULT_SILENT_INTERVALS};
use crate::fleet;
use crate::metrics::{FleetGauges, METRICS};
use crate::store::StoreError;

fn store_error(e: &StoreError) -> Response {
    tracing::error!("fleet query: {e}");
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the collector's database did not answer; retry later",
    )
}

fn respond<T: serde::Serialize>(result: Result<T, StoreError>) -> Response {
    match result {
        Ok(view) => json_response(StatusCode::OK, &view),
        Err(e) => store_error(&e),
    }
}

pub(super) async fn status(State(app): State<Arc<App>>) -> Response {
    let clock = app.clock(DEFAULT_SILENT_INTERVALS);
    respond(fleet::status(&app.store, &app.inventory.current(), &clock).await)
}

pub(super) async fn hosts(State(app): State<Arc<App>>) -> Response {
    let clock = app.clock(DEFAULT_SILENT_INTERVALS);
    respond(
        fleet::hosts(&app.store, &app.inventory.current(), &clock)
            .await
            .map(|hosts| fleet::host_list(hosts, &clock)),
    )
}

#[derive(Debug, Deserialize)]
pub(super) struct HostQuery {
    recent: Option<i64>,
}

pub(super) async fn host(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Query(query): Query<HostQuery>,
) -> Response {
    let recent = query.recent.unwrap_or(20);
    if !(1..=500).contains(&recent) {
        return error(StatusCode::BAD_REQUEST, "recent must be between 1 and 500");
    }
    let clock = app.clock(DEFAULT_SILENT_INTERVALS);
    match fleet::host_detail(&app.store, &app.inventory.current(), &name, &clock, recent).await {
        Ok(Some(detail)) => json_response(StatusCode::OK, &detail),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            "no such host in the inventory or the reports",
        ),
        Err(e) => store_error(&e),
    }
}

pub(super) async fn failures(State(app): State<Arc<App>>) -> Response {
    let clock = app.clock(DEFAULT_SILENT_INTERVALS);
    respond(fleet::failures(&app.store, &clock).await)
}

#[derive(Debug, Deserialize)]
pub(super) struct ChangesQuery {
    since: Option<String>,
    until: Option<String>,
    host: Option<String>,
    limit: Option<i64>,
}

/// Default window of `/changes`: the last day.
const DEFAULT_CHANGES_WINDOW: i64 = 86_400;

pub(super) async fn changes(
    State(app): State<Arc<App>>,
    Query(query): Query<ChangesQuery>,
) -> Response {
    let now = jiff::Timestamp::now().as_second();
    let since = match parse_time("since", query.since.as_deref()) {
        Ok(t) => t.unwrap_or(now - DEFAULT_CHANGES_WINDOW),
        Err(e) => return error(StatusCode::BAD_REQUEST, &e),
    };
    let until = match parse_time("until", query.until.as_deref()) {
        Ok(t) => t.unwrap_or(now + 1),
        Err(e) => return error(StatusCode::BAD_REQUEST, &e),
    };
    let limit = query.limit.unwrap_or(1_000);
    if !(1..=10_000).contains(&limit) {
        return error(StatusCode::BAD_REQUEST, "limit must be between 1 and 10000");
    }
    respond(fleet::changes(&app.store, since, until, query.host.as_deref(), limit).await)
}

fn parse_time(name: &str, value: Option<&str>) -> Result<Option<i64>, String> {
    let Some(value) = value else { return Ok(None) };
    value
        .parse::<jiff::Timestamp>()
        .map(|t| Some(t.as_second()))
        .map_err(|e| format!("{name}: {e} (expected RFC 3339, e.g. 2026-11-24T00:00:00Z)"))
}

#[derive(Debug, Deserialize)]
pub(super) struct FactsQuery {
    host: Option<String>,
}

pub(super) async fn facts(
    State(app): State<Arc<App>>,
    Query(query): Query<FactsQuery>,
) -> Response {
    respond(fleet::facts(&app.store, &app.inventory.current(), query.host.as_deref()).await)
}

#[derive(Debug, Deserialize)]
pub(super) struct SilentQuery {
    intervals: Option<i64>,
}

pub(super) async fn silent(
    State(app): State<Arc<App>>,
    Query(query): Query<SilentQuery>,
) -> Response {
    let intervals = query.intervals.unwrap_or(DEFAULT_SILENT_INTERVALS);
    if !(1..=100_000).contains(&intervals) {
        return error(
            StatusCode::BAD_REQUEST,
            "intervals must be between 1 and 100000",
        );
    }
    let clock = app.clock(intervals);
    respond(
        fleet::hosts(&app.store, &app.inventory.current(), &clock)
            .await
            .map(|hosts| {
                let silent = hosts.into_iter().filter(|h| h.silent).collect();
                fleet::host_list(silent, &clock)
            }),
    )
}

#[derive(Debug, Deserialize)]
pub(super) struct PromiseQuery {
    #[serde(rename = "type")]
    kind: Option<String>,
    promiser: Option<String>,
}

pub(super) async fn promises(
    State(app): State<Arc<App>>,
    Query(query): Query<PromiseQuery>,
) -> Response {
    let (Some(kind), Some(promiser)) = (query.kind, query.promiser) else {
        return error(
            StatusCode::BAD_REQUEST,
            "give the promise as ?type=TYPE&promiser=PROMISER (e.g. ?type=file&promiser=/etc/motd)",
        );
    };
    let clock = app.clock(DEFAULT_SILENT_INTERVALS);
    respond(
        fleet::promise(
            &app.store,
            &app.inventory.current(),
            &kind,
            &promiser,
            &clock,
        )
        .await,
    )
}

pub(super) async fn tampered(State(app): State<Arc<App>>) -> Response {
    let clock = app.clock(DEFAULT_SILENT_INTERVALS);
    respond(crate::tampered::tampered(&app.store, &clock).await)
}

pub(super) async fn rollout(State(app): State<Arc<App>>) -> Response {
    let clock = app.clock(DEFAULT_SILENT_INTERVALS);
    respond(
        fleet::hosts(&app.store, &app.inventory.current(), &clock)
            .await
            .map(|hosts| crate::rollout::rollout(&hosts, &clock)),
    )
}

pub(super) async fn metrics(State(app): State<Arc<App>>) -> Response {
    let clock = app.clock(DEFAULT_SILENT_INTERVALS);
    let hosts = match fleet::hosts(&app.store, &app.inventory.current(), &clock).await {
        Ok(hosts) => hosts,
        Err(e) => return store_error(&e),
    };
    let tampered_hosts = match app.store.tampered().await {
        Ok(rows) => rows.len() as u64,
        Err(e) => return store_error(&e),
    };
    let gauges = FleetGauges {
        hosts_by_status: fleet::STATUSES
            .iter()
            .map(|s| {
                let n = hosts.iter().filter(|h| h.status == *s).count() as u64;
                ((*s).to_owned(), n)
            })
            .collect(),
        silent_hosts: hosts.iter().filter(|h| h.silent).count() as u64,
        tampered_hosts,
    };
    let mut response = METRICS.render(&gauges).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}
