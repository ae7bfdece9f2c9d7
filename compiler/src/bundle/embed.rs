//! Files a promise embeds in the bundle (`source`): named
//! relative to the policy file that names them, and read only from inside
//! that file's policy tree ([`crate::policy_tree`]). `policyc check`
//! applies the same rule without reading ([`check_embeds`]), so a path
//! that leaves the tree is an error before anyone builds.

use std::path::PathBuf;

use converge_format::bundle::envelope::MAX_BUNDLE_LEN;
use converge_format::schema::package_file_problem;

use super::embed_blob::{embed_file, BlobSink, Embedded};
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{self, Value};
use crate::policy_tree::PolicyTree;
use crate::source::SourceDb;
use crate::workspace::outside_tree;

/// Attributes whose value names a file to embed. (A `template` is read
/// with the policy, `workspace::documents`, and rendered by expansion: its
/// attribute holds the content.)
pub const EMBEDDED: &[&str] = converge_format::schema::EMBEDDED_ATTRS;

/// The path an embedding attribute names, checked against the policy tree
/// of the file it is written in (by name and through links).
pub(super) fn resolve(
    db: &SourceDb,
    p: &ir::Promise,
    attr: &ir::Attr,
) -> Result<(PathBuf, PolicyTree), Diagnostic> {
    let Some(name) = attr.value.as_str() else {
        return Err(Diagnostic::new(
            Code::EmbedFailed,
            format!("`{}` must name a file at compile time", attr.name),
            attr.span,
            "depends on facts",
        ));
    };
    let file = db.get(attr.span.file).or_else(|| db.get(p.span.file));
    let (from, tree) = match file.and_then(|f| Some((f.path.clone(), f.tree.as_deref()?.clone()))) {
        Some(found) => found,
        // Written in the standard library, which has no tree on disk.
        None => {
            return Err(Diagnostic::new(
                Code::EmbedFailed,
                format!("cannot embed `{name}`: the standard library embeds no files"),
                attr.span,
                "named here",
            ))
        }
    };
    match tree.resolve(&from, name) {
        Ok(path) => Ok((path, tree)),
        Err(err) => Err(outside_tree(attr.name, name, &err, &tree, attr.span)),
    }
}

/// The error of a package file (`rpm = "..."`) whose content is no
/// package of that kind (`schema::package_file_problem`).
pub fn package_file_diagnostic(attr: &ir::Attr, bytes: &[u8]) -> Option<Diagnostic> {
    let why = package_file_problem(attr.name, bytes)?;
    let name = attr.value.as_str().unwrap_or_default();
    Some(
        Diagnostic::new(
            Code::EmbedFailed,
            format!("cannot embed `{name}` as `{}`: {why}", attr.name),
            attr.span,
            "not a package file",
        )
        .with_help(format!(
            "`{}` names a package file built by rpmbuild (`NAME-VERSION-RELEASE.ARCH.rpm`), relative to the policy file",
            attr.name
        )),
    )
}

/// Reads the file an embedding attribute names, from inside its tree.
pub fn read(db: &SourceDb, p: &ir::Promise, attr: &ir::Attr) -> Result<Vec<u8>, Diagnostic> {
    match embed(db, p, attr, None)? {
        Embedded::Inline(bytes) => Ok(bytes),
        // Without a sink nothing is stored.
        Embedded::Stored(_) => Err(Diagnostic::new(
            Code::EmbedFailed,
            "internal error: a file stored without a blob directory",
            attr.span,
            "here",
        )),
    }
}

/// The file an embedding attribute names, read from inside its tree:
/// inline, or stored into `sink` when it is larger than
/// [`INLINE_MAX`](converge_format::bundle::limits::INLINE_MAX)
/// (`super::embed_blob`).
pub fn embed(
    db: &SourceDb,
    p: &ir::Promise,
    attr: &ir::Attr,
    sink: Option<&BlobSink>,
) -> Result<Embedded, Diagnostic> {
    let (path, tree) = resolve(db, p, attr)?;
    let name = attr.value.as_str().unwrap_or_default();
    embed_file(&tree, &path, sink, MAX_BUNDLE_LEN).map_err(|err| {
        if err.is_escape() {
            return outside_tree(attr.name, name, &err, &tree, attr.span);
        }
        Diagnostic::new(
            Code::EmbedFailed,
            format!("cannot embed `{name}`: {err}"),
            attr.span,
            format!("looked for {}", path.display()),
        )
        .with_help(
            "`source` and `template` files are read at build time, relative to the policy file",
        )
    })
}

/// Every constant `source`/`template` path of the program that leaves its
/// policy tree (what `policyc check` says before a build would refuse).
/// Missing files are left to the build, which reads them.
pub fn check_embeds(db: &SourceDb, program: &ir::Program) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = Vec::new();
    for p in &program.promises {
        for attr in p.attrs.iter().filter(|a| EMBEDDED.contains(&a.name)) {
            if !matches!(attr.value, Value::Str(_)) {
                continue;
            }
            match resolve(db, p, attr) {
                Err(d) => {
                    if d.code == Code::OutsidePolicyTree && !out.contains(&d) {
                        out.push(d);
                    }
                }
                // A package file is read now for its magic: a file that is
                // no package is an error before anyone builds.
                Ok((path, tree)) if package_file_problem(attr.name, &[]).is_some() => {
                    if let Some(d) = tree
                        .read(&path, MAX_BUNDLE_LEN)
                        .ok()
                        .and_then(|bytes| package_file_diagnostic(attr, &bytes))
                    {
                        if !out.contains(&d) {
                            out.push(d);
                        }
                    }
                }
                Ok(_) => {}
            }
        }
    }
    out
}
