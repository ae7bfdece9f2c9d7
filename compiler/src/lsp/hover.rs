//! `textDocument/hover`: what the name under the cursor is. Attributes,
//! promise types and facts are described from the schema
//! (`converge_format::schema`), the same text the checker's messages use;
//! classes, lets and bodies show their definition, bundles their signature.
//! What a name refers to is the checker's answer (its name table).

use converge_format::schema::{self, AttrSpec};
use converge_grammar::ast::{AttrStmt, BundleDef, Item, Promise, Stmt};
use converge_grammar::{FileId, Span};
use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind, Position};

use super::analysis::Analysis;
use super::index::Target;
use super::position::LspPositions;
use super::server::Document;
use crate::sema::names::DefKind;

/// The hover for the name at `pos`, with its range, or `None` where there
/// is no name.
pub fn hover(analysis: &Analysis, doc: &Document, pos: Position) -> Option<Hover> {
    let offset = doc.lines.offset(&doc.text, pos);
    let file = analysis.file_of(&doc.path);
    let (span, target) = analysis.index.at(file, offset)?;
    let mut text = describe(analysis, file, target)?;
    if target.def.kind == DefKind::PromiseType {
        text.push_str(&taken_defaults(analysis, file, span));
    }
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: text,
        }),
        range: Some(doc.lines.range(&doc.text, span.start, span.end)),
    })
}

/// On the type word of a promise: the attributes it takes from its
/// bundle's `defaults` (LANGUAGE.md section 17), each with its value and
/// the block's line; empty when it takes none.
fn taken_defaults(analysis: &Analysis, file: FileId, kind_span: Span) -> String {
    let Some(module) = analysis.ws.module(file) else {
        return String::new();
    };
    let found = module.items.iter().find_map(|item| match item {
        Item::Bundle(b) => promise_at(&b.body, kind_span).map(|p| (b, p)),
        _ => None,
    });
    let Some((bundle, promise)) = found else {
        return String::new();
    };
    // The bodies a promise uses count as its own attributes.
    let body_attrs = |name: &str| -> Vec<&str> {
        let mut out = Vec::new();
        let mut pending = vec![name.to_owned()];
        let mut seen: Vec<String> = Vec::new();
        while let Some(name) = pending.pop() {
            if seen.contains(&name) {
                continue;
            }
            let body = analysis
                .ws
                .modules
                .iter()
                .flat_map(|m| &m.items)
                .find_map(|i| match i {
                    Item::Body(b) if b.name.name == name => Some(b),
                    _ => None,
                });
            seen.push(name);
            for a in body.map(|b| b.attrs.as_slice()).unwrap_or_default() {
                match a {
                    AttrStmt::Set(set) => out.push(set.name.name.as_str()),
                    AttrStmt::Use(u) => pending.push(u.body.name.to_string()),
                    AttrStmt::Error(_) => {}
                }
            }
        }
        out
    };
    let applied = crate::sema::check::defaults::applied(bundle, promise, &body_attrs);
    if applied.is_empty() {
        return String::new();
    }
    let text = analysis.text(file);
    let lines: Vec<String> = applied
        .iter()
        .map(|(attr, block)| {
            let line = analysis
                .ws
                .db
                .get(file)
                .map_or(0, |f| f.line_col(block.span.start).0);
            let value = text.get(attr.value.span.range()).unwrap_or("");
            let head = text.get(block.head().range()).unwrap_or("defaults");
            format!("- `{} = {value}` (`{head}`, line {line})", attr.name.name)
        })
        .collect();
    format!(
        "\n\nfrom the defaults of bundle `{}` (this promise does not set them):\n{}",
        bundle.name.name,
        lines.join("\n")
    )
}

/// The promise whose type word is at `kind_span`, inside `when` and `for`
/// too.
fn promise_at(stmts: &[Stmt], kind_span: Span) -> Option<&Promise> {
    stmts.iter().find_map(|s| match s {
        Stmt::Promise(p) if p.kind.span == kind_span => Some(p),
        Stmt::When(w) => promise_at(&w.body, kind_span),
        Stmt::For(f) => promise_at(&f.body, kind_span),
        _ => None,
    })
}

