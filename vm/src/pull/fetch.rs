//! Getting bytes from a hub: HTTP and HTTPS through `ureq` (blocking, no
//! async runtime), with every request bounded in time, size and redirects.
//!
//! The transport is untrusted (THREATS.md: a mirror, a CDN, the network may
//! all lie); these bounds only keep a hostile server from hanging the agent
//! or filling its memory (T6 endless data, T7 slow retrieval). Trust comes
//! from the signatures checked afterwards, never from TLS.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ureq::tls::{Certificate, RootCerts, TlsConfig};

/// Where a pull reads the stamp and the bundle from. The protocol in
/// [`super::pull`] is written against this, so it is tested without a
/// network as well as against a real server.
pub trait Source {
    /// The URL (or other name) of `file`, for messages.
    fn locate(&self, file: &str) -> String;
    /// The whole of `file`, if it is at most `limit` bytes long.
    fn get(&self, file: &str, limit: u64) -> Result<Vec<u8>, FetchError>;
    /// `file` as a stream (a stored blob, issue 22 item 5), which the
    /// caller stops reading past `limit` bytes; by default [`Source::get`]
    /// of one byte more (which tells "more" from "exactly").
    fn reader(&self, file: &str, limit: u64) -> Result<Box<dyn Read + '_>, FetchError> {
        let bytes = self.get(file, limit.saturating_add(1))?;
        Ok(Box::new(std::io::Cursor::new(bytes)))
    }
}

/// Why a file could not be fetched. None of these says anything about the
/// policy: the hub, a mirror or the network failed, and what the host has
/// stays in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchError {
    /// No answer, a broken connection, a TLS failure, a timeout, too many
    /// redirects.
    Unreachable { url: String, reason: String },
    /// The server answered with an HTTP error status.
    Status { url: String, status: u16 },
    /// The server sent more than `limit` bytes (or says it will).
    TooLong { url: String, limit: u64 },
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Unreachable { url, reason } => write!(f, "cannot fetch {url}: {reason}"),
            FetchError::Status { url, status: 404 } => write!(
                f,
                "{url}: HTTP 404 Not Found; is a bundle published under that name?"
            ),
            FetchError::Status { url, status } => write!(f, "{url}: HTTP status {status}"),
            FetchError::TooLong { url, limit } => write!(
                f,
                "{url} sends more than {limit} bytes; stopped reading there"
            ),
        }
    }
}

/// Bounds on every request of one pull.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// From the start of a request to the last byte of its body. A server
    /// that trickles one byte a second is cut off here.
    pub timeout: Duration,
    /// Redirects followed per request.
    pub max_redirects: u32,
    /// PEM file of the certificate authorities for HTTPS hubs, instead of
    /// the built-in WebPKI roots (a private hub's own CA).
    pub ca_file: Option<std::path::PathBuf>,
    /// An HTTP proxy (`http://proxy:3128`); none when unset. The
    /// environment's `http_proxy` is ignored: what the agent connects to is
    /// in its configuration file, nowhere else.
    pub proxy: Option<String>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            timeout: Duration::from_secs(60),
            max_redirects: 3,
            ca_file: None,
            proxy: None,
        }
    }
}

/// A hub (or mirror) at a base URL: files are `BASE/NAME.stamp` and
/// `BASE/NAME.bundle`.
#[derive(Debug)]
pub struct HttpSource {
    base: String,
    agent: ureq::Agent,
}

impl HttpSource {
    /// A source for `base` (`http://` or `https://`). Fails on another
    /// scheme, an unreadable CA file or a malformed proxy URL.
    pub fn new(base: &str, options: &HttpOptions) -> Result<HttpSource, String> {
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(format!(
                "`{base}` is not an http:// or https:// URL; hubs are reached over HTTP(S) only"
            ));
        }
        let agent = http_agent(options)?;
        Ok(HttpSource {
            base: base.trim_end_matches('/').to_owned(),
            agent,
        })
    }
}

/// The one HTTP client builder of the agent, for pulls and report uploads
/// alike: the CA file and proxy of the configuration, `options.timeout`
/// from the start of a request to its last byte, and `policyvm/VERSION` as
/// the user agent. Fails on an unreadable CA file or a malformed proxy URL.
pub fn http_agent(options: &HttpOptions) -> Result<ureq::Agent, String> {
    let mut tls = TlsConfig::builder();
    if let Some(path) = &options.ca_file {
        tls = tls.root_certs(RootCerts::Specific(Arc::new(read_ca_file(path)?)));
    }
    let proxy = match &options.proxy {
        Some(url) => {
            Some(ureq::Proxy::new(url).map_err(|e| format!("invalid proxy `{url}`: {e}"))?)
        }
        None => None,
    };
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(options.timeout))
        .max_redirects(options.max_redirects)
        .http_status_as_error(true)
        .proxy(proxy)
        .user_agent(format!("policyvm/{}", crate::VERSION))
        .tls_config(tls.build())
        .build();
    Ok(config.into())
}

fn read_ca_file(path: &Path) -> Result<Vec<Certificate<'static>>, String> {
    let pem = std::fs::read(path)
        .map_err(|e| format!("cannot read the CA file `{}`: {e}", path.display()))?;
    let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(format!(
            "the CA file `{}` holds no PEM certificate",
            path.display()
        ));
    }
    Ok(certs)
}

impl Source for HttpSource {
    fn locate(&self, file: &str) -> String {
        format!("{}/{file}", self.base)
    }

    fn reader(&self, file: &str, _limit: u64) -> Result<Box<dyn Read + '_>, FetchError> {
        let url = self.locate(file);
        match self.agent.get(&url).call() {
            // Streamed as it arrives: the caller bounds and verifies it.
            Ok(response) => Ok(Box::new(response.into_body().into_reader())),
            Err(ureq::Error::StatusCode(status)) => Err(FetchError::Status { url, status }),
            Err(e) => Err(FetchError::Unreachable {
                url,
                reason: e.to_string(),
            }),
        }
    }

    fn get(&self, file: &str, limit: u64) -> Result<Vec<u8>, FetchError> {
        let url = self.locate(file);
        let unreachable = |reason: String| FetchError::Unreachable {
            url: url.clone(),
            reason,
        };
        let mut response = match self.agent.get(&url).call() {
            Ok(r) => r,
            Err(ureq::Error::StatusCode(status)) => {
                return Err(FetchError::Status { url, status });
            }
            Err(e) => return Err(unreachable(e.to_string())),
        };
        // One byte past the limit tells "exactly at the limit" from "more";
        // nothing is allocated ahead of what the server actually sends.
        let mut body = Vec::new();
        response
            .body_mut()
            .as_reader()
            .take(limit.saturating_add(1))
            .read_to_end(&mut body)
            .map_err(|e| unreachable(e.to_string()))?;
        if body.len() as u64 > limit {
            return Err(FetchError::TooLong { url, limit });
        }
        Ok(body)
    }
}
