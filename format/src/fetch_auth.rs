//! How a host proves who it is when it asks the collector for a
//! neighbour's latest report (`GET /api/v1/hosts/NAME/report/latest`,
//! docs/fleet.md "Neighbour watch"): the agent has no bearer token, but it
//! has its report key, which the collector's inventory already lists.
//!
//! The request carries one header, [`HEADER`]: `HOST TIME SIGNATURE`,
//! where `SIGNATURE` is the base64 Ed25519 signature over [`CONTEXT`],
//! the host, the Unix time and the request path, NUL-separated. The
//! collector accepts it from an enrolled, unrevoked host whose key
//! verifies it, within [`MAX_SKEW_SECONDS`] of its own clock. A captured
//! header replays only the same read of the same path for those minutes.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};

/// The request header (lower case, as HTTP/2 sends it).
pub const HEADER: &str = "x-converge-host-signature";

/// Domain separation: this signature is never a report's.
const CONTEXT: &[u8] = b"converge neighbour fetch v1\0";

/// How far the request's time may be from the collector's.
pub const MAX_SKEW_SECONDS: i64 = 300;

/// A parsed [`HEADER`] value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSignature {
    pub host: String,
    pub time: i64,
    signature: [u8; 64],
}

fn message(host: &str, time: i64, path: &str) -> Vec<u8> {
    let mut m = CONTEXT.to_vec();
    m.extend_from_slice(host.as_bytes());
    m.push(0);
    m.extend_from_slice(time.to_string().as_bytes());
    m.push(0);
    m.extend_from_slice(path.as_bytes());
    m
}

/// The [`HEADER`] value for `host` (whose report key is `key`) reading
/// `path` at Unix time `time`.
pub fn sign(host: &str, key: &SigningKey, path: &str, time: i64) -> String {
    let signature = key.sign(&message(host, time, path));
    format!("{host} {time} {}", STANDARD.encode(signature.to_bytes()))
}

impl HostSignature {
    /// Parses a [`HEADER`] value; `None` when it is not one.
    pub fn parse(value: &str) -> Option<HostSignature> {
        let mut parts = value.split(' ');
        let (host, time, signature) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || !crate::inventory::is_host_name(host) {
            return None;
        }
        let signature = STANDARD.decode(signature).ok()?;
        Some(HostSignature {
            host: host.to_owned(),
            time: time.parse().ok()?,
            signature: <[u8; 64]>::try_from(signature.as_slice()).ok()?,
        })
    }

    /// Whether one of `keys` signed this request for `path`, and its time
    /// is within [`MAX_SKEW_SECONDS`] of `now`.
    pub fn verify(&self, keys: &[VerifyingKey], path: &str, now: i64) -> bool {
        if self.time.abs_diff(now) > MAX_SKEW_SECONDS.unsigned_abs() {
            return false;
        }
        let message = message(&self.host, self.time, path);
        let signature = Signature::from_bytes(&self.signature);
        keys.iter().any(|k| k.verify(&message, &signature).is_ok())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_request_verifies_only_for_its_path_key_and_time() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let other = SigningKey::from_bytes(&[8; 32]);
        let path = "/api/v1/hosts/web-02/report/latest";
        let value = sign("web-01", &key, path, 1_000_000);
        let parsed = HostSignature::parse(&value).unwrap();
        assert_eq!(parsed.host, "web-01");
        let keys = [key.verifying_key()];
        assert!(parsed.verify(&keys, path, 1_000_100));
        assert!(!parsed.verify(&keys, "/api/v1/hosts/web-03/report/latest", 1_000_100));
        assert!(!parsed.verify(&[other.verifying_key()], path, 1_000_100));
        assert!(!parsed.verify(&keys, path, 1_000_000 + MAX_SKEW_SECONDS + 1));
    }

    #[test]
    fn malformed_headers_are_refused() {
        for bad in [
            "",
            "web-01",
            "web-01 12",
            "web-01 x AAAA",
            "../x 1 AAAA",
            "a 1 b c",
        ] {
            assert_eq!(HostSignature::parse(bad), None, "{bad:?}");
        }
    }
}
