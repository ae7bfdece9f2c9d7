//! The one-line rendering of expressions, types and small statements.
//!
//! Literals are copied from the source (a string keeps its escapes, raw
//! marker or heredoc body; an integer keeps its base and separators), so
//! formatting never changes a value. Everything else is rebuilt from the
//! tree with canonical spacing; parentheses are written exactly where the
//! grammar needs them to give back the same tree.

use converge_grammar::ast::{
    Arg, AttrStmt, Call, Defaults, Expr, ExprKind, FactDef, FactSource, FieldDef, For, Param,
    Promise, Stmt, TypeExpr, When,
};
use converge_grammar::Span;

/// The source text a span covers.
pub(super) fn slice(src: &str, span: Span) -> &str {
    src.get(span.range()).unwrap_or("")
}

/// Binding strength: the loosest operator first. A child that binds less
/// tightly than its place requires is parenthesised.
fn precedence(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Coalesce(_) => 0,
        ExprKind::Or(_) => 1,
        ExprKind::And(_) => 2,
        ExprKind::Not(_) => 3,
        ExprKind::Compare { .. } => 4,
        _ => 5,
    }
}

/// `e`, in parentheses when it binds more loosely than `min`.
fn operand(src: &str, e: &Expr, min: u8) -> String {
    let text = expr(src, e);
    if precedence(e) < min {
        format!("({text})")
    } else {
        text
    }
}

/// An expression on one line (a heredoc keeps its own line breaks).
pub(super) fn expr(src: &str, e: &Expr) -> String {
    match &e.kind {
        ExprKind::Str(_) | ExprKind::Int { .. } | ExprKind::Duration(_) => {
            slice(src, e.span).to_owned()
        }
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Path(parts) => parts
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join("."),
        ExprKind::List(items) => {
            let items: Vec<String> = items.iter().map(|i| expr(src, i)).collect();
            format!("[{}]", items.join(", "))
        }
        ExprKind::Map(entries) if entries.is_empty() => "{}".to_owned(),
        ExprKind::Map(entries) => {
            let entries: Vec<String> = entries.iter().map(|(k, v)| entry(src, k, v)).collect();
            format!("{{ {} }}", entries.join(", "))
        }
        ExprKind::Ref(r) => {
            // The target has no span of its own: it is the rest of the
            // reference after the kind.
            let between = src
                .get(r.kind.span.end as usize..e.span.end as usize)
                .unwrap_or("");
            format!("{} {}", r.kind.name, skip_trivia(between))
        }
        // `!(a == b)` reads better than the equivalent `!a == b`.
        ExprKind::Not(inner) if matches!(inner.kind, ExprKind::Not(_)) => {
            format!("!{}", expr(src, inner))
        }
        ExprKind::Not(inner) => format!("!{}", operand(src, inner, 5)),
        ExprKind::And(items) => items
            .iter()
            .map(|i| operand(src, i, 3))
            .collect::<Vec<_>>()
            .join(" && "),
        ExprKind::Or(items) => items
            .iter()
            .map(|i| operand(src, i, 2))
            .collect::<Vec<_>>()
            .join(" || "),
        ExprKind::Compare { op, lhs, rhs } => format!(
            "{} {} {}",
            operand(src, lhs, 5),
            op.as_str(),
            operand(src, rhs, 5)
        ),
        ExprKind::Coalesce(items) => items
            .iter()
            .map(|i| operand(src, i, 1))
            .collect::<Vec<_>>()
            .join(" ?? "),
        ExprKind::Record(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(name, value)| format!("{}: {}", name.name, expr(src, value)))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
        // A dotted name before `.x` is parenthesised: `a.b.x` would be one
        // longer name, not a field of `a.b`.
        ExprKind::Field { base, name } if matches!(base.kind, ExprKind::Path(_)) => {
            format!("({}).{}", expr(src, base), name.name)
        }
        ExprKind::Field { base, name } => format!("{}.{}", operand(src, base, 5), name.name),
        ExprKind::Index { base, index } => {
            format!("{}[{}]", operand(src, base, 5), expr(src, index))
        }
        ExprKind::Call { func, args } => {
            let args: Vec<String> = args.iter().map(|a| expr(src, a)).collect();
            format!("{}({})", func.name, args.join(", "))
        }
    }
}

/// `text` without the whitespace and comments it starts with.
fn skip_trivia(mut text: &str) -> &str {
    loop {
        let trimmed = text.trim_start();
        if let Some(rest) = trimmed.strip_prefix("//") {
            text = rest.find('\n').and_then(|i| rest.get(i..)).unwrap_or("");
        } else if let Some(rest) = trimmed.strip_prefix("/*") {
            text = rest
                .find("*/")
                .and_then(|i| rest.get(i + 2..))
                .unwrap_or("");
        } else {
            return trimmed;
        }
    }
}

/// `"key": value` of a map literal.
fn entry(src: &str, k: &Expr, value: &Expr) -> String {
    format!("{}: {}", key(src, k), expr(src, value))
}

