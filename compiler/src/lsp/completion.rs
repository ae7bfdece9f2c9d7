//! `textDocument/completion`. What fits at the cursor is read from the
//! tokens before it, not from the syntax tree: while typing, the statement
//! under the cursor is usually unfinished and the parser has replaced it
//! with an error node. A small stack machine over the tokens finds the
//! enclosing block (a promise, a body, a bundle, `when`, `exclusive`) and
//! the unfinished statement; the names come from the schema and from the
//! program's definitions.

use std::collections::BTreeSet;

use converge_format::schema::{self, AttrSpec, AttrType};
use converge_grammar::ast::Item;
use converge_grammar::token::Token;
use logos::Logos;
use lsp_types::{
    CompletionItem, CompletionItemKind, CompletionTextEdit, Documentation, InsertTextFormat,
    Position, Range, TextEdit,
};
use smol_str::SmolStr;

use super::analysis::Analysis;
use super::expressions;
use super::position::LspPositions;
use super::server::Document;

/// Where the cursor is, as far as completion cares.
#[derive(Debug, PartialEq)]
enum Context {
    /// Between top-level items.
    TopLevel,
    /// At the start of a statement in a bundle, `policy`, `when` or `for`.
    Statement,
    /// At an attribute name in a promise of this type (`None`: a body);
    /// `used` are the attributes already set in the block.
    AttrName {
        kind: Option<SmolStr>,
        used: Vec<SmolStr>,
    },
    /// After `attr =` in a promise of this type.
    AttrValue {
        kind: Option<SmolStr>,
        attr: SmolStr,
    },
    /// Where a class expression goes (`when`, `class x =`, `exclusive`).
    Classes,
    /// After `use`.
    Bodies,
    /// Where an expression may start: after `let x =`, an operator, `(`,
    /// `,`, `??`, a map key's `:`.
    Expression,
    Nothing,
}

/// The completion items at `pos`; empty in comments, strings (except in
/// `${...}` and a key typed after `[`) and where nothing fits. In a
/// template file, only inside `${...}` and `{% ... %}`.
pub fn complete(analysis: &Analysis, doc: &Document, pos: Position) -> Vec<CompletionItem> {
    let offset = doc.lines.offset(&doc.text, pos) as usize;
    let before = doc.text.get(..offset).unwrap_or("");
    let file = analysis.file_of(&doc.path);
    let word = before
        .bytes()
        .rev()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    let head = before.get(..before.len() - word).unwrap_or("");
    if !doc.policy {
        if !open_tag(head) {
            return Vec::new();
        }
        if let Some(start) = fact_prefix(before) {
            let range = doc.lines.range(&doc.text, start as u32, offset as u32);
            return facts(analysis, range);
        }
        return expressions::complete(analysis, file, offset as u32, head);
    }
    let (comment, string) = in_comment_or_string(before);
    if comment {
        return Vec::new();
    }
    if let Some(start) = fact_prefix(before) {
        // In a string, only inside `${...}`.
        if !string || before.get(..start).is_some_and(|b| b.ends_with("${")) {
            let range = doc.lines.range(&doc.text, start as u32, offset as u32);
            return facts(analysis, range);
        }
    }
    if string {
        // Inside `${...}`, or a key typed after `[`.
        if open_tag(head) || head.ends_with("[\"") {
            return expressions::complete(analysis, file, offset as u32, head);
        }
        return Vec::new();
    }
    // The lexer ends a string at the quote of a key in `${ports["ht`; the
    // key is still being typed.
    let tail = head.trim_end();
    if tail.ends_with('.') || tail.ends_with('[') || tail.ends_with("[\"") || open_tag(head) {
        return expressions::complete(analysis, file, offset as u32, head);
    }
    let context = context(head);
    match context {
        Context::TopLevel => keywords(&[
            "import",
            "class",
            "exclusive",
            "let",
            "body",
            "bundle",
            "policy",
        ]),
        Context::Statement => {
            let mut items = promise_types();
            items.extend(keywords(&["when", "for"]));
            items.extend(bundles(analysis));
            items
        }
        Context::AttrName { kind, used } => attributes(kind.as_deref(), &used),
        Context::AttrValue { kind, attr } => {
            // Enum words, booleans and classes are all an attribute of
            // such a type takes; any other value may be an expression.
            let mut items = values(analysis, kind.as_deref(), &attr);
            if items.is_empty() {
                items.extend(expressions::complete(analysis, file, offset as u32, head));
            }
            items
        }
        Context::Classes => classes(analysis),
        Context::Bodies => bodies(analysis),
        Context::Expression => expressions::complete(analysis, file, offset as u32, head),
        Context::Nothing => Vec::new(),
    }
}

