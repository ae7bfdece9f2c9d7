//! The bundle format: the security boundary of every host.
//!
//! The reader lives here, in the VM; the compiler's writer depends on it,
//! never the reverse. [`envelope`] is the signed framing and the checks made
//! before anything is decoded, [`format`] the body, [`instr`] the
//! instruction set, [`verify`] the structural checks on a decoded body,
//! [`keys`] the key files, [`disasm`] `policyvm inspect`, and [`error`] why
//! a bundle is refused. The format is specified in `docs/bytecode.md`.

pub mod disasm;
pub mod envelope;
pub mod error;
pub mod format;
pub mod instr;
pub mod keys;
pub mod limits;
pub mod verify;

pub use envelope::{open, open_unsigned, Verified};
pub use error::BundleError;
