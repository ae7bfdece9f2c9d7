//! The stamp: a small signed text file published next to a bundle, so that
//! a host learns whether anything changed by fetching a few hundred bytes
//! (CFEngine's `cf_promises_validated` idea), and learns enough to refuse
//! what The Update Framework calls mix-and-match, endless data, rollback and
//! freeze attacks before it downloads a bundle at all (THREATS.md T3-T6).
//!
//! ```text
//! converge-stamp 1
//! name site
//! serial 1795308900
//! length 634123
//! sha256 9de26b13...(64 hex digits)
//! published 2026-11-22T00:55:00Z
//! expires 2026-11-29T00:55:00Z
//! key 1a2b3c4d5e6f7a8b
//! signature (128 hex digits)
//! ```
//!
//! A staged rollout's stamp (`converge-stamp 2`, [`rollout`]) has four
//! more lines after `sha256`: `previous`, `previous-length`,
//! `previous-sha256` and `rollout`; a stamp without them (version 1) means
//! every host takes the named serial. An agent older than rollouts refuses
//! a version 2 stamp and keeps the bundle in force.
//!
//! Every line is required, once, in this order, spelled canonically (no
//! leading zeros, lowercase hex, UTC times): a stamp has exactly one byte
//! representation, and the parser checks that by re-encoding what it read.
//! The signature is Ed25519 over SHA-256 of every byte before the
//! `signature` line; the first line keeps it from ever being mistaken for a
//! bundle signature (bundles sign bytes starting with `CNVGBNDL`).

pub mod rollout;
pub mod time;

use ed25519_dalek::{Signature, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::bundle::error::hex;
use crate::bundle::keys::PublicKey;
use crate::bundle::Verified;
use rollout::{Release, Rollout, Who};

/// The largest stamp read (a plain one is about 350 bytes; a rollout to
/// explicit hosts lists their names). A server that sends more is cut off
/// here.
pub const MAX_STAMP_LEN: usize = 64 * 1024;

const FIRST_LINE: &str = "converge-stamp 1";
/// The first line of a rollout's stamp.
const ROLLOUT_FIRST_LINE: &str = "converge-stamp 2";

/// What a stamp says about the bundle it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The bundle's name, as in its signed header.
    pub name: String,
    /// The bundle's serial, as in its signed header.
    pub serial: u64,
    /// The bundle file's length in bytes: a download stops there.
    pub length: u64,
    /// SHA-256 of the bundle file.
    pub sha256: [u8; 32],
    /// When it was published (UNIX seconds).
    pub published: u64,
    /// After this (UNIX seconds), a host that still sees this stamp reports
    /// its policy source as stale: a mirror may be freezing it.
    pub expires: u64,
    /// The id of the key that signed it.
    pub key_id: [u8; 8],
    /// A staged rollout: only the hosts it selects take this serial, the
    /// others keep (or go back to) the previous release. `None`: everyone
    /// takes this serial.
    pub rollout: Option<Rollout>,
}

/// Why a stamp was refused. Each says what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StampError {
    TooLarge { len: usize },
    Malformed { line: usize, reason: String },
    UnknownKey { key_id: [u8; 8] },
    BadSignature,
}

impl std::fmt::Display for StampError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StampError::TooLarge { len } => write!(
                f,
                "the stamp is {len} bytes or more, over the {MAX_STAMP_LEN}-byte limit; \
                 the server is not serving a Converge stamp"
            ),
            StampError::Malformed { line, reason } => write!(
                f,
                "malformed stamp at line {line}: {reason}; republish with `policyc publish`"
            ),
            StampError::UnknownKey { key_id } => write!(
                f,
                "the stamp is signed by key {}, which is not in the trust directory; \
                 install its .pub file if the key is legitimate",
                hex(key_id)
            ),
            StampError::BadSignature => write!(
                f,
                "the stamp's signature does not verify: it was altered or forged"
            ),
        }
    }
}

impl std::error::Error for StampError {}

