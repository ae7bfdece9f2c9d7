//! The expressions of LANGUAGE.md sections 10-11: record types and
//! literals, field access, indexing, `??` and function calls.

use std::sync::Arc;

use converge_grammar::ast::{Expr, ExprKind, Ident, TypeDef, TypeExpr};
use converge_grammar::Span;

use super::*;
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::Value;
use crate::sema::functions;
use crate::sema::names::DefKind;
use crate::sema::types::{self, FieldType, RecordType, Type};
use crate::suggest::did_you_mean;

/// A record type being built: `None` while its fields are resolved, so a
/// type that contains itself is found instead of recursing forever.
pub(crate) type RecordSlot = Option<Arc<RecordType>>;

impl<'a> Checker<'a> {
    /// Resolves a written type; record type names are the program's `type`
    /// declarations.
    pub(super) fn resolve_type(&mut self, ty: &'a TypeExpr) -> Option<Type> {
        if ty.args.is_empty() {
            if let Some(def) = self.symbols.types.get(&ty.name.name) {
                if let Some(id) = self.names.find(DefKind::Type, &ty.name.name) {
                    self.names.record(ty.name.span, id);
                }
                return self.record_type(def).map(Type::Record);
            }
        }
        if matches!(ty.name.name.as_str(), "list" | "map") {
            // Resolve the arguments here, so they may name record types.
            let mut args = Vec::new();
            for arg in &ty.args {
                args.push(self.resolve_type(arg)?);
            }
            let shape = types::resolve_shape(ty);
            return match shape {
                Ok(()) => match (ty.name.name.as_str(), args.as_slice()) {
                    ("list", [inner]) => Some(Type::List(Box::new(inner.clone()))),
                    ("map", [Type::String, inner]) => Some(Type::Map(Box::new(inner.clone()))),
                    ("map", [_, _]) => {
                        let span = ty.args.first().map_or(ty.span, |a| a.span);
                        self.push(Diagnostic::new(
                            Code::UnknownType,
                            "map keys must be `string`",
                            span,
                            "not `string`",
                        ));
                        None
                    }
                    _ => None,
                },
                Err((message, span)) => {
                    self.push(Diagnostic::new(
                        Code::UnknownType,
                        message,
                        span,
                        "not a type",
                    ));
                    None
                }
            };
        }
        match types::resolve(ty) {
            Ok(t) => Some(t),
            Err((message, span)) => {
                let mut d = Diagnostic::new(Code::UnknownType, message, span, "not a type");
                let candidates = types::TYPE_NAMES
                    .iter()
                    .copied()
                    .chain(self.symbols.types.names());
                d = match did_you_mean(&ty.name.name, candidates) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_note(
                        "the types are string, int, bool, mode, duration, list<T>, map<string, T> and the record types the policy declares with `type NAME = { ... };`",
                    ),
                };
                self.push(d);
                None
            }
        }
    }

    /// The record type a `type` declaration defines, built on first use.
    pub(super) fn record_type(&mut self, def: &'a TypeDef) -> Option<Arc<RecordType>> {
        match self.records.get(def.name.name.as_str()) {
            Some(Some(done)) => return Some(Arc::clone(done)),
            Some(None) => {
                self.push(
                    Diagnostic::new(
                        Code::RecursiveType,
                        format!("record type `{}` contains itself", def.name.name),
                        def.name.span,
                        "defined in terms of itself",
                    )
                    .with_help("a record cannot hold a value of its own type, directly or through other records, lists or maps"),
                );
                return None;
            }
            None => {}
        }
        self.records.insert(&def.name.name, None);
        let mut fields: Vec<FieldType> = Vec::new();
        for field in &def.fields {
            if let Some(first) = fields.iter().find(|f| f.name == field.name.name) {
                let first = first.span;
                self.push(
                    Diagnostic::new(
                        Code::DuplicateDefinition,
                        format!("field `{}` is declared twice", field.name.name),
                        field.name.span,
                        "declared again here",
                    )
                    .with_secondary(first, "first declared here"),
                );
                continue;
            }
            let ty = self.resolve_type(&field.ty).unwrap_or(Type::Any);
            let default = field.default.as_ref().and_then(|d| {
                self.check_against(d, &ty, &Vec::new());
                let value = literal_value(d, &ty);
                // A field whose type is in error (reported) has no default
                // worth a second error.
                if value.is_none() && !matches!(ty, Type::Any) {
                    self.push(
                        Diagnostic::new(
                            Code::InvalidExpression,
                            "a field default must be a literal value",
                            d.span,
                            "not a literal",
                        )
                        .with_help("write the default literally (`port: int = 80`); compute values where the record is used"),
                    );
                }
                value
            });
            fields.push(FieldType {
                name: field.name.name.to_string(),
                ty,
                default,
                span: field.name.span,
            });
        }
        let record = Arc::new(RecordType {
            name: def.name.name.to_string(),
            fields,
            span: def.name.span,
        });
        self.records
            .insert(&def.name.name, Some(Arc::clone(&record)));
        Some(record)
    }

    /// Checks a record literal against the record type it stands for.
    pub(super) fn check_record_literal(
        &mut self,
        fields: &[(Ident, Expr)],
        record: &Arc<RecordType>,
        span: Span,
        scope: &Scope,
    ) {
        self.record_literals.insert(span, Arc::clone(record));
        let type_id = self.names.find(DefKind::Type, &record.name);
        let mut seen: Vec<&Ident> = Vec::new();
        for (name, value) in fields {
            if let Some(first) = seen.iter().find(|i| i.name == name.name) {
                self.push(
                    Diagnostic::new(
                        Code::DuplicateDefinition,
                        format!("field `{}` is given twice", name.name),
                        name.span,
                        "given again here",
                    )
                    .with_secondary(first.span, "first given here"),
                );
            }
            seen.push(name);
            match record.field(&name.name) {
                Some(field) => {
                    if let Some(id) = type_id.and_then(|t| self.names.field(t, &name.name)) {
                        self.names.record(name.span, id);
                    }
                    let ty = field.ty.clone();
                    self.check_against(value, &ty, scope);
                }
                None => {
                    self.unknown_field(record, name);
                    self.value_type(value, scope);
                }
            }
        }
        let missing: Vec<&FieldType> = record
            .fields
            .iter()
            .filter(|f| f.default.is_none() && !fields.iter().any(|(n, _)| n.name == f.name))
            .collect();
        if !missing.is_empty() {
            let list: Vec<String> = missing
                .iter()
                .map(|f| format!("`{}` ({})", f.name, f.ty.describe()))
                .collect();
            self.push(
                Diagnostic::new(
                    Code::MissingField,
                    format!("`{}` needs {}", record.name, list.join(", ")),
                    span,
                    "missing field",
                )
                .with_secondary(record.span, format!("`{}` declared here", record.name))
                .with_help("give every field that has no default"),
            );
        }
    }

    pub(super) fn unknown_field(&mut self, record: &RecordType, name: &Ident) {
        let mut d = Diagnostic::new(
            Code::UnknownField,
            format!("`{}` has no field `{}`", record.name, name.name),
            name.span,
            "unknown field",
        )
        .with_secondary(record.span, format!("`{}` declared here", record.name));
        let candidates = record.fields.iter().map(|f| f.name.as_str());
        d = match did_you_mean(&name.name, candidates) {
            Some(s) => d.with_help(format!("did you mean `{s}`?")),
            None => {
                let all: Vec<&str> = record.fields.iter().map(|f| f.name.as_str()).collect();
                d.with_note(format!("its fields are {}", all.join(", ")))
            }
        };
        self.push(d);
    }

    /// The type of `.name` on a value of type `base`.
    pub(super) fn field_type(&mut self, base: Type, name: &Ident) -> Type {
        match base {
            Type::Record(record) => match record.field(&name.name) {
                Some(field) => {
                    let type_id = self.names.find(DefKind::Type, &record.name);
                    if let Some(id) = type_id.and_then(|t| self.names.field(t, &name.name)) {
                        self.names.record(name.span, id);
                    }
                    field.ty.clone()
                }
                None => {
                    self.unknown_field(&record, name);
                    Type::Any
                }
            },
            // `ports.http`: a map read with a constant key.
            Type::Map(inner) => *inner,
            Type::Any => Type::Any,
            other => {
                self.push(Diagnostic::new(
                    Code::TypeMismatch,
                    format!(
                        "`.{}` needs a record or a map, but this is {}",
                        name.name,
                        other.with_article()
                    ),
                    name.span,
                    "no fields",
                ));
                Type::Any
            }
        }
    }

    /// `base[index]`.
    pub(super) fn index_type(&mut self, base: &Expr, index: &Expr, scope: &Scope) -> Type {
        let base_ty = self.value_type(base, scope);
        let index_ty = self.value_type(index, scope);
        let (want, result) = match base_ty {
            Type::List(inner) => (Type::Int, *inner),
            Type::Map(inner) => (Type::String, *inner),
            Type::Any => return Type::Any,
            other => {
                self.push(
                    Diagnostic::new(
                        Code::TypeMismatch,
                        format!("cannot index {}", other.with_article()),
                        base.span,
                        "not a list or a map",
                    )
                    .with_help("index a list with an int (`servers[0]`) or a map with a string (`sites[sys.hostname]`); read a record's field with `.name`"),
                );
                return Type::Any;
            }
        };
        if !want.accepts(&index_ty) {
            self.mismatch(index.span, &want, &index_ty, "this index");
        }
        result
    }

    /// `a ?? b ?? c`: every alternative has the first one's type (so a
    /// record literal after `??` takes the type of what it replaces).
    pub(super) fn coalesce_type(&mut self, items: &[Expr], scope: &Scope) -> Type {
        let mut result = Type::Any;
        for item in items {
            if result == Type::Any {
                result = self.value_type(item, scope);
            } else {
                let expected = result.clone();
                self.check_against(item, &expected, scope);
            }
        }
        result
    }

    /// A function call in an expression.
    pub(super) fn call_type(
        &mut self,
        func: &Ident,
        args: &[Expr],
        span: Span,
        scope: &Scope,
    ) -> Type {
        let Some(f) = functions::function(&func.name) else {
            let names = functions::FUNCTIONS.iter().map(|f| f.name);
            let mut d = Diagnostic::new(
                Code::UnknownFunction,
                format!("unknown function `{}`", func.name),
                func.span,
                "not a built-in function",
            );
            d = match did_you_mean(&func.name, names) {
                Some(s) => {
                    let sig = functions::function(&s).map_or("", |f| f.signature);
                    d.with_help(format!("did you mean `{s}`? {sig}"))
                }
                None => {
                    let all: Vec<&str> = functions::FUNCTIONS.iter().map(|f| f.name).collect();
                    d.with_note(format!("the functions are {}", all.join(", ")))
                }
            };
            self.push(d);
            for arg in args {
                self.value_type(arg, scope);
            }
            return Type::Any;
        };
        let id = self.names.builtin(DefKind::Function, f.name);
        self.names.record(func.span, id);
        if f.name == "data" {
            self.push(
                Diagnostic::new(
                    Code::DataOutsideLet,
                    "`data(...)` must be the whole value of a `let` with a declared type",
                    span,
                    "not the value of a typed let",
                )
                .with_help("write `let NAME: TYPE = data(\"path\");` and use NAME here"),
            );
            return Type::Any;
        }
        if f.name == "secret" {
            return self.secret_call(args, span);
        }
        if f.name == super::super::neighbours::FUNCTION {
            return self.neighbours_call(args, span, scope);
        }
        let types: Vec<Type> = args.iter().map(|a| self.value_type(a, scope)).collect();
        match functions::result_type(f.name, &types) {
            Ok(t) => t,
            Err(why) => {
                self.push(
                    Diagnostic::new(Code::BadArguments, why, span, "in this call")
                        .with_help(format!("`{}`", f.signature)),
                );
                Type::Any
            }
        }
    }
}

