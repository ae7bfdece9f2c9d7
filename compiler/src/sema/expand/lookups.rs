//! Values of LANGUAGE.md section 11 during expansion: field access,
//! indexing, `??` and the built-in functions.
//!
//! What is known at compile time is computed now. A map looked up by a key
//! only the host knows becomes a [`Choice`]: one case per key, so the
//! analyses stay exact; operations on a choice apply to every case
//! ("lifting"). Functions of values only the host knows become
//! [`Value::Call`]s the VM computes.

use converge_format::bundle::verify::Ty;
use converge_format::schema;
use converge_grammar::Span;

use crate::ir::{Choice, TemplatePart, Value};

/// What a value is, as far as the VM's stack is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Str,
    Int,
    Bool,
    List,
    /// Maps and records: compile-time only.
    Other,
}

/// The kind of a value (of a host value: what the VM will compute).
pub fn kind(v: &Value) -> Kind {
    match v {
        Value::Str(_) | Value::Word(_) | Value::Template(_) | Value::LoopVar(_) => Kind::Str,
        Value::Secret(_) => Kind::Str,
        Value::Elem(_) | Value::Each(_) => Kind::Str,
        Value::Int(_) | Value::Duration(_) => Kind::Int,
        Value::Bool(_) => Kind::Bool,
        Value::List(_) => Kind::List,
        Value::Map(_) | Value::Record(_) | Value::Ref { .. } | Value::Missing(_) => Kind::Other,
        Value::Fact(name) => match schema::fact(name).map(|f| &f.ty) {
            Some(schema::AttrType::Int) => Kind::Int,
            Some(schema::AttrType::List(_)) => Kind::List,
            Some(schema::AttrType::Bool) => Kind::Bool,
            _ => Kind::Str,
        },
        Value::Probe { ty, .. } => match ty {
            Ty::Int => Kind::Int,
            Ty::List => Kind::List,
            Ty::Bool => Kind::Bool,
            Ty::Str => Kind::Str,
        },
        Value::Call(call) => match call.func {
            "split" | "concat" | "sort" | "unique" => Kind::List,
            "len_str" | "len_list" => Kind::Int,
            "contains_list" | "contains_str" => Kind::Bool,
            "index" | "join" | "upper" | "lower" | "trim" | "replace" | "to_string" => Kind::Str,
            _ => call.args.first().map_or(Kind::Other, kind),
        },
        Value::Coalesce(items) => items.first().map_or(Kind::Other, kind),
        Value::Select { then, .. } => kind(then),
        Value::Choice(c) => c
            .cases
            .first()
            .map(|(_, v)| v)
            .map_or_else(|| kind(&c.default), kind),
    }
}

/// Whether the host may find this value missing (a run-time index not
/// under a `??`).
pub fn may_be_missing(v: &Value) -> bool {
    match v {
        Value::Call(call) => call.func == "index" || call.args.iter().any(may_be_missing),
        Value::Template(parts) => parts.iter().any(|p| match p {
            TemplatePart::Host(v) => may_be_missing(v),
            _ => false,
        }),
        Value::Coalesce(items) => items.last().is_some_and(may_be_missing),
        Value::Select {
            then, otherwise, ..
        } => may_be_missing(then) || may_be_missing(otherwise),
        Value::Each(each) => may_be_missing(&each.list) || may_be_missing(&each.body),
        _ => false,
    }
}

/// Whether the value contains a [`Value::Missing`] anywhere.
pub fn has_missing(v: &Value) -> bool {
    matches!(v, Value::Missing(_)) || v.find_child(|c| has_missing(c).then_some(())).is_some()
}

/// Applies `f` to every case of a choice (and its default).
pub fn map_choice(c: Choice, f: &mut impl FnMut(Value) -> Value) -> Value {
    let cases = c.cases.into_iter().map(|(k, v)| (k, f(v))).collect();
    Value::Choice(Box::new(Choice {
        on: c.on,
        cases,
        default: f(c.default),
    }))
}

/// Applies `f` to every case of a choice (and its default), telling it the
/// case's key (`None` for the default) and the choice's key expression, so
/// that `f` can resolve other choices on the same key ([`assume`]): a
/// template that reads `hosts[sys.hostname]` five times makes one choice
/// of five lookups, not a choice of choices.
pub fn map_choice_keyed(
    c: Choice,
    f: &mut impl FnMut(&Value, Option<&str>, &[(String, Value)], Value) -> Value,
) -> Value {
    let Choice { on, cases, default } = c;
    let keys: Vec<(String, Value)> = Vec::new();
    let mapped: Vec<(String, Value)> = cases
        .iter()
        .map(|(k, v)| (k.clone(), f(&on, Some(k), &keys, v.clone())))
        .collect();
    let default = f(&on, None, &cases, default);
    Value::Choice(Box::new(Choice {
        on,
        cases: mapped,
        default,
    }))
}

