//! Splitting a promise on the keys of a lookup (LANGUAGE.md section 11,
//! "Analysis stays exact").
//!
//! `content = sites[sys.hostname].banner ?? "..."` holds a [`Choice`]: one
//! value per key of `sites`, and one for every other host. The promise
//! becomes one promise per group of keys that give it the same values,
//! guarded by `sys.hostname in [keys]`, plus one for the other hosts,
//! guarded by `!(sys.hostname in [all keys])`. The analyses then see only
//! ordinary promises with ordinary guards: a contradiction's witness names
//! the key (`sys.hostname == "shop-web01"`), and a lookup without `??` is
//! an error exactly where a host can reach the missing case.

use std::collections::HashMap;
use std::sync::Arc;

use converge_grammar::Span;

use super::functions;
use super::lookups::{self, coalesce, has_missing, may_be_missing};
use crate::ir::{self, Choice, CompareOp, Each, Guard, Value};

/// The instances of `p`, each free of choices. `budget` counts instances
/// made (it is the expansion's); splitting stops when it says so.
pub fn split(p: ir::Promise, spend: &mut dyn FnMut() -> bool) -> Vec<ir::Promise> {
    // Most promises hold no choice: one instance, without the work list.
    if first_choice(&p).is_none() {
        return vec![mark_missing(p)];
    }
    let mut out = Vec::new();
    let mut pending = vec![p];
    while let Some(p) = pending.pop() {
        let Some(on) = first_choice(&p) else {
            out.push(mark_missing(p));
            continue;
        };
        let mut keys: Vec<String> = Vec::new();
        for v in values(&p) {
            collect_keys(v, &on, &mut keys);
        }
        keys.sort();
        keys.dedup();
        let of = keys.len();
        // A guard that already pins the fact to one value (`when
        // sys.hostname == "web-02"` around the lookup) leaves one live
        // case: the others could never apply, and making them anyway cost
        // the analyses a question per key for every such promise.
        let pinned = pinned_value(&p.guard, &on);
        let pinned_known =
            pinned.is_some_and(|v| keys.binary_search_by(|k| k.as_str().cmp(v)).is_ok());
        if let Some(v) = pinned {
            keys.retain(|k| k == v);
        }
        // Group the keys that give the promise the same values.
        let mut groups: Vec<(ir::Promise, Vec<String>)> = Vec::new();
        let mut index: HashMap<(Value, Vec<Value>), usize> = HashMap::new();
        for key in &keys {
            let instance = substitute_promise(&p, &on, Some(key));
            let fingerprint = (
                instance.promiser.clone(),
                instance.attrs.iter().map(|a| a.value.clone()).collect(),
            );
            match index.get(&fingerprint) {
                Some(&g) => {
                    if let Some((_, group)) = groups.get_mut(g) {
                        group.push(key.clone());
                    }
                }
                None => {
                    if !spend() {
                        return out;
                    }
                    index.insert(fingerprint, groups.len());
                    groups.push((instance, vec![key.clone()]));
                }
            }
        }
        let case = |keys: Vec<String>| ir::LookupCase {
            on: on.clone(),
            keys,
            of,
        };
        for (mut instance, group) in groups {
            instance.rare_mut().lookups.push(case(group.clone()));
            instance.guard = Arc::new(Guard::clone(&p.guard).and(member(&on, group)));
            pending.push(instance);
        }
        if pinned_known {
            continue;
        }
        let mut other = substitute_promise(&p, &on, None);
        other.rare_mut().lookups.push(case(Vec::new()));
        other.guard = Arc::new(Guard::clone(&p.guard).and(Guard::Not(Box::new(member(&on, keys)))));
        pending.push(other);
    }
    // Keep the source order of the cases: by key, the other hosts last.
    out.reverse();
    out
}

/// The string `guard` requires `on` to equal, when one of its conjuncts is
/// `on == "v"` (either way round).
fn pinned_value<'g>(guard: &'g Guard, on: &Value) -> Option<&'g str> {
    match guard {
        Guard::Compare {
            op: CompareOp::Eq,
            lhs,
            rhs,
        } => match (lhs, rhs) {
            (l, Value::Str(v)) if l == on => Some(v.as_str()),
            (Value::Str(v), r) if r == on => Some(v.as_str()),
            _ => None,
        },
        Guard::And(all) => all.iter().find_map(|g| pinned_value(g, on)),
        _ => None,
    }
}

/// `on == key`, or `on in [keys]`.
fn member(on: &Value, mut keys: Vec<String>) -> Guard {
    if keys.len() == 1 {
        if let Some(key) = keys.pop() {
            return Guard::Compare {
                op: CompareOp::Eq,
                lhs: on.clone(),
                rhs: Value::Str(key),
            };
        }
    }
    Guard::Compare {
        op: CompareOp::In,
        lhs: on.clone(),
        rhs: Value::List(keys.into_iter().map(Value::Str).collect()),
    }
}

