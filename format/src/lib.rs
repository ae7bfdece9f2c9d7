//! `converge-format`: what `policyc` writes and `policyvm` reads.
//!
//! The bundle format (envelope, body, instruction set, verifier,
//! disassembler, key files), the signed stamp, the promise-type schema,
//! the grammar of policy paths, the inventory and the signed run report
//! that hosts upload to the collector. Both sides depend on this crate and on
//! nothing else of each other: the compiler links no HTTP or TLS stack, and
//! the VM links neither the grammar nor the compiler
//! (`tests/architecture.rs` checks the real dependency graph).
#![deny(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

pub mod atomic;
pub mod blobs;
pub mod bundle;
pub mod chain;
pub mod crosscheck;
pub mod fetch_auth;
pub mod globs;
pub mod ids;
pub mod inventory;
pub mod paths;
pub mod report;
pub mod schema;
pub mod stamp;
pub mod system;
pub mod terminal;
pub mod tree;