/// The hover text of a name written in `shown` (a policy file or a
/// template), in Markdown.
pub fn describe(analysis: &Analysis, shown: FileId, target: Target<'_>) -> Option<String> {
    let def = target.def;
    let name = def.name.as_str();
    match def.kind {
        DefKind::Attribute => {
            let kind = def
                .parent
                .and_then(|p| target.names.definition(p))
                .map(|p| p.name.as_str());
            let found: Option<&AttrSpec> = match kind {
                Some(kind) => schema::promise_type(kind)?.attr(name),
                None => schema::COMMON
                    .iter()
                    .chain(schema::PROMISE_TYPES.iter().flat_map(|t| t.attrs))
                    .find(|a| a.name == name),
            };
            let spec = found?;
            Some(format!(
                "```policy\n{}: {}\n```\ndefault: {}\n\n{}",
                spec.name,
                spec.ty.describe(),
                spec.default.describe(),
                spec.doc
            ))
        }
        DefKind::PromiseType => {
            let t = schema::promise_type(name)?;
            let attrs: Vec<String> = t
                .all_attrs()
                .map(|a| format!("- `{}`: {}", a.name, a.ty.describe()))
                .collect();
            Some(format!(
                "```policy\n{} PROMISER {{ ... }}\n```\n{}\n\nattributes:\n{}",
                t.name,
                t.doc,
                attrs.join("\n")
            ))
        }
        DefKind::Fact => {
            let fact = schema::fact(name)?;
            Some(format!(
                "```policy\n{}: {}\n```\nhost fact, gathered by the VM on each run\n\n{}",
                fact.name,
                fact.ty.describe(),
                fact.doc
            ))
        }
        DefKind::HardClass => Some(format!(
            "```policy\nclass {name}\n```\nhard class: set by the VM from the host's facts"
        )),
        DefKind::InventoryClass => Some(format!(
            "```policy\nclass {name}\n```\n{}{}",
            if name.starts_with(crate::sema::inventory::GROUP_PREFIX) {
                "group class: true on the hosts the inventory lists in this group"
            } else {
                "host class: true on the inventory host of this name (the VM sets it from the hostname)"
            },
            def.span
                .map(|s| origin(analysis, shown, s.file))
                .unwrap_or_default()
        )),
        DefKind::Function => {
            let f = crate::sema::functions::function(name)?;
            Some(format!(
                "```policy\n{}\n```\nbuilt-in function\n\n{}",
                f.signature, f.doc
            ))
        }
        DefKind::Field => {
            let item = def.item?;
            let text = analysis.text(item.file).get(item.range())?;
            let record = def
                .parent
                .and_then(|p| target.names.definition(p))
                .map(|p| p.name.to_string())
                .unwrap_or_default();
            Some(format!(
                "```policy\n{text}\n```\nfield of `{record}`{}",
                origin(analysis, shown, item.file)
            ))
        }
        DefKind::Class | DefKind::Let | DefKind::Body | DefKind::Type | DefKind::ProbeFact => {
            let item = def.item?;
            let text = analysis.text(item.file).get(item.range())?;
            Some(format!(
                "```policy\n{text}\n```{}",
                origin(analysis, shown, item.file)
            ))
        }
        DefKind::Bundle => {
            let span = def.span?;
            let (file, bundle) = find_bundle(analysis, |b| b.name.span == span)?;
            Some(format!(
                "```policy\n{}\n```{}",
                signature(analysis.text(file), bundle),
                origin(analysis, shown, file)
            ))
        }
        DefKind::Param => {
            let bundle = def.parent.and_then(|p| target.names.definition(p))?.span?;
            let (file, bundle) = find_bundle(analysis, |b| b.name.span == bundle)?;
            let text = analysis.text(file);
            Some(format!(
                "```policy\n{}\n```\nparameter of `{}`",
                text.get(def.item?.range()).unwrap_or(""),
                signature(text, bundle)
            ))
        }
        DefKind::LoopVar => Some(format!("```policy\n{name}\n```\nloop variable")),
    }
}

/// `bundle name(params)`, with the parameters as written.
pub fn signature(text: &str, b: &BundleDef) -> String {
    let params: Vec<&str> = b
        .params
        .iter()
        .map(|p| text.get(p.span.range()).unwrap_or(""))
        .collect();
    if params.is_empty() {
        format!("bundle {}", b.name.name)
    } else {
        format!("bundle {}({})", b.name.name, params.join(", "))
    }
}

/// The first bundle definition of the program that `matches` accepts,
/// with its file.
pub fn find_bundle(
    analysis: &Analysis,
    matches: impl Fn(&BundleDef) -> bool,
) -> Option<(FileId, &BundleDef)> {
    analysis.ws.modules.iter().find_map(|m| {
        m.items.iter().find_map(|item| match item {
            Item::Bundle(b) if matches(b) => Some((m.file, b)),
            _ => None,
        })
    })
}

/// "defined in std/files.policy" for definitions outside the hovered file.
fn origin(analysis: &Analysis, shown: FileId, file: FileId) -> String {
    if file == shown {
        String::new()
    } else {
        format!("\ndefined in `{}`", analysis.ws.db.name(file))
    }
}
