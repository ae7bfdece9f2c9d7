//! Who may read the fleet (T31): when the collector has a token
//! (`--token-file`), every read endpoint and `/metrics` require
//! `Authorization: Bearer <token>`. Uploads need none: their signature is
//! their authentication.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use converge_format::fetch_auth;

use super::App;

pub(super) async fn require_token(
    State(app): State<Arc<App>>,
    request: Request,
    next: Next,
) -> Response {
    if has_token(&app, &request) {
        return next.run(request).await;
    }
    unauthorized()
}

/// The rule of a neighbour's latest report (docs/security.md, "Neighbour
/// watch"): the operator's token as for every read, or a request signed
/// by an enrolled, unrevoked host's report key
/// ([`converge_format::fetch_auth`]). The report is signed by its host and
/// holds what the fleet API shows of it; the agents have no token.
pub(super) async fn require_token_or_host(
    State(app): State<Arc<App>>,
    request: Request,
    next: Next,
) -> Response {
    if has_token(&app, &request) || signed_by_a_host(&app, &request) {
        return next.run(request).await;
    }
    unauthorized()
}

/// Whether no token is configured or the request carries it.
fn has_token(app: &App, request: &Request) -> bool {
    let Some(token) = &app.token else {
        return true;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    given.is_some_and(|g| same(g.as_bytes(), token.as_bytes()))
}

fn signed_by_a_host(app: &App, request: &Request) -> bool {
    let Some(signed) = request
        .headers()
        .get(fetch_auth::HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(fetch_auth::HostSignature::parse)
    else {
        return false;
    };
    let hosts = app.inventory.current();
    let Some(host) = hosts.host(&signed.host) else {
        return false;
    };
    let now = jiff::Timestamp::now().as_second();
    signed.verify(&host.report_keys(), request.uri().path(), now)
}

fn unauthorized() -> Response {
    let mut response = super::json::error(
        StatusCode::UNAUTHORIZED,
        "this collector requires `Authorization: Bearer <token>` (the token in its --token-file)",
    );
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Compares without an early exit, so the time taken says nothing of how
/// much of the token was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_compare_whole() {
        assert!(super::same(b"abc", b"abc"));
        assert!(!super::same(b"abc", b"abd"));
        assert!(!super::same(b"abc", b"abcd"));
    }
}
