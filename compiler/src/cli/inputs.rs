//! Loading the files named on the command line into a [`SourceDb`].

use std::fmt;
use std::path::{Path, PathBuf};

use crate::source::{SourceDb, MAX_FILE_BYTES};

/// A problem reading input, shown as one line.
#[derive(Debug)]
pub enum InputError {
    Read { path: PathBuf, err: std::io::Error },
    NotUtf8 { path: PathBuf, offset: usize },
    TooLarge { path: PathBuf },
    NoPolicyFiles { dir: PathBuf },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Read { path, err } => {
                write!(f, "cannot read `{}`: {err}", path.display())
            }
            InputError::NotUtf8 { path, offset } => write!(
                f,
                "`{}` is not valid UTF-8 (first bad byte at offset {offset}); policy files must be UTF-8",
                path.display()
            ),
            InputError::TooLarge { path } => write!(
                f,
                "`{}` is larger than 4 GiB; split the policy into several files",
                path.display()
            ),
            InputError::NoPolicyFiles { dir } => write!(
                f,
                "`{}` contains no `.policy` files",
                dir.display()
            ),
        }
    }
}

/// Reads every file (directories are searched recursively for `*.policy`,
/// in sorted order so output is stable).
pub fn load(paths: &[PathBuf]) -> Result<SourceDb, InputError> {
    let mut db = SourceDb::new();
    for path in paths {
        if path.is_dir() {
            let mut found = Vec::new();
            collect_policy_files(path, &mut found)?;
            if found.is_empty() {
                return Err(InputError::NoPolicyFiles { dir: path.clone() });
            }
            for file in found {
                add_file(&mut db, &file)?;
            }
        } else {
            add_file(&mut db, path)?;
        }
    }
    Ok(db)
}

fn add_file(db: &mut SourceDb, path: &Path) -> Result<(), InputError> {
    let bytes = std::fs::read(path).map_err(|err| InputError::Read {
        path: path.to_path_buf(),
        err,
    })?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(InputError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    let text = String::from_utf8(bytes).map_err(|e| InputError::NotUtf8 {
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })?;
    db.add(path, text);
    Ok(())
}

fn collect_policy_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), InputError> {
    let read_err = |err| InputError::Read {
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