/// The value of a literal expression of type `ty` (a field default), or
/// `None` if it is not a literal.
pub(crate) fn literal_value(expr: &Expr, ty: &Type) -> Option<Value> {
    Some(match (&expr.kind, ty) {
        (ExprKind::Str(lit), _) => Value::Str(lit.as_plain()?),
        (ExprKind::Int { value, .. }, _) => Value::Int(*value),
        (ExprKind::Bool(b), _) => Value::Bool(*b),
        (ExprKind::Duration(d), _) => Value::Duration(*d),
        (ExprKind::List(items), Type::List(inner)) => Value::List(
            items
                .iter()
                .map(|i| literal_value(i, inner))
                .collect::<Option<_>>()?,
        ),
        (ExprKind::Map(entries), Type::Map(inner)) => {
            let mut out: Vec<(String, Value)> = entries
                .iter()
                .map(|(k, v)| {
                    let ExprKind::Str(key) = &k.kind else {
                        return None;
                    };
                    Some((key.as_plain()?, literal_value(v, inner)?))
                })
                .collect::<Option<_>>()?;
            out.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Map(out)
        }
        // A record default (`tls: Tls = { enabled: false }`, or `{}` for
        // all the defaults): every field in declaration order.
        (ExprKind::Record(given), Type::Record(record)) => record_value(given, record)?,
        (ExprKind::Map(entries), Type::Record(record)) if entries.is_empty() => {
            record_value(&[], record)?
        }
        _ => return None,
    })
}

/// A record literal of literals, its omitted fields given their defaults.
fn record_value(given: &[(Ident, Expr)], record: &RecordType) -> Option<Value> {
    if given
        .iter()
        .any(|(name, _)| !record.fields.iter().any(|f| f.name == name.name))
    {
        return None;
    }
    let fields = record
        .fields
        .iter()
        .map(|f| {
            let value = match given.iter().find(|(name, _)| f.name == name.name) {
                Some((_, expr)) => literal_value(expr, &f.ty)?,
                None => f.default.clone()?,
            };
            Some((f.name.clone(), value))
        })
        .collect::<Option<_>>()?;
    Some(Value::Record(fields))
}
