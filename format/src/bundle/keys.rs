//! Public key files, as a human can copy them (in the manner of minisign):
//!
//! ```text
//! untrusted comment: converge public key 1a2b3c4d5e6f7a8b
//! Q1ZwaxorPE1eb3ofT3pUp2HRXUqtsBZ2ETkp6a4oxRm/m1RQ6BGoWrUe4u4=
//! ```
//!
//! The second line is base64 of `"CVpk"`, the 8-byte key id and the 32-byte
//! Ed25519 public key. The key id is the first 8 bytes of SHA-256 of the
//! public key; it only tells a host which trusted key to try.
//! Secret keys use the same layout with `"CVsk"` and the 32-byte seed; they
//! are written and read by `policyc` only.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::error::hex;

pub const PUBLIC_TAG: &[u8; 4] = b"CVpk";
pub const SECRET_TAG: &[u8; 4] = b"CVsk";

/// A trusted public key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey {
    pub id: [u8; 8],
    pub key: [u8; 32],
}

/// The key id of a public key.
pub fn key_id(public: &[u8; 32]) -> [u8; 8] {
    let digest = Sha256::digest(public);
    let mut id = [0u8; 8];
    id.copy_from_slice(digest.get(..8).unwrap_or(&[0; 8]));
    id
}

/// The prefix of a key fingerprint.
pub const FINGERPRINT_PREFIX: &str = "SHA256:";

/// A public key's fingerprint, what an operator compares out of band before
/// a host trusts a key it fetched (`policyvm bootstrap
/// --trust-fingerprint`): `SHA256:` and the 64 lowercase hex digits of the
/// SHA-256 of the 32-byte Ed25519 public key. Unlike the key id (8 bytes,
/// only a hint), it is long enough that no one can make a second key with
/// the same fingerprint. `policyc keygen` prints it.
pub fn fingerprint(public: &[u8; 32]) -> String {
    format!("{FINGERPRINT_PREFIX}{}", hex(&Sha256::digest(public)))
}

/// Reads a fingerprint as an operator may paste it: with or without the
/// `SHA256:` prefix, in either case, with or without `:` between byte
/// pairs. Returns the canonical form ([`fingerprint`]).
pub fn parse_fingerprint(text: &str) -> Result<String, String> {
    let trimmed = text.trim();
    let digits = match trimmed.get(..FINGERPRINT_PREFIX.len()) {
        Some(p) if p.eq_ignore_ascii_case(FINGERPRINT_PREFIX) => {
            trimmed.get(FINGERPRINT_PREFIX.len()..).unwrap_or_default()
        }
        _ => trimmed,
    };
    let digits: String = digits
        .chars()
        .filter(|c| *c != ':')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if digits.len() != 64 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "`{trimmed}` is not a key fingerprint: expected `SHA256:` and 64 hex digits, as \
             `policyc keygen` prints it"
        ));
    }
    Ok(format!("{FINGERPRINT_PREFIX}{digits}"))
}

/// Encodes a key file: a comment line and the base64 payload.
pub fn encode_key_file(kind: &str, tag: &[u8; 4], id: [u8; 8], key: &[u8; 32]) -> String {
    let mut payload = Vec::with_capacity(44);
    payload.extend_from_slice(tag);
    payload.extend_from_slice(&id);
    payload.extend_from_slice(key);
    format!(
        "untrusted comment: converge {kind} key {}\n{}\n",
        hex(&id),
        STANDARD.encode(payload)
    )
}

/// Decodes the payload of a key file with the given tag: `(id, key)`.
pub fn decode_key_file(text: &str, tag: &[u8; 4]) -> Result<([u8; 8], [u8; 32]), String> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("untrusted comment:"))
        .ok_or("no key line")?;
    let payload = STANDARD
        .decode(line)
        .map_err(|e| format!("the key line is not base64 ({e})"))?;
    if payload.len() != 44 {
        return Err(format!("the key is {} bytes, expected 44", payload.len()));
    }
    if payload.get(..4) != Some(&tag[..]) {
        return Err("not a Converge key of this kind".to_owned());
    }
    let mut id = [0u8; 8];
    let mut key = [0u8; 32];
    id.copy_from_slice(payload.get(4..12).unwrap_or(&[0; 8]));
    key.copy_from_slice(payload.get(12..44).unwrap_or(&[0; 32]));
    Ok((id, key))
}

/// Parses a public key file; its key id must match its key.
pub fn parse_public_key(text: &str) -> Result<PublicKey, String> {
    let (id, key) = decode_key_file(text, PUBLIC_TAG)?;
    if key_id(&key) != id {
        return Err("the key id does not match the key".to_owned());
    }
    Ok(PublicKey { id, key })
}

/// A problem with the trust directory, shown as one line.
#[derive(Debug)]
pub struct TrustError {
    pub path: PathBuf,
    pub reason: String,
}

impl std::fmt::Display for TrustError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

