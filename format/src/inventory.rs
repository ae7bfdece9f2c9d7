//! The inventory (`inventory.toml`, LANGUAGE.md §16): the hosts of a site,
//! their public identities and what is known of them before they report.
//!
//! ```toml
//! [[host]]
//! name = "web-01"                      # the name the host reports under
//! report_key = "ed25519:BASE64"        # signs its reports (policyvm enroll)
//! age_recipient = "age1..."            # receives its secrets
//! groups = ["web", "eu"]               # classes `group_web`, `group_eu`
//! facts = { datacenter = "eu-1", rack = 12 }
//! # previous_report_keys = ["ed25519:..."]  # accepted during a key rotation
//! # revoked = true                      # every report refused
//! ```
//!
//! Read by `policyc` (checked, with errors at file:line:col: spans come
//! from [`toml::Spanned`]) and by `converge-collector` (the keys it
//! verifies reports with). `policyvm enroll` prints an entry of this shape.

use std::collections::BTreeMap;
use std::ops::Range;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ed25519_dalek::VerifyingKey;
use serde::Deserialize;
use toml::Spanned;

/// The prefix of a report key in the inventory.
pub const REPORT_KEY_PREFIX: &str = "ed25519:";

/// A parsed, checked inventory.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inventory {
    #[serde(default, rename = "host")]
    pub hosts: Vec<Host>,
}

/// One `[[host]]` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    pub name: Spanned<String>,
    pub report_key: Spanned<String>,
    #[serde(default)]
    pub age_recipient: Option<Spanned<String>>,
    #[serde(default)]
    pub groups: Vec<Spanned<String>>,
    #[serde(default)]
    pub facts: BTreeMap<String, Spanned<FactValue>>,
    #[serde(default)]
    pub previous_report_keys: Vec<Spanned<String>>,
    #[serde(default)]
    pub revoked: bool,
}

/// A static fact: a string, an integer or a boolean.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum FactValue {
    Bool(bool),
    Int(i64),
    Str(String),
}

/// A problem in the inventory, at a byte range of its text when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InventoryError {
    pub kind: InventoryErrorKind,
    pub message: String,
    pub span: Option<Range<usize>>,
    /// What to do about it.
    pub help: Option<String>,
}

/// What kind of problem an [`InventoryError`] is: `policyc` gives each kind
/// its own diagnostic code (docs/diagnostics.md, `E08xx`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InventoryErrorKind {
    /// Not TOML.
    Syntax,
    /// TOML of another shape: an unknown or missing field, a value of the
    /// wrong type.
    Shape,
    /// A host or group name the inventory does not accept.
    Name,
    /// A host listed twice, or two hosts whose names define one class.
    Duplicate,
    /// A report key or age recipient that is not one.
    Key,
}

impl std::fmt::Display for InventoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        if let Some(help) = &self.help {
            write!(f, " ({help})")?;
        }
        Ok(())
    }
}

impl std::error::Error for InventoryError {}

fn error(
    kind: InventoryErrorKind,
    message: String,
    span: Range<usize>,
    help: Option<&str>,
) -> InventoryError {
    InventoryError {
        kind,
        message,
        span: Some(span),
        help: help.map(str::to_owned),
    }
}

/// Whether `name` is a host name the inventory accepts: letters, digits,
/// `-`, `.` and `_`, starting with a letter or digit, at most 253 bytes.
pub fn is_host_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    name.len() <= 253
        && bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
}

/// The class a host name defines on its host (`host_web_01`), as the VM
/// derives it from the hostname (LANGUAGE.md §3).
pub fn host_class(name: &str) -> String {
    format!("host_{}", identifier(name))
}

/// The class a group defines on its members (`group_web`).
pub fn group_class(group: &str) -> String {
    format!("group_{}", identifier(group))
}

fn identifier(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Decodes `ed25519:BASE64` into a verifying key.
pub fn parse_report_key(text: &str) -> Result<VerifyingKey, String> {
    let b64 = text.strip_prefix(REPORT_KEY_PREFIX).ok_or_else(|| {
        format!("a report key starts with {REPORT_KEY_PREFIX:?} (as `policyvm enroll` prints it)")
    })?;
    let bytes = STANDARD
        .decode(b64)
        .map_err(|e| format!("the report key is not base64: {e}"))?;
    let bytes = <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| format!("the report key is {} bytes, expected 32", bytes.len()))?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| "the report key is not an Ed25519 key".to_owned())
}

