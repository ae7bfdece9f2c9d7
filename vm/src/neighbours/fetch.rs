//! Before a run, the agent fetches the latest signed report of each host
//! the previous run watched (`neighbours/wanted`) from the first collector
//! that answers: `GET COLLECTOR/api/v1/hosts/NAME/report/latest`, signed
//! with this host's report key ([`converge_format::fetch_auth`]: the
//! agent has no bearer token). What it stores is checked by the run, with
//! the neighbour's key from the bundle; the collector is not trusted.
//!
//! A collector that is down, slow or answers nothing usable leaves the
//! stored report as it was: the run then sees the same report again
//! (`same`), or none yet (`unavailable`), never an alarm. All fetches
//! share the upload's time budget and each answer is bounded by
//! [`MAX_ENVELOPE_BYTES`].

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use converge_format::fetch_auth;
use converge_format::inventory::is_host_name;
use converge_format::report::MAX_ENVELOPE_BYTES;

use super::{DIR, WANTED};
use crate::identity::HostIdentity;
use crate::pull::fetch::http_agent;
use crate::state::StateDir;
use crate::upload::UploadConfig;

/// The most hosts one cycle fetches (a `wanted` file is written by the
/// VM, but bounded all the same).
const MAX_HOSTS: usize = 64;

/// What a fetch did, for standard error.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Fetched {
    /// Hosts whose report was stored.
    pub stored: Vec<String>,
    /// `NAME: why` for each host whose report could not be fetched
    /// (status `unavailable`, not an alarm).
    pub unavailable: Vec<String>,
}

/// The path of a host's latest report on a collector.
pub fn latest_path(host: &str) -> String {
    format!("/api/v1/hosts/{host}/report/latest")
}

/// Fetches the reports of the hosts in `neighbours/wanted`. Never fails:
/// what could not be fetched is listed.
pub fn fetch(config: &UploadConfig, state: &StateDir, identity: &HostIdentity) -> Fetched {
    let mut out = Fetched::default();
    if config.collectors.is_empty() || !state.has(DIR) {
        return out;
    }
    let dir = match state.subdir(DIR, 0o700) {
        Ok(dir) => dir,
        Err(e) => {
            out.unavailable
                .push(format!("{}: {e}", state.path(DIR).display()));
            return out;
        }
    };
    let wanted = match dir.read(WANTED, MAX_HOSTS.saturating_mul(256)) {
        Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        Ok(None) => return out,
        Err(e) => {
            out.unavailable
                .push(format!("{}: {e}", dir.path(WANTED).display()));
            return out;
        }
    };
    let agent = match http_agent(&config.http) {
        Ok(agent) => agent,
        Err(e) => {
            out.unavailable.push(e);
            return out;
        }
    };
    let deadline = Instant::now()
        .checked_add(config.http.timeout)
        .unwrap_or_else(Instant::now);
    let mut down = vec![false; config.collectors.len()];
    for host in wanted.lines().filter(|h| is_host_name(h)).take(MAX_HOSTS) {
        let mut why = "no collector answered".to_owned();
        let mut stored = false;
        for (i, base) in config.collectors.iter().enumerate() {
            if down.get(i).copied().unwrap_or(true) {
                continue;
            }
            match get(&agent, base, host, identity, deadline) {
                Ok(body) => {
                    match dir.write(&format!("{host}.report"), &body, 0o600) {
                        Ok(()) => stored = true,
                        Err(e) => why = format!("cannot store it: {e}"),
                    }
                    break;
                }
                Err(Failure::Down(e)) => {
                    if let Some(d) = down.get_mut(i) {
                        *d = true;
                    }
                    why = e;
                }
                Err(Failure::NotThere(e)) => {
                    why = e;
                    break;
                }
            }
        }
        if stored {
            out.stored.push(host.to_owned());
        } else {
            out.unavailable.push(format!("{host}: {why}"));
        }
    }
    out
}

enum Failure {
    /// The collector is unreachable or failing: try the next one.
    Down(String),
    /// The collector answered that it has no such report (or refused us).
    NotThere(String),
}

fn get(
    agent: &ureq::Agent,
    base: &str,
    host: &str,
    identity: &HostIdentity,
    deadline: Instant,
) -> Result<Vec<u8>, Failure> {
    let path = latest_path(host);
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let remaining = deadline.saturating_duration_since(Instant::now());
    if remaining < Duration::from_millis(1) {
        return Err(Failure::Down(format!("{url}: the time budget is spent")));
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let signature = fetch_auth::sign(&identity.name, &identity.report_key, &path, now);
    let sent = agent
        .get(&url)
        .header(fetch_auth::HEADER, &signature)
        .config()
        .timeout_global(Some(remaining))
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .call();
    let mut response = sent.map_err(|e| Failure::Down(format!("{url}: {e}")))?;
    let status = response.status().as_u16();
    let limit = u64::try_from(MAX_ENVELOPE_BYTES).unwrap_or(u64::MAX);
    match status {
        200 => response
            .body_mut()
            .with_config()
            .limit(limit)
            .read_to_vec()
            .map_err(|e| Failure::Down(format!("{url}: {e}"))),
        401 | 403 | 404 => Err(Failure::NotThere(format!("{url}: HTTP {status}"))),
        _ => Err(Failure::Down(format!("{url}: HTTP {status}"))),
    }
}
