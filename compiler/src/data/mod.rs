//! Compile-time data files (LANGUAGE.md §10): `let sites: map<string, Site>
//! = data("data/sites.yaml");` reads the file from inside the policy tree,
//! parses it by its extension and checks it against the declared type.
//!
//! Each format has its own reader (`toml.rs`, `yaml.rs`, `json.rs`), built
//! on the ecosystem's parsers, which all produce one spanned tree
//! (`tree.rs`); one checker (`check.rs`) compares that tree with the type.
//! The data file is added to the [`SourceDb`], so every error is labelled at
//! `data-file:line:col` and the language server can publish it for that
//! file.

mod check;
mod json;
mod reader;
mod toml;
mod tree;
mod yaml;

use std::path::{Path, PathBuf};

use converge_grammar::{FileId, Span};

use crate::diagnostic::{Code, Diagnostic};
use crate::ir::Value;
use crate::policy_tree::{normalize, TreeError};
use crate::sema::types::Type;
use crate::source::SourceDb;
use crate::workspace::outside_tree;

pub use check::{parse_duration, MAX_ERRORS};
pub use tree::{DataKind, DataValue, Entry, MAX_DEPTH, MAX_VALUES};

/// The largest data file read: 16 MiB. A 10,000-host inventory is about
/// 2 MB; the limit keeps a stray dump from exhausting the build machine.
pub const MAX_DATA_BYTES: usize = 16 * 1024 * 1024;

/// The formats, by file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Toml,
    Yaml,
    Json,
}

impl Format {
    /// The format of a path, from its extension (`.toml`, `.json`,
    /// `.yaml`/`.yml`, in any case).
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "toml" => Some(Format::Toml),
            "yaml" | "yml" => Some(Format::Yaml),
            "json" => Some(Format::Json),
            _ => None,
        }
    }

    /// Parses a data file's text into the spanned tree.
    pub fn parse(self, file: FileId, text: &str) -> Result<DataValue, Vec<Diagnostic>> {
        match self {
            Format::Toml => toml::parse(file, text),
            Format::Yaml => yaml::parse(file, text),
            Format::Json => json::parse(file, text),
        }
    }
}

/// Reads `path` (as written, relative to the policy file `from`) inside the
/// policy tree, parses it by extension and checks it against `ty`.
///
/// The data file is added to `db` (once: loading the same file again, by
/// any path that leads to it, reuses its [`FileId`] and text), so every
/// diagnostic renders as `data-file:line:col`. Returns the value — maps
/// sorted by key, records with every field in declaration order and
/// defaults filled in, modes as `Value::Int`, durations as seconds — or the
/// diagnostics. Errors about the file as a whole (outside the tree,
/// missing, unsupported extension, not UTF-8, too large) are labelled at
/// `path_span`, the path string in the policy.
pub fn load(
    db: &mut SourceDb,
    from: FileId,
    path: &str,
    path_span: Span,
    ty: &Type,
) -> Result<(FileId, Value), Vec<Diagnostic>> {
    let file = read(db, from, path, path_span).map_err(|d| vec![d])?;
    let (text, format) = match db.get(file) {
        Some(source) => (source.text.as_str(), Format::of(&source.path)),
        None => return Err(vec![unreadable(path, "not loaded", path_span, "", "")]),
    };
    let format = format.ok_or_else(|| vec![unsupported(path, path_span)])?;
    let tree = format.parse(file, text)?;
    let value = check::check(&tree, ty, text)?;
    Ok((file, value))
}

/// Checks a data file the workspace already loaded (`workspace::documents`)
/// against `ty`. `path` and `path_span` are the path as written, for an
/// unsupported extension.
pub fn check_loaded(
    db: &SourceDb,
    file: FileId,
    path: &str,
    path_span: Span,
    ty: &Type,
) -> Result<Value, Vec<Diagnostic>> {
    let Some(source) = db.get(file) else {
        return Err(vec![unreadable(path, "not loaded", path_span, "", "")]);
    };
    let format = Format::of(&source.path).ok_or_else(|| vec![unsupported(path, path_span)])?;
    check_text(file, format, &source.text, ty)
}

