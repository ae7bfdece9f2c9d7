//! `GET /api/v1/hosts/{name}/report/latest`: a host's latest stored report
//! as it was uploaded (a `SignedReport` envelope: the signed bytes and
//! their signature), for its neighbours to verify with the host's own key
//! (docs/fleet.md, "Neighbour watch"). The collector only relays it: a
//! neighbour trusts the signature, never the collector.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use converge_format::report::SignedReport;

use super::json::{error, json_response};
use super::App;

pub(super) async fn latest_report(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> Response {
    match app.store.latest_signed(&name).await {
        Ok(Some((raw, signature))) => json_response(
            StatusCode::OK,
            &SignedReport {
                host: name,
                report: STANDARD.encode(raw),
                signature,
            },
        ),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            "no signed report of this host is stored (it never reported, or only before this collector kept signatures)",
        ),
        Err(e) => {
            tracing::error!("latest report: {e}");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the collector's database did not answer; retry later",
            )
        }
    }
}
