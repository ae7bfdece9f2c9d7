//! Shared support for the end-to-end tests in `tests/`: where the built
//! binaries and the repository's policy files are ([`binary`],
//! [`repo_root`]), compiling policy and converging sandbox roots in process
//! ([`support`]), HTTP servers on loopback ([`http`]) and sockets seen
//! through `/proc` ([`sockets`]), tiny `.deb` and `.rpm` packages ([`debs`],
//! [`rpms`]), what a test changed on the host ([`host_changes`]).

use std::path::{Path, PathBuf};

/// The repository root (where this package's `Cargo.toml` is).
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Path of a workspace binary (`policyc`, `policyvm`) built next to the
/// running test executable (`target/<profile>/deps/..` -> `target/<profile>`).
///
/// `cargo test --workspace` and `cargo nextest run --workspace` build every
/// binary of the workspace before running tests, so the file is there.
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("."));
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

pub mod collector;
pub mod debs;
pub mod host_changes;
pub mod http;
pub mod rpms;
pub mod sockets;
pub mod support;