/// The context of a cursor placed right after `before` (a partly typed
/// word already removed).
fn context(before: &str) -> Context {
    struct Frame {
        header: Vec<Token>,
        used: Vec<SmolStr>,
    }
    let mut stack: Vec<Frame> = Vec::new();
    let mut current: Vec<Token> = Vec::new();
    for token in Token::lexer(before).flatten() {
        match token {
            Token::LBrace => {
                stack.push(Frame {
                    header: std::mem::take(&mut current),
                    used: Vec::new(),
                });
            }
            Token::RBrace => {
                stack.pop();
                current.clear();
            }
            Token::Semi => {
                if let (Some(Token::Ident(name)), Some(Token::Eq), Some(frame)) =
                    (current.first(), current.get(1), stack.last_mut())
                {
                    frame.used.push(name.clone());
                }
                current.clear();
            }
            other => current.push(other),
        }
    }
    let Some(frame) = stack.last() else {
        return match current.as_slice() {
            [] => Context::TopLevel,
            [Token::Class, Token::Ident(_), Token::Eq, ..] => Context::Classes,
            [Token::Let, ..] if expression_start(&current) => Context::Expression,
            _ => Context::Nothing,
        };
    };
    let block = match frame.header.as_slice() {
        [Token::Body, ..] => Some(None),
        [Token::Ident(kind), second, ..] if !matches!(second, Token::Eq | Token::LParen) => {
            Some(Some(kind.clone()))
        }
        _ => None,
    };
    if let Some(kind) = block {
        return match current.as_slice() {
            [] => Context::AttrName {
                kind,
                used: frame.used.clone(),
            },
            [Token::Use] => Context::Bodies,
            [Token::Ident(attr), Token::Eq] => Context::AttrValue {
                kind,
                attr: attr.clone(),
            },
            [Token::Ident(attr), Token::Eq, ..]
                if ["on_repaired", "on_kept", "on_failed"].contains(&attr.as_str()) =>
            {
                Context::Classes
            }
            [Token::Ident(_), Token::Eq, ..] if expression_start(&current) => Context::Expression,
            _ => Context::Nothing,
        };
    }
    match (frame.header.first(), current.as_slice()) {
        (Some(Token::Exclusive), _) => Context::Classes,
        (Some(Token::Bundle | Token::Policy | Token::When | Token::For), []) => Context::Statement,
        (Some(Token::Bundle | Token::Policy | Token::When | Token::For), [Token::When, ..]) => {
            Context::Classes
        }
        // Inside a map or record literal (its `{` follows `=`, `:`, ...),
        // or an expression in a statement (`for x in `, a call argument).
        _ if expression_start(&current)
            || (current.is_empty() && expression_start(&frame.header)) =>
        {
            Context::Expression
        }
        _ => Context::Nothing,
    }
}

/// Whether an expression may start after these tokens: they end with an
/// operator, `=`, `(`, `[`, `,`, `:` or `in`.
fn expression_start(tokens: &[Token]) -> bool {
    matches!(
        tokens.last(),
        Some(
            Token::Eq
                | Token::LParen
                | Token::LBracket
                | Token::Comma
                | Token::Colon
                | Token::Coalesce
                | Token::AndAnd
                | Token::OrOr
                | Token::Bang
                | Token::EqEq
                | Token::NotEq
                | Token::In
        )
    )
}

