//! Merging the instances of a split lookup back into one bundle promise
//! (format 2.3, `docs/bytecode.md` "Where `lookup` comes from").
//!
//! Expansion splits a promise that looks a value up by a key only the host
//! knows (`hosts[sys.hostname].port ?? 80`) into one instance per group of
//! keys, guarded `base && on == "k"` / `base && on in [..]`, and one for the
//! other hosts, guarded `base && !(on in [all keys])`
//! (`sema::expand::split`). The analyses need those instances; a host does
//! not: a bundle of 10,000 instances is verified, decoded and has 10,000
//! guards evaluated to apply one file. Here the writer finds the instances
//! of one split promise again and decides how they become one promise:
//! guarded by `base` alone (and, without a default instance, by the key
//! being one of the keys), every attribute that differs between them
//! looked up in a table by the key on the host.
//!
//! Only what is provably the same promise is merged: consecutive instances
//! of one promise (kind, place, call chain, promiser, run-time loops,
//! attribute names, the lookups split before this one) whose guards are
//! exactly `base && <their case>`, whose keys are disjoint and together
//! are every key of the lookup, and whose differing values are constants,
//! or values the host computes that differ only in constants and literal
//! text inside them ([`leaves`]), of an attribute the host may compute.
//! The edges are checked in [`settle`].
//! Anything else is written as before, one promise per instance.

use converge_format::bundle::limits::MAX_CONST_LIST;
use converge_format::schema::{self, AttrRole, AttrType};

use crate::ir::{self, CompareOp, EdgeKind, Guard, LookupCase, TemplatePart, Value};

/// Instances of one split promise that become one bundle promise.
#[derive(Clone, Debug, PartialEq)]
pub struct Merge {
    /// Their indices in [`ir::Program::promises`], ascending.
    pub members: Vec<usize>,
    /// The key the host looks up (`sys.hostname`).
    pub on: Value,
    /// The guard of the promise before the split: every member's guard is
    /// `base && <its case>`.
    pub base: Guard,
    /// Per member, the keys it stands for; empty for the instance of every
    /// other key (the `??` default).
    pub keys: Vec<Vec<String>>,
    /// Per attribute (by position), how its value differs between the
    /// members; `None` where it is the same in all.
    pub attrs: Vec<Option<Joint>>,
}

impl Merge {
    /// The position in [`Merge::members`] of the default instance.
    pub fn default_member(&self) -> Option<usize> {
        self.keys.iter().position(Vec::is_empty)
    }

    /// Every key of the lookup, sorted.
    pub fn all_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.keys.iter().flatten().cloned().collect();
        keys.sort();
        keys
    }

    /// The merged promise's guard: the base guard, and without a default
    /// instance the key being one of the keys (a host with another key
    /// applied no instance before the merge, and applies nothing now).
    pub fn guard(&self) -> Guard {
        if self.default_member().is_some() {
            return self.base.clone();
        }
        let keys = self.all_keys().into_iter().map(Value::Str).collect();
        self.base.clone().and(Guard::Compare {
            op: CompareOp::In,
            lhs: self.on.clone(),
            rhs: Value::List(keys),
        })
    }
}

/// How one value differs between the members of a [`Merge`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Joint {
    /// A constant scalar of one type in each member: looked up whole.
    Scalar,
    /// A string built on the host (the same facts, loop variables and host
    /// expressions in the same places) whose literal parts differ: per
    /// part, whether it is looked up.
    Template(Vec<bool>),
    /// A list attribute, item by item (`None`: the same in all).
    List(Vec<Option<Joint>>),
    /// A value only the host computes, the same in every member but for
    /// constant leaves inside it (in a `{% for %}` body over a host list,
    /// a function's argument, a branch): each such leaf is looked up
    /// ([`leaves`]).
    Deep,
}