/// `v` where the host's `on` is `key`: every choice on `on` inside it is
/// resolved to that key's case. With `key` `None` (the host has none of
/// `outer`'s keys), a choice on `on` whose keys are all among `outer`'s
/// takes its default; one with other keys stays a choice.
pub fn assume(v: &Value, on: &Value, key: Option<&str>, outer: &[(String, Value)]) -> Value {
    if !has_choice_on(v, on) {
        return v.clone();
    }
    match key {
        Some(_) => super::split::substitute(v, on, key),
        None => {
            let covered = |c: &Choice| {
                c.cases
                    .iter()
                    .all(|(k, _)| outer.binary_search_by(|(o, _)| o.as_str().cmp(k)).is_ok())
            };
            assume_default(v, on, &covered)
        }
    }
}

fn assume_default(v: &Value, on: &Value, covered: &dyn Fn(&Choice) -> bool) -> Value {
    match v {
        Value::Choice(c) if c.on == *on && covered(c) => assume_default(&c.default, on, covered),
        Value::List(items) => Value::List(
            items
                .iter()
                .map(|i| assume_default(i, on, covered))
                .collect(),
        ),
        Value::Template(parts) => map_parts(parts, |v| assume_default(v, on, covered)),
        other => other.clone(),
    }
}

/// Whether `v` holds a choice on `on`.
pub fn has_choice_on(v: &Value, on: &Value) -> bool {
    matches!(v, Value::Choice(c) if c.on == *on)
        || v.find_child(|c| has_choice_on(c, on).then_some(()))
            .is_some()
}

/// `value.name`.
pub fn field(value: Value, name: &str, span: Span) -> Value {
    match value {
        Value::Record(fields) | Value::Map(fields) => fields
            .into_iter()
            .find(|(k, _)| k == name)
            .map_or(Value::Missing(span), |(_, v)| v),
        Value::Choice(c) => map_choice(*c, &mut |v| field(v, name, span)),
        other => other,
    }
}

/// What `base[index]` is.
pub enum Indexed {
    Value(Value),
    /// A compile-time list indexed by a value only the host knows, whose
    /// elements are not all strings: the VM cannot index it.
    Unsupported,
}

/// `base[index]`.
pub fn index(base: Value, idx: Value, span: Span) -> Indexed {
    Indexed::Value(match (base, idx) {
        (Value::Missing(s), _) | (_, Value::Missing(s)) => Value::Missing(s),
        // The base or the key chosen by a key: index every case, the
        // other side resolved for that case.
        (Value::Choice(c), idx) => {
            return index_cases(*c, span, |on, key, outer, v| {
                (v, assume(&idx, on, key, outer))
            })
        }
        (base, Value::Choice(c)) => {
            return index_cases(*c, span, |on, key, outer, k| {
                (assume(&base, on, key, outer), k)
            })
        }
        (Value::Map(entries), Value::Str(key) | Value::Word(key)) => {
            match entries.binary_search_by(|(k, _)| k.as_str().cmp(&key)) {
                Ok(i) => entries
                    .into_iter()
                    .nth(i)
                    .map_or(Value::Missing(span), |(_, v)| v),
                Err(_) => entries
                    .into_iter()
                    .find(|(k, _)| *k == key)
                    .map_or(Value::Missing(span), |(_, v)| v),
            }
        }
        (Value::List(items), Value::Int(i)) => usize::try_from(i)
            .ok()
            .and_then(|i| items.into_iter().nth(i))
            .unwrap_or(Value::Missing(span)),
        // The finite choice of section 11: one case per key.
        (Value::Map(mut entries), on) => {
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Choice(Box::new(Choice {
                on,
                cases: entries,
                default: Value::Missing(span),
            }))
        }
        (Value::List(items), on) => {
            if !items
                .iter()
                .all(|i| matches!(i, Value::Str(_) | Value::Word(_)))
            {
                return Indexed::Unsupported;
            }
            Value::call("index", vec![Value::List(items), on])
        }
        // A list only the host knows (`split(sys.hostname, "-")[1]`).
        (list, idx) => Value::call("index", vec![list, idx]),
    })
}