/// A promise whose values still hold a missing lookup: the analyses
/// report it where a host can reach it (`analysis::missing`).
fn mark_missing(mut p: ir::Promise) -> ir::Promise {
    if p.missing().is_none() {
        let found = values(&p).find_map(first_missing);
        if let Some(found) = found {
            p.rare_mut().missing = Some(found);
        }
    }
    p
}

pub fn first_missing(v: &Value) -> Option<Span> {
    match v {
        Value::Missing(span) => Some(*span),
        _ if !has_missing(v) => None,
        _ => v.find_child(first_missing),
    }
}

fn values(p: &ir::Promise) -> impl Iterator<Item = &Value> {
    std::iter::once(&p.promiser).chain(p.attrs.iter().map(|a| &a.value))
}

fn first_choice(p: &ir::Promise) -> Option<Value> {
    values(p).find_map(choice_key)
}

/// The key of the first choice inside `v`.
fn choice_key(v: &Value) -> Option<Value> {
    match v {
        Value::Choice(c) => Some(c.on.clone()),
        _ => v.find_child(choice_key),
    }
}

/// The keys of every choice on `on` inside `v`.
fn collect_keys(v: &Value, on: &Value, keys: &mut Vec<String>) {
    if let Value::Choice(c) = v {
        if c.on == *on {
            keys.extend(c.cases.iter().map(|(k, _)| k.clone()));
        }
    }
    for child in v.children() {
        collect_keys(child, on, keys);
    }
}

fn substitute_promise(p: &ir::Promise, on: &Value, key: Option<&str>) -> ir::Promise {
    // Built field by field: cloning the promise first would copy every
    // case of every choice once per key.
    ir::Promise {
        kind: p.kind,
        promiser: substitute(&p.promiser, on, key),
        attrs: p
            .attrs
            .iter()
            .map(|a| ir::Attr {
                name: a.name,
                value: substitute(&a.value, on, key),
                span: a.span,
                default: a.default.clone(),
            })
            .collect(),
        guard: Arc::clone(&p.guard),
        span: p.span,
        chain: Arc::clone(&p.chain),
        rare: p.rare.clone(),
    }
}

/// `v` on a host whose `on` is `key` (`None`: none of the keys).
pub fn substitute(v: &Value, on: &Value, key: Option<&str>) -> Value {
    let sub = |v: &Value| substitute(v, on, key);
    match v {
        Value::Choice(c) if c.on == *on => {
            let case = key.and_then(|k| {
                c.cases
                    .binary_search_by(|(ck, _)| ck.as_str().cmp(k))
                    .ok()
                    .and_then(|i| c.cases.get(i))
            });
            match case {
                Some((_, v)) => sub(v),
                None => sub(&c.default),
            }
        }
        Value::Choice(c) => Value::Choice(Box::new(Choice {
            on: sub(&c.on),
            cases: c.cases.iter().map(|(k, v)| (k.clone(), sub(v))).collect(),
            default: sub(&c.default),
        })),
        Value::List(items) => Value::List(items.iter().map(sub).collect()),
        Value::Map(e) => Value::Map(e.iter().map(|(k, v)| (k.clone(), sub(v))).collect()),
        Value::Record(e) => Value::Record(e.iter().map(|(k, v)| (k.clone(), sub(v))).collect()),
        Value::Coalesce(items) => {
            let mut items = items.iter().map(sub);
            let first = items.next().unwrap_or(Value::Str(String::new()));
            items.fold(first, coalesce)
        }
        Value::Call(call) => {
            let func = call.func;
            let args: Vec<Value> = call.args.iter().map(sub).collect();
            if args.iter().all(Value::is_constant) {
                // A VM function of constants: compute it now, under the
                // language's name for it.
                let name = match func {
                    "len_str" | "len_list" => "len",
                    "contains_list" | "contains_str" => "contains",
                    "index" => {
                        let mut args = args.into_iter();
                        let (list, idx) = (args.next(), args.next());
                        return match (list, idx) {
                            (Some(list), Some(idx)) => {
                                match lookups::index(list, idx, Span::default()) {
                                    lookups::Indexed::Value(v) => v,
                                    lookups::Indexed::Unsupported => Value::Str(String::new()),
                                }
                            }
                            _ => Value::Str(String::new()),
                        };
                    }
                    other => other,
                };
                return functions::apply(name, args.clone())
                    .unwrap_or_else(|_| Value::call(func, args));
            }
            Value::call(func, args)
        }
        Value::Template(parts) => lookups::map_parts(parts, sub),
        Value::Select {
            cond,
            then,
            otherwise,
        } => Value::Select {
            cond: cond.clone(),
            then: Box::new(sub(then)),
            otherwise: Box::new(sub(otherwise)),
        },
        Value::Each(each) => Value::Each(Box::new(Each {
            list: sub(&each.list),
            var: each.var.clone(),
            body: sub(&each.body),
        })),
        Value::Ref { kind, target } => Value::Ref {
            kind: kind.clone(),
            target: Box::new(sub(target)),
        },
        other => other.clone(),
    }
}

/// Whether a value still needs a `??` on the host.
pub fn needs_default(v: &Value) -> bool {
    may_be_missing(v)
}
