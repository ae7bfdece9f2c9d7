//! Go to definition, find references and rename, all answered from the
//! checker's name table of the document's program
//! ([`Index`](super::index::Index)).
//!
//! Global names (bundles, bodies, classes, lets) are also looked up in the
//! programs of the other open documents, so a rename in a library reaches
//! the open files that use it. Import paths lead to the imported file.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use converge_grammar::Span;
use lsp_types::{Location, Position, Range, TextEdit, Url, WorkspaceEdit};

use super::analysis::Analysis;
use super::index::Target;
use super::position::{span_range, LspPositions};
use super::server::Document;
use crate::sema::names::{DefKind, Definition};

/// The locations a name at `pos` is defined at, or the file an import path
/// names.
pub fn definition(analysis: &Analysis, doc: &Document, pos: Position) -> Vec<Location> {
    let offset = doc.lines.offset(&doc.text, pos);
    if let Some(target) = import_at(analysis, analysis.file_of(&doc.path), offset) {
        return analysis
            .path(target)
            .and_then(|p| Url::from_file_path(p).ok())
            .map(|uri| vec![Location::new(uri, Range::default())])
            .unwrap_or_default();
    }
    let Some((_, target)) = analysis.index.at(analysis.file_of(&doc.path), offset) else {
        return Vec::new();
    };
    target
        .def
        .span
        .and_then(|span| location(analysis, span))
        .into_iter()
        .collect()
}

/// Every place the name at `pos` is written (or, on an import path, every
/// import of that file).
pub fn references(
    analysis: &Analysis,
    others: &[&Analysis],
    doc: &Document,
    pos: Position,
    include_declaration: bool,
) -> Vec<Location> {
    let offset = doc.lines.offset(&doc.text, pos);
    if let Some(target) = import_at(analysis, analysis.file_of(&doc.path), offset) {
        return analysis
            .ws
            .imports
            .iter()
            .flatten()
            .filter(|e| e.target == target)
            .filter_map(|e| location(analysis, e.span))
            .collect();
    }
    let Some((_, target)) = analysis.index.at(analysis.file_of(&doc.path), offset) else {
        return Vec::new();
    };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (a, t) in same_targets(analysis, others, target) {
        for o in t.uses() {
            if !include_declaration && Some(o.span) == t.def.span {
                continue;
            }
            if let Some(loc) = location(a, o.span) {
                if seen.insert((loc.uri.to_string(), loc.range.start, loc.range.end)) {
                    out.push(loc);
                }
            }
        }
    }
    out
}

/// The range of the name `rename` would change at `pos` (editors ask
/// first, to pre-fill the new name), or why there is nothing to rename.
pub fn prepare_rename(analysis: &Analysis, doc: &Document, pos: Position) -> Result<Range, String> {
    let offset = doc.lines.offset(&doc.text, pos);
    let (span, target) = analysis
        .index
        .at(analysis.file_of(&doc.path), offset)
        .ok_or("there is no name to rename here")?;
    check_renamable(analysis, target)?;
    Ok(doc.lines.range(&doc.text, span.start, span.end))
}

/// Why the name `target` cannot be renamed, if it cannot.
fn check_renamable(analysis: &Analysis, target: Target<'_>) -> Result<(), String> {
    if !target.def.kind.is_renamable() {
        return Err(
            "only bundles, bodies, classes, lets, parameters and loop variables can be renamed"
                .to_owned(),
        );
    }
    let Some(span) = target.def.span else {
        return Err("this name has no definition in the policy (a hard class?)".to_owned());
    };
    if analysis.is_stdlib(span.file) {
        return Err(
            "this name is defined in the standard library, which cannot be edited".to_owned(),
        );
    }
    Ok(())
}

/// The edits that rename the bundle, body, class, let, parameter or loop
/// variable at `pos` to `new_name` everywhere, or why it cannot be done.
pub fn rename(
    analysis: &Analysis,
    others: &[&Analysis],
    doc: &Document,
    pos: Position,
    new_name: &str,
) -> Result<WorkspaceEdit, String> {
    let offset = doc.lines.offset(&doc.text, pos);
    let (_, target) = analysis
        .index
        .at(analysis.file_of(&doc.path), offset)
        .ok_or("there is no name to rename here")?;
    check_renamable(analysis, target)?;
    if !is_identifier(new_name) {
        return Err(format!("`{new_name}` is not a valid name"));
    }
    let mut changes: HashMap<Url, Vec<TextEdit>> = HashMap::new();
    let mut seen = HashSet::new();
    for (a, t) in same_targets(analysis, others, target) {
        for o in t.uses() {
            let Some(loc) = location(a, o.span) else {
                continue;
            };
            if seen.insert((loc.uri.to_string(), loc.range.start, loc.range.end)) {
                changes
                    .entry(loc.uri)
                    .or_default()
                    .push(TextEdit::new(loc.range, new_name.to_owned()));
            }
        }
    }
    Ok(WorkspaceEdit::new(changes))
}

/// The definition `target` of `analysis`, and for a global name (bundle,
/// body, class, let) the same definition in the programs of the other open
/// documents: defined in the same file at the same place.
fn same_targets<'a>(
    analysis: &'a Analysis,
    others: &[&'a Analysis],
    target: Target<'a>,
) -> Vec<(&'a Analysis, Target<'a>)> {
    let mut out = vec![(analysis, target)];
    if !target.def.kind.is_global() {
        return out;
    }
    let wanted = identity(analysis, target.def);
    for other in others {
        if std::ptr::eq(*other, analysis) {
            continue;
        }
        out.extend(
            other
                .index
                .targets()
                .filter(|t| identity(other, t.def) == wanted)
                .map(|t| (*other, t)),
        );
    }
    out
}

/// What makes a definition the same in two programs: its kind, its name,
/// and the file and place it is defined at (none for what the schema
/// defines).
fn identity<'a>(
    analysis: &'a Analysis,
    def: &'a Definition,
) -> (DefKind, &'a str, Option<(&'a Path, u32, u32)>) {
    let place = def.span.and_then(|span| {
        let file = analysis.ws.db.get(span.file)?;
        Some((file.path.as_path(), span.start, span.end))
    });
    (def.kind, def.name.as_str(), place)
}

/// The file imported by the import path under `offset` in `file`.
fn import_at(
    analysis: &Analysis,
    file: converge_grammar::FileId,
    offset: u32,
) -> Option<converge_grammar::FileId> {
    analysis
        .ws
        .imports
        .get(file.0 as usize)?
        .iter()
        .find(|e| e.span.start <= offset && offset <= e.span.end)
        .map(|e| e.target)
}

fn location(analysis: &Analysis, span: Span) -> Option<Location> {
    let uri = Url::from_file_path(analysis.path(span.file)?).ok()?;
    Some(Location::new(uri, span_range(analysis, span)))
}

/// `[A-Za-z_][A-Za-z0-9_]*` and not a keyword.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !converge_grammar::token::KEYWORDS.contains(&name)
}
