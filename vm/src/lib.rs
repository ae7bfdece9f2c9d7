//! `policyvm`: the on-host half of Converge. It verifies signed bundles
//! (through `converge-format`'s reader), gathers facts, and converges the
//! host to the bundle's promises, once (`run`) or as an agent that pulls
//! new bundles (`agent`).
//!
//! Architecture invariant: this crate never depends on `converge-grammar` or
//! `converge-compiler` (tests/architecture.rs checks it). The VM is what runs
//! as root on every host; it stays small. The bundle format and its verifier,
//! the security boundary, live in `converge-format`, which the compiler's
//! writer and this crate's reader share.
#![deny(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

/// The VM's version, reported by `policyvm --version` and in run reports.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub use converge_format::{bundle, ids, schema, stamp, tree};
// The evaluator, its instances and the resolver are shared with policyc
// (`policyc test`, `policyc plan`) in `converge-eval`; these keep their
// paths here (`crate::eval`, `crate::instance`, `crate::run::resolve`).
pub use converge_eval::{eval, instance};

// The evaluator's text budget is four times the largest file the VM reads.
const _: () = assert!(eval::MAX_EVAL_BYTES == 4 * (rootfs::MAX_READ as usize));

pub mod agent;
pub mod backend;
pub mod blobs;
pub mod capture;
pub mod cli;
pub mod facts;
pub mod identity;
pub mod neighbours;
pub mod outcome;
pub mod probes;
pub mod pull;
pub mod rootfs;
pub mod run;
pub mod secrets;
pub mod state;
pub mod unmanaged;
pub mod upload;
pub mod watch;

#[cfg(test)]
mod eval_tests;
