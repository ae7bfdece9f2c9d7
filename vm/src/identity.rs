//! The host's identity (`policyvm enroll`), in `STATE/identity/` (0700):
//!
//! ```text
//! name                  the name the host reports under (the inventory's)
//! report.key            Ed25519 secret that signs its run reports
//! report.key.previous   the one before a rotation (see below)
//! age.key               X25519 identity its secrets are encrypted to
//! age.key.previous      the one before a rotation
//! ```
//!
//! `report.key` is a key file in the layout of the bundle keys
//! (`converge_format::bundle::keys`) with its own tag, `CVrk`, so it can
//! never be mistaken for (or used as) a bundle signing key; `age.key` is in
//! `age-keygen`'s format (`# public key: age1...` then
//! `AGE-SECRET-KEY-1...`), so the age tools read it as it is.
//!
//! Every file is 0600 and written with the one atomic write. A key others
//! can read, or, when the VM runs as root, one not owned by root, is
//! refused: whoever reads it can sign reports as this host.
//!
//! Rotation (`--rotate`) keeps the old keys as `*.previous` and prints the
//! old report key as `previous_report_keys`, so the collector still accepts
//! the reports spooled before it (docs/operations.md, "Host identity").

use std::str::FromStr as _;

use age::secrecy::ExposeSecret as _;
use converge_format::bundle::keys::{decode_key_file, encode_key_file, key_id};
use converge_format::inventory::{host_entry, is_host_name};
use ed25519_dalek::{SigningKey, VerifyingKey};

use crate::state::{FileInfo, StateDir, SubDir};

pub const IDENTITY: &str = "identity";
pub const NAME: &str = "name";
pub const REPORT_KEY: &str = "report.key";
pub const PREVIOUS_REPORT_KEY: &str = "report.key.previous";
pub const AGE_KEY: &str = "age.key";
pub const PREVIOUS_AGE_KEY: &str = "age.key.previous";

/// The tag of a report signing key file (bundle keys are `CVsk`/`CVpk`).
pub const REPORT_KEY_TAG: &[u8; 4] = b"CVrk";

/// The largest identity file read.
const MAX_IDENTITY_FILE: usize = 4096;

/// A host's identity, as loaded or just made.
#[derive(Debug)]
pub struct HostIdentity {
    pub name: String,
    pub report_key: SigningKey,
    /// The report key before the last rotation, while it is kept.
    pub previous_report_key: Option<VerifyingKey>,
    /// `age1...`: what secrets for this host are encrypted to.
    pub age_recipient: String,
}

impl HostIdentity {
    /// The host's `[[host]]` entry for `inventory.toml`
    /// (`converge_format::inventory`).
    pub fn inventory_entry(&self) -> String {
        host_entry(
            &self.name,
            &self.report_key.verifying_key(),
            Some(&self.age_recipient),
            self.previous_report_key.as_ref(),
            "",
        )
    }
}

/// Why `enroll` made no identity.
#[derive(Debug, PartialEq, Eq)]
pub enum EnrollError {
    /// An identity exists and `--rotate` was not given.
    Enrolled {
        name: String,
    },
    /// The name cannot be a host name in the inventory.
    BadName(String),
    Invalid(String),
    Io(String),
}

impl std::fmt::Display for EnrollError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnrollError::Enrolled { name } => write!(
                f,
                "this host is already enrolled as {name:?} (identity/report.key exists); \
                 nothing was changed. `policyvm enroll --rotate` makes new keys and keeps the \
                 old report key for the rotation window"
            ),
            EnrollError::BadName(name) => write!(
                f,
                "{name:?} cannot be a host name in the inventory: use letters, digits, `-`, `.` \
                 and `_`, starting with a letter or digit (`--name NAME`)"
            ),
            EnrollError::Invalid(e) | EnrollError::Io(e) => f.write_str(e),
        }
    }
}

fn io(dir: &SubDir, file: &str) -> impl Fn(std::io::Error) -> EnrollError {
    let shown = dir.path(file).display().to_string();
    move |e| EnrollError::Io(format!("cannot write `{shown}`: {e}"))
}

