//! Opening the secrets of a bundle on this host: the host's age identity
//! (`STATE/identity/age.key`, written by `policyvm enroll`) opens the
//! sealed set of the secrets that go to a set of hosts. Everything happens
//! in memory: no plaintext ever goes to a file, and each is wiped when the
//! run ends ([`Zeroizing`]).
//!
//! Lazily: nothing is read or decrypted until an active promise needs a
//! secret, the identity is read at most once per run and each sealed set
//! opened at most once per run (one X25519 per set of hosts, however many
//! secrets it holds). A host that cannot open a secret (not a recipient,
//! never enrolled, an unreadable identity) fails the promise that needs
//! it with the reason; every other promise goes on.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use age::x25519::Identity;
use age::DecryptError;
use zeroize::Zeroizing;

use super::SecretText;
use crate::bundle::format::{Body, Constant, SealedSet};
use crate::state::StateDir;

/// Why a sealed set (or the host identity) could not be had: kept per set,
/// and worded per secret when a secret needs it.
#[derive(Clone, Debug)]
enum Unopened {
    /// No state directory, or no `identity/age.key` in it.
    NoIdentity,
    /// This host's identity is not among the set's recipients.
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

/// The entries of one opened set: (name, value), values wiped when dropped.
type Opened = Vec<(String, Zeroizing<String>)>;

/// The secrets of one run: the host identity and the sealed sets opened
/// so far.
pub struct Keyring<'s> {
    /// Where the host identity is (`None`: a run without `--state`).
    state: Option<&'s StateDir>,
    /// The host's age identity, once read.
    identity: Option<Result<Identity, Unopened>>,
    /// Sealed set constant index -> its entries.
    sets: HashMap<u32, Result<Opened, Unopened>>,
    /// Secret constant index -> its plaintext.
    secrets: HashMap<u32, Arc<SecretText>>,
    /// How many sealed sets were decrypted (each at most once).
    opened: usize,
}

impl std::fmt::Debug for Keyring<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("sets_opened", &self.opened)
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
            sets: HashMap::new(),
            secrets: HashMap::new(),
            opened: 0,
        }
    }

    /// How many sealed sets this run decrypted.
    pub fn sets_opened(&self) -> usize {
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
        if !self.sets.contains_key(&sealed.set) {
            let opened = self.open_set(body, sealed.set);
            self.sets.insert(sealed.set, opened);
        }
        let entries = match self.sets.get(&sealed.set) {
            Some(Ok(entries)) => entries,
            Some(Err(e)) => return Err(e.for_secret(name)),
            None => {
                return Err(format!(
                    "secret {name}: sealed set {} was not opened",
                    sealed.set
                ))
            }
        };
        let value = match entries.get(sealed.index as usize) {
            Some((entry, value)) if entry == name => value,
            _ => {
                return Err(format!(
                    "secret {name} cannot be decrypted: entry {} of sealed set {} is not it (a damaged bundle)",
                    sealed.index, sealed.set
                ))
            }
        };
        let secret = Arc::new(SecretText::new(
            BTreeSet::from([name.to_owned()]),
            value.clone(),
        ));
        self.secrets.insert(c, Arc::clone(&secret));
        Ok(secret)
    }

    /// Decrypts sealed set constant `s` with the host identity: one X25519.
    fn open_set(&mut self, body: &Body, s: u32) -> Result<Opened, Unopened> {
        let Some(Constant::SealedSet(sealed)) = body.constants.get(s as usize) else {
            return Err(Unopened::Other(format!("constant {s} is not a sealed set")));
        };
        self.load_identity();
        let host = match &self.identity {
            Some(Ok(identity)) => identity,
            Some(Err(e)) => return Err(e.clone()),
            None => return Err(Unopened::NoIdentity),
        };
        self.opened = self.opened.saturating_add(1);
        let plain =
            Zeroizing::new(age::decrypt(host, &sealed.ciphertext.0).map_err(|e| unopened(&e))?);
        let entries = SealedSet::decode_plaintext(&plain).map_err(Unopened::Other)?;
        Ok(entries
            .into_iter()
            .map(|(name, value)| (name.to_owned(), Zeroizing::new(value.to_owned())))
            .collect())
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

/// The evaluator opens secrets through this keyring on a host.
impl converge_eval::sources::Secrets for Keyring<'_> {
    fn reveal(&mut self, body: &Body, c: u32) -> Result<Arc<SecretText>, String> {
        Keyring::reveal(self, body, c)
    }

    fn sets_opened(&self) -> usize {
        Keyring::sets_opened(self)
    }
}

