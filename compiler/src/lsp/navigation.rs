//! Go to definition, find references and rename, all answered from the
//! [`Index`](super::index::Index) of the document's program.
//!
//! Global names (bundles, bodies, classes, lets) are also looked up in the
//! programs of the other open documents, so a rename in a library reaches
//! the open files that use it. Import paths lead to the imported file.

use std::collections::{HashMap, HashSet};

use converge_grammar::Span;
use lsp_types::{Location, Position, Range, TextEdit, Url, WorkspaceEdit};

use super::analysis::Analysis;
use super::diagnostics::LineCache;
use super::index::Key;
use super::server::Document;

/// The locations a name at `pos` is defined at, or the file an import path
/// names.
pub fn definition(analysis: &Analysis, doc: &Document, pos: Position) -> Vec<Location> {
    let offset = doc.lines.offset(&doc.text, pos);
    if let Some(target) = import_at(analysis, offset) {
        return analysis
            .path(target)
            .and_then(|p| Url::from_file_path(p).ok())
            .map(|uri| vec![Location::new(uri, Range::default())])
            .unwrap_or_default();
    }
    let Some(occurrence) = analysis.index.at(analysis.root, offset) else {
        return Vec::new();
    };
    let mut lines = LineCache::default();
    analysis
        .index
        .definitions(&occurrence.key)
        .filter_map(|o| location(analysis, o.span, &mut lines))
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
    let mut lines = LineCache::default();
    if let Some(target) = import_at(analysis, offset) {
        return analysis
            .ws
            .imports
            .iter()
            .flatten()
            .filter(|e| e.target == target)
            .filter_map(|e| location(analysis, e.span, &mut lines))
            .collect();
    }
    let Some(occurrence) = analysis.index.at(analysis.root, offset) else {
        return Vec::new();
    };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (a, o) in occurrences(analysis, others, &occurrence.key) {
        if o.def && !include_declaration {
            continue;
        }
        let mut cache = LineCache::default();
        let cache = if std::ptr::eq(a, analysis) {
            &mut lines
        } else {
            &mut cache
        };
        if let Some(loc) = location(a, o.span, cache) {
            if seen.insert((loc.uri.to_string(), loc.range.start, loc.range.end)) {
                out.push(loc);
            }
        }
    }
    out
}

/// The range of the name `rename` would change at `pos` (editors ask
/// first, to pre-fill the new name), or why there is nothing to rename.
pub fn prepare_rename(analysis: &Analysis, doc: &Document, pos: Position) -> Result<Range, String> {
    let offset = doc.lines.offset(&doc.text, pos);
    let occurrence = analysis
        .index
        .at(analysis.root, offset)
        .ok_or("there is no name to rename here")?;
    check_renamable(analysis, &occurrence.key)?;
    let span = occurrence.span;
    Ok(doc.lines.range(&doc.text, span.start, span.end))
}

/// Why the name `key` cannot be renamed, if it cannot.
fn check_renamable(analysis: &Analysis, key: &Key) -> Result<(), String> {
    if !key.renamable() {
        return Err(
            "only bundles, bodies, classes, lets, parameters and loop variables can be renamed"
                .to_owned(),
        );
    }
    let defs: Vec<_> = analysis.index.definitions(key).collect();
    if defs.is_empty() {
        return Err("this name has no definition in the policy (a hard class?)".to_owned());
    }
    if defs.iter().any(|d| analysis.is_stdlib(d.span.file)) {
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
    let occurrence = analysis
        .index
        .at(analysis.root, offset)
        .ok_or("there is no name to rename here")?;
    let key = &occurrence.key;
    check_renamable(analysis, key)?;
    if !is_identifier(new_name) {
        return Err(format!("`{new_name}` is not a valid name"));
    }
    let mut changes: HashMap<Url, Vec<TextEdit>> = HashMap::new();
    let mut seen = HashSet::new();
    for (a, o) in occurrences(analysis, others, key) {
        let mut lines = LineCache::default();
        let Some(loc) = location(a, o.span, &mut lines) else {
            continue;
        };
        if seen.insert((loc.uri.to_string(), loc.range.start, loc.range.end)) {
            changes
                .entry(loc.uri)
                .or_default()
                .push(TextEdit::new(loc.range, new_name.to_owned()));
        }
    }
    Ok(WorkspaceEdit::new(changes))
}

/// Every occurrence of `key`: in this program, and for global names also in
/// the programs of the other open documents.
fn occurrences<'a>(
    analysis: &'a Analysis,
    others: &[&'a Analysis],
    key: &'a Key,
) -> Vec<(&'a Analysis, &'a super::index::Occurrence)> {
    let mut out: Vec<_> = analysis.index.all(key).map(|o| (analysis, o)).collect();
    let global = matches!(
        key,
        Key::Bundle(_) | Key::Body(_) | Key::Class(_) | Key::Let(_)
    );
    if global {
        for other in others {
            if !std::ptr::eq(*other, analysis) {
                out.extend(other.index.all(key).map(|o| (*other, o)));
            }
        }
    }
    out
}

/// The file imported by the import path under `offset` in the root file.
fn import_at(analysis: &Analysis, offset: u32) -> Option<converge_grammar::FileId> {
    analysis
        .ws
        .imports
        .get(analysis.root.0 as usize)?
        .iter()
        .find(|e| e.span.start <= offset && offset <= e.span.end)
        .map(|e| e.target)
}

fn location(analysis: &Analysis, span: Span, lines: &mut LineCache) -> Option<Location> {
    let uri = Url::from_file_path(analysis.path(span.file)?).ok()?;
    Some(Location::new(
        uri,
        lines.range(analysis, span.file, span.start, span.end),
    ))
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
