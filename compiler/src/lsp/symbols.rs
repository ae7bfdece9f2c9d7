//! `textDocument/documentSymbol`: the outline of a file. Bundles hold their
//! promises (inside `when` and `for` blocks as written); bodies, classes,
//! lets and the policy block are listed too.

use converge_grammar::ast::{Item, Stmt};
use converge_grammar::Span;
use lsp_types::{DocumentSymbol, SymbolKind};

use super::analysis::Analysis;
use super::position::LspPositions;
use super::server::Document;

/// The outline of an open document, from its syntax tree (whatever the
/// parser recovered).
pub fn document_symbols(analysis: &Analysis, doc: &Document) -> Vec<DocumentSymbol> {
    let Some(module) = analysis.ws.module(analysis.root) else {
        return Vec::new();
    };
    let text = &doc.text;
    let slice = |span: Span| text.get(span.range()).unwrap_or("").to_owned();
    let mut out = Vec::new();
    for item in &module.items {
        let symbol = match item {
            Item::Bundle(b) => Some(symbol(
                doc,
                b.name.name.to_string(),
                Some(super::hover::signature(text, b)),
                SymbolKind::FUNCTION,
                b.span,
                b.name.span,
                statements(doc, &b.body),
            )),
            Item::Body(b) => Some(symbol(
                doc,
                b.name.name.to_string(),
                Some("body".to_owned()),
                SymbolKind::STRUCT,
                b.span,
                b.name.span,
                Vec::new(),
            )),
            Item::Class(c) => Some(symbol(
                doc,
                c.name.name.to_string(),
                c.expr.as_ref().map(|e| slice(e.span)),
                SymbolKind::CONSTANT,
                c.span,
                c.name.span,
                Vec::new(),
            )),
            Item::Fact(f) => Some(symbol(
                doc,
                format!("facts.{}", f.name.name),
                Some(slice(f.ty.span)),
                SymbolKind::PROPERTY,
                f.span,
                f.name.span,
                Vec::new(),
            )),
            Item::Let(l) => Some(symbol(
                doc,
                l.name.name.to_string(),
                l.ty.as_ref().map(|t| slice(t.span)),
                SymbolKind::VARIABLE,
                l.span,
                l.name.span,
                Vec::new(),
            )),
            Item::Policy(p) => Some(symbol(
                doc,
                "policy".to_owned(),
                None,
                SymbolKind::MODULE,
                p.span,
                Span::new(p.span.file, p.span.start, p.span.start + 6),
                statements(doc, &p.body),
            )),
            Item::Type(t) => Some(symbol(
                doc,
                t.name.name.to_string(),
                Some("type".to_owned()),
                SymbolKind::STRUCT,
                t.span,
                t.name.span,
                Vec::new(),
            )),
            Item::Import(_) | Item::Exclusive(_) | Item::Error(_) => None,
        };
        out.extend(symbol);
    }
    out
}

/// The promises of a block, with `when` and `for` blocks as containers.
fn statements(doc: &Document, body: &[Stmt]) -> Vec<DocumentSymbol> {
    let slice = |span: Span| doc.text.get(span.range()).unwrap_or("").to_owned();
    body.iter()
        .filter_map(|s| match s {
            Stmt::Promise(p) => Some(symbol(
                doc,
                format!("{} {}", p.kind.name, slice(p.promiser.span)),
                None,
                SymbolKind::OBJECT,
                p.span,
                p.kind.span.to(p.promiser.span),
                Vec::new(),
            )),
            Stmt::When(w) => Some(symbol(
                doc,
                format!("when {}", slice(w.guard.span)),
                None,
                SymbolKind::NAMESPACE,
                w.span,
                w.guard.span,
                statements(doc, &w.body),
            )),
            Stmt::For(f) => Some(symbol(
                doc,
                format!("for {} in {}", f.var.name, slice(f.list.span)),
                None,
                SymbolKind::NAMESPACE,
                f.span,
                f.var.span,
                statements(doc, &f.body),
            )),
            Stmt::Defaults(d) => Some(symbol(
                doc,
                slice(d.head()),
                None,
                SymbolKind::PROPERTY,
                d.span,
                d.head(),
                Vec::new(),
            )),
            Stmt::Call(_) | Stmt::Error(_) => None,
        })
        .collect()
}

#[allow(deprecated)] // `deprecated` is a required field of the struct
fn symbol(
    doc: &Document,
    name: String,
    detail: Option<String>,
    kind: SymbolKind,
    span: Span,
    selection: Span,
    children: Vec<DocumentSymbol>,
) -> DocumentSymbol {
    DocumentSymbol {
        name: if name.is_empty() {
            "?".to_owned()
        } else {
            name
        },
        detail,
        kind,
        tags: None,
        deprecated: None,
        range: doc.lines.range(&doc.text, span.start, span.end),
        selection_range: doc.lines.range(&doc.text, selection.start, selection.end),
        children: (!children.is_empty()).then_some(children),
    }
}