/// Makes this host's keys in `state`'s `identity/` (see the module
/// comment). `name` is the inventory name; with `rotate`, an existing
/// identity's keys become the `*.previous` ones and its name is kept
/// unless `name` is given.
pub fn enroll(
    state: &StateDir,
    name: Option<&str>,
    default_name: &str,
    rotate: bool,
) -> Result<HostIdentity, EnrollError> {
    let dir = state
        .subdir(IDENTITY, 0o700)
        .map_err(|e| EnrollError::Io(format!("cannot create the identity directory: {e}")))?;
    guard(&dir, None).map_err(EnrollError::Invalid)?;
    let existing = read_identity(&dir).map_err(EnrollError::Invalid)?;
    let name = match (name, &existing) {
        (Some(n), _) => n.to_owned(),
        (None, Some(old)) => old.name.clone(),
        (None, None) => default_name.to_owned(),
    };
    if !is_host_name(&name) {
        return Err(EnrollError::BadName(name));
    }
    let mut previous_report_key = None;
    if let Some(old) = &existing {
        if !rotate {
            return Err(EnrollError::Enrolled {
                name: old.name.clone(),
            });
        }
        // Copies, not renames: a crash at any point leaves `report.key`
        // usable, and running `--rotate` again finishes the job.
        for (file, previous) in [
            (REPORT_KEY, PREVIOUS_REPORT_KEY),
            (AGE_KEY, PREVIOUS_AGE_KEY),
        ] {
            if let Some(bytes) = dir
                .read(file, MAX_IDENTITY_FILE)
                .map_err(|e| EnrollError::Io(e.to_string()))?
            {
                dir.write(previous, &bytes, 0o600)
                    .map_err(io(&dir, previous))?;
            }
        }
        previous_report_key = Some(old.report_key.verifying_key());
    }

    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed)
        .map_err(|e| EnrollError::Io(format!("no randomness for a new key: {e}")))?;
    let report_key = SigningKey::from_bytes(&seed);
    let public = report_key.verifying_key().to_bytes();
    let key_text = encode_key_file("report secret", REPORT_KEY_TAG, key_id(&public), &seed);
    let age = age::x25519::Identity::generate();
    let age_recipient = age.to_public().to_string();
    let age_text = format!(
        "# created: {}\n# public key: {age_recipient}\n{}\n",
        crate::stamp::time::format_utc(now()),
        age.to_string().expose_secret()
    );
    dir.write(AGE_KEY, age_text.as_bytes(), 0o600)
        .map_err(io(&dir, AGE_KEY))?;
    dir.write(REPORT_KEY, key_text.as_bytes(), 0o600)
        .map_err(io(&dir, REPORT_KEY))?;
    dir.write(NAME, format!("{name}\n").as_bytes(), 0o600)
        .map_err(io(&dir, NAME))?;
    Ok(HostIdentity {
        name,
        report_key,
        previous_report_key,
        age_recipient,
    })
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Whether this host has a report key (not whether it is usable: see
/// [`load`]).
pub fn exists(state: &StateDir) -> bool {
    state.has(IDENTITY)
        && state
            .subdir(IDENTITY, 0o700)
            .and_then(|dir| dir.stat(REPORT_KEY))
            .is_ok_and(|info| info.is_some())
}

/// This host's identity: `Ok(None)` when it was never enrolled, an error
/// saying what to fix when a file is unsafe or unreadable.
pub fn load(state: &StateDir) -> Result<Option<HostIdentity>, String> {
    // Not created here: a host that never enrolled has no identity/.
    if !state.has(IDENTITY) {
        return Ok(None);
    }
    let dir = state
        .subdir(IDENTITY, 0o700)
        .map_err(|e| format!("cannot open the identity directory: {e}"))?;
    guard(&dir, None)?;
    read_identity(&dir)
}

fn read_identity(dir: &SubDir) -> Result<Option<HostIdentity>, String> {
    let Some(key_bytes) = read_guarded(dir, REPORT_KEY)? else {
        return Ok(None);
    };
    let key_text = String::from_utf8_lossy(&key_bytes);
    let shown = dir.path(REPORT_KEY).display().to_string();
    let (id, seed) = decode_key_file(&key_text, REPORT_KEY_TAG).map_err(|e| {
        format!("`{shown}` is not a report key: {e}; re-enroll with `policyvm enroll --rotate`")
    })?;
    let report_key = SigningKey::from_bytes(&seed);
    if key_id(&report_key.verifying_key().to_bytes()) != id {
        return Err(format!(
            "`{shown}`: the key id does not match the key (corrupted)"
        ));
    }
    let name = read_guarded(dir, NAME)?
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .filter(|n| is_host_name(n))
        .ok_or_else(|| {
            format!(
                "`{}` is missing or not a host name; re-enroll with `policyvm enroll --rotate --name NAME`",
                dir.path(NAME).display()
            )
        })?;
    let previous_report_key = match read_guarded(dir, PREVIOUS_REPORT_KEY)? {
        Some(bytes) => decode_key_file(&String::from_utf8_lossy(&bytes), REPORT_KEY_TAG)
            .ok()
            .map(|(_, seed)| SigningKey::from_bytes(&seed).verifying_key()),
        None => None,
    };
    let age_recipient = match read_guarded(dir, AGE_KEY)? {
        Some(bytes) => age_recipient(&String::from_utf8_lossy(&bytes)).ok_or_else(|| {
            format!(
                "`{}` holds no age identity (AGE-SECRET-KEY-1...)",
                dir.path(AGE_KEY).display()
            )
        })?,
        None => {
            return Err(format!(
                "`{}` is missing; re-enroll with `policyvm enroll --rotate`",
                dir.path(AGE_KEY).display()
            ))
        }
    };
    Ok(Some(HostIdentity {
        name,
        report_key,
        previous_report_key,
        age_recipient,
    }))
}

/// This host's age identity (`identity/age.key`), which the secrets of a
/// bundle are sealed to (issue 20): `Ok(None)` when the host never
/// enrolled. The same guards as [`load`] (0600, owned by root when running
/// as root); the file's text is wiped from memory once parsed.
pub fn load_age_identity(state: &StateDir) -> Result<Option<age::x25519::Identity>, String> {
    if !state.has(IDENTITY) {
        return Ok(None);
    }
    let dir = state
        .subdir(IDENTITY, 0o700)
        .map_err(|e| format!("cannot open the identity directory: {e}"))?;
    guard(&dir, None)?;
    let Some(bytes) = read_guarded(&dir, AGE_KEY)?.map(zeroize::Zeroizing::new) else {
        return Ok(None);
    };
    age_identity(std::str::from_utf8(&bytes).unwrap_or_default())
        .map(Some)
        .ok_or_else(|| {
            format!(
                "`{}` holds no age identity (AGE-SECRET-KEY-1...); re-enroll with `policyvm enroll --rotate`",
                dir.path(AGE_KEY).display()
            )
        })
}

/// The recipient of the age identity in an `age-keygen` file.
fn age_recipient(text: &str) -> Option<String> {
    age_identity(text).map(|identity| identity.to_public().to_string())
}

/// The age identity of an `age-keygen` file.
pub(crate) fn age_identity(text: &str) -> Option<age::x25519::Identity> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("AGE-SECRET-KEY-"))?;
    age::x25519::Identity::from_str(line).ok()
}

