//! Why a bundle is refused. Each kind has a one-line message and its own
//! exit code, so scripts and monitoring can tell a forged bundle from a
//! truncated download.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BundleError {
    /// Not a Converge bundle at all.
    BadMagic,
    /// A bundle format this VM does not read.
    UnsupportedVersion { major: u16, minor: u16 },
    /// Shorter than its header says.
    Truncated { len: usize, expected: usize },
    /// Longer than its header says.
    TrailingBytes { extra: usize },
    /// Larger than the VM accepts.
    TooLarge { len: usize },
    /// No trusted key has the bundle's key id.
    UnknownKey { key_id: [u8; 8] },
    /// The signature does not verify against any trusted key with that id.
    BadSignature { key_id: [u8; 8] },
    /// Signed, but the body does not decode or breaks a structural rule
    /// (an index out of range, a program with a bad stack effect...).
    Corrupt { reason: String },
}

impl BundleError {
    /// The exit code of `policyvm verify` for this refusal.
    pub fn exit_code(&self) -> u8 {
        match self {
            BundleError::BadMagic => 10,
            BundleError::UnsupportedVersion { .. } => 11,
            BundleError::Truncated { .. } => 12,
            BundleError::TrailingBytes { .. }
            | BundleError::TooLarge { .. }
            | BundleError::Corrupt { .. } => 13,
            BundleError::UnknownKey { .. } => 14,
            BundleError::BadSignature { .. } => 15,
        }
    }
}

pub fn hex(bytes: &[u8]) -> String {
    // Digests are shown in every report line of a repaired file: one
    // String, not a `format!` per byte.
    let mut out = String::with_capacity(bytes.len().saturating_mul(2));
    for b in bytes {
        for nibble in [b >> 4, b & 0x0f] {
            out.push(char::from_digit(u32::from(nibble), 16).unwrap_or('0'));
        }
    }
    out
}

impl fmt::Display for BundleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BundleError::BadMagic => write!(f, "not a Converge bundle (bad magic number)"),
            BundleError::UnsupportedVersion { major, minor } => write!(
                f,
                "bundle format {major}.{minor} is not supported by this policyvm (it reads format {}.x); upgrade policyvm",
                super::envelope::FORMAT_MAJOR
            ),
            BundleError::Truncated { len, expected } => {
                write!(f, "bundle is truncated: {len} bytes, expected {expected}")
            }
            BundleError::TrailingBytes { extra } => {
                write!(f, "bundle has {extra} unexpected bytes after its signature")
            }
            BundleError::TooLarge { len } => write!(f, "bundle is too large ({len} bytes)"),
            BundleError::UnknownKey { key_id } => write!(
                f,
                "bundle is signed by key {} which is not trusted here",
                hex(key_id)
            ),
            BundleError::BadSignature { key_id } => write!(
                f,
                "bad signature: the bundle was not signed by trusted key {} or was modified",
                hex(key_id)
            ),
            BundleError::Corrupt { reason } => write!(f, "corrupt bundle: {reason}"),
        }
    }
}

impl std::error::Error for BundleError {}

#[cfg(test)]
mod hex_tests {
    #[test]
    fn hex_is_two_lowercase_digits_per_byte() {
        assert_eq!(super::hex(&[0x00, 0x0f, 0xa5, 0xff, 0x10]), "000fa5ff10");
        assert_eq!(super::hex(&[]), "");
        let all: Vec<u8> = (0..=255).collect();
        let by_format: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(super::hex(&all), by_format);
    }
}