/// `base[index]` for every case of a choice; `pair` gives the base and
/// the index of one case.
fn index_cases(
    c: Choice,
    span: Span,
    mut pair: impl FnMut(&Value, Option<&str>, &[(String, Value)], Value) -> (Value, Value),
) -> Indexed {
    let mut unsupported = false;
    let v = map_choice_keyed(c, &mut |on, key, outer, case| {
        let (base, idx) = pair(on, key, outer, case);
        match index(base, idx, span) {
            Indexed::Value(v) => v,
            Indexed::Unsupported => {
                unsupported = true;
                Value::Missing(span)
            }
        }
    });
    if unsupported {
        Indexed::Unsupported
    } else {
        Indexed::Value(v)
    }
}

/// `a ?? b` once both are evaluated: `a` where it is present, else `b`.
pub fn coalesce(a: Value, b: Value) -> Value {
    match a {
        Value::Missing(_) => b,
        Value::Choice(c) => map_choice_keyed(*c, &mut |on, key, outer, v| {
            coalesce(v, assume(&b, on, key, outer))
        }),
        a if may_be_missing(&a) => match a {
            Value::Coalesce(mut items) => {
                items.push(b);
                Value::Coalesce(items)
            }
            a => Value::Coalesce(vec![a, b]),
        },
        a => a,
    }
}

/// The text a compile-time scalar contributes to a string.
pub fn text_of(value: &Value) -> Option<String> {
    Some(match value {
        Value::Str(s) | Value::Word(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Duration(s) => s.to_string(),
        _ => return None,
    })
}

/// A template with `f` applied to its host parts, joined again (parts that
/// become constants become text).
pub fn map_parts(parts: &[TemplatePart], mut f: impl FnMut(&Value) -> Value) -> Value {
    concat(
        parts
            .iter()
            .map(|p| match p {
                TemplatePart::Lit(t) => Value::Str(t.clone()),
                TemplatePart::Fact(f) => Value::Fact(f.clone()),
                TemplatePart::LoopVar(l) => Value::LoopVar(l.clone()),
                TemplatePart::Host(v) => f(v),
            })
            .collect(),
    )
}

/// Joins the pieces of a string: text and values. Compile-time scalars
/// become text; a choice among the pieces makes the whole string a choice
/// (each case joined); host values stay parts of a template.
pub fn concat(pieces: Vec<Value>) -> Value {
    if let Some(at) = pieces.iter().position(|p| matches!(p, Value::Choice(_))) {
        let mut pieces = pieces;
        let Value::Choice(c) = pieces.remove(at) else {
            return Value::Str(String::new());
        };
        return map_choice_keyed(*c, &mut |on, key, outer, v| {
            let mut with: Vec<Value> = pieces.iter().map(|p| assume(p, on, key, outer)).collect();
            with.insert(at, v);
            concat(with)
        });
    }
    if let Some(m) = pieces.iter().find(|p| matches!(p, Value::Missing(_))) {
        return m.clone();
    }
    let mut parts: Vec<TemplatePart> = Vec::new();
    // Text pieces are moved, not copied, into the first text part they
    // start (the common case: a string with no host parts is one piece).
    let push_lit = |parts: &mut Vec<TemplatePart>, text: String| match parts.last_mut() {
        Some(TemplatePart::Lit(prev)) => prev.push_str(&text),
        _ => parts.push(TemplatePart::Lit(text)),
    };
    for piece in pieces {
        match piece {
            Value::Str(s) | Value::Word(s) => push_lit(&mut parts, s),
            Value::Int(i) => push_lit(&mut parts, i.to_string()),
            Value::Bool(b) => push_lit(&mut parts, b.to_string()),
            Value::Duration(s) => push_lit(&mut parts, s.to_string()),
            Value::Fact(f) => parts.push(TemplatePart::Fact(f)),
            Value::LoopVar(v) => parts.push(TemplatePart::LoopVar(v)),
            Value::Template(inner) => {
                for p in inner {
                    match p {
                        TemplatePart::Lit(t) => push_lit(&mut parts, t),
                        other => parts.push(other),
                    }
                }
            }
            other => parts.push(TemplatePart::Host(other)),
        }
    }
    if let [TemplatePart::Lit(_)] = parts.as_slice() {
        if let Some(TemplatePart::Lit(mut text)) = parts.pop() {
            // The program keeps it: without the room joining left.
            text.shrink_to_fit();
            return Value::Str(text);
        }
    }
    match parts.as_slice() {
        [] => Value::Str(String::new()),
        _ => Value::Template(parts),
    }
}
