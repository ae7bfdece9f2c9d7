//! Strings and templates (LANGUAGE.md sections 11-12): every `${expr}` is
//! a single value, every `{% for %}` loops over a list or a map, every
//! `{% if %}` tests a condition. Template files are checked in the scope of
//! the promise that names them, so a misspelt name is an error at the
//! template's file, line and column.

use converge_grammar::ast::{Expr, ExprKind, Ident};
use converge_grammar::template::Node;
use converge_grammar::token::{StrLit, StrPart};
use converge_grammar::Span;

use super::*;
use crate::diagnostic::{Code, Diagnostic};
use crate::sema::names::{DefKind, Definition};
use crate::sema::types::Type;

impl<'a> Checker<'a> {
    /// Checks a string literal: its interpolations, and its tags when it
    /// has any (then the workspace has its nested form).
    pub(super) fn check_string(&mut self, lit: &StrLit, span: Span, scope: &Scope) {
        if lit.parts.iter().any(|p| matches!(p, StrPart::Tag(_))) {
            let nodes = self.symbols.ws.and_then(|ws| ws.string_nodes(span));
            if let Some(nodes) = nodes {
                let mut scope = scope.clone();
                self.check_nodes(nodes, &mut scope);
            }
            return;
        }
        for part in &lit.parts {
            if let StrPart::Interp(expr) = part {
                self.check_interp(expr, scope);
            }
        }
    }

    /// Checks template nodes (of a string or a template file).
    pub(crate) fn check_nodes(&mut self, nodes: &[Node], scope: &mut Scope) {
        for node in nodes {
            match node {
                Node::Text(_) => {}
                Node::Interp(expr) => self.check_interp(expr, scope),
                Node::For {
                    key,
                    var,
                    iter,
                    body,
                    span,
                } => {
                    let ty = self.value_type(iter, scope);
                    let (key_ty, elem) = match (&ty, key) {
                        (Type::List(inner), None) => (None, (**inner).clone()),
                        (Type::Map(inner), Some(_)) => (Some(Type::String), (**inner).clone()),
                        (Type::Any, _) => (key.as_ref().map(|_| Type::Any), Type::Any),
                        (Type::Map(_), None) => {
                            self.push(
                                Diagnostic::new(
                                    Code::TemplateType,
                                    "a loop over a map needs a key and a value variable",
                                    iter.span,
                                    "a map",
                                )
                                .with_help(format!("write `for key, {} in ...`", var.name)),
                            );
                            (None, Type::Any)
                        }
                        (Type::List(_), Some(_)) => {
                            self.push(
                                Diagnostic::new(
                                    Code::TemplateType,
                                    "a loop over a list has one variable",
                                    iter.span,
                                    "a list",
                                )
                                .with_help(format!("write `for {} in ...`", var.name)),
                            );
                            (None, Type::Any)
                        }
                        (other, _) => {
                            self.push(
                                Diagnostic::new(
                                    Code::TemplateType,
                                    format!("cannot loop over {}", other.with_article()),
                                    iter.span,
                                    "not a list or a map",
                                )
                                .with_help("`for x in LIST` loops over a list, `for k, v in MAP` over a map"),
                            );
                            (None, Type::Any)
                        }
                    };
                    let before = scope.len();
                    if let (Some(key), Some(t)) = (key, key_ty) {
                        self.loop_var(key, t, *span, scope);
                    }
                    self.loop_var(var, elem, *span, scope);
                    self.check_nodes(body, scope);
                    scope.truncate(before);
                }
                Node::If {
                    branches,
                    otherwise,
                    ..
                } => {
                    for (cond, body) in branches {
                        self.check_condition(cond, scope);
                        self.check_nodes(body, scope);
                    }
                    if let Some(body) = otherwise {
                        self.check_nodes(body, scope);
                    }
                }
            }
        }
    }

