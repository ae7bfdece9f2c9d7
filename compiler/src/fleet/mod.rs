//! `policyc fleet`: the fleet as the collector (`converge-collector`)
//! sees it, from its JSON API (docs/fleet.md, "policyc fleet"): hosts by
//! status, failing promises, changes, facts, silent hosts, hosts whose
//! watch history was tampered with.
//!
//! [`curl`] fetches (policyc links no HTTP stack), [`views`] reads the
//! answers (`converge-fleet/1`, checked before anything is shown) and
//! [`tables`] draws them for people. `--format json` prints the
//! collector's answer itself, once it is known to be a view of the kind
//! asked for.

pub mod curl;
pub mod tables;
pub mod views;

use serde::de::DeserializeOwned;

use converge_format::stamp::time::{format_utc, parse_duration, parse_utc};
use curl::{Client, FetchError};

/// What to ask the collector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    /// Hosts by status, and how many are silent.
    Status,
    /// Every host: status, last report's age, bundle serial.
    Hosts,
    /// Failing promises of the hosts' last reports, with their hosts.
    Failures,
    /// Changes in a window (`since`: RFC 3339, the collector's default
    /// window when `None`), of one host or all.
    Changes {
        since: Option<String>,
        host: Option<String>,
    },
    /// Inventory, `sys` and probe facts, of one host or all.
    Facts { host: Option<String> },
    /// Hosts without a report for more than `intervals` run intervals.
    Silent { intervals: Option<u32> },
    /// One host: its recent runs and what its last report did not keep.
    /// The name is an inventory host name (checked by the caller), so it
    /// goes into the path as it is.
    Host { name: String },
    /// One promise across the hosts' last reports.
    Promise { kind: String, promiser: String },
    /// Hosts whose watch history failed the collector's cross-check.
    Tampered,
    /// The serial of every host and the failure rate per serial (a
    /// staged rollout: docs/rollout.md).
    Rollout,
}

/// Why `policyc fleet` has nothing to show.
#[derive(Debug, PartialEq, Eq)]
pub enum FleetError {
    /// The request failed: curl, the network, or an HTTP error.
    Fetch(FetchError),
    /// The collector answered, but not with the view asked for.
    NotAView { url: String, reason: String },
}

impl std::fmt::Display for FleetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FleetError::Fetch(e) => write!(f, "{e}"),
            FleetError::NotAView { url, reason } => {
                write!(f, "{url}: {}", tables::clean(reason))
            }
        }
    }
}

/// `--since`: a duration back from `now` (`90m`, `1h`, `7d`) or a time in
/// RFC 3339 (`2026-11-24T00:00:00Z`, `2026-11-24T01:00:00+01:00`), as the
/// RFC 3339 the collector takes.
pub fn since(text: &str, now: u64) -> Result<String, String> {
    if let Ok(seconds) = parse_duration(text) {
        return Ok(format_utc(now.saturating_sub(seconds)));
    }
    if is_rfc3339(text) {
        return Ok(text.to_owned());
    }
    Err(format!(
        "`--since {text}`: give a duration back from now (`30m`, `1h`, `7d`) or a time in RFC 3339 (`2026-11-24T00:00:00Z`)"
    ))
}

/// `YYYY-MM-DDTHH:MM:SS`, optional fractional seconds, then `Z` or
/// `+HH:MM`/`-HH:MM`.
fn is_rfc3339(text: &str) -> bool {
    let (Some(head), Some(mut rest)) = (text.get(..19), text.get(19..)) else {
        return false;
    };
    if parse_utc(&format!("{head}Z")).is_none() {
        return false;
    }
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        rest = fraction.get(digits..).unwrap_or_default();
    }
    let offset = |o: &str| {
        let b = o.as_bytes();
        b.len() == 5
            && b.get(2) == Some(&b':')
            && o.get(..2)
                .and_then(|h| h.parse::<u8>().ok())
                .is_some_and(|h| h < 24)
            && o.get(3..)
                .and_then(|m| m.parse::<u8>().ok())
                .is_some_and(|m| m < 60)
    };
    rest == "Z" || rest.strip_prefix(['+', '-']).is_some_and(offset)
}

