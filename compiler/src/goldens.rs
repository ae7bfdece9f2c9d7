//! The golden policies (`tests/golden/NAME/NAME.policy`), checked, for unit
//! tests that compare two ways of computing one thing over every kind of
//! value, guard, loop, lookup, file and account the goldens write.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use crate::check::{check, CheckedProgram};
use crate::workspace::{FileSystem, Workspace};

/// Every golden policy, by name.
pub(crate) fn policies() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|d| {
            let name = d.file_name()?.to_str()?.to_owned();
            Some(d.join(format!("{name}.policy"))).filter(|p| p.is_file())
        })
        .collect();
    found.sort();
    assert!(found.len() >= 10, "golden policies: {found:?}");
    found
}

/// `policy` checked (it must have no error), with the workspace that
/// holds its sources.
pub(crate) fn checked(policy: &Path) -> (Workspace, CheckedProgram) {
    let mut ws = Workspace::new(FileSystem::new());
    ws.add_root(policy).unwrap();
    let mut outcome = check(&ws);
    let errors: Vec<_> = outcome
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .collect();
    assert!(errors.is_empty(), "{}: {errors:?}", policy.display());
    let program = outcome.programs.pop().expect("a policy block");
    (ws, program)
}
