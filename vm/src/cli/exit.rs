//! Every exit code of `policyvm`, one meaning each, across all its
//! subcommands (docs/exit-codes.md, checked against [`TABLE`] by
//! `tests/exit_codes.rs`). The codes of 64 and up are those of sysexits.
//!
//! A code means the same in every subcommand that can return it: 3 is
//! "refused by a check" whether `run` refused the bundle or `pull` refused
//! what the hub served. `verify` and `inspect` tell refusals apart by
//! reason (10-15, [`crate::bundle::error::BundleError::exit_code`]).

/// Converged without failures; verified; installed or already current.
pub const OK: u8 = 0;
/// Some promise failed (the run went on with the others).
pub const FAILED: u8 = 1;
/// Not converged within the pass limit.
pub const NOT_CONVERGED: u8 = 2;
/// A bundle (`run`), or what a hub served (`pull`), was refused by a
/// check; the message says which.
pub const REFUSED: u8 = 3;
/// The hub's stamp has expired (a frozen hub or mirror): nothing was
/// installed, the bundle in force stays.
pub const STALE: u8 = 4;
/// `agent`: no bundle to run (none installed, or every one refused
/// locally) and no hub delivered one.
pub const NO_BUNDLE: u8 = 5;
/// `verify`, `inspect`: not a Converge bundle (bad magic number).
pub const BAD_MAGIC: u8 = 10;
/// `verify`, `inspect`: a bundle format this VM does not read.
pub const UNSUPPORTED_VERSION: u8 = 11;
/// `verify`, `inspect`: shorter than its header says.
pub const TRUNCATED: u8 = 12;
/// `verify`, `inspect`: the body is corrupt, too large, or has bytes past
/// its end.
pub const CORRUPT: u8 = 13;
/// `verify`, `inspect`: signed by no trusted key.
pub const UNKNOWN_KEY: u8 = 14;
/// `verify`, `inspect`: the signature does not verify.
pub const BAD_SIGNATURE: u8 = 15;
/// `EX_USAGE`: the command line is wrong.
pub const USAGE: u8 = 64;
/// `EX_NOINPUT`: an input cannot be read: the bundle, the trust
/// directory, the agent's configuration, the root.
pub const NO_INPUT: u8 = 66;
/// `EX_UNAVAILABLE`: the hub cannot be reached or has no such file.
pub const UNAVAILABLE: u8 = 69;
/// `EX_CANTCREAT`: the state directory cannot be created or written, or
/// another output: the `--out` directory of `capture`.
pub const CANT_CREATE: u8 = 73;
/// `EX_TEMPFAIL`: busy, another run or agent holds the lock; nothing was
/// done, the next attempt may succeed.
pub const BUSY: u8 = 75;

/// Every code with its meaning, as docs/exit-codes.md lists them.
pub const TABLE: &[(u8, &str)] = &[
    (
        OK,
        "success: converged without failures, verified, installed or already current",
    ),
    (FAILED, "some promise failed"),
    (NOT_CONVERGED, "not converged within the pass limit"),
    (
        REFUSED,
        "a bundle, or what a hub served, was refused by a check",
    ),
    (STALE, "the hub's stamp has expired; nothing was installed"),
    (NO_BUNDLE, "no bundle to run, and no hub delivered one"),
    (BAD_MAGIC, "not a Converge bundle"),
    (UNSUPPORTED_VERSION, "unsupported bundle format version"),
    (TRUNCATED, "truncated bundle"),
    (CORRUPT, "corrupt bundle"),
    (UNKNOWN_KEY, "signed by no trusted key"),
    (BAD_SIGNATURE, "bad signature"),
    (USAGE, "usage error"),
    (NO_INPUT, "an input cannot be read"),
    (UNAVAILABLE, "the hub cannot be reached or has no such file"),
    (
        CANT_CREATE,
        "the state directory, or another output (`capture --out`), cannot be created or written",
    ),
    (
        BUSY,
        "busy: another run or agent holds the lock; nothing was done",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::error::BundleError;

    #[test]
    fn each_code_has_one_meaning_and_refusals_match_the_bundle_errors() {
        let mut codes: Vec<u8> = TABLE.iter().map(|(c, _)| *c).collect();
        codes.dedup();
        assert_eq!(codes.len(), TABLE.len(), "a code is listed twice");
        assert!(codes.windows(2).all(|w| w.first() < w.get(1)), "not sorted");
        let refusals = [
            (BundleError::BadMagic, BAD_MAGIC),
            (
                BundleError::UnsupportedVersion { major: 9, minor: 0 },
                UNSUPPORTED_VERSION,
            ),
            (
                BundleError::Truncated {
                    len: 1,
                    expected: 2,
                },
                TRUNCATED,
            ),
            (
                BundleError::Corrupt {
                    reason: String::new(),
                },
                CORRUPT,
            ),
            (BundleError::UnknownKey { key_id: [0; 8] }, UNKNOWN_KEY),
            (BundleError::BadSignature { key_id: [0; 8] }, BAD_SIGNATURE),
        ];
        for (error, code) in refusals {
            assert_eq!(error.exit_code(), code, "{error}");
        }
    }
}
