//! GET requests to the collector through `curl`, run as a child process.
//!
//! Why curl: `policyc` links no HTTP or TLS stack (ARCHITECTURE.md; checked
//! by `tests/architecture.rs`), and curl brings what a client of a real
//! collector needs: TLS with the system's or a given CA, proxies from the
//! environment (`https_proxy`, `no_proxy`), client certificates. It runs
//! from an argv (never a shell), with `-q` first so no `~/.curlrc` changes
//! what it does, only `http` and `https`, a deadline, and bounded output.
//! The bearer token goes in on curl's standard input (`-H @-`), never on its
//! command line, where `ps` would show it to every user of the machine.

use std::ffi::OsString;
use std::io::{Read, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The largest answer read; a longer one is refused.
pub const MAX_ANSWER_BYTES: u64 = 64 << 20;

/// What curl's standard error is read up to.
const MAX_STDERR_BYTES: u64 = 64 << 10;

/// How much longer than curl's own `--max-time` policyc waits before it
/// kills curl.
const GRACE: Duration = Duration::from_secs(5);

/// Where the collector is and how to reach it.
#[derive(Clone, Debug)]
pub struct Client {
    /// `http://host:port` or `https://...`, without a trailing `/`.
    pub base: String,
    /// `--ca-file`: the CA that signed the collector's certificate.
    pub ca_file: Option<PathBuf>,
    /// `--token-file`'s token (one line of printable ASCII).
    pub token: Option<String>,
    /// Seconds for the whole request.
    pub timeout: u64,
    /// The program to run (`curl`).
    pub program: OsString,
}

/// Why a request gave no view.
#[derive(Debug, PartialEq, Eq)]
pub enum FetchError {
    /// curl is not installed.
    CurlMissing,
    /// curl could not be started for another reason.
    CannotRun(String),
    /// No answer: the name does not resolve, the connection is refused or
    /// times out, TLS fails. `detail` is curl's own message.
    Unreachable { url: String, detail: String },
    /// The collector answered with an HTTP error; `message` is the `error`
    /// of its JSON answer, when it has one.
    Http {
        url: String,
        status: u16,
        message: Option<String>,
    },
    /// The answer is larger than [`MAX_ANSWER_BYTES`].
    TooLarge { url: String },
    /// curl's output is not an answer (no status code).
    Garbled { url: String },
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::CurlMissing => write!(
                f,
                "`policyc fleet` runs `curl` to reach the collector, and curl is not installed (apt-get install curl)"
            ),
            FetchError::CannotRun(e) => write!(f, "cannot run curl: {e}"),
            FetchError::Unreachable { url, detail } => {
                write!(f, "cannot reach the collector at {url}: {detail}")?;
                if detail.contains("certificate") || detail.contains("SSL") {
                    write!(f, " (pass the CA that signed its certificate with --ca-file)")?;
                }
                Ok(())
            }
            FetchError::Http {
                url,
                status,
                message,
            } => {
                write!(f, "the collector answered {status} to {url}")?;
                if let Some(message) = message {
                    write!(f, ": {}", crate::fleet::tables::clean(message))?;
                }
                if *status == 401 {
                    write!(f, " (pass the collector's read token with --token-file)")?;
                }
                Ok(())
            }
            FetchError::TooLarge { url } => write!(
                f,
                "the answer of {url} is larger than {} MiB; refused",
                MAX_ANSWER_BYTES >> 20
            ),
            FetchError::Garbled { url } => {
                write!(f, "curl gave no HTTP status for {url}; is it a converge-collector?")
            }
        }
    }
}

impl Client {
    /// The URL of `path` (`/api/v1/status`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// curl's arguments for `GET path?query`: every value is a separate
    /// argument, the query is URL-encoded by curl (`-G --data-urlencode`).
    pub fn argv(&self, path: &str, query: &[(&str, String)]) -> Vec<OsString> {
        let mut args: Vec<OsString> = [
            "-q",
            "--silent",
            "--show-error",
            "--fail-with-body",
            "--proto",
            "=http,https",
            "--proto-redir",
            "=http,https",
            "--max-time",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        args.push(self.timeout.to_string().into());
        args.push("--connect-timeout".into());
        args.push(self.timeout.clamp(1, 10).to_string().into());
        args.push("--max-filesize".into());
        args.push(MAX_ANSWER_BYTES.to_string().into());
        args.push("--header".into());
        args.push("Accept: application/json".into());
        if let Some(ca) = &self.ca_file {
            args.push("--cacert".into());
            args.push(ca.clone().into_os_string());
        }
        if self.token.is_some() {
            // The header line is written to curl's standard input.
            args.push("--header".into());
            args.push("@-".into());
        }
        args.push("--write-out".into());
        args.push("\n%{http_code}".into());
        if !query.is_empty() {
            args.push("--get".into());
            for (name, value) in query {
                args.push("--data-urlencode".into());
                args.push(format!("{name}={value}").into());
            }
        }
        args.push("--url".into());
        args.push(self.url(path).into());
        args
    }

    /// `GET path?query`: the body of a 2xx answer.
    pub fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Vec<u8>, FetchError> {
        let url = self.url(path);
        let mut child = Command::new(&self.program)
            .args(self.argv(path, query))
            .stdin(if self.token.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => FetchError::CurlMissing,
                _ => FetchError::CannotRun(e.to_string()),
            })?;
        if let (Some(token), Some(mut stdin)) = (&self.token, child.stdin.take()) {
            // A write error means curl exited early; its status says why.
            let _ = stdin.write_all(format!("Authorization: Bearer {token}\n").as_bytes());
        }
        let stdout = child
            .stdout
            .take()
            .map(|s| read_bounded(s, MAX_ANSWER_BYTES));
        let stderr = child
            .stderr
            .take()
            .map(|s| read_bounded(s, MAX_STDERR_BYTES));
        let deadline = Instant::now() + Duration::from_secs(self.timeout) + GRACE;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let (out, too_large) = stdout.map(join).unwrap_or_default();
        let (err, _) = stderr.map(join).unwrap_or_default();
        if too_large {
            return Err(FetchError::TooLarge { url });
        }
        let Some(status) = status else {
            return Err(FetchError::Unreachable {
                url,
                detail: format!("no answer within {} s", self.timeout),
            });
        };
        let (body, code) = split_status(&out).ok_or(FetchError::Garbled { url: url.clone() })?;
        match status.code() {
            Some(0) if (200..300).contains(&code) => Ok(body.to_vec()),
            Some(0) | Some(22) if code >= 300 => Err(FetchError::Http {
                url,
                status: code,
                message: error_message(body),
            }),
            _ => Err(FetchError::Unreachable {
                url,
                detail: curl_message(&err, status.code()),
            }),
        }
    }
}

