//! `policyvm`: the on-host half of Converge. It will verify signed bundles,
//! gather facts, and converge the host to the bundle's promises.
//!
//! Architecture invariant: this crate never depends on `converge-grammar` or
//! `converge-compiler` (tests/architecture.rs checks it). The VM is what runs
//! as root on every host; it stays small, and the bundle reader in it is the
//! security boundary that the compiler's writer depends on, not the reverse.
#![deny(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

/// The VM's version, reported by `policyvm --version` and in run reports.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub use converge_format::{bundle, ids, schema, stamp, tree};

pub mod agent;
pub mod backend;
pub mod cli;
pub mod eval;
pub mod facts;
pub mod pull;
pub mod rootfs;
pub mod run;
pub mod state;
