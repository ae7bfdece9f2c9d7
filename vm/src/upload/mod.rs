//! Uploading signed run reports to `converge-collector` (issue 18 item 4):
//! `POST COLLECTOR/api/v1/reports` with the JSON of a
//! `converge_format::report::SignedReport`.
//!
//! After the run (its report on disk, its exit code decided), the agent
//! sends what the spool holds, oldest first, then the new report; what no
//! collector takes is spooled ([`spool`]). Collectors are tried in order;
//! the first that answers decides:
//!
//! - 2xx: stored, or already stored / older (uploads are idempotent by
//!   host and run id): the report leaves the spool;
//! - 4xx with the collector's refusal (JSON with a `reason`: unknown or
//!   revoked host, bad signature, ...): it never will be accepted, so it
//!   leaves the spool too, with a warning naming the collector's reason,
//!   and is counted;
//! - 5xx, 407, 408, 429, any other 4xx (a web server's 404 at a mistyped
//!   URL), a redirect, no connection, a timeout: kept, sent again next
//!   cycle. Sending stops at the first report no collector took, so order
//!   is kept.
//!
//! The whole upload has one time budget (`upload_timeout`, 5 s by
//! default): a collector that is down or slow costs at most that, never
//! the run, never the exit code. The agent still listens on no port.

pub mod report;
pub mod sequence;
pub mod spool;

use std::time::{Duration, Instant};

use crate::pull::fetch::{http_agent, HttpOptions};
use crate::state::StateDir;
use spool::{Limits, Spool};

/// Where and how reports are uploaded (`agent.toml`).
#[derive(Clone, Debug, Default)]
pub struct UploadConfig {
    /// Base URLs, tried in order.
    pub collectors: Vec<String>,
    /// The CA file and proxy of pulls; `timeout` is the budget of the whole
    /// upload.
    pub http: HttpOptions,
    pub limits: Limits,
}

/// What an upload did, for the metrics and standard error.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Reports a collector took (2xx).
    pub sent: u64,
    /// Reports a collector refused for good (4xx).
    pub refused: u64,
    /// Reports dropped from a full spool (or unreadable there).
    pub dropped: u64,
    /// Reports waiting in the spool afterwards.
    pub spooled: u64,
    pub warnings: Vec<String>,
}

/// A collector's answer to one report.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Taken,
    /// Never to be accepted: the collector's reason.
    Refused(String),
    /// Try again later: why not now.
    Retry(String),
}

/// The path under a collector's base URL that takes reports.
pub const REPORTS_PATH: &str = "/api/v1/reports";

/// The largest answer read from a collector.
const MAX_ANSWER: u64 = 64 * 1024;

struct Sender<'a> {
    agent: ureq::Agent,
    collectors: &'a [String],
    /// Collectors that failed this cycle are not tried again in it.
    down: Vec<bool>,
    deadline: Instant,
}

impl Sender<'_> {
    fn send(&mut self, body: &[u8]) -> Answer {
        let mut last = "no collector is configured".to_owned();
        for (i, base) in self.collectors.iter().enumerate() {
            if self.down.get(i).copied().unwrap_or(true) {
                continue;
            }
            match post(&self.agent, base, body, self.deadline) {
                Answer::Retry(why) => {
                    if let Some(d) = self.down.get_mut(i) {
                        *d = true;
                    }
                    last = why;
                }
                answer => return answer,
            }
        }
        Answer::Retry(last)
    }
}

fn post(agent: &ureq::Agent, base: &str, body: &[u8], deadline: Instant) -> Answer {
    let url = format!("{}{REPORTS_PATH}", base.trim_end_matches('/'));
    let remaining = deadline.saturating_duration_since(Instant::now());
    if remaining < Duration::from_millis(1) {
        return Answer::Retry(format!("{url}: the upload's time budget is spent"));
    }
    let sent = agent
        .post(&url)
        .header("Content-Type", "application/json")
        .config()
        .timeout_global(Some(remaining))
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .send(body);
    let mut response = match sent {
        Ok(r) => r,
        Err(e) => return Answer::Retry(format!("{url}: {e}")),
    };
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER)
        .read_to_string()
        .unwrap_or_default();
    classify(&url, status, &text)
}

/// What a collector's answer means for the report. A 4xx is a refusal for
/// good only when it is the collector's own (a JSON body with a `reason`):
/// a 404 page from a web server at a mistyped URL, a proxy's 407, a 408 or
/// a 429 (rate limiting) are "later", so a configuration mistake or a busy
/// collector never throws reports away.
fn classify(url: &str, status: u16, body: &str) -> Answer {
    match status {
        200..=299 => Answer::Taken,
        407 | 408 | 429 => Answer::Retry(format!("{url}: HTTP {status}")),
        400..=499 => match refusal(body) {
            Some(why) => Answer::Refused(format!("{url}: HTTP {status}: {why}")),
            None => Answer::Retry(format!(
                "{url}: HTTP {status} without a collector's refusal (is this the URL of a \
                 converge-collector?): {}",
                printable_start(body)
            )),
        },
        _ => Answer::Retry(format!("{url}: HTTP {status}")),
    }
}