/// A map key (keys are postfix expressions in the grammar). A bare name is
/// parenthesised: unparenthesised, `{ a: 1 }` would be a record literal.
pub(super) fn key(src: &str, k: &Expr) -> String {
    match &k.kind {
        ExprKind::Path(path) if path.len() == 1 => format!("({})", expr(src, k)),
        _ => operand(src, k, 5),
    }
}

/// `port: int = 80` of a record type.
pub(super) fn field_def(src: &str, f: &FieldDef) -> String {
    match &f.default {
        Some(d) => format!("{}: {} = {}", f.name.name, ty(&f.ty), expr(src, d)),
        None => format!("{}: {}", f.name.name, ty(&f.ty)),
    }
}

/// `fact name: T from ["/p", "arg"] timeout 5s;` or `fact name: T from
/// file "/path";`, on one line (strings as written).
pub(super) fn fact_def(src: &str, f: &FactDef) -> String {
    let source = match &f.source {
        FactSource::Program { argv, .. } => {
            let words: Vec<&str> = argv.iter().map(|(_, span)| slice(src, *span)).collect();
            format!("[{}]", words.join(", "))
        }
        FactSource::File { path, .. } => format!("file {}", slice(src, path.1)),
    };
    let timeout = f
        .timeout
        .as_ref()
        .map(|t| format!(" timeout {}", expr(src, t)))
        .unwrap_or_default();
    format!(
        "fact {}: {} from {source}{timeout};",
        f.name.name,
        ty(&f.ty)
    )
}

pub(super) fn ty(t: &TypeExpr) -> String {
    if t.args.is_empty() {
        t.name.name.to_string()
    } else {
        let args: Vec<String> = t.args.iter().map(ty).collect();
        format!("{}<{}>", t.name.name, args.join(", "))
    }
}

pub(super) fn param(src: &str, p: &Param) -> String {
    match &p.default {
        Some(d) => format!("{}: {} = {}", p.name.name, ty(&p.ty), expr(src, d)),
        None => format!("{}: {}", p.name.name, ty(&p.ty)),
    }
}

pub(super) fn arg(src: &str, a: &Arg) -> String {
    match &a.name {
        Some(name) => format!("{} = {}", name.name, expr(src, &a.value)),
        None => expr(src, &a.value),
    }
}

pub(super) fn call(src: &str, c: &Call) -> String {
    let args: Vec<String> = c.args.iter().map(|a| arg(src, a)).collect();
    format!("{}({});", c.bundle.name, args.join(", "))
}

/// `name = value;` or `use body;`, without alignment.
pub(super) fn attr(src: &str, a: &AttrStmt) -> String {
    match a {
        AttrStmt::Set(set) => format!("{} = {};", set.name.name, expr(src, &set.value)),
        AttrStmt::Use(u) => format!("use {};", u.body.name),
        AttrStmt::Error(span) => slice(src, *span).to_owned(),
    }
}

/// `{ a; b; }` or `{}`.
pub(super) fn braces(parts: &[String]) -> String {
    if parts.is_empty() {
        "{}".to_owned()
    } else {
        format!("{{ {} }}", parts.join(" "))
    }
}

pub(super) fn promise_head(src: &str, p: &Promise) -> String {
    format!("{} {}", p.kind.name, expr(src, &p.promiser))
}

/// `defaults` or `defaults file`.
pub(super) fn defaults_head(d: &Defaults) -> String {
    match &d.kind {
        Some(kind) => format!("{} {}", d.keyword.name, kind.name),
        None => d.keyword.name.to_string(),
    }
}

pub(super) fn when_head(src: &str, w: &When) -> String {
    format!("when {}", expr(src, &w.guard))
}

pub(super) fn for_head(src: &str, f: &For) -> String {
    match &f.key {
        Some(key) => format!("for {}, {} in {}", key.name, f.var.name, expr(src, &f.list)),
        None => format!("for {} in {}", f.var.name, expr(src, &f.list)),
    }
}

/// A whole statement on one line.
pub(super) fn stmt(src: &str, s: &Stmt) -> String {
    match s {
        Stmt::Promise(p) => {
            let attrs: Vec<String> = p.attrs.iter().map(|a| attr(src, a)).collect();
            format!("{} {}", promise_head(src, p), braces(&attrs))
        }
        Stmt::When(w) => format!("{} {}", when_head(src, w), block(src, &w.body)),
        Stmt::For(f) => format!("{} {}", for_head(src, f), block(src, &f.body)),
        Stmt::Call(c) => call(src, c),
        Stmt::Defaults(d) => {
            let attrs: Vec<String> = d.attrs.iter().map(|a| attr(src, a)).collect();
            format!("{} {}", defaults_head(d), braces(&attrs))
        }
        Stmt::Error(span) => slice(src, *span).to_owned(),
    }
}

/// Statements in braces on one line.
pub(super) fn block(src: &str, body: &[Stmt]) -> String {
    let parts: Vec<String> = body.iter().map(|s| stmt(src, s)).collect();
    braces(&parts)
}
