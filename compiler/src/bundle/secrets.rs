//! Sealing the secrets of a bundle to the hosts entitled to them
//! (LANGUAGE.md section 14, format 2.4, docs/secrets.md).
//!
//! Lowering writes each secret as a placeholder constant (its name, set
//! [`UNSEALED`]); [`seal_secrets`] replaces every one:
//!
//! 1. [`plan`]: for each secret, the inventory hosts that can activate a
//!    promise using it (`entitle`), revoked hosts never;
//! 2. the secrets going to exactly the same set of hosts, decrypted here
//!    with the builder's identities (`policyc build --identity`), are
//!    sealed together: one age file to the `age_recipient` of every host
//!    of the set (a `SealedSet` constant);
//! 3. each secret becomes a `Sealed` constant naming its set and its entry
//!    in it. The plaintexts live only in [`Zeroizing`] buffers, for the
//!    time it takes to encrypt them again.
//!
//! So a host decrypts only the sets it is a recipient of; the hub and
//! mirrors see ciphertext; a build pays one X25519 per host per set and a
//! run one per set. age encryption is randomized: a bundle with secrets is
//! not byte-reproducible (one without is).

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::sync::Arc;

use converge_format::bundle::format::{Body, Bytes, Constant, Sealed, SealedSet};
use converge_format::inventory::Inventory;
use zeroize::Zeroizing;

use super::entitle::Entitlement;
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{self, SecretRef};
use crate::sema::secrets::secrets_in;

/// The set index of a secret constant that lowering wrote and sealing has
/// not yet replaced (a bundle holding one fails verification).
pub const UNSEALED: u32 = u32::MAX;

/// The builder's age identities (`policyc build --identity FILE`, any
/// number), which decrypt the secret files of the policy tree.
pub struct Identities {
    identities: Vec<Box<dyn age::Identity>>,
    files: Vec<PathBuf>,
}

impl std::fmt::Debug for Identities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<identities from {:?}>", self.files)
    }
}

impl Identities {
    /// No identity: enough for a policy without secrets.
    pub fn none() -> Self {
        Identities {
            identities: Vec::new(),
            files: Vec::new(),
        }
    }