/// Sealing as `policyc` does (`docs/bytecode.md`, "Secrets"), for the tests
/// of the VM.
#[cfg(test)]
pub(crate) mod sealing {
    use std::str::FromStr as _;

    use crate::bundle::format::{Bytes, Constant, Sealed, SealedSet};

    /// A sealed set for `hosts` (their `age1...` recipients) holding
    /// `secrets` (name, value), as constant index `at`, followed by one
    /// secret constant per entry (`at + 1`, `at + 2`, ...).
    pub fn sealed_set(at: u32, hosts: &[&str], secrets: &[(&str, &str)]) -> Vec<Constant> {
        use std::io::Write as _;
        let recipients: Vec<_> = hosts
            .iter()
            .map(|h| age::x25519::Recipient::from_str(h).unwrap())
            .collect();
        let plaintext = SealedSet::encode_plaintext(secrets).unwrap();
        let encryptor =
            age::Encryptor::with_recipients(recipients.iter().map(|r| r as &dyn age::Recipient))
                .unwrap();
        let mut ciphertext = Vec::new();
        let mut writer = encryptor.wrap_output(&mut ciphertext).unwrap();
        writer.write_all(&plaintext).unwrap();
        writer.finish().unwrap();
        let mut out = vec![Constant::SealedSet(Box::new(SealedSet {
            ciphertext: Bytes(ciphertext),
        }))];
        for (index, (name, _)) in (0u32..).zip(secrets) {
            out.push(Constant::Secret(Box::new(Sealed {
                name: (*name).to_owned(),
                set: at,
                index,
            })));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::sealing::sealed_set;
    use super::*;

    fn enrolled(dir: &std::path::Path, name: &str) -> (StateDir, String) {
        let state = StateDir::open(&dir.join(name)).unwrap();
        let identity = crate::identity::enroll(&state, Some(name), name, false).unwrap();
        (state, identity.age_recipient)
    }

    /// Two secrets sealed to one set of hosts: the set is decrypted once,
    /// however many secrets (and reveals) use it; a host outside the set,
    /// or one never enrolled, is told so, naming the secret.
    #[test]
    fn a_recipient_opens_each_set_once_and_others_are_told_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let (a, a_recipient) = enrolled(dir.path(), "a");
        let (b, _) = enrolled(dir.path(), "b");
        let mut constants = sealed_set(
            0,
            &[&a_recipient],
            &[("db_password", "s3cret-one"), ("api_token", "s3cret-two")],
        );
        constants.push(Constant::Str("plain".into()));
        let body = Body::with_programs(constants, Vec::new());

        let mut ring = Keyring::new(Some(&a));
        assert_eq!(
            ring.sets_opened(),
            0,
            "nothing is opened before it is needed"
        );
        let one = ring.reveal(&body, 1).unwrap();
        assert_eq!(one.expose(), "s3cret-one");
        assert_eq!(one.label(), "<secret db_password>");
        assert_eq!(ring.reveal(&body, 2).unwrap().expose(), "s3cret-two");
        assert_eq!(ring.reveal(&body, 1).unwrap().expose(), "s3cret-one");
        assert_eq!(ring.sets_opened(), 1);
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
        assert_eq!(other.sets_opened(), 1, "a failed set is not tried again");

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
        let body = Body::with_programs(sealed_set(0, &[&a_recipient], &[("s", "v")]), Vec::new());
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

    /// A secret constant pointing at another secret's entry of its set (a
    /// damaged or hand-made bundle) gets nothing: the entry's name must be
    /// the secret's.
    #[test]
    fn a_secret_naming_another_entry_of_its_set_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (a, a_recipient) = enrolled(dir.path(), "a");
        let mut constants = sealed_set(0, &[&a_recipient], &[("one", "v1"), ("two", "v2")]);
        if let Some(Constant::Secret(s)) = constants.get_mut(1) {
            s.index = 1;
        }
        let body = Body::with_programs(constants, Vec::new());
        let mut ring = Keyring::new(Some(&a));
        let err = ring.reveal(&body, 1).unwrap_err();
        assert_eq!(
            err,
            "secret one cannot be decrypted: entry 1 of sealed set 0 is not it (a damaged bundle)"
        );
        assert!(!err.contains("v2"));
        assert_eq!(ring.reveal(&body, 2).unwrap().expose(), "v2");
    }
}
