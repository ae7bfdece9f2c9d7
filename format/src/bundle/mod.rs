//! The bundle format: the security boundary of every host.
//!
//! The reader lives here, in `converge-format`, which both sides depend on;
//! the compiler's writer follows it. [`envelope`] is the signed framing and
//! the checks made before anything is decoded, [`format`] the body,
//! [`instr`] the instruction set, [`functions`] the built-in functions of
//! `func`, [`probe`] the probe table (format 2.3), [`text`] the texts of constants, [`verify`] the structural checks on a decoded body, [`keys`] the
//! key files, [`disasm`] `policyvm inspect`, [`wire`] the canonical
//! encoding, and [`error`] why a bundle is refused. Every number that names
//! something (opcodes, kinds, functions, promise types, attributes, facts)
//! is an id from [`crate::ids`]. The format is specified in
//! `docs/bytecode.md`.

pub mod disasm;
pub mod envelope;
pub mod error;
pub mod format;
pub mod functions;
pub mod instr;
pub mod keys;
pub mod limits;
pub mod probe;
pub mod text;
pub mod verify;
pub mod wire;

pub use envelope::{open, open_unsigned, Verified};
pub use error::BundleError;
