//! Turning the paths named on the command line into a loaded [`Workspace`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;

use crate::policy_tree::PolicyTree;
use crate::workspace::{FileSystem, ReadError, Workspace};

/// `--policy-root`, shared by every command that reads policy.
#[derive(Debug, Args)]
pub struct TreeArgs {
    /// The policy tree: every file the compiler reads (`import`, `source`,
    /// `template`) must be inside this directory. Defaults to the directory
    /// of each policy file named (or the directory named) on the command
    /// line.
    #[arg(long, value_name = "DIR")]
    pub policy_root: Option<PathBuf>,

    /// The inventory (hosts, their keys and groups: docs/fleet.md) to check
    /// `host_` and `group_` classes against, instead of the
    /// `inventory.toml` at the root of the policy tree. May lie outside the
    /// tree.
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
}

/// A problem reading input, shown as one line.
#[derive(Debug)]
pub enum InputError {
    Read { path: PathBuf, err: ReadError },
    ReadDir { path: PathBuf, err: std::io::Error },
    NoPolicyFiles { dir: PathBuf },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Read {
                path,
                err: ReadError::Io(err),
            } => {
                write!(f, "cannot read `{}`: {err}", path.display())
            }
            InputError::Read {
                path,
                err: ReadError::Tree(err),
            } => write!(
                f,
                "cannot read `{}`: {err} (the policy tree is the directory of the file named, or `--policy-root DIR`)",
                path.display()
            ),
            InputError::Read { path, err } => write!(f, "`{}` is {err}", path.display()),
            InputError::ReadDir { path, err } => {
                write!(f, "cannot read directory `{}`: {err}", path.display())
            }
            InputError::NoPolicyFiles { dir } => {
                write!(f, "`{}` contains no `.policy` files", dir.display())
            }
        }
    }
}

/// Loads every named file (directories are searched recursively for
/// `*.policy`, in sorted order so output is stable) with its imports. Each
/// file's policy tree is `--policy-root`, else the directory named on the
/// command line it was found in, else its own directory.
pub fn load(paths: &[PathBuf], tree: &TreeArgs) -> Result<Workspace, InputError> {
    let mut ws = Workspace::new(FileSystem::new());
    if let Some(dir) = &tree.policy_root {
        ws.set_policy_root(dir);
    }
    if let Some(path) = &tree.inventory {
        ws.set_inventory(path).map_err(|err| InputError::Read {
            path: path.clone(),
            err,
        })?;
    }
    for (root, dir) in policy_files(paths)? {
        let added = match (&tree.policy_root, dir) {
            (None, Some(dir)) => ws.add_root_in(&root, Arc::new(PolicyTree::new(&dir))),
            _ => ws.add_root(&root),
        };
        added.map_err(|(path, err)| InputError::Read { path, err })?;
    }
    Ok(ws)
}

/// The named files, with directories replaced by the `*.policy` files
/// under them (recursively, sorted), each with the directory it was found
/// in.
pub fn policy_files(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Option<PathBuf>)>, InputError> {
    let mut roots = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found = Vec::new();
            collect_policy_files(path, &mut found)?;
            if found.is_empty() {
                return Err(InputError::NoPolicyFiles { dir: path.clone() });
            }
            roots.extend(found.into_iter().map(|f| (f, Some(path.clone()))));
        } else {
            roots.push((path.clone(), None));
        }
    }
    Ok(roots)
}

/// Every `*.policy` file under `dir`, sorted. Symbolic links to
/// directories are not followed (a link loop would never end, and a link
/// out would leave the tree); linked files are kept, and their target is
/// checked against the tree when they are read.
fn collect_policy_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), InputError> {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let read_err = |err| InputError::ReadDir {
            path: dir.clone(),
            err,
        };
        let mut entries: Vec<(PathBuf, bool)> = std::fs::read_dir(&dir)
            .map_err(read_err)?
            .map(|e| e.and_then(|e| Ok((e.path(), e.file_type()?.is_dir()))))
            .collect::<Result<_, _>>()
            .map_err(read_err)?;
        entries.sort();
        let mut subdirs = Vec::new();
        for (path, is_dir) in entries {
            if is_dir {
                subdirs.push(path);
            } else if path.extension().is_some_and(|e| e == "policy")
                && !crate::testing::is_test_file(&path)
            {
                out.push(path);
            }
        }
        pending.extend(subdirs.into_iter().rev());
    }
    out.sort();
    Ok(())
}
