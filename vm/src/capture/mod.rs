//! `policyvm capture`: the host's current state as promises, in policy
//! syntax (LANGUAGE.md section 17, like `puppet resource`).
//!
//! Each resource kind reads the state the way the operator of its promise
//! type reads it when it converges, so that running the captured policy on
//! the same root repairs nothing: files, directories and links through
//! [`crate::rootfs`] (no link followed, never outside the root)
//! ([`files`]); packages through the query of the root's toolset (dpkg,
//! or rpm on a Red Hat family root) ([`packages`]); services through the service manager the run would
//! pick ([`services`]); users and groups through the one parser of
//! `/etc/passwd` and `/etc/group` ([`accounts`]). [`print`] writes the
//! promises in the layout `policyc fmt` produces.
//!
//! A capture is all or nothing: every object is read before anything is
//! printed or written, and an object that cannot be described (it does
//! not exist, a name is not UTF-8, a FIFO) fails the whole capture with
//! the reason. Decisions (documented in docs/vm.md, "Capture"):
//! - file content is inline (`content`) when it is UTF-8 text of at most
//!   [`INLINE_MAX`] bytes that a policy string can hold; otherwise it is
//!   written to `files/PATH` under `--out` ([`SourceFile`]) and named by
//!   `source`;
//! - a user's password hash is never printed unless asked
//!   (`--with-passwords`); without it the promise says so in a comment;
//! - what the run could not keep as captured (a systemd unit's running
//!   state under `--root`, where no systemd runs; a group member that is
//!   no user) is left out, with a comment saying why.

pub mod accounts;
pub mod files;
pub mod packages;
pub mod print;
pub mod services;

use std::path::{Path, PathBuf};

use crate::rootfs::{FsError, RootFs};
pub use print::{Promise, Value};

/// The largest file content written inline as `content`: 4 KiB. Larger
/// text is easier to read and diff as a file of its own beside the policy.
pub const INLINE_MAX: usize = 4096;

/// The resource kinds `policyvm capture` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Whatever is at each path: a file, a directory or a link (as
    /// Puppet's `file` type).
    File,
    Directory,
    Link,
    Package,
    Service,
    User,
    Group,
}

/// What a capture is asked to do besides the names.
#[derive(Clone, Debug)]
pub struct Options {
    /// The system image to read (`/` for this host).
    pub root: PathBuf,
    /// Directories: capture everything below them too.
    pub recurse: bool,
    /// Users: print the password hash (from `/etc/shadow`).
    pub with_passwords: bool,
}

/// A file whose content goes beside the policy, named by `source`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// Relative to the policy file (and to `--out`): `files/...`.
    pub name: String,
    pub content: Vec<u8>,
    /// Whose content it is (for messages).
    pub of: String,
    /// Whether others may read the original: if not, the copy is 0600.
    pub world_readable: bool,
}

/// The result of a capture: the promises, in order, and the files their
/// `source` attributes name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Captured {
    pub promises: Vec<Promise>,
    pub sources: Vec<SourceFile>,
}

/// Why a capture failed. Each maps to one exit code of the table
/// ([`crate::cli::exit`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaptureError {
    /// A name on the command line is not one a promise can have.
    BadName(String),
    /// The object does not exist.
    NotFound(String),
    /// It exists, but cannot be read or described as policy.
    Unreadable(String),
}

impl std::fmt::Display for CaptureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaptureError::BadName(why)
            | CaptureError::NotFound(why)
            | CaptureError::Unreadable(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for CaptureError {}

impl From<FsError> for CaptureError {
    fn from(e: FsError) -> CaptureError {
        CaptureError::Unreadable(e.to_string())
    }
}

/// Captures `names` of `kind` from the root of `opts`.
pub fn capture(kind: Kind, names: &[String], opts: &Options) -> Result<Captured, CaptureError> {
    let fs = RootFs::open(&opts.root).map_err(|e| {
        CaptureError::NotFound(format!(
            "cannot open the root `{}`: {e}",
            opts.root.display()
        ))
    })?;
    // A name given twice is captured once, where it first appears.
    let mut seen = std::collections::HashSet::new();
    let names: Vec<String> = names
        .iter()
        .filter(|n| seen.insert(n.as_str()))
        .cloned()
        .collect();
    let names = names.as_slice();
    let mut out = Captured::default();
    match kind {
        Kind::File | Kind::Directory | Kind::Link => {
            files::capture(&fs, kind, names, opts.recurse, &mut out)?;
        }
        Kind::Package => out.promises = packages::capture(&fs, names)?,
        Kind::Service => out.promises = services::capture(&fs, names)?,
        Kind::User => out.promises = accounts::users(&fs, names, opts.with_passwords)?,
        Kind::Group => out.promises = accounts::groups(&fs, names)?,
    }
    Ok(out)
}

/// The header comment of a capture's policy.
pub fn header(root: &Path) -> Vec<String> {
    let from = if root == Path::new("/") {
        "this host".to_owned()
    } else {
        format!("the root {}", root.display())
    };
    vec![format!(
        "Captured by policyvm {} from {from}: the state found, as promises.",
        crate::VERSION
    )]
}

/// A name given on the command line as a promise name (package, service,
/// user, group), checked as the backends check it before any tool sees it.
pub fn checked_name(kind: &str, name: &str) -> Result<(), CaptureError> {
    match crate::schema::name_problem(name) {
        Some(why) => Err(CaptureError::BadName(format!(
            "`{}` is not a valid {kind} name: {why}",
            name.escape_debug()
        ))),
        None => Ok(()),
    }
}