/// Checks a text as a data file of `format` against `ty` without reading
/// anything (what `load` does after reading; the fuzz target and tests).
pub fn check_text(
    file: FileId,
    format: Format,
    text: &str,
    ty: &Type,
) -> Result<Value, Vec<Diagnostic>> {
    let tree = format.parse(file, text)?;
    check::check(&tree, ty, text)
}

/// The data file `request` names, in `db`: found there if already loaded,
/// else read from the policy tree of `from` and added.
fn read(db: &mut SourceDb, from: FileId, request: &str, span: Span) -> Result<FileId, Diagnostic> {
    let (from_path, tree) = match db.get(from) {
        Some(f) => match &f.tree {
            Some(tree) => (f.path.clone(), std::sync::Arc::clone(tree)),
            None => {
                return Err(unreadable(
                    request,
                    "the standard library reads no data files",
                    span,
                    "",
                    "",
                ))
            }
        },
        None => return Err(unreadable(request, "unknown policy file", span, "", "")),
    };
    let path = tree
        .resolve(&from_path, request)
        .map_err(|err| outside_tree("data", request, &err, &tree, span))?;
    if Format::of(&path).is_none() {
        return Err(unsupported(request, span));
    }
    if let Some(id) = already_loaded(db, &path) {
        return Ok(id);
    }
    let bytes = tree.read(&path, MAX_DATA_BYTES).map_err(|err| match err {
        err if err.is_escape() => outside_tree("data", request, &err, &tree, span),
        TreeError::TooLarge { .. } => unreadable(
            request,
            &format!("larger than {} MiB", MAX_DATA_BYTES / (1024 * 1024)),
            span,
            "",
            "split the data into several files, each loaded with its own `data(...)`",
        ),
        err => unreadable(
            request,
            &err.to_string(),
            span,
            &format!("looked for {}", path.display()),
            "",
        ),
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        unreadable(
            request,
            &format!(
                "not valid UTF-8 (first bad byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
            span,
            "",
            "data files must be UTF-8; convert it, e.g. with `iconv -t UTF-8`",
        )
    })?;
    let id = db.add(path, text);
    db.set_tree(id, tree);
    Ok(id)
}

/// The file already in `db` that `path` leads to (by canonical path, or by
/// name for a file that is not on disk). Only data files are compared:
/// policy files have another extension.
fn already_loaded(db: &SourceDb, path: &Path) -> Option<FileId> {
    let key = identity(path);
    db.iter()
        .filter(|(_, f)| f.tree.is_some() && Format::of(&f.path).is_some())
        .find(|(_, f)| identity(&f.path) == key)
        .map(|(id, _)| id)
}

fn identity(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| normalize(path))
}

fn unsupported(request: &str, span: Span) -> Diagnostic {
    Diagnostic::new(
        Code::DataUnreadable,
        format!("cannot read data file `{request}`: unsupported extension"),
        span,
        "not .toml, .json, .yaml or .yml",
    )
    .with_help("data files are TOML (`.toml`), JSON (`.json`) or YAML (`.yaml`, `.yml`); rename the file to its format's extension")
}

/// A data file that cannot be read; `label` defaults to `why`, `help` to
/// where data paths are looked for.
fn unreadable(request: &str, why: &str, span: Span, label: &str, help: &str) -> Diagnostic {
    let label = if label.is_empty() { why } else { label };
    let help = if help.is_empty() {
        "data paths are relative to the policy file that names them, inside the policy tree"
    } else {
        help
    };
    Diagnostic::new(
        Code::DataUnreadable,
        format!("cannot read data file `{request}`: {why}"),
        span,
        label.to_owned(),
    )
    .with_help(help.to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests;
