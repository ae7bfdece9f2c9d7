//! `serve`'s options, checked before anything starts: a bad value is an
//! error naming the option and what to give instead.

use std::path::Path;
use std::time::Duration;

use crate::cli::ServeArgs;

/// The checked settings `serve` runs with.
#[derive(Debug)]
pub struct ServeConfig {
    /// Seconds between agent runs.
    pub interval: i64,
    /// The read endpoints' bearer token.
    pub token: Option<String>,
    pub header_timeout: Duration,
    pub request_timeout: Duration,
}

/// Checks `args`: the interval parses, the token file holds a token, and a
/// non-loopback address has a token (T31).
pub fn check(args: &ServeArgs) -> Result<ServeConfig, String> {
    let interval = parse_seconds("--interval", &args.interval)?;
    let header_timeout = parse_seconds("--header-timeout", &args.header_timeout)?;
    let request_timeout = parse_seconds("--request-timeout", &args.request_timeout)?;
    let token = args.token_file.as_deref().map(read_token).transpose()?;
    if !args.listen.ip().is_loopback() && token.is_none() {
        return Err(format!(
            "--listen {}: the fleet API shows every host's failures and facts, so it is \
             served beyond loopback only with --token-file (readers send \
             `Authorization: Bearer <token>`)",
            args.listen
        ));
    }
    Ok(ServeConfig {
        interval,
        token,
        header_timeout: Duration::from_secs(header_timeout.unsigned_abs()),
        request_timeout: Duration::from_secs(request_timeout.unsigned_abs()),
    })
}

/// The value of `option`: `300s`, `5m`, `1h 30m`, or ISO 8601 (`PT5M`),
/// in whole seconds >= 1.
pub fn parse_seconds(option: &str, text: &str) -> Result<i64, String> {
    let duration: jiff::SignedDuration = text
        .parse()
        .map_err(|e| format!("{option} {text:?}: {e} (give e.g. `300s` or `5m`)"))?;
    let seconds = duration.as_secs();
    if seconds < 1 {
        return Err(format!("{option} {text:?}: must be at least one second"));
    }
    Ok(seconds)
}

fn read_token(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--token-file {}: {e}", path.display()))?;
    let token = text.trim();
    if token.len() < 16 || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "--token-file {}: the token must be one line of at least 16 characters without \
             spaces (e.g. `openssl rand -hex 32`)",
            path.display()
        ));
    }
    Ok(token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn args(extra: &[&str]) -> ServeArgs {
        let mut argv = vec!["converge-collector", "serve", "--inventory", "i.toml"];
        argv.extend_from_slice(extra);
        match crate::cli::Cli::parse_from(argv).command {
            crate::cli::Command::Serve(a) => *a,
            crate::cli::Command::Prune(_) => unreachable!(),
        }
    }

    #[test]
    fn intervals_parse_in_friendly_units() {
        assert_eq!(parse_seconds("--interval", "300s"), Ok(300));
        assert_eq!(parse_seconds("--interval", "5m"), Ok(300));
        assert_eq!(parse_seconds("--interval", "1h 30m"), Ok(5_400));
        assert!(parse_seconds("--interval", "soon")
            .unwrap_err()
            .contains("--interval \"soon\""));
        assert!(parse_seconds("--interval", "0s").is_err());
    }

    #[test]
    fn a_public_address_needs_a_token() {
        let e = check(&args(&["--listen", "0.0.0.0:8470"])).unwrap_err();
        assert!(e.contains("--token-file"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "0123456789abcdef0123\n").unwrap();
        let config = check(&args(&[
            "--listen",
            "0.0.0.0:8470",
            "--token-file",
            token.to_str().unwrap(),
        ]))
        .unwrap();
        assert_eq!(config.token.as_deref(), Some("0123456789abcdef0123"));
        std::fs::write(&token, "short").unwrap();
        assert!(check(&args(&["--token-file", token.to_str().unwrap()])).is_err());
        assert!(check(&args(&[])).is_ok());
    }
}