fn read_guarded(dir: &SubDir, file: &str) -> Result<Option<Vec<u8>>, String> {
    let Some(info) = dir.stat(file).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    guard(dir, Some((file, info)))?;
    dir.read(file, MAX_IDENTITY_FILE)
        .map_err(|e| format!("cannot read `{}`: {e}", dir.path(file).display()))
}

/// A secret others can read, or (as root) one not owned by root, signs
/// reports for whoever reads it: refused, with what to do.
fn guard(dir: &SubDir, file: Option<(&str, FileInfo)>) -> Result<(), String> {
    let (shown, info) = match file {
        Some((name, info)) => (dir.path(name), info),
        None => (
            dir.path(""),
            dir.info()
                .map_err(|e| format!("cannot stat the identity directory: {e}"))?,
        ),
    };
    if info.mode & 0o077 != 0 {
        return Err(format!(
            "the host identity `{}` is readable or writable by group or others (mode {:o}): \
             whoever reads it can sign reports as this host; `chmod go-rwx` it, and rotate \
             the keys (`policyvm enroll --rotate`) if others may have read them",
            shown.display(),
            info.mode
        ));
    }
    if rustix::process::geteuid().is_root() && info.uid != 0 {
        return Err(format!(
            "the host identity `{}` is owned by uid {}, not root: that user can read or \
             replace this host's keys; `chown root` it and rotate the keys",
            shown.display(),
            info.uid
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use converge_format::inventory::Inventory;

    #[test]
    fn enrolling_makes_private_files_and_a_parseable_inventory_entry() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(&dir.path().join("state")).unwrap();
        let made = enroll(&state, None, "web-01", false).unwrap();
        let entry = made.inventory_entry();
        let inventory = Inventory::parse(&entry).unwrap();
        let host = inventory.hosts.first().unwrap();
        assert_eq!(host.name.get_ref(), "web-01");
        for file in [REPORT_KEY, AGE_KEY, NAME] {
            let mode = std::fs::metadata(state.path(IDENTITY).join(file))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{file}");
        }
        let loaded = load(&state).unwrap().unwrap();
        assert_eq!(loaded.inventory_entry(), entry);
        assert!(std::fs::read_to_string(state.path(IDENTITY).join(AGE_KEY))
            .unwrap()
            .contains(&format!("# public key: {}\n", loaded.age_recipient)));
    }

    #[test]
    fn a_second_enroll_is_refused_and_a_rotation_keeps_the_old_key() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(&dir.path().join("state")).unwrap();
        let first = enroll(&state, Some("db-1"), "ignored", false).unwrap();
        assert_eq!(
            enroll(&state, None, "x", false).unwrap_err(),
            EnrollError::Enrolled {
                name: "db-1".to_owned()
            }
        );
        let second = enroll(&state, None, "x", true).unwrap();
        assert_eq!(second.name, "db-1");
        assert_ne!(
            second.report_key.verifying_key(),
            first.report_key.verifying_key()
        );
        assert_eq!(
            second.previous_report_key,
            Some(first.report_key.verifying_key())
        );
        assert_ne!(second.age_recipient, first.age_recipient);
        let loaded = load(&state).unwrap().unwrap();
        assert_eq!(
            loaded.previous_report_key,
            Some(first.report_key.verifying_key())
        );
        assert!(loaded.inventory_entry().contains("previous_report_keys"));
    }

    #[test]
    fn an_identity_others_can_read_is_refused_and_no_identity_is_none() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(&dir.path().join("state")).unwrap();
        assert!(load(&state).unwrap().is_none());
        assert!(!exists(&state));
        assert!(!state.path(IDENTITY).exists(), "load creates nothing");
        enroll(&state, Some("h"), "h", false).unwrap();
        assert!(exists(&state));
        let key = state.path(IDENTITY).join(REPORT_KEY);
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = load(&state).unwrap_err();
        assert!(
            err.contains("readable or writable by group or others (mode 644)"),
            "{err}"
        );
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(state.path(IDENTITY), std::fs::Permissions::from_mode(0o750))
            .unwrap();
        assert!(load(&state).unwrap_err().contains("chmod go-rwx"));
        std::fs::set_permissions(state.path(IDENTITY), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        assert!(load(&state).unwrap().is_some());
        // As root, a key another user owns is refused (that user can read it).
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&key, Some(1000), None).unwrap();
            let err = load(&state).unwrap_err();
            assert!(err.contains("owned by uid 1000, not root"), "{err}");
        }
    }

    #[test]
    fn a_bad_name_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(&dir.path().join("state")).unwrap();
        let err = enroll(&state, Some("-bad name"), "x", false).unwrap_err();
        assert!(err.to_string().contains("cannot be a host name"), "{err}");
        assert!(load(&state).unwrap().is_none());
    }
}