/// A place where the members' values differ inside a value the host
/// computes, with each member's value there.
#[derive(Debug)]
pub enum Leaf<'v> {
    /// A constant scalar.
    Value(Vec<&'v Value>),
    /// A literal part of a string built on the host.
    Lit(Vec<&'v TemplatePart>),
}

/// Collects where `values` (one per member) differ; false when they
/// differ anywhere but in constant scalars of one type and literal parts
/// of strings (a different function, loop variable, condition, list or
/// number of parts).
pub fn leaves<'v>(values: &[&'v Value], out: &mut Vec<Leaf<'v>>) -> bool {
    let Some(first) = values.first().copied() else {
        return false;
    };
    if values.iter().all(|v| *v == first) {
        return true;
    }
    if let Some(kind) = scalar_kind(first) {
        let same = values.iter().all(|v| scalar_kind(v) == Some(kind));
        if same {
            out.push(Leaf::Value(values.to_vec()));
        }
        return same;
    }
    if let Value::Template(parts) = first {
        let mut all: Vec<&[TemplatePart]> = Vec::with_capacity(values.len());
        for v in values {
            match v {
                Value::Template(p) if p.len() == parts.len() => all.push(p),
                _ => return false,
            }
        }
        for k in 0..parts.len() {
            let column: Vec<&TemplatePart> = all.iter().filter_map(|p| p.get(k)).collect();
            let Some(head) = column.first().copied() else {
                return false;
            };
            if column.iter().all(|p| *p == head) {
                continue;
            }
            if column.iter().all(|p| matches!(p, TemplatePart::Lit(_))) {
                out.push(Leaf::Lit(column));
                continue;
            }
            let hosts: Option<Vec<&Value>> = column
                .iter()
                .map(|p| match p {
                    TemplatePart::Host(v) => Some(v),
                    _ => None,
                })
                .collect();
            match hosts {
                Some(hosts) if leaves(&hosts, out) => {}
                _ => return false,
            }
        }
        return true;
    }
    // The same operation on children that may differ.
    let mut columns: Vec<Vec<&Value>> = Vec::new();
    for v in values {
        let Some(children) = same_operation(first, v) else {
            return false;
        };
        if columns.is_empty() {
            columns = vec![Vec::with_capacity(values.len()); children.len()];
        }
        for (column, child) in columns.iter_mut().zip(children) {
            column.push(child);
        }
    }
    columns.iter().all(|column| leaves(column, out))
}

/// The children of `v` that may differ from `shape`'s, when `v` is the
/// same operation as `shape` (same function, loop variable, condition,
/// arity); `None` otherwise.
fn same_operation<'v>(shape: &Value, v: &'v Value) -> Option<Vec<&'v Value>> {
    match (shape, v) {
        (Value::Call(a), Value::Call(call))
            if a.func == call.func && a.args.len() == call.args.len() =>
        {
            Some(call.args.iter().collect())
        }
        (Value::Coalesce(a), Value::Coalesce(items)) if a.len() == items.len() => {
            Some(items.iter().collect())
        }
        (
            Value::Select { cond: c, .. },
            Value::Select {
                cond,
                then,
                otherwise,
            },
        ) if c == cond => Some(vec![then, otherwise]),
        (Value::Each(a), Value::Each(each)) if a.var == each.var => {
            Some(vec![&each.list, &each.body])
        }
        _ => None,
    }
}

/// Item `k` of a list attribute's value (a single value is a list of one).
pub fn list_item(v: &Value, k: usize) -> Option<&Value> {
    match v {
        Value::List(items) => items.get(k),
        other if k == 0 => Some(other),
        _ => None,
    }
}

/// The merges of a program, in promise order.
pub fn plan(program: &ir::Program) -> Vec<Merge> {
    let mut out = Vec::new();
    let mut run: Vec<usize> = Vec::new();
    for (i, p) in program.promises.iter().enumerate() {
        let joins = match run.first().and_then(|&f| program.promises.get(f)) {
            Some(first) => same_origin(first, p),
            None => false,
        };
        if !joins {
            out.extend(merge_run(program, &run));
            run.clear();
        }
        if !p.lookups().is_empty() {
            run.push(i);
        }
    }
    out.extend(merge_run(program, &run));
    out
}

/// Whether `b` is another instance of the split promise `a` is one of.
fn same_origin(a: &ir::Promise, b: &ir::Promise) -> bool {
    let (Some((last_a, rest_a)), Some((last_b, rest_b))) =
        (a.lookups().split_last(), b.lookups().split_last())
    else {
        return false;
    };
    a.kind == b.kind
        && a.span == b.span
        && a.chain == b.chain
        && a.promiser == b.promiser
        && a.runtime_loops() == b.runtime_loops()
        && a.missing().is_none()
        && b.missing().is_none()
        && rest_a == rest_b
        && last_a.on == last_b.on
        && last_a.of == last_b.of
        && a.attrs.len() == b.attrs.len()
        && a.attrs.iter().zip(&b.attrs).all(|(x, y)| x.name == y.name)
}

