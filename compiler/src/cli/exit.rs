//! Every exit code of `policyc`, one meaning each, across all its
//! subcommands (docs/exit-codes.md, checked against [`TABLE`] by
//! `compiler/tests/cli.rs`). The codes of 64 and up are those of sysexits,
//! as in `policyvm`: a usage error is 64 for both.

/// Success: no errors; built, published, formatted.
pub const OK: u8 = 0;
/// The policy has errors (or warnings under `--deny-warnings`); `fmt`: a
/// file was refused (syntax errors) or, under `--check`, would change;
/// `test`: a test failed, or the tests have errors.
pub const ERRORS: u8 = 1;
/// `plan`: something would change on some host (or cannot be known
/// without a fact the host lacks), as `terraform plan -detailed-exitcode`.
pub const CHANGES: u8 = 2;
/// `EX_USAGE`: the command line is wrong, or a value on it is refused (a
/// bundle name, a serial not above the published one).
pub const USAGE: u8 = 64;
/// `EX_NOINPUT`: an input cannot be read: a policy file or directory, a
/// key, the published stamp.
pub const NO_INPUT: u8 = 66;
/// `EX_UNAVAILABLE`: `fleet`: the collector cannot be reached, answers
/// with an HTTP error, or `curl` is not installed; `test --run`: no
/// `policyvm` to run.
pub const UNAVAILABLE: u8 = 69;
/// `EX_CANTCREAT`: an output cannot be made: the bundle, the keys, the
/// publish directory or its files, a reformatted file.
pub const CANT_CREATE: u8 = 73;
/// `EX_IOERR`: `lsp`: the session with the editor broke off (no
/// `initialize`, a closed pipe, a malformed message).
pub const IO_ERROR: u8 = 74;
/// `EX_PROTOCOL`: `fleet`: the collector's answer is not a fleet view (not
/// JSON, another version, malformed).
pub const PROTOCOL: u8 = 76;

/// Every code with its meaning, as docs/exit-codes.md lists them.
pub const TABLE: &[(u8, &str)] = &[
    (OK, "success"),
    (
        ERRORS,
        "the policy has errors, a test failed (or a file fmt refused or would change)",
    ),
    (CHANGES, "plan: something would change"),
    (USAGE, "usage error"),
    (NO_INPUT, "an input cannot be read"),
    (
        UNAVAILABLE,
        "the collector (or `test --run`'s policyvm) cannot be reached",
    ),
    (CANT_CREATE, "an output cannot be written"),
    (IO_ERROR, "the language server's session broke off"),
    (PROTOCOL, "the collector's answer is not a fleet view"),
];
