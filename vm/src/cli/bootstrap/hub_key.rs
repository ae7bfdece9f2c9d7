//! The hub's public key for a new host: from a key file the operator
//! copied (`--trust KEYFILE`), or fetched from the hub and accepted only
//! when its fingerprint is the one the operator passed
//! (`--trust-fingerprint`; the format is
//! [`converge_format::bundle::keys::fingerprint`]).
//!
//! Fetched: `BASE/NAME.stamp` names the signing key's id, `policyc publish`
//! writes that key as `BASE/keys/KEYID.pub`; the key must have the given
//! fingerprint and must verify the stamp. The transport is untrusted as
//! for every pull: the fingerprint, compared out of band, is the trust.

use std::path::Path;

use crate::bundle::error::hex;
use crate::bundle::keys::{fingerprint, parse_public_key, PublicKey};
use crate::pull::fetch::{FetchError, Source};
use crate::stamp::{Stamp, MAX_STAMP_LEN};

/// The largest public key file read (two short lines).
const MAX_KEY_FILE: u64 = 4096;

/// Why no key was obtained, by exit code.
#[derive(Debug, PartialEq, Eq)]
pub enum KeyError {
    /// The key file cannot be read or is not a public key (66).
    Unreadable(String),
    /// The hub cannot be reached or has no such file (69).
    Unavailable(String),
    /// What the hub served is not the key the operator vouched for (3).
    Refused(String),
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::Unreadable(e) | KeyError::Unavailable(e) | KeyError::Refused(e) => {
                f.write_str(e)
            }
        }
    }
}

/// Reads a public key file (`policyc keygen`'s `NAME.pub`).
pub fn from_file(path: &Path) -> Result<PublicKey, KeyError> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_KEY_FILE).read_to_string(&mut text))
        .map_err(|e| KeyError::Unreadable(format!("cannot read `{}`: {e}", path.display())))?;
    parse_public_key(&text).map_err(|e| {
        KeyError::Unreadable(format!(
            "`{}` is not a Converge public key: {e}",
            path.display()
        ))
    })
}

/// Fetches the key that signs `name`'s stamp from `hub` and accepts it only
/// if its fingerprint is `expected` (canonical form).
pub fn fetch(hub: &dyn Source, name: &str, expected: &str) -> Result<PublicKey, KeyError> {
    let stamp_file = format!("{name}.stamp");
    let stamp_bytes = hub
        .get(&stamp_file, MAX_STAMP_LEN as u64)
        .map_err(unavailable)?;
    let (stamp, _) = Stamp::parse_unverified(&stamp_bytes)
        .map_err(|e| KeyError::Refused(format!("{}: not a stamp: {e}", hub.locate(&stamp_file))))?;
    let key_file = key_path(&stamp.key_id);
    let text = hub.get(&key_file, MAX_KEY_FILE).map_err(unavailable)?;
    let key = std::str::from_utf8(&text)
        .map_err(|e| e.to_string())
        .and_then(parse_public_key)
        .map_err(|e| {
            KeyError::Refused(format!(
                "{}: not a Converge public key: {e}",
                hub.locate(&key_file)
            ))
        })?;
    let found = fingerprint(&key.key);
    if found != expected {
        return Err(KeyError::Refused(format!(
            "{} has fingerprint {found}, not {expected}: refused, nothing was written. \
             Check the fingerprint `policyc keygen` printed for the hub's key; a different one \
             means a different key (or someone between this host and the hub)",
            hub.locate(&key_file)
        )));
    }
    Stamp::open(&stamp_bytes, std::slice::from_ref(&key)).map_err(|e| {
        KeyError::Refused(format!(
            "{}: not signed by the key with fingerprint {expected}: {e}",
            hub.locate(&stamp_file)
        ))
    })?;
    Ok(key)
}

/// Where a hub publishes the key with id `id`, relative to its base URL
/// (written by `policyc publish`).
pub fn key_path(id: &[u8; 8]) -> String {
    format!("keys/{}.pub", hex(id))
}

fn unavailable(e: FetchError) -> KeyError {
    KeyError::Unavailable(format!(
        "{e}; is `--hub` the base URL `policyvm pull` would use?"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::keys::{encode_key_file, key_id, PUBLIC_TAG};
    use ed25519_dalek::{Signer as _, SigningKey};
    use std::collections::HashMap;

    /// A hub as a map of files.
    struct Files(HashMap<String, Vec<u8>>);

    impl Source for Files {
        fn locate(&self, file: &str) -> String {
            format!("http://hub/{file}")
        }
        fn get(&self, file: &str, _limit: u64) -> Result<Vec<u8>, FetchError> {
            self.0.get(file).cloned().ok_or(FetchError::Status {
                url: self.locate(file),
                status: 404,
            })
        }
    }

    fn hub(signer: &SigningKey, published: &SigningKey) -> (Files, PublicKey) {
        let public = published.verifying_key().to_bytes();
        let id = key_id(&public);
        let stamp = Stamp {
            name: "site".into(),
            serial: 7,
            length: 1,
            sha256: [0; 32],
            published: 1,
            expires: 4_102_444_800, // 2100-01-01
            key_id: id,
            rollout: None,
        };
        let text = stamp.encode(&signer.sign(&stamp.signing_digest()).to_bytes());
        let mut files = HashMap::new();
        files.insert("site.stamp".to_owned(), text.into_bytes());
        files.insert(
            key_path(&id),
            encode_key_file("public", PUBLIC_TAG, id, &public).into_bytes(),
        );
        (Files(files), PublicKey { id, key: public })
    }

    #[test]
    fn the_key_with_the_right_fingerprint_is_accepted() {
        let signing = SigningKey::from_bytes(&[3; 32]);
        let (files, public) = hub(&signing, &signing);
        let fp = fingerprint(&public.key);
        assert_eq!(fetch(&files, "site", &fp), Ok(public));
    }

    #[test]
    fn another_fingerprint_a_stamp_it_did_not_sign_or_no_hub_are_refused() {
        let signing = SigningKey::from_bytes(&[3; 32]);
        let (files, public) = hub(&signing, &signing);
        let other = fingerprint(&[9; 32]);
        match fetch(&files, "site", &other) {
            Err(KeyError::Refused(e)) => assert!(e.contains("has fingerprint"), "{e}"),
            other => panic!("{other:?}"),
        }
        // The published key has the fingerprint, but another key signed
        // the stamp (a key file swapped in beside someone else's stamp).
        let (files, _) = hub(&SigningKey::from_bytes(&[4; 32]), &signing);
        match fetch(&files, "site", &fingerprint(&public.key)) {
            Err(KeyError::Refused(e)) => assert!(e.contains("not signed by"), "{e}"),
            other => panic!("{other:?}"),
        }
        match fetch(&Files(HashMap::new()), "site", &other) {
            Err(KeyError::Unavailable(e)) => assert!(e.contains("404"), "{e}"),
            other => panic!("{other:?}"),
        }
    }
}