/// The merge of one run of instances of the same origin, if it is one.
fn merge_run(program: &ir::Program, run: &[usize]) -> Option<Merge> {
    if run.len() < 2 {
        return None;
    }
    let members: Vec<&ir::Promise> = run
        .iter()
        .filter_map(|&i| program.promises.get(i))
        .collect();
    let first = members.first()?;
    let case: &LookupCase = first.lookups().last()?;
    let on = case.on.clone();
    let (base, _) = split_guard(&first.guard);
    let mut keys: Vec<Vec<String>> = Vec::with_capacity(members.len());
    for p in &members {
        let case = p.lookups().last()?;
        let (b, last) = split_guard(&p.guard);
        if b != base {
            return None;
        }
        if !case.keys.is_empty() && !is_member(last, &on, &case.keys) {
            return None;
        }
        keys.push(case.keys.clone());
    }
    let mut all: Vec<String> = keys.iter().flatten().cloned().collect();
    all.sort();
    let unique = all.windows(2).all(|w| w.first() != w.last());
    if !unique || all.len() != case.of || all.len() > MAX_CONST_LIST {
        return None;
    }
    // At most one default instance, guarded by exactly `!(on in [all])`.
    let defaults: Vec<&&ir::Promise> = members
        .iter()
        .zip(&keys)
        .filter(|(_, k)| k.is_empty())
        .map(|(p, _)| p)
        .collect();
    match defaults.as_slice() {
        [] => {}
        [p] => match split_guard(&p.guard).1 {
            Guard::Not(inner) if is_member(inner, &on, &all) => {}
            _ => return None,
        },
        _ => return None,
    }
    let pt = schema::promise_type(first.kind)?;
    let mut attrs = Vec::with_capacity(first.attrs.len());
    for (j, attr) in first.attrs.iter().enumerate() {
        let spec = pt.attr(attr.name)?;
        let values: Vec<&Value> = members
            .iter()
            .filter_map(|p| p.attrs.get(j).map(|a| &a.value))
            .collect();
        attrs.push(joint_attr(&values, spec)?);
    }
    Some(Merge {
        members: run.to_vec(),
        on,
        base,
        keys,
        attrs,
    })
}

/// A guard as `(base, last conjunct)`: the inverse of `base.and(last)`
/// (`Guard::and` flattens, and `true && g` is `g`).
fn split_guard(g: &Guard) -> (Guard, &Guard) {
    match g {
        Guard::And(items) if items.len() >= 2 => match items.split_last() {
            Some((last, [one])) => (one.clone(), last),
            Some((last, rest)) => (Guard::And(rest.to_vec()), last),
            None => (Guard::Const(true), g),
        },
        other => (Guard::Const(true), other),
    }
}

/// Whether `g` is the case guard of `keys` as expansion writes it:
/// `on == "k"` for one key, `on in ["a", "b", ...]` for more.
fn is_member(g: &Guard, on: &Value, keys: &[String]) -> bool {
    let Guard::Compare { op, lhs, rhs } = g else {
        return false;
    };
    if lhs != on {
        return false;
    }
    match (op, rhs, keys) {
        (CompareOp::Eq, Value::Str(k), [key]) => k == key,
        (CompareOp::In, Value::List(items), _) if keys.len() != 1 => {
            items.len() == keys.len()
                && items
                    .iter()
                    .zip(keys)
                    .all(|(item, key)| matches!(item, Value::Str(s) if s == key))
        }
        _ => false,
    }
}

/// How an attribute's values differ; `None` when they cannot be merged.
fn joint_attr(values: &[&Value], spec: &schema::AttrSpec) -> Option<Option<Joint>> {
    let first = values.first()?;
    if values.iter().all(|v| v == first) {
        return Some(None);
    }
    // Relations are edges and outcome classes; a mode, a duration and an
    // embedded file must be constants in a bundle (the verifier's rules).
    if spec.role == AttrRole::Relation || schema::EMBEDDED_ATTRS.contains(&spec.name) {
        return None;
    }
    match &spec.ty {
        AttrType::List(inner) if computable(inner) => {
            let len = |v: &Value| match v {
                Value::List(items) => items.len(),
                _ => 1,
            };
            let n = len(first);
            let lists = values
                .iter()
                .filter(|v| matches!(v, Value::List(_)))
                .count();
            if values.iter().any(|v| len(v) != n) || (lists != 0 && lists != values.len()) {
                return None;
            }
            let items = (0..n)
                .map(|k| {
                    let column: Vec<&Value> =
                        values.iter().filter_map(|v| list_item(v, k)).collect();
                    joint_value(&column)
                })
                .collect::<Option<Vec<_>>>()?;
            Some(Some(Joint::List(items)))
        }
        ty if computable(ty) => joint_value(values),
        _ => None,
    }
}

