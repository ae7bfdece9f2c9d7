//! Turning the paths named on the command line into a loaded [`Workspace`].

use std::fmt;
use std::path::{Path, PathBuf};

use crate::workspace::{FileSystem, ReadError, Workspace};

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
/// `*.policy`, in sorted order so output is stable) with its imports.
pub fn load(paths: &[PathBuf]) -> Result<Workspace, InputError> {
    let roots = policy_files(paths)?;
    let mut ws = Workspace::new(FileSystem::new());
    for root in &roots {
        ws.add_root(root)
            .map_err(|(path, err)| InputError::Read { path, err })?;
    }
    Ok(ws)
}

/// The named files, with directories replaced by the `*.policy` files
/// under them (recursively, sorted).
pub fn policy_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, InputError> {
    let mut roots = Vec::new();
    for path in paths {
        if path.is_dir() {
            let before = roots.len();
            collect_policy_files(path, &mut roots)?;
            if roots.len() == before {
                return Err(InputError::NoPolicyFiles { dir: path.clone() });
            }
        } else {
            roots.push(path.clone());
        }
    }
    Ok(roots)
}

fn collect_policy_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), InputError> {
    let read_err = |err| InputError::ReadDir {
        path: dir.to_path_buf(),
        err,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_err)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_err)?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_policy_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "policy") {
            out.push(path);
        }
    }
    Ok(())
}
