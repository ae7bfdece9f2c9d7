//! The signed envelope around a bundle body, and opening it.
//!
//! ```text
//! offset  size  field
//! 0       8     magic "CNVGBNDL"
//! 8       2     format major version (little endian)
//! 10      2     format minor version
//! 12      8     key id of the signing key (a lookup hint, not trusted)
//! 20      4     body length N (little endian)
//! 24      N     body (canonical postcard, see format.rs and wire.rs)
//! 24+N    64    Ed25519 signature over SHA-256(bytes 0 .. 24+N)
//! ```
//!
//! Opening checks, in this order and before decoding anything: the magic,
//! the version, the exact length, that a trusted key has this key id, and
//! the signature (`verify_strict`, against the full public key: a key id is
//! only a hint, two keys may share one). Only then is the body decoded —
//! from the very buffer that was verified — and checked by `verify.rs`.

use ed25519_dalek::{Signature, VerifyingKey};
use sha2::{Digest, Sha256};

use super::error::BundleError;
use super::format::Body;
use super::keys::PublicKey;
use super::verify::verify_body;
use super::wire::decode as decode_body;

pub const MAGIC: [u8; 8] = *b"CNVGBNDL";
/// The format major version this VM reads. A bundle of another major
/// version is refused before decoding: its meaning may have changed. 2.0:
/// explicit ids, canonical bodies ("Compatibility" in `docs/bytecode.md`).
pub const FORMAT_MAJOR: u16 = 2;
/// The minor version `policyc` writes and the newest this VM knows; minor
/// versions only add ids, so an older VM reads a newer minor's bundle when
/// nothing new is used, and refuses it naming the unknown id otherwise.
/// Changing the id tables ([`crate::ids`]) needs a bump here and a new
/// `format/tests/ids/MAJOR.MINOR.txt`.
pub const FORMAT_MINOR: u16 = 6;
pub const HEADER_LEN: usize = 24;
pub const SIGNATURE_LEN: usize = 64;
/// The largest bundle a VM accepts (256 MiB), checked before any work.
pub const MAX_BUNDLE_LEN: usize = 256 << 20;

/// A bundle whose signature and structure were verified.
#[derive(Debug)]
pub struct Verified {
    pub body: Body,
    pub key_id: [u8; 8],
    pub version: (u16, u16),
    /// SHA-256 of the whole bundle file, for reports.
    pub digest: [u8; 32],
    pub len: usize,
}

/// The bytes a signer signs the SHA-256 of: the header and the body.
pub fn signed_prefix(key_id: [u8; 8], body: &[u8]) -> Result<Vec<u8>, BundleError> {
    let len = u32::try_from(body.len()).map_err(|_| BundleError::TooLarge { len: body.len() })?;
    let mut out = Vec::with_capacity(body.len().saturating_add(HEADER_LEN + SIGNATURE_LEN));
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_MAJOR.to_le_bytes());
    out.extend_from_slice(&FORMAT_MINOR.to_le_bytes());
    out.extend_from_slice(&key_id);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(body);
    Ok(out)
}

/// The digest that is signed.
pub fn signing_digest(prefix: &[u8]) -> [u8; 32] {
    Sha256::digest(prefix).into()
}

fn field<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The framing of a bundle, checked but not yet trusted.
struct Frame<'b> {
    key_id: [u8; 8],
    version: (u16, u16),
    /// Header and body: the bytes the signature covers.
    signed: &'b [u8],
    signature: [u8; SIGNATURE_LEN],
}