    /// Reads age identity files (`AGE-SECRET-KEY-1...` lines, `#`
    /// comments), as `age-keygen` and `policyvm enroll` write them.
    pub fn read(paths: &[PathBuf]) -> Result<Self, String> {
        let mut identities = Vec::new();
        for path in paths {
            identities.extend(read_identity_file(path)?);
        }
        Ok(Identities {
            identities,
            files: paths.to_vec(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.identities.is_empty()
    }

    /// Decrypts an age file (armored or binary) with these identities.
    pub fn decrypt(&self, ciphertext: &[u8]) -> Result<Zeroizing<Vec<u8>>, age::DecryptError> {
        decrypt_with(self.identities.iter().map(|i| i.as_ref()), ciphertext)
    }
}

/// The identities of one identity file.
pub fn read_identity_file(path: &Path) -> Result<Vec<Box<dyn age::Identity>>, String> {
    let text = Zeroizing::new(
        std::fs::read(path)
            .map_err(|e| format!("cannot read the identity `{}`: {e}", path.display()))?,
    );
    let file = age::IdentityFile::from_buffer(&text[..])
        .map_err(|e| format!("`{}` is not an age identity file: {e}", path.display()))?;
    let identities = file
        .into_identities()
        .map_err(|e| format!("`{}` is not an age identity file: {e}", path.display()))?;
    if identities.is_empty() {
        return Err(format!(
            "`{}` holds no age identity (an `AGE-SECRET-KEY-1...` line)",
            path.display()
        ));
    }
    Ok(identities)
}

/// Decrypts an age file, armored or binary.
pub fn decrypt_with<'i>(
    identities: impl Iterator<Item = &'i dyn age::Identity>,
    ciphertext: &[u8],
) -> Result<Zeroizing<Vec<u8>>, age::DecryptError> {
    let reader = age::armor::ArmoredReader::new(ciphertext);
    let decryptor = age::Decryptor::new(reader)?;
    let mut stream = decryptor.decrypt(identities)?;
    let mut plain = Zeroizing::new(Vec::new());
    stream.read_to_end(&mut plain)?;
    Ok(plain)
}

/// Encrypts `plaintext` (binary age format) to `recipients`.
pub fn encrypt_to<'r>(
    recipients: impl Iterator<Item = &'r dyn age::Recipient>,
    plaintext: &[u8],
) -> Result<Vec<u8>, String> {
    let encryptor = age::Encryptor::with_recipients(recipients).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(plaintext.len() + 256);
    let mut writer = encryptor.wrap_output(&mut out).map_err(|e| e.to_string())?;
    writer.write_all(plaintext).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok(out)
}

/// One secret of a program: the file, and the promises that use it.
#[derive(Debug)]
pub struct SecretUse {
    pub secret: Arc<SecretRef>,
    pub promises: Vec<usize>,
}

/// Every secret the program's promises hold, in the order first met, with
/// the promises holding each.
pub fn uses(program: &ir::Program) -> Vec<SecretUse> {
    let mut out: Vec<SecretUse> = Vec::new();
    let mut index: HashMap<Arc<SecretRef>, usize> = HashMap::new();
    for (i, p) in program.promises.iter().enumerate() {
        let mut found = Vec::new();
        for attr in &p.attrs {
            secrets_in(&attr.value, &mut found);
        }
        secrets_in(&p.promiser, &mut found);
        for secret in found {
            let at = *index.entry(Arc::clone(secret)).or_insert_with(|| {
                out.push(SecretUse {
                    secret: Arc::clone(secret),
                    promises: Vec::new(),
                });
                out.len() - 1
            });
            if let Some(u) = out.get_mut(at) {
                if u.promises.last() != Some(&i) {
                    u.promises.push(i);
                }
            }
        }
    }
    out
}

/// Who gets one secret, and why.
#[derive(Debug)]
pub struct Grant {
    pub secret: Arc<SecretRef>,
    /// Entitled hosts (indices into [`Plan::hosts`]), ascending, each with
    /// the first promise (index into the program) that entitles it.
    pub hosts: Vec<(usize, usize)>,
}

/// The hosts of the inventory and who gets which secret.
#[derive(Debug)]
pub struct Plan {
    pub hosts: Vec<super::entitle::HostView>,
    pub grants: Vec<Grant>,
}

/// Works out which hosts are entitled to each secret of `program`.
pub fn plan(program: &ir::Program, inventory: &Inventory) -> Plan {
    let mut e = Entitlement::new(inventory, &program.classes);
    // Promises of one block share their guard: evaluate each guard once.
    let mut by_guard: HashMap<*const ir::Guard, Vec<usize>> = HashMap::new();
    let mut grants = Vec::new();
    for u in uses(program) {
        let mut first: Vec<Option<usize>> = vec![None; e.hosts.len()];
        for &i in &u.promises {
            let Some(p) = program.promises.get(i) else {
                continue;
            };
            let key = Arc::as_ptr(&p.guard);
            let hosts = match by_guard.get(&key) {
                Some(h) => h,
                None => {
                    let h = e.entitled(&p.guard);
                    by_guard.entry(key).or_insert(h)
                }
            };
            for &h in hosts {
                if let Some(slot @ None) = first.get_mut(h) {
                    *slot = Some(i);
                }
            }
        }
        grants.push(Grant {
            secret: u.secret,
            hosts: first
                .iter()
                .enumerate()
                .filter_map(|(h, p)| p.map(|p| (h, p)))
                .collect(),
        });
    }
    Plan {
        hosts: e.hosts,
        grants,
    }
}

/// Replaces the placeholder secret constants of `body` with sealed ones
/// and adds one sealed set per set of hosts. `read` reads a secret file
/// (through the policy tree).
pub fn seal_secrets(
    body: &mut Body,
    program: &ir::Program,
    inventory: Option<&Inventory>,
    identities: &Identities,
    read: &dyn Fn(&SecretRef) -> Result<Vec<u8>, Diagnostic>,
) -> Result<(), Vec<Diagnostic>> {
    let placeholders = body
        .constants
        .0
        .iter()
        .any(|c| matches!(c, Constant::Secret(s) if s.set == UNSEALED));
    if !placeholders {
        return Ok(());
    }
    let Some(inventory) = inventory else {
        return Err(uses(program)
            .iter()
            .map(|u| {
                no_recipient(&u.secret, "there is no inventory to take the hosts' keys from".to_owned())
                    .with_help("add `inventory.toml` (hosts enrolled with `policyvm enroll`) at the root of the policy tree, or pass `--inventory FILE`")
            })
            .collect());
    };
    let plan = plan(program, inventory);
    let mut problems = Vec::new();
    // The recipients of every host that gets something.
    let mut recipients: HashMap<usize, age::x25519::Recipient> = HashMap::new();
    for grant in &plan.grants {
        if grant.hosts.is_empty() {
            problems.push(
                no_recipient(&grant.secret, "no host of the inventory can activate a promise using it".to_owned())
                    .with_help("add the hosts that need it to the inventory, or remove the promises that use it (`policyc explain --secrets` shows who gets what)"),
            );
            continue;
        }
        let mut missing = Vec::new();
        for &(h, _) in &grant.hosts {
            let Some(host) = plan.hosts.get(h) else {
                continue;
            };
            match host
                .recipient
                .as_deref()
                .map(age::x25519::Recipient::from_str)
            {
                Some(Ok(r)) => {
                    recipients.entry(h).or_insert(r);
                }
                Some(Err(_)) | None => missing.push(host.name.as_str()),
            }
        }
        if !missing.is_empty() {
            let shown: Vec<&str> = missing.iter().take(5).copied().collect();
            let more = missing.len().saturating_sub(shown.len());
            problems.push(
                no_recipient(
                    &grant.secret,
                    format!(
                        "host{} {}{} may use it but {} no `age_recipient` in the inventory",
                        if missing.len() == 1 { "" } else { "s" },
                        shown.join(", "),
                        if more > 0 { format!(" and {more} more") } else { String::new() },
                        if missing.len() == 1 { "has" } else { "have" },
                    ),
                )
                .with_help("enroll them with `policyvm enroll` and paste the printed entry (with `age_recipient`) into the inventory, or guard the promises so these hosts cannot activate them"),
            );
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    // The plaintexts, decrypted with the builder's identities.
    let mut plaintexts: HashMap<String, Zeroizing<Vec<u8>>> = HashMap::new();
    for grant in &plan.grants {
        match decrypt_secret(&grant.secret, identities, read) {
            Ok(p) => {
                plaintexts.insert(grant.secret.name.clone(), p);
            }
            Err(d) => problems.push(d),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    // Sets of hosts, in the order of the first secret that goes to each.
    let mut sets: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    let mut set_index: HashMap<Vec<usize>, usize> = HashMap::new();
    for (g, grant) in plan.grants.iter().enumerate() {
        let hosts: Vec<usize> = grant.hosts.iter().map(|(h, _)| *h).collect();
        let at = *set_index.entry(hosts.clone()).or_insert_with(|| {
            sets.push((hosts, Vec::new()));
            sets.len() - 1
        });
        if let Some(set) = sets.get_mut(at) {
            set.1.push(g);
        }
    }
    let sealed = seal_sets(&sets, &recipients, &plan, &plaintexts).map_err(|e| {
        vec![Diagnostic::unlocated(
            Code::SecretNoRecipient,
            format!("cannot seal the secrets: {e}"),
        )]
    })?;
    // Sealed sets go after every other constant; secrets take their place.
    let mut by_name: HashMap<String, Sealed> = HashMap::new();
    for (set, names) in sealed {
        let at = body.constants.0.len() as u32;
        body.constants.0.push(Constant::SealedSet(Box::new(set)));
        for (index, name) in (0u32..).zip(names) {
            by_name.insert(
                name.clone(),
                Sealed {
                    name,
                    set: at,
                    index,
                },
            );
        }
    }
    for c in body.constants.0.iter_mut() {
        if let Constant::Secret(s) = c {
            if s.set == UNSEALED {
                match by_name.get(&s.name) {
                    Some(sealed) => **s = sealed.clone(),
                    None => problems.push(Diagnostic::unlocated(
                        Code::InternalError,
                        format!("internal error: the secret `{}` was not sealed", s.name),
                    )),
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// A set sealed to its hosts, and the names of its secrets in entry order.
type Sealing = (SealedSet, Vec<String>);

/// Seals every set, on as many threads as the machine has (each set is
/// independent).
fn seal_sets(
    sets: &[(Vec<usize>, Vec<usize>)],
    recipients: &HashMap<usize, age::x25519::Recipient>,
    plan: &Plan,
    plaintexts: &HashMap<String, Zeroizing<Vec<u8>>>,
) -> Result<Vec<Sealing>, String> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 16);
    let chunk = sets.len().div_ceil(threads).max(1);
    let results: Vec<Result<Vec<Sealing>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = sets
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|set| seal_set(set, recipients, plan, plaintexts))
                        .collect::<Result<Vec<_>, String>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a sealing thread failed".to_owned()))
            })
            .collect()
    });
    let mut out = Vec::with_capacity(sets.len());
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}

fn seal_set(
    (hosts, grants): &(Vec<usize>, Vec<usize>),
    recipients: &HashMap<usize, age::x25519::Recipient>,
    plan: &Plan,
    plaintexts: &HashMap<String, Zeroizing<Vec<u8>>>,
) -> Result<Sealing, String> {
    let mut entries: Vec<(&str, &str)> = Vec::with_capacity(grants.len());
    for &g in grants {
        let Some(grant) = plan.grants.get(g) else {
            continue;
        };
        let name = grant.secret.name.as_str();
        let value = plaintexts
            .get(name)
            .and_then(|plain| std::str::from_utf8(plain).ok())
            .ok_or_else(|| format!("the secret `{name}` was not decrypted"))?;
        entries.push((name, value));
    }
    let plaintext = SealedSet::encode_plaintext(&entries)?;
    let to_hosts = hosts
        .iter()
        .filter_map(|h| recipients.get(h))
        .map(|r| r as &dyn age::Recipient);
    let ciphertext = encrypt_to(to_hosts, &plaintext)?;
    let names = entries.iter().map(|(name, _)| (*name).to_owned()).collect();
    Ok((
        SealedSet {
            ciphertext: Bytes(ciphertext),
        },
        names,
    ))
}

/// Reads and decrypts one secret file; the error points at its
/// `secret(...)` call and says what to do.
fn decrypt_secret(
    secret: &SecretRef,
    identities: &Identities,
    read: &dyn Fn(&SecretRef) -> Result<Vec<u8>, Diagnostic>,
) -> Result<Zeroizing<Vec<u8>>, Diagnostic> {
    let not_decrypted = |why: String, label: &str| {
        Diagnostic::new(
            Code::SecretNotDecrypted,
            format!("cannot decrypt the secret `{}`: {why}", secret.name),
            secret.span,
            label.to_owned(),
        )
    };
    if identities.is_empty() {
        return Err(not_decrypted(
            "`policyc build` was given no identity".to_owned(),
            "read here",
        )
        .with_help("pass the builder's age identity with `--identity FILE` (the key whose recipient the secret files are encrypted to: `secrets/.recipients`)"));
    }
    let ciphertext = read(secret)?;
    let plain = identities.decrypt(&ciphertext).map_err(|e| {
        let (why, help) = match e {
            age::DecryptError::NoMatchingKeys => (
                "none of the identities given with `--identity` is one of its recipients".to_owned(),
                "pass the identity the file is encrypted to, or re-encrypt it to yours with `policyc secret edit` (run by someone who can decrypt it) or `policyc secret rekey`",
            ),
            age::DecryptError::ExcessiveWork { .. } => (
                "it is encrypted with a passphrase".to_owned(),
                "encrypt secrets to recipients, not passphrases: `policyc secret add NAME --recipient age1...`",
            ),
            other => (other.to_string(), "check the file is a complete age file; recreate it with `policyc secret add`"),
        };
        not_decrypted(why, "read here").with_help(help)
    })?;
    if std::str::from_utf8(&plain).is_err() {
        return Err(Diagnostic::new(
            Code::SecretUnreadable,
            format!("the secret `{}` is not UTF-8 text", secret.name),
            secret.span,
            "read here",
        )
        .with_help("a secret is a string value; store binary secrets base64-encoded"));
    }
    Ok(plain)
}

/// Reads a secret file through the policy tree of the file that names it
/// (the path the checker resolved), for [`seal_secrets`].
pub fn read_secret(
    db: &crate::source::SourceDb,
    secret: &SecretRef,
) -> Result<Vec<u8>, Diagnostic> {
    let unreadable = |why: String| {
        Diagnostic::new(
            Code::SecretUnreadable,
            format!("cannot read the secret `{}`: {why}", secret.name),
            secret.span,
            "read here",
        )
    };
    let tree = db
        .tree(secret.span.file)
        .ok_or_else(|| unreadable("the standard library reads no secrets".to_owned()))?;
    tree.read(&secret.path, crate::sema::check::MAX_SECRET_BYTES)
        .map_err(|e| unreadable(e.to_string()))
}

fn no_recipient(secret: &SecretRef, why: String) -> Diagnostic {
    Diagnostic::new(
        Code::SecretNoRecipient,
        format!("cannot seal the secret `{}`: {why}", secret.name),
        secret.span,
        "read here",
    )
}