impl Query {
    /// The API path and query parameters.
    pub fn request(&self) -> (String, Vec<(&'static str, String)>) {
        let (path, query) = match self {
            Query::Status => ("status".to_owned(), Vec::new()),
            Query::Hosts => ("hosts".to_owned(), Vec::new()),
            Query::Host { name } => (format!("hosts/{name}"), Vec::new()),
            Query::Failures => ("failures".to_owned(), Vec::new()),
            Query::Tampered => ("tampered".to_owned(), Vec::new()),
            Query::Rollout => ("rollout".to_owned(), Vec::new()),
            Query::Promise { kind, promiser } => (
                "promises".to_owned(),
                vec![("type", kind.clone()), ("promiser", promiser.clone())],
            ),
            Query::Changes { since, host } => {
                let mut q = Vec::new();
                if let Some(s) = since {
                    q.push(("since", s.clone()));
                }
                if let Some(h) = host {
                    q.push(("host", h.clone()));
                }
                ("changes".to_owned(), q)
            }
            Query::Facts { host } => (
                "facts".to_owned(),
                host.iter().map(|h| ("host", h.clone())).collect(),
            ),
            Query::Silent { intervals } => (
                "silent".to_owned(),
                intervals
                    .iter()
                    .map(|n| ("intervals", n.to_string()))
                    .collect(),
            ),
        };
        (format!("/api/v1/{path}"), query)
    }
}

/// Asks the collector and returns what to print: a table, or with `json`
/// the collector's answer itself (checked to be the view asked for).
pub fn run(client: &Client, query: &Query, json: bool) -> Result<String, FleetError> {
    let (path, params) = query.request();
    let body = client.get(&path, &params).map_err(FleetError::Fetch)?;
    let url = client.url(&path);
    let text = match query {
        Query::Status => tables::status(&view(&url, &body)?),
        Query::Hosts => tables::hosts(&view(&url, &body)?),
        Query::Failures => tables::failures(&view(&url, &body)?),
        Query::Changes { .. } => tables::changes(&view(&url, &body)?),
        Query::Facts { .. } => tables::facts(&view(&url, &body)?),
        Query::Host { .. } => tables::host(&view(&url, &body)?),
        Query::Promise { .. } => tables::promise(&view(&url, &body)?),
        Query::Tampered => tables::tampered(&view(&url, &body)?),
        Query::Rollout => tables::rollout(&view(&url, &body)?),
        Query::Silent { .. } => {
            let list: views::HostList = view(&url, &body)?;
            format!(
                "{} silent: no report for more than {}\n{}",
                list.hosts.len(),
                tables::age(list.silent_after_seconds),
                if list.hosts.is_empty() {
                    String::new()
                } else {
                    tables::hosts(&list)
                }
            )
        }
    };
    if json {
        let mut raw = String::from_utf8_lossy(&body).into_owned();
        raw.push('\n');
        return Ok(raw);
    }
    Ok(text)
}

fn view<T: DeserializeOwned>(url: &str, body: &[u8]) -> Result<T, FleetError> {
    views::parse(body).map_err(|e| FleetError::NotAView {
        url: url.to_owned(),
        reason: e.0,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn since_takes_a_duration_or_a_time() {
        let now = 1_764_000_000;
        assert_eq!(since("1h", now).unwrap(), format_utc(now - 3_600));
        assert_eq!(since("7d", now).unwrap(), format_utc(now - 7 * 86_400));
        for ok in [
            "2026-11-24T00:00:00Z",
            "2026-11-24T00:00:00.5Z",
            "2026-11-24T01:00:00+01:00",
            "2026-11-24T01:00:00-05:30",
        ] {
            assert_eq!(since(ok, now).unwrap(), ok);
        }
        for bad in [
            "yesterday",
            "2026-11-24",
            "2026-13-01T00:00:00Z",
            "2026-11-24T00:00:00+1:00",
            "",
        ] {
            assert!(since(bad, now).unwrap_err().contains("RFC 3339"), "{bad}");
        }
    }

    #[test]
    fn each_query_asks_its_endpoint() {
        let q = Query::Changes {
            since: Some("2026-11-24T00:00:00Z".into()),
            host: Some("web-01".into()),
        };
        assert_eq!(
            q.request(),
            (
                "/api/v1/changes".to_owned(),
                vec![
                    ("since", "2026-11-24T00:00:00Z".to_owned()),
                    ("host", "web-01".to_owned())
                ]
            )
        );
        assert_eq!(
            Query::Silent { intervals: Some(5) }.request(),
            (
                "/api/v1/silent".to_owned(),
                vec![("intervals", "5".to_owned())]
            )
        );
        assert_eq!(
            Query::Tampered.request(),
            ("/api/v1/tampered".to_owned(), vec![])
        );
        assert_eq!(
            Query::Rollout.request(),
            ("/api/v1/rollout".to_owned(), vec![])
        );
        assert_eq!(
            Query::Status.request(),
            ("/api/v1/status".to_owned(), vec![])
        );
        assert_eq!(
            Query::Host {
                name: "web-01".into()
            }
            .request(),
            ("/api/v1/hosts/web-01".to_owned(), vec![])
        );
    }
}