/// Whoever can write the trust directory, a key in it or the agent's
/// configuration decides what this host runs, so (like sshd's
/// `StrictModes`) none may be writable by group or others, nor, when the VM
/// runs as root, owned by anyone else.
pub fn guarded(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "writable by group or others (mode {:o}): anyone who can write it can make this \
             host trust their key; `chmod go-w` it",
            meta.mode() & 0o7777
        ));
    }
    if rustix::process::geteuid().is_root() && meta.uid() != 0 {
        return Err(format!(
            "owned by uid {}, not root: that user can make this host trust their key; \
             `chown root` it",
            meta.uid()
        ));
    }
    Ok(())
}

/// Loads every `*.pub` file of a trust directory. A malformed file is an
/// error, not skipped: a host must not silently trust fewer keys than its
/// operator installed, nor more.
pub fn load_trust_dir(dir: &Path) -> Result<Vec<PublicKey>, TrustError> {
    let err = |path: &Path, reason: String| TrustError {
        path: path.to_path_buf(),
        reason,
    };
    guarded(dir).map_err(|reason| err(dir, reason))?;
    let entries = std::fs::read_dir(dir).map_err(|e| err(dir, e.to_string()))?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| err(dir, e.to_string()))?.path();
        if path.extension().is_some_and(|e| e == "pub") {
            paths.push(path);
        }
    }
    paths.sort();
    let mut keys = Vec::with_capacity(paths.len());
    for path in paths {
        guarded(&path).map_err(|reason| err(&path, reason))?;
        let text = std::fs::read_to_string(&path).map_err(|e| err(&path, e.to_string()))?;
        keys.push(parse_public_key(&text).map_err(|e| err(&path, e))?);
    }
    if keys.is_empty() {
        return Err(err(dir, "no trusted keys (*.pub files) here".to_owned()));
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_is_the_sha256_of_the_public_key() {
        // SHA-256 of 32 zero bytes.
        let zero = fingerprint(&[0u8; 32]);
        assert_eq!(
            zero,
            "SHA256:66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925"
        );
        assert_ne!(fingerprint(&[1u8; 32]), zero);
        for pasted in [
            zero.clone(),
            zero.to_uppercase(),
            zero.trim_start_matches("SHA256:").to_owned(),
            format!("  sha256:{}\n", zero.trim_start_matches("SHA256:")),
            "66:68:7a:ad:f8:62:bd:77:6c:8f:c1:8b:8e:9f:8e:20:08:97:14:85:6e:e2:33:b3:90:2a:59:1d:0d:5f:29:25"
                .to_owned(),
        ] {
            assert_eq!(parse_fingerprint(&pasted).unwrap(), zero, "{pasted:?}");
        }
        for bad in [
            "",
            "SHA256:",
            "SHA256:66687a",
            "md5:00",
            &format!("{zero}00"),
            &zero.replace('6', "g"),
        ] {
            let err = parse_fingerprint(bad).unwrap_err();
            assert!(err.contains("not a key fingerprint"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn public_key_files_round_trip() {
        let key = [7u8; 32];
        let id = key_id(&key);
        let text = encode_key_file("public", PUBLIC_TAG, id, &key);
        assert!(text.starts_with(&format!(
            "untrusted comment: converge public key {}\n",
            hex(&id)
        )));
        assert_eq!(parse_public_key(&text).unwrap(), PublicKey { id, key });
    }

    #[test]
    fn mismatched_ids_and_wrong_kinds_are_refused() {
        let key = [7u8; 32];
        let text = encode_key_file("public", PUBLIC_TAG, [0; 8], &key);
        assert!(parse_public_key(&text)
            .unwrap_err()
            .contains("does not match"));
        let secret = encode_key_file("secret", SECRET_TAG, key_id(&key), &key);
        assert!(parse_public_key(&secret)
            .unwrap_err()
            .contains("not a Converge key"));
        assert!(parse_public_key("garbage").is_err());
        assert!(parse_public_key("").is_err());
    }

    #[test]
    fn a_trust_directory_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let key = [7u8; 32];
        let file = dir.path().join("hub.pub");
        std::fs::write(
            &file,
            encode_key_file("public", PUBLIC_TAG, key_id(&key), &key),
        )
        .unwrap();
        let chmod = |path: &Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        chmod(dir.path(), 0o755);
        chmod(&file, 0o644);
        assert_eq!(load_trust_dir(dir.path()).unwrap().len(), 1);
        chmod(&file, 0o664);
        let e = load_trust_dir(dir.path()).unwrap_err();
        assert_eq!(e.path, file);
        assert!(
            e.reason.contains("writable by group or others (mode 664)"),
            "{e}"
        );
        chmod(&file, 0o644);
        chmod(dir.path(), 0o777);
        let e = load_trust_dir(dir.path()).unwrap_err();
        assert_eq!(e.path, dir.path());
        assert!(e.reason.contains("chmod go-w"), "{e}");
        chmod(dir.path(), 0o755);
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&file, Some(1000), None).unwrap();
            let e = load_trust_dir(dir.path()).unwrap_err();
            assert!(e.reason.contains("owned by uid 1000, not root"), "{e}");
        }
    }
}
