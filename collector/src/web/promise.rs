//! `/promises?type=&promiser=`: one promise across the fleet, from
//! [`fleet::promise`]: the hosts whose last report repaired, failed or
//! skipped it are listed (with the source location and error they
//! reported); the rest are counted (kept there, or not in that host's
//! policy; or the host never reported).

use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use super::display::shorten;
use super::page::{error, html, store_error};
use crate::api::{App, DEFAULT_SILENT_INTERVALS};
use crate::fleet::{self, PromiseView, KEPT_OR_ABSENT, NEVER};

#[derive(Debug, Deserialize)]
pub(super) struct PromiseQuery {
    #[serde(rename = "type")]
    kind: Option<String>,
    promiser: Option<String>,
}

/// The outcomes, in the order the page lists them, with their labels.
const OUTCOMES: [(&str, &str); 5] = [
    ("failed", "failed"),
    ("repaired", "repaired"),
    ("skipped", "skipped"),
    (KEPT_OR_ABSENT, "kept or not in the policy"),
    (NEVER, "never reported"),
];

pub(super) struct OutcomeCount {
    pub outcome: &'static str,
    pub label: &'static str,
    pub hosts: u64,
}

pub(super) struct HostOutcome {
    pub host: String,
    pub outcome: String,
    pub source: String,
    pub error: String,
}

#[derive(Template)]
#[template(path = "promise.html")]
pub(super) struct PromisePage {
    pub kind: String,
    pub promiser: String,
    pub counts: Vec<OutcomeCount>,
    /// Hosts whose last report lists the promise, worst outcome first.
    pub hosts: Vec<HostOutcome>,
}

pub(super) async fn page(
    State(app): State<Arc<App>>,
    Query(query): Query<PromiseQuery>,
) -> Response {
    let (Some(kind), Some(promiser)) = (query.kind, query.promiser) else {
        return error(
            StatusCode::BAD_REQUEST,
            "Which promise?",
            "Give the promise as /promises?type=TYPE&promiser=PROMISER \
             (e.g. ?type=file&promiser=/etc/motd); the host and overview pages link here.",
        );
    };
    let clock = app.clock(DEFAULT_SILENT_INTERVALS);
    match fleet::promise(
        &app.store,
        &app.inventory.current(),
        &kind,
        &promiser,
        &clock,
    )
    .await
    {
        Ok(view) => html(StatusCode::OK, &promise_page(&view)),
        Err(e) => store_error(&e),
    }
}

fn promise_page(view: &PromiseView) -> PromisePage {
    let mut hosts: Vec<HostOutcome> = view
        .hosts
        .iter()
        .filter(|h| h.outcome != KEPT_OR_ABSENT && h.outcome != NEVER)
        .map(|h| HostOutcome {
            host: h.host.clone(),
            outcome: h.outcome.clone(),
            source: h.source.as_deref().map(shorten).unwrap_or_default(),
            error: h.error.as_deref().map(shorten).unwrap_or_default(),
        })
        .collect();
    let order = |o: &str| {
        OUTCOMES
            .iter()
            .position(|(k, _)| *k == o)
            .unwrap_or(OUTCOMES.len())
    };
    hosts.sort_by(|a, b| {
        order(&a.outcome)
            .cmp(&order(&b.outcome))
            .then(a.host.cmp(&b.host))
    });
    PromisePage {
        kind: shorten(&view.kind),
        promiser: shorten(&view.promiser),
        counts: OUTCOMES
            .iter()
            .map(|(outcome, label)| OutcomeCount {
                outcome,
                label,
                hosts: view.counts.get(*outcome).copied().unwrap_or(0),
            })
            .collect(),
        hosts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::PromiseOnHost;

    #[test]
    fn listed_hosts_worst_first_and_the_rest_counted() {
        let on = |host: &str, outcome: &str| PromiseOnHost {
            host: host.into(),
            outcome: outcome.into(),
            source: (outcome != KEPT_OR_ABSENT).then(|| "site.policy:1:1".into()),
            error: None,
        };
        let view = PromiseView {
            format: fleet::FLEET_FORMAT,
            kind: "file".into(),
            promiser: "'; DROP TABLE reports; --".into(),
            counts: [("failed", 1), ("repaired", 1), (KEPT_OR_ABSENT, 2)]
                .iter()
                .map(|(k, n)| ((*k).to_owned(), *n))
                .collect(),
            hosts: vec![
                on("a", "repaired"),
                on("b", KEPT_OR_ABSENT),
                on("c", "failed"),
                on("d", KEPT_OR_ABSENT),
            ],
        };
        let page = promise_page(&view);
        let listed: Vec<(&str, &str)> = page
            .hosts
            .iter()
            .map(|h| (h.host.as_str(), h.outcome.as_str()))
            .collect();
        assert_eq!(listed, vec![("c", "failed"), ("a", "repaired")]);
        let counts: Vec<u64> = page.counts.iter().map(|c| c.hosts).collect();
        assert_eq!(counts, vec![1, 1, 0, 2, 0]);
        let text = page.render().unwrap();
        assert!(
            text.contains("<span class=\"promiser\" id=\"promise-promiser\">&#39;; DROP TABLE reports; --</span>"),
            "{text}"
        );
    }
}
