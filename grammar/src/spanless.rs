//! Equality of syntax trees ignoring where things are written: two trees
//! parsed from differently laid-out text are the same program. The
//! formatter checks every result with it.
//!
//! Every node is taken apart field by field, with no `..`: a field added
//! to the tree does not compile until it is compared here (or explicitly
//! ignored as a position), so the check can never silently skip part of a
//! program.

use crate::ast::*;
use crate::span::Span;
use crate::token::{StrLit, StrPart};

/// Equality that ignores spans and byte offsets.
pub trait SpanlessEq {
    fn spanless_eq(&self, other: &Self) -> bool;
}

impl<T: SpanlessEq> SpanlessEq for [T] {
    fn spanless_eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a.spanless_eq(b))
    }
}

impl<T: SpanlessEq> SpanlessEq for Vec<T> {
    fn spanless_eq(&self, other: &Self) -> bool {
        self.as_slice().spanless_eq(other.as_slice())
    }
}

impl<T: SpanlessEq> SpanlessEq for Option<T> {
    fn spanless_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Some(a), Some(b)) => a.spanless_eq(b),
            (None, None) => true,
            _ => false,
        }
    }
}

impl<T: SpanlessEq + ?Sized> SpanlessEq for Box<T> {
    fn spanless_eq(&self, other: &Self) -> bool {
        (**self).spanless_eq(other)
    }
}

impl<A: SpanlessEq, B: SpanlessEq> SpanlessEq for (A, B) {
    fn spanless_eq(&self, other: &Self) -> bool {
        self.0.spanless_eq(&other.0) && self.1.spanless_eq(&other.1)
    }
}

impl SpanlessEq for Module {
    fn spanless_eq(&self, other: &Self) -> bool {
        let Module { file: _, items } = self;
        items.spanless_eq(&other.items)
    }
}

impl SpanlessEq for Ident {
    fn spanless_eq(&self, other: &Self) -> bool {
        let Ident { name, span: _ } = self;
        *name == other.name
    }
}

impl SpanlessEq for Item {
    fn spanless_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Item::Import(a), Item::Import(b)) => {
                let Import {
                    path,
                    path_span: _,
                    span: _,
                } = a;
                path.spanless_eq(&b.path)
            }
            (Item::Class(a), Item::Class(b)) => {
                let ClassDef {
                    name,
                    expr,
                    span: _,
                } = a;
                name.spanless_eq(&b.name) && expr.spanless_eq(&b.expr)
            }
            (Item::Exclusive(a), Item::Exclusive(b)) => {
                let Exclusive { classes, span: _ } = a;
                classes.spanless_eq(&b.classes)
            }
            (Item::Let(a), Item::Let(b)) => {
                let LetDef {
                    name,
                    ty,
                    value,
                    span: _,
                } = a;
                name.spanless_eq(&b.name) && ty.spanless_eq(&b.ty) && value.spanless_eq(&b.value)
            }
            (Item::Body(a), Item::Body(b)) => {
                let BodyDef {
                    name,
                    attrs,
                    span: _,
                } = a;
                name.spanless_eq(&b.name) && attrs.spanless_eq(&b.attrs)
            }
            (Item::Bundle(a), Item::Bundle(b)) => {
                let BundleDef {
                    name,
                    params,
                    body,
                    span: _,
                } = a;
                name.spanless_eq(&b.name)
                    && params.spanless_eq(&b.params)
                    && body.spanless_eq(&b.body)
            }
            (Item::Policy(a), Item::Policy(b)) => {
                let PolicyDef { body, span: _ } = a;
                body.spanless_eq(&b.body)
            }
            (Item::Type(a), Item::Type(b)) => {
                let TypeDef {
                    name,
                    fields,
                    span: _,
                } = a;
                name.spanless_eq(&b.name) && fields.spanless_eq(&b.fields)
            }
            (Item::Fact(a), Item::Fact(b)) => {
                let FactDef {
                    name,
                    ty,
                    source,
                    timeout,
                    span: _,
                } = &**a;
                name.spanless_eq(&b.name)
                    && ty.spanless_eq(&b.ty)
                    && source.spanless_eq(&b.source)
                    && timeout.spanless_eq(&b.timeout)
            }
            (Item::Error(_), Item::Error(_)) => true,
            _ => false,
        }
    }
}

impl SpanlessEq for FactSource {
    fn spanless_eq(&self, other: &Self) -> bool {
        let words = |a: &[(StrLit, Span)], b: &[(StrLit, Span)]| {
            a.len() == b.len() && a.iter().zip(b).all(|((x, _), (y, _))| x.spanless_eq(y))
        };
        match (self, other) {
            (FactSource::Program { argv: a, span: _ }, FactSource::Program { argv: b, .. }) => {
                words(a, b)
            }
            (FactSource::File { path: a, span: _ }, FactSource::File { path: b, .. }) => {
                a.0.spanless_eq(&b.0)
            }
            _ => false,
        }
    }
}