    /// Defines a loop variable (of a `for` statement or tag) in scope.
    pub(super) fn loop_var(&mut self, name: &Ident, ty: Type, item: Span, scope: &mut Scope) {
        let def = self.names.define(
            Definition {
                kind: DefKind::LoopVar,
                name: name.name.clone(),
                span: Some(name.span),
                item: Some(item),
                parent: None,
            },
            false,
        );
        self.names.set_type(def, ty.clone());
        scope.push(Var {
            name: name.name.clone(),
            ty,
            span: name.span,
            def,
        });
    }

    /// `${expr}`: any expression of a single-value type.
    fn check_interp(&mut self, expr: &Expr, scope: &Scope) {
        let ty = self.value_type(expr, scope);
        if !ty.is_scalar() {
            let help = match ty {
                Type::List(_) => "join a list into one string: `${join(LIST, \", \")}`, or loop: `{% for x in LIST %}${x}{% endfor %}`",
                Type::Map(_) => "read one entry (`${m[\"key\"]}`) or loop: `{% for k, v in MAP %}${k}=${v}{% endfor %}`",
                _ => "interpolate one of its fields: `${site.port}`",
            };
            self.push(
                Diagnostic::new(
                    Code::TemplateType,
                    format!("cannot interpolate {} into a string", ty.with_article()),
                    expr.span,
                    "not a single value",
                )
                .with_help(help),
            );
        }
    }

    /// An `{% if %}` condition: a class expression, or any bool value.
    pub(super) fn check_condition(&mut self, cond: &Expr, scope: &Scope) {
        match &cond.kind {
            ExprKind::Path(path) if path.len() == 1 => self.check_guard(cond, scope),
            ExprKind::Not(_) | ExprKind::And(_) | ExprKind::Or(_) | ExprKind::Compare { .. } => {
                self.check_guard(cond, scope)
            }
            _ => {
                let ty = self.value_type(cond, scope);
                if !Type::Bool.accepts(&ty) {
                    self.push(
                        Diagnostic::new(
                            Code::TemplateType,
                            format!("a condition must be a bool, found {}", ty.describe()),
                            cond.span,
                            "not a condition",
                        )
                        .with_help("test a class (`{% if web %}`), a bool (`{% if site.tls %}`) or a comparison (`{% if sys.os_family == \"debian\" %}`)"),
                    );
                }
            }
        }
    }

    /// A `template = "..."` attribute: the template file, checked in the
    /// promise's scope.
    pub(super) fn check_template_attr(&mut self, value: &Expr, scope: &Scope) {
        let ExprKind::Str(lit) = &value.kind else {
            return self.template_not_literal(value.span);
        };
        let Some(path) = lit.as_plain() else {
            return self.template_not_literal(value.span);
        };
        let Some(ws) = self.symbols.ws else { return };
        match ws.document(value.span.file, &path) {
            Some(Ok(file)) => {
                if let Some(nodes) = ws.template_nodes(*file) {
                    let mut scope = scope.clone();
                    self.check_nodes(nodes, &mut scope);
                }
            }
            Some(Err(d)) => self.push(d.clone()),
            None => {}
        }
    }

    /// A literal `source` path the workspace refused (outside the policy
    /// tree): reported here, so every other problem is reported too.
    pub(super) fn check_source_path(&mut self, value: &Expr) {
        let ExprKind::Str(lit) = &value.kind else {
            return;
        };
        let Some(path) = lit.as_plain() else { return };
        if let Some(Err(d)) = self
            .symbols
            .ws
            .and_then(|ws| ws.document(value.span.file, &path))
        {
            self.push(d.clone());
        }
    }

    fn template_not_literal(&mut self, span: Span) {
        self.push(
            Diagnostic::new(
                Code::TemplatePathNotLiteral,
                "a `template` path must be a literal string",
                span,
                "computed path",
            )
            .with_help("the compiler reads and checks every template before anything ships; write the path literally and choose between templates with `when`"),
        );
    }
}
