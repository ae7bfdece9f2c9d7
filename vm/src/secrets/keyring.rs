//! Opening the secrets of a bundle on this host: the host's age identity
//! (`STATE/identity/age.key`, written by `policyvm enroll`) opens the
//! sealed key of a set of hosts, which opens the secrets sealed to that
//! set. Everything happens in memory: no plaintext and no key ever goes
//! to a file, and both are wiped when the run ends ([`Zeroizing`]).
//!
//! Lazily: nothing is read or decrypted until an active promise needs a
//! secret, the identity is read at most once per run and each sealed key
//! opened at most once per run (one X25519 per set of hosts, however many
//! secrets it seals). A host that cannot open a secret (not a recipient,
//! never enrolled, an unreadable identity) fails the promise that needs
//! it with the reason; every other promise goes on.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use age::x25519::Identity;
use age::DecryptError;
use zeroize::Zeroizing;

use super::SecretText;
use crate::bundle::format::{Body, Constant};
use crate::state::StateDir;

/// Why a sealed key (or the host identity) could not be had: kept per key,
/// and worded per secret when a secret needs it.
#[derive(Clone, Debug)]
enum Unopened {
    /// No state directory, or no `identity/age.key` in it.
    NoIdentity,
    /// This host's identity is not among the key's recipients.
    NotRecipient,
    /// Anything else: an unsafe or unreadable identity, a corrupt file.
    Other(String),
}

impl Unopened {
    fn for_secret(&self, name: &str) -> String {
        match self {
            Unopened::NoIdentity => format!(
                "secret {name}: no identity: run `policyvm enroll` (the host's age identity is kept in the state directory, `--state`)"
            ),
            Unopened::NotRecipient => format!("this host is not a recipient of secret {name}"),
            Unopened::Other(why) => format!("secret {name} cannot be decrypted: {why}"),
        }
    }
}

/// The secrets of one run: the host identity and the sealed keys and
/// secrets opened so far.
pub struct Keyring<'s> {
    /// Where the host identity is (`None`: a run without `--state`).
    state: Option<&'s StateDir>,
    /// The host's age identity, once read.
    identity: Option<Result<Identity, Unopened>>,
    /// Sealed key constant index -> the identity it holds.
    keys: HashMap<u32, Result<Identity, Unopened>>,
    /// Secret constant index -> its plaintext.
    secrets: HashMap<u32, Arc<SecretText>>,
    /// How many sealed keys were decrypted (each at most once).
    opened: usize,
}

impl std::fmt::Debug for Keyring<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("keys_opened", &self.opened)
            .field("secrets_opened", &self.secrets.len())
            .finish_non_exhaustive()
    }
}

impl<'s> Keyring<'s> {
    /// A keyring reading the host identity from `state` when a secret is
    /// first needed.
    pub fn new(state: Option<&'s StateDir>) -> Self {
        Keyring {
            state,
            identity: None,
            keys: HashMap::new(),
            secrets: HashMap::new(),
            opened: 0,
        }
    }

    /// How many sealed keys this run decrypted.
    pub fn keys_opened(&self) -> usize {
        self.opened
    }

    /// The plaintext of the secret constant `c` of `body`, or why this host
    /// cannot have it (a message naming the secret, never its value).
    pub fn reveal(&mut self, body: &Body, c: u32) -> Result<Arc<SecretText>, String> {
        if let Some(text) = self.secrets.get(&c) {
            return Ok(Arc::clone(text));
        }
        let Some(Constant::Secret(sealed)) = body.constants.get(c as usize) else {
            return Err(format!("constant {c} is not a secret"));
        };
        let name = sealed.name.as_str();
        let key = self.key(body, sealed.key).map_err(|e| e.for_secret(name))?;
        let bytes = Zeroizing::new(
            age::decrypt(key, &sealed.ciphertext.0).map_err(|e| unopened(&e).for_secret(name))?,
        );
        let text =
            std::str::from_utf8(&bytes).map_err(|_| format!("secret {name} is not UTF-8 text"))?;
        let secret = Arc::new(SecretText::new(
            BTreeSet::from([name.to_owned()]),
            Zeroizing::new(text.to_owned()),
        ));
        self.secrets.insert(c, Arc::clone(&secret));
        Ok(secret)
    }