/// Checks magic, version and exact length, before anything else.
fn frame(bytes: &[u8]) -> Result<Frame<'_>, BundleError> {
    if bytes.len() > MAX_BUNDLE_LEN {
        return Err(BundleError::TooLarge { len: bytes.len() });
    }
    let magic: Option<[u8; 8]> = field(bytes, 0);
    match magic {
        Some(m) if m == MAGIC => {}
        // A prefix of the magic is a bundle cut short, not another file.
        _ if !bytes.is_empty() && MAGIC.starts_with(bytes) => {
            return Err(BundleError::Truncated {
                len: bytes.len(),
                expected: HEADER_LEN,
            })
        }
        _ => return Err(BundleError::BadMagic),
    }
    let truncated = || BundleError::Truncated {
        len: bytes.len(),
        expected: HEADER_LEN,
    };
    let (Some(major), Some(minor)) = (field::<2>(bytes, 8), field::<2>(bytes, 10)) else {
        return Err(truncated());
    };
    let (major, minor) = (u16::from_le_bytes(major), u16::from_le_bytes(minor));
    if major != FORMAT_MAJOR {
        return Err(BundleError::UnsupportedVersion { major, minor });
    }
    let (Some(key_id), Some(body_len)) = (field::<8>(bytes, 12), field::<4>(bytes, 20)) else {
        return Err(truncated());
    };
    let body_len = u32::from_le_bytes(body_len) as usize;
    let expected = HEADER_LEN
        .checked_add(body_len)
        .and_then(|n| n.checked_add(SIGNATURE_LEN))
        .ok_or(BundleError::TooLarge { len: usize::MAX })?;
    if bytes.len() < expected {
        return Err(BundleError::Truncated {
            len: bytes.len(),
            expected,
        });
    }
    if bytes.len() > expected {
        return Err(BundleError::TrailingBytes {
            extra: bytes.len().saturating_sub(expected),
        });
    }
    let signed_len = expected.saturating_sub(SIGNATURE_LEN);
    let (Some(signed), Some(signature)) = (bytes.get(..signed_len), field::<64>(bytes, signed_len))
    else {
        return Err(BundleError::Truncated {
            len: bytes.len(),
            expected,
        });
    };
    Ok(Frame {
        key_id,
        version: (major, minor),
        signed,
        signature,
    })
}

/// Decodes and verifies the body of a framed bundle; `digest` is the
/// SHA-256 of all of `bytes`.
fn decode(bytes: &[u8], frame: &Frame<'_>, digest: [u8; 32]) -> Result<Verified, BundleError> {
    let body_bytes = frame.signed.get(HEADER_LEN..).unwrap_or_default();
    let body = decode_body(body_bytes)?;
    if body.header.key_id != frame.key_id {
        return Err(BundleError::Corrupt {
            reason: "the signed header names another key than the envelope".to_owned(),
        });
    }
    verify_body(&body)?;
    Ok(Verified {
        body,
        key_id: frame.key_id,
        version: frame.version,
        digest,
        len: bytes.len(),
    })
}

/// Verifies and decodes a bundle against the trusted keys: framing first,
/// then the signature over the exact bytes, and only then the body.
pub fn open(bytes: &[u8], trusted: &[PublicKey]) -> Result<Verified, BundleError> {
    let frame = frame(bytes)?;
    let candidates: Vec<&PublicKey> = trusted.iter().filter(|k| k.id == frame.key_id).collect();
    if candidates.is_empty() {
        return Err(BundleError::UnknownKey {
            key_id: frame.key_id,
        });
    }
    // One pass over the bytes gives both digests: the signed one (header
    // and body), and, continued over the signature, the whole file's.
    let mut hasher = Sha256::new();
    hasher.update(frame.signed);
    let digest: [u8; 32] = hasher.clone().finalize().into();
    hasher.update(frame.signature);
    let file_digest: [u8; 32] = hasher.finalize().into();
    let signature = Signature::from_bytes(&frame.signature);
    let signed_by_trusted = candidates.iter().any(|k| {
        VerifyingKey::from_bytes(&k.key)
            .map(|vk| vk.verify_strict(&digest, &signature).is_ok())
            .unwrap_or(false)
    });
    if !signed_by_trusted {
        return Err(BundleError::BadSignature {
            key_id: frame.key_id,
        });
    }
    decode(bytes, &frame, file_digest)
}

/// Decodes and verifies a bundle's structure without checking who signed
/// it: for `policyvm inspect` without a trust directory, and the fuzzer.
/// Never use the result to change a host.
pub fn open_unsigned(bytes: &[u8]) -> Result<Verified, BundleError> {
    let frame = frame(bytes)?;
    decode(bytes, &frame, Sha256::digest(bytes).into())
}