/// Whether the text ends inside an unclosed `${` or `{%` (a template file,
/// or a policy string with tags).
fn open_tag(head: &str) -> bool {
    let start = match (head.rfind("${"), head.rfind("{%")) {
        (Some(a), Some(b)) => a.max(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return false,
    };
    !head.get(start..).unwrap_or("").contains('}')
}

/// Whether the cursor is inside a comment, and whether inside a string
/// literal.
fn in_comment_or_string(before: &str) -> (bool, bool) {
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let in_line_comment = converge_grammar::comments(before).last().is_some_and(|c| {
        c.end as usize == before.len() && c.start as usize >= line_start && !c.is_block()
    });
    // An unfinished string or block comment is the lexer's last, failed,
    // token.
    let unfinished = Token::lexer(before)
        .spanned()
        .last()
        .filter(|(t, _)| t.is_err())
        .and_then(|(_, span)| before.get(span));
    let in_block_comment = unfinished.is_some_and(|t| t.starts_with("/*"));
    let in_string = unfinished.is_some_and(|t| !t.starts_with("/*"));
    let in_comment = in_line_comment || in_block_comment;
    (in_comment, in_string)
}

/// The offset of `sys.` (or `facts.`) when the cursor is in such a name.
fn fact_prefix(before: &str) -> Option<usize> {
    let tail = before
        .bytes()
        .rev()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.')
        .count();
    let start = before.len() - tail;
    let word = before.get(start..)?;
    (word.starts_with("sys.") || word.starts_with("facts.")).then_some(start)
}

/// The `sys.*` facts and the program's probe facts (`facts.NAME`, from the
/// `fact` declarations of every loaded file).
fn facts(analysis: &Analysis, range: Range) -> Vec<CompletionItem> {
    let probes = analysis.ws.modules.iter().flat_map(|m| {
        m.items.iter().filter_map(move |item| match item {
            converge_grammar::ast::Item::Fact(f) => Some((m.file, f)),
            _ => None,
        })
    });
    let probe_items: Vec<CompletionItem> = probes
        .map(|(file, f)| {
            let name = format!("facts.{}", f.name.name);
            CompletionItem {
                label: name.clone(),
                kind: Some(CompletionItemKind::CONSTANT),
                detail: analysis
                    .text(file)
                    .get(f.ty.span.range())
                    .map(str::to_owned),
                documentation: Some(Documentation::String(
                    "probe fact, gathered by the VM before classes".to_owned(),
                )),
                filter_text: Some(name.clone()),
                text_edit: Some(CompletionTextEdit::Edit(TextEdit::new(range, name))),
                ..CompletionItem::default()
            }
        })
        .collect();
    schema::FACTS
        .iter()
        .map(|f| CompletionItem {
            label: f.name.to_owned(),
            kind: Some(CompletionItemKind::CONSTANT),
            detail: Some(f.ty.describe()),
            documentation: Some(Documentation::String(f.doc.to_owned())),
            filter_text: Some(f.name.to_owned()),
            text_edit: Some(CompletionTextEdit::Edit(TextEdit::new(
                range,
                f.name.to_owned(),
            ))),
            ..CompletionItem::default()
        })
        .chain(probe_items)
        .collect()
}

fn keywords(words: &[&str]) -> Vec<CompletionItem> {
    words
        .iter()
        .map(|w| CompletionItem {
            label: (*w).to_owned(),
            kind: Some(CompletionItemKind::KEYWORD),
            ..CompletionItem::default()
        })
        .collect()
}

/// Every promise type, inserted as `file "" { }` with the cursor in the
/// promiser.
fn promise_types() -> Vec<CompletionItem> {
    schema::PROMISE_TYPES
        .iter()
        .map(|t| CompletionItem {
            label: t.name.to_owned(),
            kind: Some(CompletionItemKind::STRUCT),
            detail: Some("promise type".to_owned()),
            documentation: Some(Documentation::String(t.doc.to_owned())),
            insert_text: Some(format!("{} \"$1\" {{\n\t$0\n}}", t.name)),
            insert_text_format: Some(InsertTextFormat::SNIPPET),
            ..CompletionItem::default()
        })
        .collect()
}

/// The attributes of a promise type (or, in a body, of any type) that the
/// block does not set yet.
fn attributes(kind: Option<&str>, used: &[SmolStr]) -> Vec<CompletionItem> {
    let specs: Vec<&AttrSpec> = match kind {
        Some(kind) => match schema::promise_type(kind) {
            Some(t) => t.all_attrs().collect(),
            None => return Vec::new(),
        },
        None => {
            let mut seen = BTreeSet::new();
            schema::PROMISE_TYPES
                .iter()
                .flat_map(|t| t.attrs.iter())
                .chain(schema::COMMON)
                .filter(|a| seen.insert(a.name))
                .collect()
        }
    };
    let mut items: Vec<CompletionItem> = specs
        .into_iter()
        .filter(|a| !used.iter().any(|u| u == a.name))
        .map(|a| CompletionItem {
            label: a.name.to_owned(),
            kind: Some(CompletionItemKind::PROPERTY),
            detail: Some(format!(
                "{} (default: {})",
                a.ty.describe(),
                a.default.describe()
            )),
            documentation: Some(Documentation::String(a.doc.to_owned())),
            insert_text: Some(format!("{} = ", a.name)),
            ..CompletionItem::default()
        })
        .collect();
    items.extend(keywords(&["use"]));
    items
}

/// Values that fit an attribute: enum words, booleans, class names.
fn values(analysis: &Analysis, kind: Option<&str>, attr: &str) -> Vec<CompletionItem> {
    let spec = match kind {
        Some(kind) => schema::promise_type(kind).and_then(|t| t.attr(attr)),
        None => schema::PROMISE_TYPES.iter().find_map(|t| t.attr(attr)),
    };
    let Some(spec) = spec else {
        return Vec::new();
    };
    let words: &[&str] = match spec.ty {
        AttrType::Enum(values) => values,
        AttrType::Bool => &["true", "false"],
        AttrType::Class => return classes(analysis),
        _ => return Vec::new(),
    };
    words
        .iter()
        .map(|w| CompletionItem {
            label: (*w).to_owned(),
            kind: Some(CompletionItemKind::ENUM_MEMBER),
            detail: Some(spec.ty.describe()),
            ..CompletionItem::default()
        })
        .collect()
}

/// The classes the program defines, then the hard classes.
fn classes(analysis: &Analysis) -> Vec<CompletionItem> {
    let mut items: Vec<CompletionItem> = Vec::new();
    let mut seen = BTreeSet::new();
    for module in &analysis.ws.modules {
        for item in &module.items {
            if let Item::Class(c) = item {
                if seen.insert(c.name.name.clone()) {
                    let text = analysis.text(module.file);
                    items.push(CompletionItem {
                        label: c.name.name.to_string(),
                        kind: Some(CompletionItemKind::CONSTANT),
                        detail: Some(text.get(c.span.range()).unwrap_or("").to_owned()),
                        ..CompletionItem::default()
                    });
                }
            }
        }
    }
    // The inventory's hosts and groups (`sema::inventory`).
    let files = analysis.ws.closure(analysis.root);
    if let Some((_, inventory)) = analysis.ws.inventory(&files) {
        use converge_format::inventory::{group_class, host_class};
        let hosts = inventory
            .hosts
            .iter()
            .map(|h| (host_class(h.name.get_ref()), "inventory host"));
        let groups = inventory.hosts.iter().flat_map(|h| {
            h.groups
                .iter()
                .map(|g| (group_class(g.get_ref()), "inventory group"))
        });
        for (name, detail) in hosts.chain(groups) {
            if seen.insert(name.as_str().into()) {
                items.push(CompletionItem {
                    label: name,
                    kind: Some(CompletionItemKind::CONSTANT),
                    detail: Some(detail.to_owned()),
                    ..CompletionItem::default()
                });
            }
        }
    }
    items.extend(
        schema::hard_class_names()
            .into_iter()
            .filter(|n| !seen.contains(n.as_str()))
            .map(|n| CompletionItem {
                label: n,
                kind: Some(CompletionItemKind::CONSTANT),
                detail: Some("hard class".to_owned()),
                ..CompletionItem::default()
            }),
    );
    items
}

fn bodies(analysis: &Analysis) -> Vec<CompletionItem> {
    let mut items = Vec::new();
    for module in &analysis.ws.modules {
        for item in &module.items {
            if let Item::Body(b) = item {
                items.push(CompletionItem {
                    label: b.name.name.to_string(),
                    kind: Some(CompletionItemKind::STRUCT),
                    detail: Some("body".to_owned()),
                    ..CompletionItem::default()
                });
            }
        }
    }
    items
}

/// Bundle calls, with the parameters that have no default as placeholders.
fn bundles(analysis: &Analysis) -> Vec<CompletionItem> {
    let mut items = Vec::new();
    for module in &analysis.ws.modules {
        let text = analysis.text(module.file);
        for item in &module.items {
            let Item::Bundle(b) = item else { continue };
            let args: Vec<String> = b
                .params
                .iter()
                .filter(|p| p.default.is_none())
                .enumerate()
                .map(|(i, p)| format!("{} = ${{{}:{}}}", p.name.name, i + 1, p.name.name))
                .collect();
            items.push(CompletionItem {
                label: b.name.name.to_string(),
                kind: Some(CompletionItemKind::FUNCTION),
                detail: Some(super::hover::signature(text, b)),
                insert_text: Some(format!("{}({});$0", b.name.name, args.join(", "))),
                insert_text_format: Some(InsertTextFormat::SNIPPET),
                ..CompletionItem::default()
            });
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_from_unfinished_text() {
        assert_eq!(context(""), Context::TopLevel);
        assert_eq!(context("bundle a {\n  "), Context::Statement);
        assert_eq!(
            context("bundle a {\n  file \"/x\" {\n    mode = 0o644;\n    "),
            Context::AttrName {
                kind: Some("file".into()),
                used: vec!["mode".into()]
            }
        );
        assert_eq!(
            context("bundle a { package \"p\" { state = "),
            Context::AttrValue {
                kind: Some("package".into()),
                attr: "state".into()
            }
        );
        assert_eq!(context("bundle a { when "), Context::Classes);
        assert_eq!(context("body b { use "), Context::Bodies);
        assert_eq!(context("exclusive { a, "), Context::Classes);
        assert_eq!(context("let x = { \"a\": "), Context::Expression);
        assert_eq!(context("let x = "), Context::Expression);
        assert_eq!(context("bundle a { for x in "), Context::Expression);
        assert_eq!(
            context("bundle a { file \"/x\" { content = a ?? "),
            Context::Expression
        );
    }

    #[test]
    fn no_completion_inside_comments_and_strings() {
        assert_eq!(in_comment_or_string("bundle a { // mo"), (true, false));
        assert_eq!(in_comment_or_string("bundle a { /* mo"), (true, false));
        assert_eq!(in_comment_or_string("bundle a { file \"/et"), (false, true));
        assert_eq!(
            in_comment_or_string("bundle a { file \"/etc\" { "),
            (false, false)
        );
        assert_eq!(fact_prefix("when sys.ho"), Some(5));
        assert_eq!(fact_prefix("when sy"), None);
        assert_eq!(fact_prefix("when facts.d"), Some(5));
        assert!(open_tag("listen ${site."));
        assert!(open_tag("{% for b in "));
        assert!(!open_tag("listen ${site.port} "));
        assert!(!open_tag("{% endif %} "));
    }
}