    /// The identity sealed in key constant `k`, opened on first use.
    fn key(&mut self, body: &Body, k: u32) -> Result<&Identity, Unopened> {
        if !self.keys.contains_key(&k) {
            let opened = self.open_key(body, k);
            self.keys.insert(k, opened);
        }
        match self.keys.get(&k) {
            Some(Ok(identity)) => Ok(identity),
            Some(Err(e)) => Err(e.clone()),
            None => Err(Unopened::Other(format!("sealed key {k}"))),
        }
    }

    fn open_key(&mut self, body: &Body, k: u32) -> Result<Identity, Unopened> {
        let Some(Constant::SealedKey(sealed)) = body.constants.get(k as usize) else {
            return Err(Unopened::Other(format!("constant {k} is not a sealed key")));
        };
        self.load_identity();
        let host = match &self.identity {
            Some(Ok(identity)) => identity,
            Some(Err(e)) => return Err(e.clone()),
            None => return Err(Unopened::NoIdentity),
        };
        self.opened = self.opened.saturating_add(1);
        let bytes =
            Zeroizing::new(age::decrypt(host, &sealed.ciphertext.0).map_err(|e| unopened(&e))?);
        std::str::from_utf8(&bytes)
            .ok()
            .and_then(crate::identity::age_identity)
            .ok_or_else(|| {
                Unopened::Other(format!(
                    "sealed key {k} does not hold an age identity (AGE-SECRET-KEY-1...)"
                ))
            })
    }

    /// Reads this host's age identity, on first use.
    fn load_identity(&mut self) {
        if self.identity.is_none() {
            let loaded = match self.state {
                None => Err(Unopened::NoIdentity),
                Some(state) => match crate::identity::load_age_identity(state) {
                    Ok(Some(identity)) => Ok(identity),
                    Ok(None) => Err(Unopened::NoIdentity),
                    Err(e) => Err(Unopened::Other(e)),
                },
            };
            self.identity = Some(loaded);
        }
    }
}

fn unopened(e: &DecryptError) -> Unopened {
    match e {
        DecryptError::NoMatchingKeys => Unopened::NotRecipient,
        other => Unopened::Other(other.to_string()),
    }
}

/// Sealing as `policyc` does (`docs/bytecode.md`, "Secrets"), for the tests
/// of the VM: a set key sealed to `hosts`, and secrets sealed to it.
/// The evaluator opens secrets through this keyring on a host.
impl converge_eval::sources::Secrets for Keyring<'_> {
    fn reveal(&mut self, body: &Body, c: u32) -> Result<Arc<SecretText>, String> {
        Keyring::reveal(self, body, c)
    }

    fn keys_opened(&self) -> usize {
        Keyring::keys_opened(self)
    }
}

#[cfg(test)]
pub(crate) mod sealing {
    use std::str::FromStr as _;

    use age::secrecy::ExposeSecret as _;

    use crate::bundle::format::{Bytes, Constant, Sealed, SealedKey};

    fn encrypt_to(recipients: &[age::x25519::Recipient], plaintext: &[u8]) -> Vec<u8> {
        use std::io::Write as _;
        let encryptor =
            age::Encryptor::with_recipients(recipients.iter().map(|r| r as &dyn age::Recipient))
                .unwrap();
        let mut out = Vec::new();
        let mut writer = encryptor.wrap_output(&mut out).unwrap();
        writer.write_all(plaintext).unwrap();
        writer.finish().unwrap();
        out
    }