/// Whether `name` can name a bundle: it becomes a file name and part of a
/// URL, so 1-64 of `a-z`, `0-9`, `.`, `_` and `-`, starting with a letter
/// or digit.
pub fn name_problem(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    match chars.next() {
        None => Some("it is empty"),
        Some(c) if !(c.is_ascii_lowercase() || c.is_ascii_digit()) => {
            Some("it must start with a lowercase letter or a digit")
        }
        _ if name.len() > 64 => Some("it is longer than 64 characters"),
        _ if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c)) => {
            Some("only `a-z`, `0-9`, `.`, `_` and `-` are allowed")
        }
        _ => None,
    }
}

impl Stamp {
    /// The stamp for a bundle file's bytes, as verified.
    pub fn for_bundle(bundle: &Verified, published: u64, expires: u64) -> Stamp {
        Stamp {
            name: bundle.body.header.name.clone(),
            serial: bundle.body.header.serial,
            length: bundle.len as u64,
            sha256: bundle.digest,
            published,
            expires,
            key_id: bundle.key_id,
            rollout: None,
        }
    }

    /// The release this stamp is named for (the new one of a rollout).
    pub fn release(&self) -> Release {
        Release {
            serial: self.serial,
            length: self.length,
            sha256: self.sha256,
        }
    }

    /// The release `host` is to run under this stamp, and whether the
    /// host is selected for a rollout's new release (`None`: no rollout,
    /// everyone takes the stamp's serial).
    pub fn release_for(&self, host: &str) -> (Release, Option<bool>) {
        match &self.rollout {
            None => (self.release(), None),
            Some(r) if r.who.selects(&self.name, self.serial, host) => (self.release(), Some(true)),
            Some(r) => (r.previous, Some(false)),
        }
    }

    /// Every line but the signature: the bytes that are signed.
    pub fn signed_text(&self) -> String {
        let (first, rollout) = match &self.rollout {
            None => (FIRST_LINE, String::new()),
            Some(r) => (
                ROLLOUT_FIRST_LINE,
                format!(
                    "previous {}\nprevious-length {}\nprevious-sha256 {}\nrollout {}\n",
                    r.previous.serial,
                    r.previous.length,
                    hex(&r.previous.sha256),
                    r.who
                ),
            ),
        };
        format!(
            "{first}\nname {}\nserial {}\nlength {}\nsha256 {}\n{rollout}published {}\nexpires {}\nkey {}\n",
            self.name,
            self.serial,
            self.length,
            hex(&self.sha256),
            time::format_utc(self.published),
            time::format_utc(self.expires),
            hex(&self.key_id),
        )
    }

    /// The digest a publisher signs.
    pub fn signing_digest(&self) -> [u8; 32] {
        Sha256::digest(self.signed_text().as_bytes()).into()
    }

    /// The whole stamp file, given the signature over [`Self::signing_digest`].
    pub fn encode(&self, signature: &[u8; 64]) -> String {
        format!("{}signature {}\n", self.signed_text(), hex(signature))
    }