/// Reads `source` on a thread, up to `limit` bytes; the flag says the
/// source had more (reading then stops, so the writer gets a broken pipe).
fn read_bounded(
    source: impl Read + Send + 'static,
    limit: u64,
) -> std::thread::JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut limited = source.take(limit.saturating_add(1));
        let _ = limited.read_to_end(&mut buf);
        let over = buf.len() as u64 > limit;
        buf.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        (buf, over)
    })
}

fn join(handle: std::thread::JoinHandle<(Vec<u8>, bool)>) -> (Vec<u8>, bool) {
    handle.join().unwrap_or_default()
}

/// The body and the status code `--write-out "\n%{http_code}"` appended.
fn split_status(out: &[u8]) -> Option<(&[u8], u16)> {
    let at = out.iter().rposition(|b| *b == b'\n')?;
    let code = std::str::from_utf8(out.get(at + 1..)?)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some((out.get(..at)?, code))
}

/// The `error` of the collector's JSON error answer.
fn error_message(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    value.get("error")?.as_str().map(str::to_owned)
}

/// curl's message (its last line on standard error), or its exit code.
fn curl_message(stderr: &[u8], code: Option<i32>) -> String {
    let text = String::from_utf8_lossy(stderr);
    match text.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(line) => crate::fleet::tables::clean(line.trim()),
        None => match code {
            Some(code) => format!("curl exited with status {code}"),
            None => "curl was killed by a signal".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn client(token: Option<&str>) -> Client {
        Client {
            base: "https://collector.example:8470".to_owned(),
            ca_file: Some(PathBuf::from("/etc/converge/ca.pem")),
            token: token.map(str::to_owned),
            timeout: 30,
            program: "curl".into(),
        }
    }

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_token_is_never_on_the_command_line() {
        let args = strings(&client(Some("s3cret-token")).argv("/api/v1/status", &[]));
        assert!(args.iter().all(|a| !a.contains("s3cret")), "{args:?}");
        let at = args.iter().position(|a| a == "@-").unwrap();
        assert_eq!(args[at - 1], "--header");
        assert_eq!(args.first().map(String::as_str), Some("-q"), "no ~/.curlrc");
    }

    #[test]
    fn only_http_and_https_within_a_deadline_with_the_ca() {
        let args = strings(&client(None).argv("/api/v1/status", &[]));
        let after = |flag: &str| {
            let at = args.iter().position(|a| a == flag).unwrap();
            args[at + 1].clone()
        };
        assert_eq!(after("--proto"), "=http,https");
        assert_eq!(after("--max-time"), "30");
        assert_eq!(after("--cacert"), "/etc/converge/ca.pem");
        assert_eq!(
            after("--url"),
            "https://collector.example:8470/api/v1/status"
        );
        assert!(!args.contains(&"@-".to_owned()));
        assert!(!args.contains(&"--get".to_owned()));
    }

    #[test]
    fn query_values_are_separate_arguments_encoded_by_curl() {
        let args = strings(&client(None).argv(
            "/api/v1/changes",
            &[
                ("since", "2026-11-24T00:00:00Z".to_owned()),
                ("host", "a b&c".to_owned()),
            ],
        ));
        assert!(args.contains(&"--get".to_owned()));
        assert!(args.contains(&"since=2026-11-24T00:00:00Z".to_owned()));
        assert!(args.contains(&"host=a b&c".to_owned()));
    }

    #[test]
    fn the_status_code_is_split_from_the_body() {
        assert_eq!(
            split_status(b"{\"a\":1}\n200"),
            Some((&b"{\"a\":1}"[..], 200))
        );
        assert_eq!(
            split_status(b"line\nmore\n404"),
            Some((&b"line\nmore"[..], 404))
        );
        assert_eq!(split_status(b"no code"), None);
        assert_eq!(
            error_message(br#"{"error":"no such host"}"#).as_deref(),
            Some("no such host")
        );
    }

    #[test]
    fn a_missing_curl_says_to_install_it() {
        let mut c = client(None);
        c.program = "/nonexistent/curl".into();
        let err = c.get("/api/v1/status", &[]).unwrap_err();
        assert_eq!(err, FetchError::CurlMissing);
        assert!(err.to_string().contains("apt-get install curl"));
    }
}
