//! The order to compute global `let`s in so that no computation recurses.
//!
//! Checking a `let` needs the types of the lets it reads, and expanding it
//! needs their values; done by recursion, a chain of 20,000 lets
//! (`let l1 = l0; let l2 = l1; ...`) overflowed the stack (issue 14, item
//! 21). [`pending`] walks the dependencies iteratively and lists the lets to
//! compute first, each after the lets it reads, so that computing them in
//! that order never goes more than one level deep.
//!
//! Lets on or behind a cycle are left out: the checker reports a cycle
//! where its recursion meets a let still being computed, and keeping that
//! recursion for them keeps those diagnostics where they always were.

use std::collections::{HashMap, HashSet};

use converge_grammar::ast::{Expr, ExprKind};
use converge_grammar::token::StrPart;

use super::symbols::Symbols;

/// The lets `name` reads, directly or not, that `known` does not yet know,
/// `name` included, each after every let it reads. Lets on or behind a
/// cycle are omitted (see the module documentation).
pub fn pending<'a>(
    symbols: &Symbols<'a>,
    name: &'a str,
    known: impl Fn(&str) -> bool,
) -> Vec<&'a str> {
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum State {
        OnStack,
        Clean,
        Tainted,
    }
    let mut state: HashMap<&'a str, State> = HashMap::new();
    let mut order = Vec::new();
    if known(name) || symbols.lets.get(name).is_none() {
        return order;
    }
    // (let, its dependencies, how many of them were visited)
    let mut work: Vec<(&'a str, Vec<&'a str>, usize)> =
        vec![(name, dependencies(symbols, name), 0)];
    state.insert(name, State::OnStack);
    while let Some((current, deps, visited)) = work.last_mut() {
        let current = *current;
        if let Some(&dep) = deps.get(*visited) {
            *visited += 1;
            match state.get(dep) {
                Some(State::OnStack | State::Tainted) => {
                    state.insert(current, State::Tainted);
                }
                Some(State::Clean) => {}
                None if known(dep) => {}
                None => {
                    state.insert(dep, State::OnStack);
                    work.push((dep, dependencies(symbols, dep), 0));
                }
            }
            continue;
        }
        work.pop();
        let tainted = state.get(current) == Some(&State::Tainted);
        if tainted {
            if let Some((parent, _, _)) = work.last() {
                state.insert(parent, State::Tainted);
            }
        } else {
            state.insert(current, State::Clean);
            order.push(current);
        }
    }
    order
}

/// The lets the definition of `name` reads (each once, in source order).
fn dependencies<'a>(symbols: &Symbols<'a>, name: &str) -> Vec<&'a str> {
    let Some(def) = symbols.lets.get(name) else {
        return Vec::new();
    };
    let mut out: Vec<&'a str> = Vec::new();
    let mut seen: HashSet<&'a str> = HashSet::new();
    let mut add = |candidate: &str, out: &mut Vec<&'a str>| {
        let Some(def) = symbols.lets.get(candidate) else {
            return;
        };
        let own: &'a str = &def.name.name;
        if seen.insert(own) {
            out.push(own);
        }
    };
    let mut stack: Vec<&Expr> = vec![&def.value];
    while let Some(expr) = stack.pop() {
        match &expr.kind {
            ExprKind::Path(path) => {
                if let Some(first) = path.first() {
                    add(&first.name, &mut out);
                }
            }
            ExprKind::Str(lit) => {
                for part in &lit.parts {
                    if let StrPart::Interp(inner) = part {
                        stack.push(inner);
                    }
                }
            }
            ExprKind::Ref(r) => {
                for part in &r.target.parts {
                    if let StrPart::Interp(inner) = part {
                        stack.push(inner);
                    }
                }
            }
            ExprKind::List(items)
            | ExprKind::And(items)
            | ExprKind::Or(items)
            | ExprKind::Coalesce(items) => {
                stack.extend(items.iter().rev());
            }
            ExprKind::Call { args, .. } => {
                stack.extend(args.iter().rev());
            }
            ExprKind::Map(entries) => {
                for (k, v) in entries.iter().rev() {
                    stack.push(v);
                    stack.push(k);
                }
            }
            ExprKind::Record(fields) => stack.extend(fields.iter().rev().map(|(_, v)| v)),
            ExprKind::Field { base, .. } => stack.push(base),
            ExprKind::Index { base, index } => {
                stack.push(index);
                stack.push(base);
            }
            ExprKind::Not(inner) => stack.push(inner),
            ExprKind::Compare { lhs, rhs, .. } => {
                stack.push(rhs);
                stack.push(lhs);
            }
            ExprKind::Int { .. } | ExprKind::Duration(_) | ExprKind::Bool(_) => {}
        }
    }
    out
}