/// Whether the host may compute a value of this type (a program's result
/// where the verifier accepts one).
fn computable(ty: &AttrType) -> bool {
    matches!(
        ty,
        AttrType::String | AttrType::Int | AttrType::Bool | AttrType::Enum(_)
    )
}

/// How one value differs between the members, if it can be looked up.
fn joint_value(values: &[&Value]) -> Option<Option<Joint>> {
    let first = values.first()?;
    if values.iter().all(|v| v == first) {
        return Some(None);
    }
    if let Some(kind) = scalar_kind(first) {
        return values
            .iter()
            .all(|v| scalar_kind(v) == Some(kind))
            .then_some(Some(Joint::Scalar));
    }
    if let Some(differs) = differing_lits(values) {
        return Some(Some(Joint::Template(differs)));
    }
    leaves(values, &mut Vec::new()).then_some(Some(Joint::Deep))
}

/// For strings built on the host that differ only in literal parts: per
/// part, whether it differs.
fn differing_lits(values: &[&Value]) -> Option<Vec<bool>> {
    let Some(Value::Template(parts)) = values.first() else {
        return None;
    };
    let mut differs = vec![false; parts.len()];
    for v in values {
        let Value::Template(other) = v else {
            return None;
        };
        if other.len() != parts.len() {
            return None;
        }
        for ((a, b), d) in parts.iter().zip(other).zip(differs.iter_mut()) {
            match (a, b) {
                _ if a == b => {}
                (TemplatePart::Lit(_), TemplatePart::Lit(_)) => *d = true,
                _ => return None,
            }
        }
    }
    Some(differs)
}

/// The stack type a constant scalar has on the host (a word is a string,
/// a duration an int); `None` for anything else.
fn scalar_kind(v: &Value) -> Option<u8> {
    match v {
        Value::Str(_) | Value::Word(_) => Some(0),
        Value::Int(_) | Value::Duration(_) => Some(1),
        Value::Bool(_) => Some(2),
        _ => None,
    }
}

/// The promises of the bundle once the merges are settled.
#[derive(Clone, Debug, PartialEq)]
pub struct Settled {
    /// The merges kept.
    pub merges: Vec<Merge>,
    /// Per bundle promise, the program promise written for it (a merge's
    /// first member) and the merge, if it is one.
    pub promises: Vec<(usize, Option<usize>)>,
    /// Per bundle promise, its `after` and `notify` lists (bundle indices,
    /// sorted).
    pub after: Vec<Vec<u32>>,
    pub notify: Vec<Vec<u32>>,
    /// The order of application, in bundle indices.
    pub order: Vec<u32>,
}

/// The bundle's promises for `program`: the merges of [`plan`], settled
/// against the `after` (explicit, containment, accounts) and `notify`
/// edges of the ordering graph. The writer lays the bundle out by it.
pub fn layout(program: &ir::Program) -> Settled {
    let n = program.promises.len();
    let mut after: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut notify: Vec<Vec<u32>> = vec![Vec::new(); n];
    for e in &program.edges {
        let (list, other) = match e.kind {
            EdgeKind::After | EdgeKind::Contains | EdgeKind::Account => {
                (after.get_mut(e.to), e.from)
            }
            EdgeKind::Notify => (notify.get_mut(e.from), e.to),
            EdgeKind::Outcome => continue,
        };
        if let Some(list) = list {
            if !list.contains(&(other as u32)) {
                list.push(other as u32);
            }
        }
    }
    for list in after.iter_mut().chain(notify.iter_mut()) {
        list.sort_unstable();
    }
    settle(plan(program), n, &after, &notify, &program.order)
}