    /// Reads a stamp's fields without checking its signature: for a
    /// publisher comparing serials with what it published before, never for
    /// deciding what a host runs.
    pub fn parse_unverified(bytes: &[u8]) -> Result<(Stamp, [u8; 64]), StampError> {
        if bytes.len() > MAX_STAMP_LEN {
            return Err(StampError::TooLarge { len: bytes.len() });
        }
        let malformed = |line: usize, reason: &str| StampError::Malformed {
            line,
            reason: reason.to_owned(),
        };
        let text = std::str::from_utf8(bytes).map_err(|_| malformed(1, "not UTF-8 text"))?;
        let body = text
            .strip_suffix('\n')
            .ok_or_else(|| malformed(1, "it does not end with a newline"))?;
        let lines: Vec<&str> = body.split('\n').collect();
        let plain = [
            "name",
            "serial",
            "length",
            "sha256",
            "published",
            "expires",
            "key",
            "signature",
        ];
        let staged = [
            "name",
            "serial",
            "length",
            "sha256",
            "previous",
            "previous-length",
            "previous-sha256",
            "rollout",
            "published",
            "expires",
            "key",
            "signature",
        ];
        let keys: &[&str] = match lines.first() {
            Some(&FIRST_LINE) => &plain,
            Some(&ROLLOUT_FIRST_LINE) => &staged,
            _ => {
                return Err(malformed(
                    1,
                    "the first line must be `converge-stamp 1` (or `converge-stamp 2` for a \
                     staged rollout)",
                ))
            }
        };
        let expected = keys.len().saturating_add(1);
        if lines.len() != expected {
            return Err(malformed(
                lines.len().min(expected.saturating_add(1)),
                &format!("a stamp has exactly {expected} lines"),
            ));
        }
        let mut values = std::collections::BTreeMap::new();
        for ((number, line), key) in (2..).zip(lines.iter().skip(1)).zip(keys) {
            let value = line
                .strip_prefix(key)
                .and_then(|rest| rest.strip_prefix(' '))
                .ok_or_else(|| malformed(number, &format!("expected `{key} VALUE`")))?;
            values.insert(*key, (number, value));
        }
        let field = |key: &str| values.get(key).copied().unwrap_or((0, ""));
        let number = |(line, v): (usize, &str)| {
            v.parse::<u64>()
                .map_err(|_| malformed(line, "not a number"))
        };
        let date = |(line, v): (usize, &str)| {
            time::parse_utc(v)
                .ok_or_else(|| malformed(line, "not a time like 2026-11-22T00:55:00Z"))
        };
        let digest = |key: &str| {
            unhex(field(key)).ok_or_else(|| malformed(field(key).0, "not 64 hex digits"))
        };
        let (name_line, name) = field("name");
        if let Some(why) = name_problem(name) {
            return Err(malformed(name_line, &format!("invalid bundle name: {why}")));
        }
        let rollout = if values.contains_key("rollout") {
            let (who_line, who) = field("rollout");
            Some(Rollout {
                previous: Release {
                    serial: number(field("previous"))?,
                    length: number(field("previous-length"))?,
                    sha256: digest("previous-sha256")?,
                },
                who: Who::parse(who).map_err(|why| malformed(who_line, &why))?,
            })
        } else {
            None
        };
        let stamp = Stamp {
            name: name.to_owned(),
            serial: number(field("serial"))?,
            length: number(field("length"))?,
            sha256: digest("sha256")?,
            published: date(field("published"))?,
            expires: date(field("expires"))?,
            key_id: unhex(field("key"))
                .ok_or_else(|| malformed(field("key").0, "not 16 hex digits"))?,
            rollout,
        };
        if let Some(r) = &stamp.rollout {
            if r.previous.serial >= stamp.serial {
                return Err(malformed(
                    field("previous").0,
                    "the previous serial must be below the stamp's serial",
                ));
            }
        }
        let signature: [u8; 64] = unhex(field("signature"))
            .ok_or_else(|| malformed(field("signature").0, "not 128 hex digits"))?;
        if stamp.expires <= stamp.published {
            return Err(malformed(
                field("expires").0,
                "it expires before it was published",
            ));
        }
        // One spelling per stamp: leading zeros, `+` signs and the like do
        // not survive re-encoding.
        if stamp.encode(&signature).as_bytes() != bytes {
            return Err(malformed(1, "not in canonical form"));
        }
        Ok((stamp, signature))
    }

    /// Reads a stamp and checks its signature against the trusted keys.
    pub fn open(bytes: &[u8], trusted: &[PublicKey]) -> Result<Stamp, StampError> {
        let (stamp, signature) = Stamp::parse_unverified(bytes)?;
        let signature = Signature::from_bytes(&signature);
        let digest = stamp.signing_digest();
        let mut known = false;
        for key in trusted.iter().filter(|k| k.id == stamp.key_id) {
            known = true;
            let Ok(verifying) = VerifyingKey::from_bytes(&key.key) else {
                continue;
            };
            if verifying.verify_strict(&digest, &signature).is_ok() {
                return Ok(stamp);
            }
        }
        Err(if known {
            StampError::BadSignature
        } else {
            StampError::UnknownKey {
                key_id: stamp.key_id,
            }
        })
    }

    /// Whether `bundle` is the very bundle this stamp stands for; if not,
    /// which field differs.
    pub fn describes(&self, bundle: &Verified) -> Result<(), String> {
        self.describes_release(&self.release(), bundle)
    }

