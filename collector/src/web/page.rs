//! Rendering a page, and the pages for what went wrong (unknown host, bad
//! query, database down): HTML like the others, with the same headers.

use askama::Template;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::store::StoreError;

/// `page` rendered as an HTML answer with `status`.
pub(super) fn html<T: Template>(status: StatusCode, page: &T) -> Response {
    match page.render() {
        Ok(body) => (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            body,
        )
            .into_response(),
        Err(e) => {
            tracing::error!("dashboard: cannot render a page: {e}");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "the dashboard could not render this page (see the collector's log)",
            )
                .into_response()
        }
    }
}

#[derive(Template)]
#[template(path = "error.html")]
pub(super) struct ErrorPage<'a> {
    pub title: &'a str,
    pub message: &'a str,
}

/// An error page: what went wrong and what to do, with a link home.
pub(super) fn error(status: StatusCode, title: &str, message: &str) -> Response {
    html(status, &ErrorPage { title, message })
}

/// The page for a database that did not answer.
pub(super) fn store_error(e: &StoreError) -> Response {
    tracing::error!("dashboard query: {e}");
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "Database unavailable",
        "The collector's database did not answer; reload the page later.",
    )
}