/// Keeps the merges whose members have the same edges once merged (after
/// the other merges), and renumbers the edges and the order. A merge whose
/// members differ in `after` or `notify` is dropped, and the others are
/// checked again; if the merged order does not respect `after`, nothing is
/// merged. `after` and `notify` are per program promise (sorted).
pub fn settle(
    merges: Vec<Merge>,
    count: usize,
    after: &[Vec<u32>],
    notify: &[Vec<u32>],
    order: &[usize],
) -> Settled {
    let mut merges = merges;
    loop {
        let (settled, index) = renumber(merges, count, after, notify, order);
        let agree: Vec<bool> = settled
            .merges
            .iter()
            .map(|m| members_agree(m, &index, after, notify))
            .collect();
        if agree.iter().all(|&a| a) {
            if respects_after(&settled.after, &settled.order) {
                return settled;
            }
            return renumber(Vec::new(), count, after, notify, order).0;
        }
        merges = settled
            .merges
            .into_iter()
            .zip(agree)
            .filter_map(|(m, a)| a.then_some(m))
            .collect();
    }
}

/// The bundle promises with `merges` as they are, and the program-to-
/// bundle index of every program promise.
fn renumber(
    merges: Vec<Merge>,
    count: usize,
    after: &[Vec<u32>],
    notify: &[Vec<u32>],
    order: &[usize],
) -> (Settled, Vec<u32>) {
    let mut merge_of: Vec<Option<usize>> = vec![None; count];
    for (g, m) in merges.iter().enumerate() {
        for &i in &m.members {
            if let Some(slot) = merge_of.get_mut(i) {
                *slot = Some(g);
            }
        }
    }
    let mut index: Vec<u32> = vec![0; count];
    let mut promises: Vec<(usize, Option<usize>)> = Vec::new();
    let mut first_of: Vec<Option<u32>> = vec![None; merges.len()];
    for (i, g) in merge_of.iter().enumerate() {
        let existing = g.and_then(|g| first_of.get(g).copied().flatten());
        let at = match existing {
            Some(at) => at,
            None => {
                let at = promises.len() as u32;
                promises.push((i, *g));
                if let Some(slot) = g.and_then(|g| first_of.get_mut(g)) {
                    *slot = Some(at);
                }
                at
            }
        };
        if let Some(slot) = index.get_mut(i) {
            *slot = at;
        }
    }
    let per_promise = |lists: &[Vec<u32>]| -> Vec<Vec<u32>> {
        promises
            .iter()
            .map(|&(i, _)| remap(lists.get(i).map_or(&[][..], |l| l), &index))
            .collect()
    };
    let (after, notify) = (per_promise(after), per_promise(notify));
    let mut seen = vec![false; promises.len()];
    let order: Vec<u32> = order
        .iter()
        .filter_map(|&i| index.get(i).copied())
        .filter(|&j| match seen.get_mut(j as usize) {
            Some(s) if !*s => {
                *s = true;
                true
            }
            _ => false,
        })
        .collect();
    let settled = Settled {
        merges,
        promises,
        after,
        notify,
        order,
    };
    (settled, index)
}

/// A list of program indices as sorted, unique bundle indices.
fn remap(list: &[u32], index: &[u32]) -> Vec<u32> {
    let mut out: Vec<u32> = list
        .iter()
        .filter_map(|&j| index.get(j as usize).copied())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether every member of `m` has the same `after` and `notify` once
/// renumbered, none naming the merged promise itself.
fn members_agree(m: &Merge, index: &[u32], after: &[Vec<u32>], notify: &[Vec<u32>]) -> bool {
    let own = m.members.first().and_then(|&i| index.get(i).copied());
    [after, notify].iter().all(|lists| {
        let mut renumbered = m
            .members
            .iter()
            .map(|&i| remap(lists.get(i).map_or(&[][..], |l| l), index));
        let Some(first) = renumbered.next() else {
            return true;
        };
        own.is_none_or(|own| !first.contains(&own)) && renumbered.all(|l| l == first)
    })
}

/// Whether `order` puts every promise after the promises of its `after`.
fn respects_after(after: &[Vec<u32>], order: &[u32]) -> bool {
    let mut position = vec![usize::MAX; after.len()];
    for (at, &j) in order.iter().enumerate() {
        if let Some(slot) = position.get_mut(j as usize) {
            *slot = at;
        }
    }
    after.iter().enumerate().all(|(j, list)| {
        let mine = position.get(j).copied().unwrap_or(usize::MAX);
        list.iter()
            .all(|&a| position.get(a as usize).is_some_and(|&p| p < mine))
    })
}

#[cfg(test)]
mod tests;
