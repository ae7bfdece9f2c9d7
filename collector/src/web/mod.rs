//! The fleet dashboard: server-rendered HTML pages over the same views the
//! JSON API serializes ([`crate::fleet`]), so a page and `/api/v1/…`
//! always agree. See docs/fleet.md, "Dashboard".
//!
//! - `/`: hosts by status with counts, every host with its status and the
//!   age of its last report, silent hosts, failing promises
//!   ([`overview`]);
//! - `/hosts/{name}`: the last report, its failures with their policy
//!   source locations, recent reports and changes, facts ([`host`]);
//! - `/promises?type=&promiser=`: which hosts repair, fail or skip one
//!   promise ([`promise`]).
//!
//! Report text is hostile (T28): every value goes through askama's HTML
//! escaping (templates in `collector/templates/`, `.html`, so escaping is
//! on by default and no template marks a value `|safe`). The pages carry no
//! script at all and are served with a Content-Security-Policy that allows
//! only this origin's style sheet, so even markup that slipped through
//! could run nothing. Who may read them is the API's rule (T31): the
//! routes sit behind the same token check (`api/auth.rs`). No GET changes
//! state.

mod display;
mod host;
mod overview;
mod page;
mod promise;

use std::sync::Arc;

use axum::http::{header, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::api::App;

/// The Content-Security-Policy of every page: resources from this origin
/// only (the style sheet), no script from anywhere (none is inline and
/// `'unsafe-inline'` is not granted), no framing, no `<base>` rewriting,
/// forms post only here.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

/// The dashboard's routes, with the headers every page carries. The caller
/// adds authentication (the API's read rule).
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/", get(overview::page))
        .route("/hosts/{name}", get(host::page))
        .route("/promises", get(promise::page))
        .route("/static/style.css", get(style_sheet))
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            HeaderName::from_static("x-frame-options"),
            HeaderValue::from_static("DENY"),
        ))
}

/// The one style sheet, compiled in (a static file, so the CSP needs no
/// `'unsafe-inline'`).
const STYLE_SHEET: &str = include_str!("../../static/style.css");

async fn style_sheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        STYLE_SHEET,
    )
        .into_response()
}
