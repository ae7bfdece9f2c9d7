//! Pulling policy: the update protocol between a publish directory and a
//! host's state directory (docs/operations.md; THREATS.md T3-T7, T11).
//!
//! 1. GET `NAME.stamp` (at most [`MAX_STAMP_LEN`] bytes) and check its
//!    signature against the pinned keys and its name against the one this
//!    host is configured for (mix-and-match).
//!    A staged rollout's stamp names two releases; this host's name picks
//!    one ([`rollout`]), and the steps below apply to that release.
//! 2. If it stands for the bundle already in force and has not expired,
//!    stop: most runs transfer only this stamp. An expired stamp is never
//!    current (a frozen mirror): it is refused as [`PullError::Expired`],
//!    so the agent asks the next hub.
//! 3. Refuse a serial not greater than the highest ever accepted
//!    (rollback, replay) and a stamp past its expiry (freeze).
//! 4. GET `NAME.bundle` (a rollout's release: `NAME.bundles/SERIAL.bundle`),
//!    reading no more than the stamp's length (endless
//!    data); check length, SHA-256, signature, structure and header against
//!    the stamp.
//! 5. Install it ([`StateDir::install`]): the previous bundle is kept as
//!    `last-good.bundle`.
//!
//! Whatever fails, the bundle in force is untouched and the error says
//! which check refused what, and what to do.

pub mod fetch;
pub mod rollout;

use sha2::{Digest, Sha256};

use crate::bundle::envelope::MAX_BUNDLE_LEN;
use crate::bundle::error::{hex, BundleError};
use crate::bundle::keys::PublicKey;
use crate::bundle::open;
use crate::stamp::time::format_utc;
use crate::stamp::{Stamp, StampError, MAX_STAMP_LEN};
use crate::state::{Local, StateDir, CURRENT};
use fetch::{FetchError, Source};

/// What a successful pull did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pulled {
    /// The hub's stamp stands for the bundle in force; nothing was
    /// downloaded but the stamp.
    Unchanged {
        stamp: Stamp,
        /// The serial this host runs (a rollout's stamp names two).
        serial: u64,
    },
    /// A new bundle was verified and installed as `current.bundle`.
    Installed {
        stamp: Stamp,
        /// The serial installed (a rollout's stamp names two).
        serial: u64,
        /// The serial of the bundle it replaced.
        previous: Option<u64>,
    },
}

impl Pulled {
    pub fn stamp(&self) -> &Stamp {
        match self {
            Pulled::Unchanged { stamp, .. } | Pulled::Installed { stamp, .. } => stamp,
        }
    }

    /// The serial this host runs after the pull.
    pub fn serial(&self) -> u64 {
        match self {
            Pulled::Unchanged { serial, .. } | Pulled::Installed { serial, .. } => *serial,
        }
    }
}

/// Why nothing was installed. Each variant is one check; the messages say
/// which, so an operator can tell a broken mirror from an attack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PullError {
    /// The hub could not be reached or did not serve the file.
    Fetch(FetchError),
    /// The stamp is malformed, unsigned, forged or signed by an unknown key.
    Stamp { url: String, error: StampError },
    /// A validly signed stamp for another bundle name.
    WrongName {
        url: String,
        expected: String,
        found: String,
    },
    /// A serial below the highest ever accepted.
    Rollback {
        url: String,
        offered: u64,
        accepted: u64,
    },
    /// The accepted serial again, for different bytes.
    SameSerial { url: String, serial: u64 },
    /// A new stamp already past its expiry.
    Expired {
        url: String,
        serial: u64,
        expires: u64,
    },
    /// The stamp announces a bundle larger than any the VM accepts.
    Oversized { url: String, length: u64 },
    /// The server sent more than the stamp's length.
    TooLong { url: String, length: u64 },
    /// The server sent less than the stamp's length.
    Truncated { url: String, got: u64, length: u64 },
    /// A valid bundle, but not the one the stamp stands for.
    MixAndMatch { url: String, serial: u64 },
    /// Bytes that are not the published bundle: altered in transit or on
    /// the server.
    Altered {
        url: String,
        error: Option<BundleError>,
    },
    /// The bundle has the stamp's digest yet is refused (an old VM and a
    /// newer format, for example).
    Refused { url: String, error: BundleError },
    /// The state directory could not be written.
    State(String),
}

impl std::fmt::Display for PullError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PullError::Fetch(e) => write!(f, "{e}"),
            PullError::Stamp { url, error } => write!(f, "stamp {url} refused: {error}"),
            PullError::WrongName { url, expected, found } => write!(
                f,
                "stamp {url} refused: it is signed for bundle {found:?}, this host pulls {expected:?} \
                 (a file of another bundle served under this name)"
            ),
            PullError::Rollback { url, offered, accepted } => write!(
                f,
                "stamp {url} refused: serial {offered} is older than serial {accepted} already \
                 accepted (rollback); to go back to old policy, publish it again with a new serial"
            ),
            PullError::SameSerial { url, serial } => write!(
                f,
                "stamp {url} refused: serial {serial} was already accepted for different content; \
                 a publish always takes a new serial"
            ),
            PullError::Expired { url, serial, expires } => write!(
                f,
                "stamp {url} (serial {serial}) expired at {}: not installed, the current bundle \
                 stays in force; the hub or a mirror is serving stale policy (publish again)",
                format_utc(*expires)
            ),
            PullError::Oversized { url, length } => write!(
                f,
                "stamp {url} refused: it announces a {length}-byte bundle, over the \
                 {MAX_BUNDLE_LEN}-byte limit"
            ),
            PullError::TooLong { url, length } => write!(
                f,
                "bundle {url} refused: the server sends more than the {length} bytes its stamp \
                 announces (stopped reading there)"
            ),
            PullError::Truncated { url, got, length } => write!(
                f,
                "bundle {url} refused: truncated, {got} of the {length} bytes its stamp announces"
            ),
            PullError::MixAndMatch { url, serial } => write!(
                f,
                "bundle {url} refused: it is a valid bundle (serial {serial}) but not the one the \
                 stamp stands for; the server mixes files of two publishes"
            ),
            PullError::Altered { url, error } => {
                write!(
                    f,
                    "bundle {url} refused: its SHA-256 differs from the stamp's; the bytes were \
                     altered"
                )?;
                match error {
                    Some(e) => write!(f, " ({e})"),
                    None => Ok(()),
                }
            }
            PullError::Refused { url, error } => write!(f, "bundle {url} refused: {error}"),
            PullError::State(reason) => write!(f, "state directory: {reason}"),
        }
    }
}