    /// Whether `bundle` is `release` of this stamp's bundle name (the
    /// stamp's own release, or a rollout's previous one).
    pub fn describes_release(&self, release: &Release, bundle: &Verified) -> Result<(), String> {
        let header = &bundle.body.header;
        if header.name != self.name {
            return Err(format!(
                "the stamp is for bundle {:?} but the bundle is {:?}",
                self.name, header.name
            ));
        }
        if header.serial != release.serial {
            return Err(format!(
                "the stamp is for serial {} but the bundle has serial {}",
                release.serial, header.serial
            ));
        }
        if bundle.len as u64 != release.length || bundle.digest != release.sha256 {
            return Err("the bundle's length or SHA-256 differs from the stamp's".to_owned());
        }
        Ok(())
    }
}

/// Lowercase hex of exactly `N` bytes.
fn unhex<const N: usize>((_, text): (usize, &str)) -> Option<[u8; N]> {
    if text.len() != N.checked_mul(2)? {
        return None;
    }
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(text.as_bytes().chunks(2)) {
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c.wrapping_sub(b'0')),
            b'a'..=b'f' => Some(c.wrapping_sub(b'a').wrapping_add(10)),
            _ => None,
        };
        let (hi, lo) = (digit(*pair.first()?)?, digit(*pair.get(1)?)?);
        *byte = hi.wrapping_shl(4) | lo;
    }
    Some(out)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use crate::bundle::keys::key_id;
    use ed25519_dalek::{Signer as _, SigningKey};

    fn key(seed: u8) -> (SigningKey, PublicKey) {
        let signing = SigningKey::from_bytes(&[seed; 32]);
        let public = signing.verifying_key().to_bytes();
        (
            signing,
            PublicKey {
                id: key_id(&public),
                key: public,
            },
        )
    }

    fn stamp(id: [u8; 8]) -> Stamp {
        Stamp {
            name: "site".into(),
            serial: 42,
            length: 634_123,
            sha256: [0xab; 32],
            published: 1_795_308_900,
            expires: 1_795_308_900 + 7 * 86_400,
            key_id: id,
            rollout: None,
        }
    }

    /// Signs arbitrary stamp text the way a publisher signs a real one.
    fn sign_text(signing: &SigningKey, signed: &str) -> Vec<u8> {
        let digest: [u8; 32] = Sha256::digest(signed.as_bytes()).into();
        let signature = signing.sign(&digest).to_bytes();
        format!("{signed}signature {}\n", hex(&signature)).into_bytes()
    }

    fn signed(signing: &SigningKey, s: &Stamp) -> Vec<u8> {
        sign_text(signing, &s.signed_text())
    }

    #[test]
    fn a_signed_stamp_opens_and_reads_as_documented() {
        let (signing, public) = key(1);
        let s = stamp(public.id);
        let bytes = signed(&signing, &s);
        assert_eq!(Stamp::open(&bytes, &[public]), Ok(s));
        let text = String::from_utf8(bytes).unwrap();
        let lines: Vec<&str> = text.lines().map(|l| l.split(' ').next().unwrap()).collect();
        assert_eq!(
            lines,
            [
                "converge-stamp",
                "name",
                "serial",
                "length",
                "sha256",
                "published",
                "expires",
                "key",
                "signature"
            ]
        );
        assert!(text.contains("\npublished 2026-11-22T00:55:00Z\nexpires 2026-11-29T00:55:00Z\n"));
        assert!(text.len() < 400, "{}", text.len());
    }

    #[test]
    fn every_flipped_bit_truncation_and_trailing_byte_is_refused() {
        let (signing, public) = key(1);
        let bytes = signed(&signing, &stamp(public.id));
        let trusted = [public];
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(Stamp::open(&b, &trusted).is_err(), "byte {i} bit {bit}");
            }
        }
        for len in 0..bytes.len() {
            assert!(Stamp::open(&bytes[..len], &trusted).is_err(), "{len}");
        }
        for extra in [&b"\n"[..], b"x", b"signature 00\n"] {
            let mut b = bytes.clone();
            b.extend_from_slice(extra);
            assert!(Stamp::open(&b, &trusted).is_err());
        }
        let huge = vec![b'a'; MAX_STAMP_LEN + 1];
        assert_eq!(
            Stamp::open(&huge, &trusted),
            Err(StampError::TooLarge {
                len: MAX_STAMP_LEN + 1
            })
        );
    }

    #[test]
    fn keys_must_be_trusted_and_ids_are_only_hints() {
        let (signing, public) = key(1);
        let (other_signing, other) = key(2);
        let bytes = signed(&signing, &stamp(public.id));
        assert_eq!(
            Stamp::open(&bytes, std::slice::from_ref(&other)),
            Err(StampError::UnknownKey { key_id: public.id })
        );
        // Another key that claims the same id: the signature decides.
        let impostor = PublicKey {
            id: public.id,
            key: other.key,
        };
        assert_eq!(
            Stamp::open(&bytes, std::slice::from_ref(&impostor)),
            Err(StampError::BadSignature)
        );
        assert!(Stamp::open(&bytes, &[impostor, public.clone()]).is_ok());
        // Signed by another key while naming the trusted key's id.
        let forged = signed(&other_signing, &stamp(public.id));
        assert_eq!(
            Stamp::open(&forged, &[public]),
            Err(StampError::BadSignature)
        );
    }

    /// Correctly signed, but not spelled the one way a stamp is spelled, or
    /// inconsistent: refused before the signature is even looked at.
    #[test]
    fn signed_but_non_canonical_or_inconsistent_stamps_are_refused() {
        let (signing, public) = key(1);
        let good = stamp(public.id).signed_text();
        let cases = [
            ("serial 42\n", "serial 042\n", "canonical"),
            ("serial 42\n", "serial +42\n", "canonical"),
            ("serial 42\n", "serial -1\n", "not a number"),
            ("name site\n", "name Site\n", "invalid bundle name"),
            ("name site\n", "name ../etc\n", "invalid bundle name"),
            ("expires 2026-11-29", "expires 2026-11-21", "expires before"),
            (
                "published 2026-11-22T00:55:00Z",
                "published 2026-11-22T00:55:00+00:00",
                "not a time",
            ),
            ("sha256 abab", "sha256 ABAB", "hex digits"),
            ("name site\n", "name site\nname other\n", "exactly 9 lines"),
            ("converge-stamp 1\n", "converge-stamp 3\n", "first line"),
            (
                "converge-stamp 1\n",
                "converge-stamp 2\n",
                "exactly 13 lines",
            ),
            ("\n", "\r\n", "first line"),
            ("\nserial", "\nserial  ", "not a number"),
        ];
        for (from, to, reason) in cases {
            let text = good.replacen(from, to, 1);
            assert_ne!(text, good, "{to}");
            match Stamp::open(&sign_text(&signing, &text), std::slice::from_ref(&public)) {
                Err(StampError::Malformed { reason: got, .. }) => {
                    assert!(got.contains(reason), "{to:?}: {got}")
                }
                other => panic!("{to:?} was not refused: {other:?}"),
            }
        }
    }

    fn staged(id: [u8; 8], who: Who) -> Stamp {
        Stamp {
            rollout: Some(Rollout {
                previous: Release {
                    serial: 41,
                    length: 600_000,
                    sha256: [0xcd; 32],
                },
                who,
            }),
            ..stamp(id)
        }
    }

    #[test]
    fn a_rollout_stamp_opens_reads_as_documented_and_names_both_releases() {
        let (signing, public) = key(1);
        for who in [
            Who::Percent(5),
            Who::Percent(0),
            Who::Hosts(vec!["db-01".into(), "web-01".into()]),
        ] {
            let s = staged(public.id, who.clone());
            let bytes = signed(&signing, &s);
            assert_eq!(Stamp::open(&bytes, std::slice::from_ref(&public)), Ok(s));
            let text = String::from_utf8(bytes).unwrap();
            let keys: Vec<&str> = text.lines().map(|l| l.split(' ').next().unwrap()).collect();
            assert_eq!(
                keys,
                [
                    "converge-stamp",
                    "name",
                    "serial",
                    "length",
                    "sha256",
                    "previous",
                    "previous-length",
                    "previous-sha256",
                    "rollout",
                    "published",
                    "expires",
                    "key",
                    "signature"
                ]
            );
            assert!(text.starts_with("converge-stamp 2\n"));
            assert!(text.contains(&format!(
                "\nprevious 41\nprevious-length 600000\nprevious-sha256 {}\nrollout {who}\n",
                "cd".repeat(32)
            )));
        }
        // Every byte of a rollout stamp is signed, the new lines included.
        let bytes = signed(&signing, &staged(public.id, Who::Percent(5)));
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x01;
            assert!(
                Stamp::open(&b, std::slice::from_ref(&public)).is_err(),
                "byte {i}"
            );
        }
    }

    #[test]
    fn hosts_take_the_release_the_rollout_gives_them() {
        let plain = stamp([1; 8]);
        assert_eq!(plain.release_for("web-01"), (plain.release(), None));
        let listed = staged([1; 8], Who::Hosts(vec!["web-01".into()]));
        assert_eq!(listed.release_for("web-01"), (listed.release(), Some(true)));
        let (release, selected) = listed.release_for("web-02");
        assert_eq!(
            (release.serial, release.length, selected),
            (41, 600_000, Some(false))
        );
        let canary = staged([1; 8], Who::Percent(50));
        let mut chosen = 0;
        for i in 0..400 {
            let host = format!("h{i}");
            let (release, selected) = canary.release_for(&host);
            let expected = rollout::bucket("site", 42, &host) < 50;
            assert_eq!(selected, Some(expected), "{host}");
            assert_eq!(release.serial, if expected { 42 } else { 41 });
            chosen += usize::from(expected);
        }
        assert!((150..=250).contains(&chosen), "{chosen}");
    }

    #[test]
    fn signed_but_malformed_rollout_lines_are_refused() {
        let (signing, public) = key(1);
        let good = staged(public.id, Who::Percent(5)).signed_text();
        let cases = [
            ("rollout 5%", "rollout 100%", "0% to 99%"),
            ("rollout 5%", "rollout 05%", "0% to 99%"),
            ("rollout 5%", "rollout 5", "neither"),
            ("rollout 5%", "rollout groups=canary", "neither"),
            ("rollout 5%", "rollout hosts=b,a", "sorted"),
            ("rollout 5%", "rollout hosts=a,a", "sorted"),
            ("rollout 5%", "rollout hosts=", "not a host name"),
            ("previous 41\n", "previous 42\n", "below the stamp's serial"),
            ("previous 41\n", "previous 43\n", "below the stamp's serial"),
            ("previous 41\n", "previous 041\n", "canonical"),
            (
                "previous-length 600000",
                "previous-length x",
                "not a number",
            ),
            ("previous-sha256 cdcd", "previous-sha256 CDCD", "hex digits"),
            ("rollout 5%\n", "", "exactly 13 lines"),
            (
                "previous 41\n",
                "previous-length 1\n",
                "expected `previous VALUE`",
            ),
            (
                "converge-stamp 2\n",
                "converge-stamp 1\n",
                "exactly 9 lines",
            ),
        ];
        for (from, to, reason) in cases {
            let text = good.replacen(from, to, 1);
            assert_ne!(text, good, "{to}");
            match Stamp::open(&sign_text(&signing, &text), std::slice::from_ref(&public)) {
                Err(StampError::Malformed { reason: got, .. }) => {
                    assert!(got.contains(reason), "{to:?}: {got}")
                }
                other => panic!("{to:?} was not refused: {other:?}"),
            }
        }
    }

    #[test]
    fn bundle_names() {
        for good in ["site", "web-frontend", "db.eu-1", "0day"] {
            assert_eq!(name_problem(good), None, "{good}");
        }
        for bad in [
            "",
            "Site",
            "-x",
            ".hidden",
            "a/b",
            "a b",
            "é",
            &"a".repeat(65),
        ] {
            assert!(name_problem(bad).is_some(), "{bad}");
        }
    }
}
