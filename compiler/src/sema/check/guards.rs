//! Class expressions: `when` guards and class definitions.

use converge_format::bundle::limits;
use converge_format::schema::is_hard_class;
use converge_grammar::ast::{CompareOp, Expr, ExprKind, Ident};

use super::*;
use crate::diagnostic::{Code, Diagnostic};
use crate::sema::names::DefKind;
use crate::sema::types::Type;

impl<'a> Checker<'a> {
    /// Checks a class expression (a `when` guard or a class definition).
    pub fn check_guard(&mut self, expr: &Expr, scope: &Scope) {
        match &expr.kind {
            ExprKind::Bool(_) => {}
            ExprKind::Path(path) => match path.as_slice() {
                [one] => self.check_class_name(one, scope),
                [first, ..] if first.name == "sys" => self.push(
                    Diagnostic::new(
                        Code::InvalidExpression,
                        "a fact is not a class",
                        expr.span,
                        "compare it with a value",
                    )
                    .with_help("write a test such as `sys.os_family == \"debian\"`"),
                ),
                _ => {
                    let ty = self.value_type(expr, scope);
                    if !Type::Bool.accepts(&ty) {
                        self.mismatch(expr.span, &Type::Bool, &ty, "a guard");
                    }
                }
            },
            ExprKind::Not(inner) => self.check_guard(inner, scope),
            ExprKind::And(items) | ExprKind::Or(items) => {
                for item in items {
                    self.check_guard(item, scope);
                }
            }
            ExprKind::Compare { op, lhs, rhs } => self.check_compare(*op, lhs, rhs, scope),
            // A bool value: a field, a lookup, a function call.
            ExprKind::Field { .. }
            | ExprKind::Index { .. }
            | ExprKind::Coalesce(_)
            | ExprKind::Call { .. } => {
                let ty = self.value_type(expr, scope);
                if !Type::Bool.accepts(&ty) {
                    self.mismatch(expr.span, &Type::Bool, &ty, "a guard");
                }
            }
            _ => self.push(
                Diagnostic::new(
                    Code::InvalidExpression,
                    "not a class expression",
                    expr.span,
                    "a value, not a condition",
                )
                .with_help("a guard combines classes with `!`, `&&`, `||`, and tests facts with `==`, `!=`, `=~`, `in`"),
            ),
        }
    }

    pub(super) fn check_class_name(&mut self, name: &Ident, scope: &Scope) {
        if let Some(refs) = &mut self.class_refs {
            refs.push((name.name.clone(), name.span));
        }
        // A class first, then a boolean loop variable, parameter or let.
        if let Some(id) = self.names.find(DefKind::Class, &name.name) {
            self.names.record(name.span, id);
            return;
        }
        if self.inventory_class(&name.name, name.span) {
            return;
        }
        if is_hard_class(&name.name) {
            let id = self.names.builtin(DefKind::HardClass, &name.name);
            self.names.record(name.span, id);
            return;
        }
        let var = self
            .lookup_var(&name.name, scope)
            .map(|v| (v.ty.clone(), v.def));
        let ty = match var {
            Some((t, def)) => {
                self.names.record(name.span, def);
                Some(t)
            }
            None => match self.symbols.lets.key(&name.name) {
                Some(key) => {
                    self.used_lets.insert(key);
                    self.record_let(key, name.span);
                    self.let_type(key)
                }
                None => None,
            },
        };
        match ty {
            Some(t) if Type::Bool.accepts(&t) => {}
            Some(t) => self.push(Diagnostic::new(
                Code::TypeMismatch,
                format!(
                    "`{}` is {}, not a class or a bool",
                    name.name,
                    t.with_article()
                ),
                name.span,
                "cannot guard with this",
            )),
            None => self.undefined_class(&name.name, name.span),
        }
    }

    pub(super) fn check_compare(&mut self, op: CompareOp, lhs: &Expr, rhs: &Expr, scope: &Scope) {
        match op {
            CompareOp::Eq | CompareOp::NotEq => {
                let l = self.value_type(lhs, scope);
                let r = self.value_type(rhs, scope);
                if !l.is_scalar() || !(l.accepts(&r) || r.accepts(&l)) {
                    self.push(Diagnostic::new(
                        Code::TypeMismatch,
                        format!(
                            "cannot compare {} with {}",
                            l.with_article(),
                            r.with_article()
                        ),
                        lhs.span.to(rhs.span),
                        format!("`{}` needs two values of one type", op.as_str()),
                    ));
                }
            }
            CompareOp::Match => {
                let l = self.value_type(lhs, scope);
                if !Type::String.accepts(&l) {
                    self.mismatch(lhs.span, &Type::String, &l, "the left side of `=~`");
                }
                match &rhs.kind {
                    ExprKind::Str(lit) => match lit.as_plain() {
                        Some(pattern) => self.check_regex(&pattern, rhs.span),
                        None => self.push(
                            Diagnostic::new(
                                Code::InvalidExpression,
                                "a regex must be a literal string",
                                rhs.span,
                                "uses interpolation",
                            )
                            .with_help("regexes are compiled and checked at compile time; write them as raw strings r\"...\""),
                        ),
                    },
                    _ => self.push(
                        Diagnostic::new(
                            Code::InvalidExpression,
                            "the right side of `=~` must be a regex literal",
                            rhs.span,
                            "not a string literal",
                        )
                        .with_help("write the pattern as a raw string: `sys.hostname =~ r\"^web[0-9]+$\"`"),
                    ),
                }
            }
            CompareOp::In => {
                let l = self.value_type(lhs, scope);
                let r = self.value_type(rhs, scope);
                match r.element() {
                    Some(elem) if elem.accepts(&l) => {}
                    Some(elem) => self.push(Diagnostic::new(
                        Code::TypeMismatch,
                        format!(
                            "cannot look for {} in a list of {}",
                            l.with_article(),
                            elem.describe()
                        ),
                        lhs.span,
                        l.with_article(),
                    )),
                    None => self.push(Diagnostic::new(
                        Code::TypeMismatch,
                        format!("`in` needs a list on its right, found {}", r.describe()),
                        rhs.span,
                        "not a list",
                    )),
                }
            }
        }
    }
}

impl Checker<'_> {
    /// A regex literal (`=~`, `line`'s `replace`) must compile under the
    /// limits the VM's verifier applies (`converge_format::bundle::limits`),
    /// so a policy that checks builds a bundle hosts run (E0206).
    pub(super) fn check_regex(&mut self, pattern: &str, span: converge_grammar::Span) {
        let built = regex::RegexBuilder::new(pattern)
            .size_limit(limits::MAX_REGEX_SIZE)
            .dfa_size_limit(limits::MAX_REGEX_DFA)
            .build();
        if let Err(err) = built {
            self.push(
                Diagnostic::new(
                    Code::InvalidRegex,
                    "invalid regular expression",
                    span,
                    "the regex engine rejects this pattern",
                )
                .with_note(regex_error_text(&err))
                .with_help("regexes follow the syntax of Rust's regex crate; write them as raw strings r\"...\""),
            );
        }
    }
}

fn regex_error_text(err: &regex::Error) -> String {
    let text = err.to_string();
    let text = text.trim();
    format!(
        "regex error: {}",
        text.lines().last().unwrap_or(text).trim()
    )
}
