//! Writing bundles: lowering an analysed program ([`lower`]), signing keys
//! ([`keys`]), and the signed envelope ([`seal`]). The format itself is
//! defined by the reader in `converge_format::bundle`, which this follows.

pub mod embed;
pub mod embed_blob;
pub mod embed_tree;
pub mod entitle;
pub mod keys;
pub mod lower;
pub mod merge;
pub mod secrets;

use converge_format::bundle::envelope::{signed_prefix, signing_digest};
use converge_format::bundle::format::Body;
use converge_format::bundle::wire::encode;
use ed25519_dalek::Signer as _;

use keys::SecretKey;

/// Encodes a body and signs it: the bytes of a bundle file.
pub fn seal(body: &Body, key: &SecretKey) -> Result<Vec<u8>, String> {
    let encoded = encode(body)?;
    let mut bytes = signed_prefix(key.id, &encoded).map_err(|e| e.to_string())?;
    let digest = signing_digest(&bytes);
    let signature = key.signing.sign(&digest);
    bytes.extend_from_slice(&signature.to_bytes());
    Ok(bytes)
}