impl SpanlessEq for Param {
    fn spanless_eq(&self, other: &Self) -> bool {
        let Param {
            name,
            ty,
            default,
            span: _,
        } = self;
        name.spanless_eq(&other.name)
            && ty.spanless_eq(&other.ty)
            && default.spanless_eq(&other.default)
    }
}

impl SpanlessEq for FieldDef {
    fn spanless_eq(&self, other: &Self) -> bool {
        let FieldDef {
            name,
            ty,
            default,
            span: _,
        } = self;
        name.spanless_eq(&other.name)
            && ty.spanless_eq(&other.ty)
            && default.spanless_eq(&other.default)
    }
}

impl SpanlessEq for TypeExpr {
    fn spanless_eq(&self, other: &Self) -> bool {
        let TypeExpr {
            name,
            args,
            span: _,
        } = self;
        name.spanless_eq(&other.name) && args.spanless_eq(&other.args)
    }
}

impl SpanlessEq for Stmt {
    fn spanless_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Stmt::Promise(a), Stmt::Promise(b)) => {
                let Promise {
                    kind,
                    promiser,
                    attrs,
                    span: _,
                } = a;
                kind.spanless_eq(&b.kind)
                    && promiser.spanless_eq(&b.promiser)
                    && attrs.spanless_eq(&b.attrs)
            }
            (Stmt::When(a), Stmt::When(b)) => {
                let When {
                    guard,
                    body,
                    span: _,
                } = a;
                guard.spanless_eq(&b.guard) && body.spanless_eq(&b.body)
            }
            (Stmt::For(a), Stmt::For(b)) => {
                let For {
                    key,
                    var,
                    list,
                    body,
                    span: _,
                } = &**a;
                key.spanless_eq(&b.key)
                    && var.spanless_eq(&b.var)
                    && list.spanless_eq(&b.list)
                    && body.spanless_eq(&b.body)
            }
            (Stmt::Call(a), Stmt::Call(b)) => {
                let Call {
                    bundle,
                    args,
                    span: _,
                } = a;
                bundle.spanless_eq(&b.bundle) && args.spanless_eq(&b.args)
            }
            (Stmt::Defaults(a), Stmt::Defaults(b)) => {
                let Defaults {
                    keyword,
                    kind,
                    attrs,
                    span: _,
                } = a;
                keyword.spanless_eq(&b.keyword)
                    && kind.spanless_eq(&b.kind)
                    && attrs.spanless_eq(&b.attrs)
            }
            (Stmt::Error(_), Stmt::Error(_)) => true,
            _ => false,
        }
    }
}

impl SpanlessEq for Arg {
    fn spanless_eq(&self, other: &Self) -> bool {
        let Arg {
            name,
            value,
            span: _,
        } = self;
        name.spanless_eq(&other.name) && value.spanless_eq(&other.value)
    }
}

impl SpanlessEq for AttrStmt {
    fn spanless_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (AttrStmt::Set(a), AttrStmt::Set(b)) => {
                let Attr {
                    name,
                    value,
                    span: _,
                } = a;
                name.spanless_eq(&b.name) && value.spanless_eq(&b.value)
            }
            (AttrStmt::Use(a), AttrStmt::Use(b)) => {
                let Use { body, span: _ } = a;
                body.spanless_eq(&b.body)
            }
            (AttrStmt::Error(_), AttrStmt::Error(_)) => true,
            _ => false,
        }
    }
}

impl SpanlessEq for Expr {
    fn spanless_eq(&self, other: &Self) -> bool {
        let Expr { kind, span: _ } = self;
        kind.spanless_eq(&other.kind)
    }
}