/// Encodes a verifying key as the inventory writes it.
pub fn format_report_key(key: &VerifyingKey) -> String {
    format!("{REPORT_KEY_PREFIX}{}", STANDARD.encode(key.as_bytes()))
}

/// A `[[host]]` entry as `inventory.toml` holds it: what `policyvm
/// enroll` prints, and what tests and load generators write. `extra` lines
/// (`groups = [...]`, `facts = {...}`) follow the keys. Host names (checked
/// by [`is_host_name`]), base64 and bech32 need no escaping in a TOML
/// string.
pub fn host_entry(
    name: &str,
    report_key: &VerifyingKey,
    age_recipient: Option<&str>,
    previous: Option<&VerifyingKey>,
    extra: &str,
) -> String {
    let mut entry = format!(
        "[[host]]\nname = \"{name}\"\nreport_key = \"{}\"\n",
        format_report_key(report_key)
    );
    if let Some(recipient) = age_recipient {
        entry.push_str(&format!("age_recipient = \"{recipient}\"\n"));
    }
    if let Some(previous) = previous {
        entry.push_str(&format!(
            "previous_report_keys = [\"{}\"]\n",
            format_report_key(previous)
        ));
    }
    if !extra.is_empty() {
        entry.push_str(extra.trim_end_matches('\n'));
        entry.push('\n');
    }
    entry
}

/// Whether `text` looks like an age X25519 recipient (`age1` + bech32).
/// The full check (checksum) belongs to the code that encrypts.
pub fn looks_like_age_recipient(text: &str) -> bool {
    text.len() == 62
        && text.starts_with("age1")
        && text
            .bytes()
            .skip(4)
            .all(|b| b"qpzry9x8gf2tvdw0s3jn54khce6mua7l".contains(&b))
}

impl Inventory {
    /// Parses and checks inventory text: TOML syntax and shape, then every
    /// rule of its own (names, keys, duplicates). All problems are returned,
    /// each at its span.
    pub fn parse(text: &str) -> Result<Inventory, Vec<InventoryError>> {
        let toml_error = |kind, e: toml::de::Error| {
            vec![InventoryError {
                kind,
                message: e.message().trim_end().to_owned(),
                span: e.span(),
                help: None,
            }]
        };
        // Syntax first, on its own, so that "not TOML" and "TOML of the
        // wrong shape" are told apart (each has its own code in policyc).
        toml::from_str::<toml::Table>(text)
            .map_err(|e| toml_error(InventoryErrorKind::Syntax, e))?;
        let inventory: Inventory =
            toml::from_str(text).map_err(|e| toml_error(InventoryErrorKind::Shape, e))?;
        let errors = inventory.problems();
        if errors.is_empty() {
            Ok(inventory)
        } else {
            Err(errors)
        }
    }

    fn problems(&self) -> Vec<InventoryError> {
        let mut errors = Vec::new();
        let mut seen: BTreeMap<&str, Range<usize>> = BTreeMap::new();
        let mut classes: BTreeMap<String, &str> = BTreeMap::new();
        for host in &self.hosts {
            let name = host.name.get_ref();
            if !is_host_name(name) {
                errors.push(error(
                    InventoryErrorKind::Name,
                    format!("{name:?} is not a host name"),
                    host.name.span(),
                    Some("use letters, digits, `-`, `.` and `_`, starting with a letter or digit"),
                ));
            } else if seen.insert(name, host.name.span()).is_some() {
                errors.push(error(
                    InventoryErrorKind::Duplicate,
                    format!("host {name:?} is listed twice"),
                    host.name.span(),
                    Some("keep one entry per host"),
                ));
            } else if let Some(other) = classes.insert(host_class(name), name) {
                errors.push(error(
                    InventoryErrorKind::Duplicate,
                    format!(
                        "hosts {other:?} and {name:?} both define class {}",
                        host_class(name)
                    ),
                    host.name.span(),
                    Some("rename one of them"),
                ));
            }
            let keys = std::iter::once(&host.report_key).chain(&host.previous_report_keys);
            for key in keys {
                if let Err(e) = parse_report_key(key.get_ref()) {
                    errors.push(error(
                        InventoryErrorKind::Key,
                        e,
                        key.span(),
                        Some("paste the line `policyvm enroll` printed on the host"),
                    ));
                }
            }
            if let Some(recipient) = &host.age_recipient {
                if !looks_like_age_recipient(recipient.get_ref()) {
                    errors.push(error(
                        InventoryErrorKind::Key,
                        format!("{:?} is not an age recipient", recipient.get_ref()),
                        recipient.span(),
                        Some("an age recipient is `age1` and 58 more characters, as `policyvm enroll` prints it"),
                    ));
                }
            }
            for group in &host.groups {
                if identifier(group.get_ref()) != *group.get_ref() || group.get_ref().is_empty() {
                    errors.push(error(
                        InventoryErrorKind::Name,
                        format!("{:?} is not a group name", group.get_ref()),
                        group.span(),
                        Some("use letters, digits and `_`"),
                    ));
                }
            }
        }
        errors
    }