    /// A set key for `hosts` (their `age1...` recipients): the constant,
    /// and the set's own recipient to seal secrets to.
    pub fn sealed_key(hosts: &[&str]) -> (Constant, age::x25519::Recipient) {
        let set = age::x25519::Identity::generate();
        let recipients: Vec<_> = hosts
            .iter()
            .map(|h| age::x25519::Recipient::from_str(h).unwrap())
            .collect();
        let ciphertext = encrypt_to(&recipients, set.to_string().expose_secret().as_bytes());
        (
            Constant::SealedKey(Box::new(SealedKey {
                ciphertext: Bytes(ciphertext),
            })),
            set.to_public(),
        )
    }

    /// Secret `name` holding `value`, sealed to the set key at constant
    /// index `key` (whose recipient is `to`).
    pub fn secret(name: &str, value: &str, key: u32, to: &age::x25519::Recipient) -> Constant {
        Constant::Secret(Box::new(Sealed {
            name: name.to_owned(),
            key,
            ciphertext: Bytes(encrypt_to(std::slice::from_ref(to), value.as_bytes())),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::sealing::{sealed_key, secret};
    use super::*;

    fn enrolled(dir: &std::path::Path, name: &str) -> (StateDir, String) {
        let state = StateDir::open(&dir.join(name)).unwrap();
        let identity = crate::identity::enroll(&state, Some(name), name, false).unwrap();
        (state, identity.age_recipient)
    }

    /// Two secrets sealed to one set of hosts: the key is decrypted once,
    /// however many secrets (and reveals) use it; a host outside the set,
    /// or one never enrolled, is told so, naming the secret.
    #[test]
    fn a_recipient_opens_each_key_once_and_others_are_told_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let (a, a_recipient) = enrolled(dir.path(), "a");
        let (b, _) = enrolled(dir.path(), "b");
        let (key, set) = sealed_key(&[&a_recipient]);
        let body = Body::with_programs(
            vec![
                key,
                secret("db_password", "s3cret-one", 0, &set),
                secret("api_token", "s3cret-two", 0, &set),
                Constant::Str("plain".into()),
            ],
            Vec::new(),
        );

        let mut ring = Keyring::new(Some(&a));
        assert_eq!(
            ring.keys_opened(),
            0,
            "nothing is opened before it is needed"
        );
        let one = ring.reveal(&body, 1).unwrap();
        assert_eq!(one.expose(), "s3cret-one");
        assert_eq!(one.label(), "<secret db_password>");
        assert_eq!(ring.reveal(&body, 2).unwrap().expose(), "s3cret-two");
        assert_eq!(ring.reveal(&body, 1).unwrap().expose(), "s3cret-one");
        assert_eq!(ring.keys_opened(), 1);
        assert!(ring.reveal(&body, 3).is_err());

        let mut other = Keyring::new(Some(&b));
        assert_eq!(
            other.reveal(&body, 1).unwrap_err(),
            "this host is not a recipient of secret db_password"
        );
        assert_eq!(
            other.reveal(&body, 2).unwrap_err(),
            "this host is not a recipient of secret api_token"
        );
        assert_eq!(other.keys_opened(), 1, "a failed key is not tried again");

        let never = StateDir::open(&dir.path().join("never")).unwrap();
        for state in [Some(&never), None] {
            let err = Keyring::new(state).reveal(&body, 1).unwrap_err();
            assert!(
                err.starts_with("secret db_password: no identity: run `policyvm enroll`"),
                "{err}"
            );
        }
    }

    /// An identity others can read is refused (as `policyvm enroll`'s
    /// loader does), and the message says why, not the key.
    #[test]
    fn an_unsafe_identity_is_refused_with_the_reason() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let (a, a_recipient) = enrolled(dir.path(), "a");
        let (key, set) = sealed_key(&[&a_recipient]);
        let body = Body::with_programs(vec![key, secret("s", "v", 0, &set)], Vec::new());
        let file = a
            .path(crate::identity::IDENTITY)
            .join(crate::identity::AGE_KEY);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Keyring::new(Some(&a)).reveal(&body, 1).unwrap_err();
        assert!(
            err.starts_with("secret s cannot be decrypted: the host identity"),
            "{err}"
        );
        assert!(!err.contains("AGE-SECRET-KEY"), "{err}");
    }
}
