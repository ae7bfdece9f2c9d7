//! The files of change detection in the state directory, `watch/` (0700):
//!
//! ```text
//! watch/history          the records, one line each (crate::watch::history)
//! watch/head             "LENGTH sha256:HEAD" after the last append
//! watch/db-HEX           the entries database of one watched path
//!                        (HEX: the first 32 hex digits of its SHA-256)
//! watch/history.broken   the last history found broken, kept as evidence
//! ```
//!
//! Every file is opened relative to the directory's handle, never through
//! a link; databases and the head are replaced with the one atomic write,
//! the history is appended to and synced.

use sha2::{Digest as _, Sha256};

use super::bounds::{MAX_DATABASE_BYTES, MAX_HISTORY_BYTES};
use crate::state::{StateDir, SubDir};

pub const DIR: &str = "watch";
pub const HISTORY: &str = "history";
pub const HEAD: &str = "head";
pub const BROKEN: &str = "history.broken";
const DB_PREFIX: &str = "db-";

/// What `watch/head` holds: `(length, "sha256:HEAD")`, or why it is not
/// that.
pub type HeadFile = Result<(u64, String), String>;

/// The `watch/` directory of a state directory.
#[derive(Debug)]
pub struct Store {
    dir: SubDir,
}

fn err(what: &str, e: std::io::Error) -> String {
    format!("change detection: cannot {what}: {e}")
}

impl Store {
    pub fn open(state: &StateDir) -> Result<Store, String> {
        state
            .subdir(DIR, 0o700)
            .map(|dir| Store { dir })
            .map_err(|e| err("open the state directory's `watch/`", e))
    }

    /// The file name of `path`'s database.
    pub fn db_name(path: &str) -> String {
        let digest = Sha256::digest(path.as_bytes());
        let hex = crate::bundle::error::hex(digest.get(..16).unwrap_or_default());
        format!("{DB_PREFIX}{hex}")
    }

    /// The names of every database file.
    pub fn db_names(&self) -> Result<Vec<String>, String> {
        Ok(self
            .dir
            .names()
            .map_err(|e| err("list `watch/`", e))?
            .into_iter()
            .filter(|n| n.starts_with(DB_PREFIX))
            .collect())
    }

    pub fn read_db(&self, name: &str) -> Result<Option<Vec<u8>>, String> {
        self.dir
            .read(name, MAX_DATABASE_BYTES)
            .map_err(|e| err(&format!("read `watch/{name}`"), e))
    }

    pub fn write_db(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        self.dir
            .write(name, bytes, 0o600)
            .map_err(|e| err(&format!("write `watch/{name}`"), e))
    }

    pub fn remove(&self, name: &str) -> Result<(), String> {
        self.dir
            .remove(name)
            .map_err(|e| err(&format!("remove `watch/{name}`"), e))
    }

    pub fn read_history(&self) -> Result<Option<Vec<u8>>, String> {
        self.dir
            .read(HISTORY, MAX_HISTORY_BYTES)
            .map_err(|e| err("read `watch/history`", e))
    }

    /// Replaces the history (after a break: the good records only).
    pub fn write_history(&self, bytes: &[u8]) -> Result<(), String> {
        self.dir
            .write(HISTORY, bytes, 0o600)
            .map_err(|e| err("write `watch/history`", e))
    }

    pub fn append_history(&self, line: &[u8]) -> Result<(), String> {
        self.dir
            .append(HISTORY, line, 0o600)
            .map_err(|e| err("append to `watch/history`", e))
    }

    pub fn keep_broken(&self, bytes: &[u8]) -> Result<(), String> {
        self.dir
            .write(BROKEN, bytes, 0o600)
            .map_err(|e| err("keep `watch/history.broken`", e))
    }

    /// The head written after the last append: `(length, "sha256:...")`,
    /// `None` when there is none, an error text when it is not one.
    pub fn read_head(&self) -> Result<Option<HeadFile>, String> {
        let Some(bytes) = self
            .dir
            .read(HEAD, 256)
            .map_err(|e| err("read `watch/head`", e))?
        else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(&bytes);
        let parsed = text
            .trim_end()
            .split_once(' ')
            .and_then(|(n, h)| Some((n.parse::<u64>().ok()?, h.to_owned())))
            .ok_or_else(|| "the head file is not `LENGTH sha256:HEAD`".to_owned());
        Ok(Some(parsed))
    }

    pub fn write_head(&self, length: u64, head: &str) -> Result<(), String> {
        self.dir
            .write(HEAD, format!("{length} {head}\n").as_bytes(), 0o600)
            .map_err(|e| err("write `watch/head`", e))
    }
}