/// The collector's reason in a refusal body (`{"error": ..., "reason":
/// ...}`); `None` when the body is not one.
fn refusal(body: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let field = |k: &str| value.get(k).and_then(|v| v.as_str()).map(printable_start);
    let reason = field("reason")?;
    Some(match field("error") {
        Some(error) => format!("{reason}: {error}"),
        None => reason,
    })
}

/// The first 200 characters of text from the network, control characters
/// escaped.
fn printable_start(text: &str) -> String {
    crate::rootfs::printable(text.chars().take(200).collect::<String>().trim()).into_owned()
}

/// Sends the spool, then `body` (the new report, `sequence`/`run_id`),
/// spooling whatever no collector takes. Never fails: every problem is a
/// warning in the result.
pub fn deliver(
    config: &UploadConfig,
    state: &StateDir,
    sequence: u64,
    run_id: &str,
    body: &[u8],
) -> Delivery {
    let mut d = Delivery::default();
    let spool = match Spool::open(state, config.limits) {
        Ok(s) => s,
        Err(e) => {
            d.warnings.push(format!(
                "warning: cannot open the report spool `{}`: {e}; this run's report is lost",
                state.path(spool::SPOOL).display()
            ));
            return d;
        }
    };
    let now = Instant::now();
    let mut sender = match http_agent(&config.http) {
        Ok(agent) => Some(Sender {
            agent,
            collectors: &config.collectors,
            down: vec![false; config.collectors.len()],
            // The configuration bounds the timeout (at most 5 minutes).
            deadline: now.checked_add(config.http.timeout).unwrap_or(now),
        }),
        Err(e) => {
            d.warnings
                .push(format!("warning: cannot upload reports: {e}"));
            None
        }
    };
    let mut blocked = None;
    if let Some(sender) = sender.as_mut().filter(|_| !config.collectors.is_empty()) {
        for name in spool.pending().unwrap_or_default() {
            let Ok(Some(spooled)) = spool.read(&name) else {
                // Unreadable (a link, too large): it can never be sent.
                let _ = spool.remove(&name);
                d.dropped = d.dropped.saturating_add(1);
                continue;
            };
            match sender.send(&spooled) {
                Answer::Retry(why) => {
                    blocked = Some(why);
                    break;
                }
                answer => {
                    d.count(answer, &format!("spooled report {name}"));
                    if let Err(e) = spool.remove(&name) {
                        d.warnings.push(format!(
                            "warning: cannot remove the sent report {name} from the spool: {e}"
                        ));
                    }
                }
            }
        }
        if blocked.is_none() {
            match sender.send(body) {
                Answer::Retry(why) => blocked = Some(why),
                answer => d.count(answer, &format!("report {sequence}")),
            }
        }
    } else {
        blocked = Some("no collector is configured".to_owned());
    }
    if let Some(why) = blocked {
        match spool.add(sequence, run_id, body) {
            Ok(dropped) => d.dropped = d.dropped.saturating_add(dropped),
            Err(e) => d.warnings.push(format!(
                "warning: cannot spool report {sequence}: {e}; it is lost"
            )),
        }
        if !config.collectors.is_empty() {
            d.warnings.push(format!(
                "warning: no collector took the report; spooled for the next run ({why})"
            ));
        }
    }
    d.spooled = spool.pending().map_or(0, |p| p.len() as u64);
    d
}

impl Delivery {
    fn count(&mut self, answer: Answer, what: &str) {
        match answer {
            Answer::Taken => self.sent = self.sent.saturating_add(1),
            Answer::Refused(why) => {
                self.refused = self.refused.saturating_add(1);
                self.warnings.push(format!(
                    "warning: the collector refused {what} for good, dropped: {why} \
                     (is this host in the inventory, with the key `policyvm enroll` printed, \
                     and not revoked?)"
                ));
            }
            Answer::Retry(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_collectors_own_refusal_drops_a_report() {
        let url = "http://c/api/v1/reports";
        assert_eq!(
            classify(
                url,
                403,
                r#"{"error":"host web-9 is revoked","reason":"revoked"}"#
            ),
            Answer::Refused(format!("{url}: HTTP 403: revoked: host web-9 is revoked"))
        );
        assert_eq!(
            classify(url, 400, r#"{"reason":"bad\u001b[31m"}"#),
            Answer::Refused(format!("{url}: HTTP 400: bad\\u{{1b}}[31m"))
        );
        assert_eq!(
            classify(url, 200, r#"{"stored":false,"reason":"duplicate"}"#),
            Answer::Taken
        );
        assert_eq!(classify(url, 204, ""), Answer::Taken);
        for (status, body) in [
            (404, "<html>Not Found</html>"),
            (405, ""),
            (407, r#"{"reason":"proxy"}"#),
            (408, r#"{"reason":"slow"}"#),
            (429, r#"{"reason":"busy"}"#),
            (500, r#"{"reason":"db down"}"#),
            (503, ""),
            (301, ""),
        ] {
            assert!(
                matches!(classify(url, status, body), Answer::Retry(_)),
                "{status} {body}"
            );
        }
    }

    #[test]
    fn a_spent_budget_is_a_retry_not_a_wait() {
        let agent = http_agent(&HttpOptions::default()).unwrap();
        let answer = post(&agent, "http://127.0.0.1:9", b"{}", Instant::now());
        assert!(
            matches!(answer, Answer::Retry(ref w) if w.contains("budget")),
            "{answer:?}"
        );
    }
}
