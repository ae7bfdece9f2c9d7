//! Signing keys: `policyc keygen` writes a pair of text files, and
//! `policyc build` reads the secret one. The file format is shared with the
//! VM's public key reader (`converge_format::bundle::keys`).

use std::path::{Path, PathBuf};

use converge_format::bundle::keys::{
    decode_key_file, encode_key_file, key_id, PublicKey, PUBLIC_TAG, SECRET_TAG,
};
use ed25519_dalek::SigningKey;

/// A secret key and what identifies it.
pub struct SecretKey {
    pub signing: SigningKey,
    pub id: [u8; 8],
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key material.
        write!(
            f,
            "SecretKey({})",
            converge_format::bundle::error::hex(&self.id)
        )
    }
}

/// Generates a key pair and writes `OUT.key` (mode 0600) and `OUT.pub`;
/// returns their paths and the public key.
/// Refuses to overwrite existing files: a lost signing key is an outage,
/// an overwritten one is worse.
pub fn keygen(out: &Path) -> Result<(PathBuf, PathBuf, PublicKey), String> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| format!("cannot get randomness from the OS: {e}"))?;
    let signing = SigningKey::from_bytes(&seed);
    let public = signing.verifying_key().to_bytes();
    let id = key_id(&public);
    let secret_path = with_extension(out, "key");
    let public_path = with_extension(out, "pub");
    for path in [&secret_path, &public_path] {
        if path.exists() {
            return Err(format!(
                "`{}` already exists; refusing to overwrite a key",
                path.display()
            ));
        }
    }
    write_new(
        &secret_path,
        &encode_key_file("secret", SECRET_TAG, id, &seed),
        0o600,
    )?;
    write_new(
        &public_path,
        &encode_key_file("public", PUBLIC_TAG, id, &public),
        0o644,
    )?;
    Ok((secret_path, public_path, PublicKey { id, key: public }))
}

fn with_extension(out: &Path, ext: &str) -> PathBuf {
    let mut name = out
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".");
    name.push(ext);
    out.with_file_name(name)
}

/// Writes a key file atomically, never replacing an existing file (or
/// following a link planted at its name).
fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), String> {
    use crate::cli::atomic::{write_atomically, Existing};
    write_atomically(path, text.as_bytes(), mode, Existing::Keep)
        .map_err(|e| format!("cannot create `{}`: {e}", path.display()))
}

/// Reads a secret key file.
pub fn read_secret_key(path: &Path) -> Result<SecretKey, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let (id, seed) = decode_key_file(&text, SECRET_TAG)
        .map_err(|e| format!("`{}` is not a Converge secret key: {e}", path.display()))?;
    let signing = SigningKey::from_bytes(&seed);
    if key_id(&signing.verifying_key().to_bytes()) != id {
        return Err(format!(
            "`{}`: the key id does not match the key",
            path.display()
        ));
    }
    Ok(SecretKey { signing, id })
}
