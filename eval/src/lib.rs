//! `converge-eval`: the pure evaluator of Converge bundles, shared by the
//! VM (`policyvm run`) and the compiler (`policyc test`, `policyc plan`), so
//! that a preview resolves a policy exactly as a host would: the same
//! classes, guards, rendered templates and lookups.
//!
//! It does no I/O. What is host-specific reaches it through traits
//! ([`facts::FactSource`], [`sources::ProbeFacts`], [`sources::Secrets`]):
//! the VM implements them for the running host, a preview for the facts it
//! is given (and it never decrypts a secret: it shows `<secret NAME>`).
//!
//! Architecture invariant: this crate depends on `converge-format` and
//! small pure crates only; never on the VM, the compiler, a clock, HTTP or
//! TLS (tests/architecture.rs checks it).
#![deny(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

pub use converge_format::{bundle, ids, schema};

pub mod eval;
pub mod facts;
pub mod instance;
pub mod preview;
pub mod resolve;
pub mod secret;
pub mod sources;

pub use preview::{preview, Preview, Previewer};
