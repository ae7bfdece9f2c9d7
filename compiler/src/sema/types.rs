//! The types of policy values (LANGUAGE.md section 3, "Types").

use std::sync::Arc;

use converge_format::schema::AttrType;
use converge_grammar::ast::TypeExpr;
use converge_grammar::Span;

use crate::ir::Value;

/// The type of a value. `Any` stands for "unknown because of an earlier
/// error" (so one mistake is reported once) and for the element type of an
/// empty list literal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    String,
    Int,
    Bool,
    Mode,
    Duration,
    List(Box<Type>),
    Map(Box<Type>),
    /// A record type declared with `type NAME = { ... };` (LANGUAGE.md
    /// section 10). Two record types are the same type only when they are
    /// the same declaration (compared by name: names are global).
    Record(Arc<RecordType>),
    Ref,
    Any,
}

/// A declared record type: its fields in declaration order.
#[derive(Clone, Debug)]
pub struct RecordType {
    pub name: String,
    pub fields: Vec<FieldType>,
    /// The `type` declaration.
    pub span: Span,
}

impl PartialEq for RecordType {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for RecordType {}

impl RecordType {
    pub fn field(&self, name: &str) -> Option<&FieldType> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// One field of a record type.
#[derive(Clone, Debug)]
pub struct FieldType {
    pub name: String,
    pub ty: Type,
    /// The value used when a literal or a data file omits the field; a
    /// field without one is required.
    pub default: Option<Value>,
    /// The field's declaration.
    pub span: Span,
}

impl Type {
    /// [`describe`](Self::describe) with its indefinite article, for
    /// messages: "an int", "a list<string>".
    pub fn with_article(&self) -> String {
        crate::diagnostic::with_article(&self.describe())
    }

    pub fn describe(&self) -> String {
        match self {
            Type::String => "string".to_owned(),
            Type::Int => "int".to_owned(),
            Type::Bool => "bool".to_owned(),
            Type::Mode => "mode".to_owned(),
            Type::Duration => "duration".to_owned(),
            Type::List(inner) => format!("list<{}>", inner.describe()),
            Type::Map(inner) => format!("map<string, {}>", inner.describe()),
            Type::Record(record) => record.name.clone(),
            Type::Ref => "ref".to_owned(),
            Type::Any => "any".to_owned(),
        }
    }

    /// The type of values an attribute holds. Enum attributes hold strings
    /// (checked against their word list separately); class attributes hold
    /// class names.
    pub fn of_attr(ty: &AttrType) -> Type {
        match ty {
            AttrType::String | AttrType::Enum(_) | AttrType::Class => Type::String,
            AttrType::Int => Type::Int,
            AttrType::Bool => Type::Bool,
            AttrType::Mode => Type::Mode,
            AttrType::Duration => Type::Duration,
            AttrType::List(inner) => Type::List(Box::new(Type::of_attr(inner))),
            AttrType::Ref => Type::Ref,
        }
    }

    /// Whether a value of type `actual` may be used where `self` is
    /// expected. Ints are accepted as modes (their range is checked where the
    /// value is known); `Any` is compatible with everything.
    pub fn accepts(&self, actual: &Type) -> bool {
        match (self, actual) {
            (Type::Any, _) | (_, Type::Any) => true,
            (Type::Mode, Type::Int) => true,
            (Type::List(a), Type::List(b)) | (Type::Map(a), Type::Map(b)) => a.accepts(b),
            (a, b) => a == b,
        }
    }

    /// Whether values of this type can be interpolated into a string.
    pub fn is_scalar(&self) -> bool {
        matches!(
            self,
            Type::String | Type::Int | Type::Bool | Type::Mode | Type::Duration | Type::Any
        )
    }

    /// The element type, for lists.
    pub fn element(&self) -> Option<&Type> {
        match self {
            Type::List(inner) => Some(inner),
            Type::Any => Some(&Type::Any),
            _ => None,
        }
    }
}

/// The type names a policy can write, for suggestions.
pub const TYPE_NAMES: &[&str] = &["string", "int", "bool", "mode", "duration", "list", "map"];

/// Checks the arity of a written `list<T>` or `map<K, V>` (the checker
/// resolves the arguments itself, so they may name record types).
pub fn resolve_shape(ty: &TypeExpr) -> Result<(), (String, Span)> {
    let n = match ty.name.name.as_str() {
        "list" => 1,
        "map" => 2,
        _ => 0,
    };
    arity_problem(ty, n)
}

/// Whether `ty` is written with `n` type arguments.
fn arity_problem(ty: &TypeExpr, n: usize) -> Result<(), (String, Span)> {
    if ty.args.len() == n {
        Ok(())
    } else {
        Err((
            format!(
                "`{}` takes {n} type argument{}, found {}",
                ty.name.name,
                if n == 1 { "" } else { "s" },
                ty.args.len()
            ),
            ty.span,
        ))
    }
}

/// Resolves a written type. On error returns what is wrong (for the caller
/// to word) and the span to point at.
pub fn resolve(ty: &TypeExpr) -> Result<Type, (String, converge_grammar::Span)> {
    let arity = |n: usize| -> Result<(), (String, converge_grammar::Span)> { arity_problem(ty, n) };
    let scalar = |t: Type| arity(0).map(|()| t);
    match ty.name.name.as_str() {
        "string" => scalar(Type::String),
        "int" => scalar(Type::Int),
        "bool" => scalar(Type::Bool),
        "mode" => scalar(Type::Mode),
        "duration" => scalar(Type::Duration),
        "list" => {
            arity(1)?;
            let inner = ty
                .args
                .first()
                .map(resolve)
                .transpose()?
                .unwrap_or(Type::Any);
            Ok(Type::List(Box::new(inner)))
        }
        "map" => {
            arity(2)?;
            let mut args = ty.args.iter();
            if let Some(key) = args.next() {
                if resolve(key)? != Type::String {
                    return Err(("map keys must be `string`".to_owned(), key.span));
                }
            }
            let inner = args.next().map(resolve).transpose()?.unwrap_or(Type::Any);
            Ok(Type::Map(Box::new(inner)))
        }
        other => Err((format!("unknown type `{other}`"), ty.name.span)),
    }
}
