//! `textDocument/hover`: what the name under the cursor is. Attributes,
//! promise types and facts are described from the schema
//! (`converge_format::schema`), the same text the checker's messages use;
//! classes, lets and bodies show their definition, bundles their signature.

use converge_format::schema::{self, AttrSpec};
use converge_grammar::ast::{BundleDef, Item};
use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind, Position};

use super::analysis::Analysis;
use super::index::Key;
use super::server::Document;

/// The hover for the name at `pos`, with its range, or `None` where there
/// is no name.
pub fn hover(analysis: &Analysis, doc: &Document, pos: Position) -> Option<Hover> {
    let offset = doc.lines.offset(&doc.text, pos);
    let occurrence = analysis.index.at(analysis.root, offset)?;
    let text = describe(analysis, &occurrence.key)?;
    let span = occurrence.span;
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: text,
        }),
        range: Some(doc.lines.range(&doc.text, span.start, span.end)),
    })
}

/// The hover text of a name, in Markdown.
pub fn describe(analysis: &Analysis, key: &Key) -> Option<String> {
    match key {
        Key::Attr { kind, name } => {
            let found: Option<&AttrSpec> = match kind {
                Some(kind) => schema::promise_type(kind)?.attr(name),
                None => schema::COMMON
                    .iter()
                    .chain(schema::PROMISE_TYPES.iter().flat_map(|t| t.attrs))
                    .find(|a| a.name == name.as_str()),
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
        Key::PromiseType(name) => {
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
        Key::Fact(name) => {
            let fact = schema::fact(name)?;
            Some(format!(
                "```policy\n{}: {}\n```\nhost fact, gathered by the VM on each run\n\n{}",
                fact.name,
                fact.ty.describe(),
                fact.doc
            ))
        }
        Key::Class(name) => {
            if let Some(text) = definition_text(analysis, |item| match item {
                Item::Class(c) if &c.name.name == name => Some(c.span),
                _ => None,
            }) {
                return Some(text);
            }
            schema::is_hard_class(name).then(|| {
                format!(
                    "```policy\nclass {name}\n```\nhard class: set by the VM from the host's facts"
                )
            })
        }
        Key::Let(name) => definition_text(analysis, |item| match item {
            Item::Let(l) if &l.name.name == name => Some(l.span),
            _ => None,
        }),
        Key::Body(name) => definition_text(analysis, |item| match item {
            Item::Body(b) if &b.name.name == name => Some(b.span),
            _ => None,
        }),
        Key::Bundle(name) => {
            let (file, bundle) = find_bundle(analysis, |b| &b.name.name == name)?;
            Some(format!(
                "```policy\n{}\n```{}",
                signature(analysis.text(file), bundle),
                origin(analysis, file)
            ))
        }
        Key::Param { bundle, name } => {
            let (file, def) = find_bundle(analysis, |b| b.span == *bundle)?;
            let param = def.params.iter().find(|p| &p.name.name == name)?;
            let text = analysis.text(file);
            Some(format!(
                "```policy\n{}\n```\nparameter of `{}`",
                text.get(param.span.range()).unwrap_or(""),
                signature(text, def)
            ))
        }
        Key::LoopVar { name, .. } => Some(format!("```policy\n{name}\n```\nloop variable")),
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
) -> Option<(converge_grammar::FileId, &BundleDef)> {
    analysis.ws.modules.iter().find_map(|m| {
        m.items.iter().find_map(|item| match item {
            Item::Bundle(b) if matches(b) => Some((m.file, b)),
            _ => None,
        })
    })
}

/// The source of the first item `pick` selects, in a code block.
fn definition_text(
    analysis: &Analysis,
    pick: impl Fn(&Item) -> Option<converge_grammar::Span>,
) -> Option<String> {
    analysis.ws.modules.iter().find_map(|m| {
        m.items.iter().find_map(|item| {
            let span = pick(item)?;
            let text = analysis.text(m.file).get(span.range())?;
            Some(format!(
                "```policy\n{text}\n```{}",
                origin(analysis, m.file)
            ))
        })
    })
}

/// "defined in std/files.policy" for definitions outside the hovered file.
fn origin(analysis: &Analysis, file: converge_grammar::FileId) -> String {
    if file == analysis.root {
        String::new()
    } else {
        format!("\ndefined in `{}`", analysis.ws.db.name(file))
    }
}