impl std::error::Error for PullError {}

/// Pulls bundle `name` from `source` into `state`, checking everything
/// against `trusted` at time `now` (UNIX seconds, read once per run:
/// THREATS.md T25). `current` is the bundle in force, as verified by the
/// caller. `host` is this host's name ([`rollout::host_name`]), which
/// picks its release when the stamp is a staged rollout's.
pub fn pull(
    source: &dyn Source,
    name: &str,
    host: &str,
    trusted: &[PublicKey],
    state: &StateDir,
    current: Option<&Local>,
    now: u64,
) -> Result<Pulled, PullError> {
    let stamp_file = format!("{name}.stamp");
    let stamp_url = source.locate(&stamp_file);
    let stamp_bytes = source
        .get(&stamp_file, MAX_STAMP_LEN as u64)
        .map_err(PullError::Fetch)?;
    let stamp = Stamp::open(&stamp_bytes, trusted).map_err(|error| PullError::Stamp {
        url: stamp_url.clone(),
        error,
    })?;
    if stamp.name != name {
        return Err(PullError::WrongName {
            url: stamp_url,
            expected: name.to_owned(),
            found: stamp.name,
        });
    }
    let (release, _) = stamp.release_for(host);
    let in_force = current.filter(|c| c.file == CURRENT).map(|c| &c.bundle);
    if let Some(bundle) = in_force {
        if stamp.describes_release(&release, bundle).is_ok() {
            // An expired stamp is never "current", even for the bundle in
            // force: a frozen mirror that keeps serving it must not stop
            // the agent from asking the next one (issue 14, item 9).
            if stamp.expires <= now {
                return Err(PullError::Expired {
                    url: stamp_url,
                    serial: release.serial,
                    expires: stamp.expires,
                });
            }
            if state.stamp().as_deref() != Some(&stamp_bytes[..]) {
                state
                    .record(release.serial, &stamp_bytes)
                    .map_err(|e| PullError::State(e.to_string()))?;
            }
            return Ok(Pulled::Unchanged {
                serial: release.serial,
                stamp,
            });
        }
    }
    // The very stamp this host accepted, while its bundle is missing or
    // damaged locally: fetching that bundle again is a repair, not a
    // rollback.
    let repair = state.stamp().as_deref() == Some(&stamp_bytes[..]);
    let accepted = state.high_water(in_force);
    if !repair && release.serial < accepted {
        return Err(PullError::Rollback {
            url: stamp_url,
            offered: release.serial,
            accepted,
        });
    } else if !repair && release.serial == accepted && accepted > 0 {
        return Err(PullError::SameSerial {
            url: stamp_url,
            serial: release.serial,
        });
    }
    if stamp.expires <= now && !repair {
        return Err(PullError::Expired {
            url: stamp_url,
            serial: release.serial,
            expires: stamp.expires,
        });
    }
    if release.length > MAX_BUNDLE_LEN as u64 {
        return Err(PullError::Oversized {
            url: stamp_url,
            length: release.length,
        });
    }

    let bundle_file = rollout::bundle_file(&stamp, &release);
    let url = source.locate(&bundle_file);
    let bytes = match source.get(&bundle_file, release.length) {
        Ok(b) => b,
        Err(FetchError::TooLong { .. }) => {
            return Err(PullError::TooLong {
                url,
                length: release.length,
            })
        }
        Err(e) => return Err(PullError::Fetch(e)),
    };
    if (bytes.len() as u64) < release.length {
        return Err(PullError::Truncated {
            url,
            got: bytes.len() as u64,
            length: release.length,
        });
    }
    let digest: [u8; 32] = Sha256::digest(&bytes).into();
    if digest != release.sha256 {
        // Which of the two it is matters to whoever investigates: a valid
        // bundle of another publish, or bytes nobody signed.
        return Err(match open(&bytes, trusted) {
            Ok(other) => PullError::MixAndMatch {
                url,
                serial: other.body.header.serial,
            },
            Err(error) => PullError::Altered {
                url,
                error: Some(error),
            },
        });
    }
    let verified = open(&bytes, trusted).map_err(|error| PullError::Refused {
        url: url.clone(),
        error,
    })?;
    if let Err(reason) = stamp.describes_release(&release, &verified) {
        // Same digest, different header: only a signer could make this.
        return Err(PullError::Stamp {
            url: stamp_url,
            error: StampError::Malformed {
                line: 2,
                reason: format!("{reason} (key {})", hex(&stamp.key_id)),
            },
        });
    }
    state
        .install(&bytes, release.serial, &stamp_bytes)
        .map_err(|e| PullError::State(format!("cannot install the new bundle: {e}")))?;
    Ok(Pulled::Installed {
        previous: in_force.map(|b| b.body.header.serial),
        serial: release.serial,
        stamp,
    })
}

#[cfg(test)]
mod tests;