    /// The host named `name`.
    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name.get_ref() == name)
    }
}

impl Host {
    /// The keys a report from this host may be signed with: the current
    /// one, then those of a rotation in progress. None when revoked.
    pub fn report_keys(&self) -> Vec<VerifyingKey> {
        if self.revoked {
            return Vec::new();
        }
        std::iter::once(&self.report_key)
            .chain(&self.previous_report_keys)
            .filter_map(|k| parse_report_key(k.get_ref()).ok())
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn key(seed: u8) -> String {
        format_report_key(&ed25519_dalek::SigningKey::from_bytes(&[seed; 32]).verifying_key())
    }

    #[test]
    fn a_valid_inventory_parses_with_its_keys() {
        let text = format!(
            "[[host]]\nname = \"web-01\"\nreport_key = \"{}\"\ngroups = [\"web\"]\n\
             facts = {{ datacenter = \"eu-1\", rack = 12, canary = true }}\n\
             [[host]]\nname = \"db-01\"\nreport_key = \"{}\"\nrevoked = true\n",
            key(1),
            key(2)
        );
        let inventory = Inventory::parse(&text).unwrap();
        assert_eq!(inventory.hosts.len(), 2);
        let web = inventory.host("web-01").unwrap();
        assert_eq!(web.report_keys().len(), 1);
        assert_eq!(
            web.facts.get("rack").map(|v| v.get_ref().clone()),
            Some(FactValue::Int(12))
        );
        assert!(inventory.host("db-01").unwrap().report_keys().is_empty());
        assert_eq!(host_class("web-01"), "host_web_01");
    }

    #[test]
    fn each_problem_is_reported_at_its_span() {
        let text = format!(
            "[[host]]\nname = \"web-01\"\nreport_key = \"{}\"\n\
             [[host]]\nname = \"web-01\"\nreport_key = \"ed25519:AAAA\"\n\
             age_recipient = \"age1nope\"\n",
            key(1)
        );
        let errors = Inventory::parse(&text).unwrap_err();
        let found: Vec<(&str, &str)> = errors
            .iter()
            .map(|e| (e.message.as_str(), &text[e.span.clone().unwrap()]))
            .collect();
        assert_eq!(
            found,
            vec![
                ("host \"web-01\" is listed twice", "\"web-01\""),
                ("the report key is 3 bytes, expected 32", "\"ed25519:AAAA\""),
                ("\"age1nope\" is not an age recipient", "\"age1nope\""),
            ]
        );
    }

    #[test]
    fn an_unknown_field_is_a_shape_error_with_a_span() {
        let errors = Inventory::parse("[[host]]\nname = \"a\"\nreportkey = \"x\"\n").unwrap_err();
        let first = errors.first().unwrap();
        assert!(first.message.contains("unknown field `reportkey`"));
        assert_eq!(first.kind, InventoryErrorKind::Shape);
        assert!(first.span.is_some());
    }

    #[test]
    fn text_that_is_not_toml_is_a_syntax_error() {
        let errors = Inventory::parse("[[host]\nname = \"a\"\n").unwrap_err();
        assert_eq!(errors.len(), 1);
        let first = errors.first().unwrap();
        assert_eq!(first.kind, InventoryErrorKind::Syntax);
        assert!(first.span.is_some());
    }

    #[test]
    fn each_rule_has_its_kind() {
        let text = format!(
            "[[host]]\nname = \"-web\"\nreport_key = \"{k}\"\ngroups = [\"a-b\"]\n\
             [[host]]\nname = \"web.1\"\nreport_key = \"{k}\"\n\
             [[host]]\nname = \"web_1\"\nreport_key = \"nope\"\n",
            k = key(1)
        );
        let kinds: Vec<InventoryErrorKind> = Inventory::parse(&text)
            .unwrap_err()
            .iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(
            kinds,
            vec![
                InventoryErrorKind::Name,
                InventoryErrorKind::Name,
                InventoryErrorKind::Duplicate,
                InventoryErrorKind::Key,
            ]
        );
    }
}