impl SpanlessEq for ExprKind {
    fn spanless_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ExprKind::Str(a), ExprKind::Str(b)) => a.spanless_eq(b),
            (ExprKind::Int { value, octal }, ExprKind::Int { value: v, octal: o }) => {
                value == v && octal == o
            }
            (ExprKind::Duration(a), ExprKind::Duration(b)) => a == b,
            (ExprKind::Bool(a), ExprKind::Bool(b)) => a == b,
            (ExprKind::Path(a), ExprKind::Path(b)) => a.spanless_eq(b),
            (ExprKind::List(a), ExprKind::List(b)) => a.spanless_eq(b),
            (ExprKind::Map(a), ExprKind::Map(b)) => a.spanless_eq(b),
            (ExprKind::Record(a), ExprKind::Record(b)) => a.spanless_eq(b),
            (ExprKind::Field { base, name }, ExprKind::Field { base: b, name: n }) => {
                base.spanless_eq(b) && name.spanless_eq(n)
            }
            (ExprKind::Index { base, index }, ExprKind::Index { base: b, index: i }) => {
                base.spanless_eq(b) && index.spanless_eq(i)
            }
            (ExprKind::Coalesce(a), ExprKind::Coalesce(b)) => a.spanless_eq(b),
            (ExprKind::Call { func, args }, ExprKind::Call { func: f, args: a }) => {
                func.spanless_eq(f) && args.spanless_eq(a)
            }
            (ExprKind::Ref(a), ExprKind::Ref(b)) => {
                let RefExpr { kind, target } = &**a;
                kind.spanless_eq(&b.kind) && target.spanless_eq(&b.target)
            }
            (ExprKind::Not(a), ExprKind::Not(b)) => a.spanless_eq(b),
            (ExprKind::And(a), ExprKind::And(b)) | (ExprKind::Or(a), ExprKind::Or(b)) => {
                a.spanless_eq(b)
            }
            (
                ExprKind::Compare { op, lhs, rhs },
                ExprKind::Compare {
                    op: o,
                    lhs: l,
                    rhs: r,
                },
            ) => op == o && lhs.spanless_eq(l) && rhs.spanless_eq(r),
            _ => false,
        }
    }
}

impl SpanlessEq for StrLit {
    fn spanless_eq(&self, other: &Self) -> bool {
        let StrLit { parts, raw } = self;
        *raw == other.raw && parts.spanless_eq(&other.parts)
    }
}

impl SpanlessEq for StrPart {
    fn spanless_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (StrPart::Lit(a), StrPart::Lit(b)) => a == b,
            (StrPart::Interp(a), StrPart::Interp(b)) => a.spanless_eq(b),
            (StrPart::Tag(a), StrPart::Tag(b)) => {
                let Tag { kind, span: _ } = &**a;
                kind.spanless_eq(&b.kind)
            }
            _ => false,
        }
    }
}

impl SpanlessEq for TagKind {
    fn spanless_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                TagKind::For { key, var, iter },
                TagKind::For {
                    key: k,
                    var: v,
                    iter: i,
                },
            ) => key.spanless_eq(k) && var.spanless_eq(v) && iter.spanless_eq(i),
            (TagKind::If(a), TagKind::If(b)) | (TagKind::Elif(a), TagKind::Elif(b)) => {
                a.spanless_eq(b)
            }
            (TagKind::Else, TagKind::Else)
            | (TagKind::EndFor, TagKind::EndFor)
            | (TagKind::EndIf, TagKind::EndIf) => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::span::FileId;

    fn parse(src: &str) -> Module {
        let (module, errors) = crate::parse(FileId(0), src);
        assert!(errors.is_empty(), "{errors:?}");
        module
    }

    #[test]
    fn a_moved_tree_is_the_same() {
        let a =
            parse("bundle b(p: int = 1) { file \"/x/${p}\" { mode = 0o644; } }\npolicy { b(); }");
        let b = parse(
            "\n\n  bundle   b(\n p : int=1 )\n{\n  file \"/x/${p}\" {\n    mode = 0o644;\n  }\n}\n\npolicy {\n  b();\n}\n",
        );
        assert_ne!(a, b, "the spans differ");
        assert!(a.spanless_eq(&b));
    }

    #[test]
    fn a_changed_tree_is_not() {
        let base = "bundle b(p: int) { when web && !db { file \"/x/${p}\" { mode = 0o644; } } }";
        let a = parse(base);
        for changed in [
            "bundle c(p: int) { when web && !db { file \"/x/${p}\" { mode = 0o644; } } }",
            "bundle b(p: string) { when web && !db { file \"/x/${p}\" { mode = 0o644; } } }",
            "bundle b(p: int) { when web || !db { file \"/x/${p}\" { mode = 0o644; } } }",
            "bundle b(p: int) { when web && db { file \"/x/${p}\" { mode = 0o644; } } }",
            "bundle b(p: int) { when web && !db { file \"/x/${q}\" { mode = 0o644; } } }",
            "bundle b(p: int) { when web && !db { file \"/x/p\" { mode = 0o644; } } }",
            "bundle b(p: int) { when web && !db { file \"/x/${p}\" { mode = 644; } } }",
            "bundle b(p: int) { when web && !db { file \"/x/${p}\" { owner = 0o644; } } }",
            "bundle b(p: int) { when web && !db { file r\"/x/${p}\" { mode = 0o644; } } }",
            "bundle b(p: int) { when web && !db { } }",
        ] {
            assert!(!a.spanless_eq(&parse(changed)), "{changed}");
        }
    }
}
