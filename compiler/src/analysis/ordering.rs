//! The ordering graph (LANGUAGE.md section 5 item 5), its cycles, the order
//! the VM applies promises in, and the pass limit (section 7 step 5).
//!
//! An edge `a -> b` means "apply `a` before `b`". Edges come from:
//! - `after = [ref]` on `b`: every promise the ref names comes first;
//! - `notify = [ref]` on `a`: the notified promises come after `a`;
//! - outcome classes: `a` sets `on_repaired = c` (or `on_kept`/`on_failed`)
//!   and `b`'s guard depends on `c` (directly or through class
//!   definitions): `b` can only become active after `a` ran;
//! - containment: a directory comes before what lies inside it (the
//!   nearest promised ancestor), a file before the `line`s that edit it;
//! - accounts: a `group` comes before a `user` that has it as its primary
//!   group (`group`, or `gid` equal to the group's constant `gid`) or in
//!   `groups` (`useradd -g`/`-G` need it to exist), a
//!   `user` before a `group` that lists it in `members` (`gpasswd -M` needs
//!   it) unless that group is one of the user's own (then the group comes
//!   first, and `useradd -G` adds the user to it anyway). Promises with
//!   `ensure = absent` get no such edge.
//!
//! A cycle is an error listing every step. Without cycles, the promises are
//! sorted topologically (ties by source order, so runs are deterministic),
//! and the pass limit is the longest chain of outcome-class edges plus 2
//! (Burgess's bound for feedback chains), capped.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use converge_grammar::Span;

use super::contradictions::describe_object;
use super::objects::Objects;
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{Edge, EdgeKind, Guard, Program, Value};

/// The cap on the pass limit when the policy does not set one.
pub const DEFAULT_MAX_PASSES: u32 = 32;

/// The result of ordering a program without cycles.
#[derive(Clone, Debug, Default)]
pub struct Ordering {
    pub edges: Vec<Edge>,
    /// Promise indices in the order the VM applies them.
    pub order: Vec<usize>,
    pub pass_limit: u32,
    /// The longest chain of outcome edges (promise indices), which sets the
    /// pass limit; empty when there is no feedback.
    pub feedback_chain: Vec<usize>,
}

/// Builds the ordering graph; reports every cycle.
pub fn ordering(program: &Program, max_passes: u32) -> Result<Ordering, Vec<Diagnostic>> {
    ordering_with(program, max_passes, &Objects::new(program))
}

/// [`ordering`] with the program's objects already grouped (shared with
/// the contradiction analysis).
pub fn ordering_with(
    program: &Program,
    max_passes: u32,
    objects: &Objects<'_>,
) -> Result<Ordering, Vec<Diagnostic>> {
    let edges = edges_with(program, objects);
    let n = program.promises.len();
    let mut adjacency: Vec<Vec<usize>> = vec![Vec::new(); n];
    for e in &edges {
        if let Some(out) = adjacency.get_mut(e.from) {
            if !out.contains(&e.to) {
                out.push(e.to);
            }
        }
    }
    let cycles = crate::graph::cycles(&adjacency);
    if !cycles.is_empty() {
        return Err(cycle_diagnostics(program, &edges, &cycles));
    }
    let order = topological(&adjacency);
    let (longest, feedback_chain) = feedback(&edges, &order, n);
    let pass_limit = (longest + 2).min(max_passes.max(2));
    Ok(Ordering {
        edges,
        order,
        pass_limit,
        feedback_chain,
    })
}

/// Every edge of the ordering graph, in a deterministic order.
pub fn edges(program: &Program) -> Vec<Edge> {
    edges_with(program, &Objects::new(program))
}

/// Programs with fewer promises find their edges on one thread: below
/// this, starting threads costs more than it saves.
const PARALLEL_FROM: usize = 1 << 14;

/// [`edges`] with the program's objects already grouped.
///
/// The ordering analysis is the longest of the analyses that run side by
/// side (`sema::analyze_program`): at 1,000,000 promises it went on alone
/// for half a second after the others were done (issue 22, item 4). So on
/// a large program its own steps run side by side too: the account edges
/// and the guard index beside the path index, then the edges of the two
/// halves of the promises, concatenated in order. The edges, and their
/// order, are those of one sequential walk.
fn edges_with(program: &Program, objects: &Objects<'_>) -> Vec<Edge> {
    if program.promises.len() < PARALLEL_FROM {
        sequential_edges(program, objects)
    } else {
        parallel_edges(program, objects)
    }
}

/// [`edges_with`] on this thread.
fn sequential_edges(program: &Program, objects: &Objects<'_>) -> Vec<Edge> {
    let index = EdgeIndex::new(program);
    let guarded = GuardedBy::new(program);
    let mut edges = promise_edges(
        program,
        objects,
        &index,
        &guarded,
        0..program.promises.len(),
    );
    account_edges(program, &mut edges);
    edges
}

/// [`edges_with`] on three threads.
fn parallel_edges(program: &Program, objects: &Objects<'_>) -> Vec<Edge> {
    let n = program.promises.len();
    std::thread::scope(|scope| {
        let accounts = scope.spawn(|| {
            let mut edges = Vec::new();
            account_edges(program, &mut edges);
            edges
        });
        let guarded = scope.spawn(|| GuardedBy::new(program));
        let index = EdgeIndex::new(program);
        let guarded = joined(guarded);
        let half = n / 2;
        let mut edges = std::thread::scope(|halves| {
            let second =
                halves.spawn(|| promise_edges(program, objects, &index, &guarded, half..n));
            let mut edges = promise_edges(program, objects, &index, &guarded, 0..half);
            edges.extend(joined(second));
            edges
        });
        edges.extend(joined(accounts));
        edges
    })
}

/// The result of a thread of [`edges_with`]; its panic is the caller's.
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The promises by `id`, and the `directory` and `file` promises by path.
struct EdgeIndex<'p> {
    ids: HashMap<&'p str, Vec<usize>>,
    directories: HashMap<&'p str, Vec<usize>>,
    files: HashMap<&'p str, Vec<usize>>,
}

impl<'p> EdgeIndex<'p> {
    fn new(program: &'p Program) -> Self {
        let mut index = EdgeIndex {
            ids: HashMap::default(),
            directories: HashMap::default(),
            files: HashMap::default(),
        };
        for (i, p) in program.promises.iter().enumerate() {
            if let Some(id) = p.attr("id").and_then(Value::as_str) {
                index.ids.entry(id).or_default().push(i);
            }
            match (p.kind, p.promiser.as_str()) {
                ("directory", Some(path)) => index.directories.entry(path).or_default().push(i),
                ("file", Some(path)) => index.files.entry(path).or_default().push(i),
                _ => {}
            }
        }
        index
    }
}

/// The edges that promises `range` make, in promise order: their `after`
/// and `notify` lists, their outcome classes, and what contains them.
fn promise_edges<'p>(
    program: &'p Program,
    objects: &Objects<'_>,
    index: &EdgeIndex<'_>,
    guarded: &GuardedBy<'p>,
    range: std::ops::Range<usize>,
) -> Vec<Edge> {
    let promises = &program.promises;
    let mut answers = Answers::default();
    let mut class_attrs = ClassAttrs::default();
    let mut edges = Vec::new();
    for i in range {
        let Some(p) = promises.get(i) else {
            continue;
        };
        let sets_classes = class_attrs.of(p.kind);
        for attr in &p.attrs {
            match attr.name {
                "after" | "notify" => {
                    let Value::List(refs) = &attr.value else {
                        continue;
                    };
                    for r in refs {
                        let Value::Ref { kind, target } = r else {
                            continue;
                        };
                        let targets: &[usize] = if &**kind == "id" {
                            target
                                .as_str()
                                .and_then(|t| index.ids.get(t))
                                .map_or(&[], Vec::as_slice)
                        } else {
                            objects.promises_of(kind, target)
                        };
                        for &t in targets {
                            let (from, to, kind) = if attr.name == "after" {
                                (t, i, EdgeKind::After)
                            } else {
                                (i, t, EdgeKind::Notify)
                            };
                            edges.push(Edge {
                                from,
                                to,
                                kind,
                                span: attr.span,
                                class: None,
                            });
                        }
                    }
                }
                // The outcome classes, and a class a promise type sets by a
                // rule of its own (`neighbours` `on_rewrite`); `watch` carries `on_changed`.
                name if matches!(name, "on_repaired" | "on_kept" | "on_failed" | "on_changed")
                    || sets_classes.contains(&name) =>
                {
                    let Some(class) = attr.value.as_str() else {
                        continue;
                    };
                    for &q in guarded.promises(class, &mut answers) {
                        edges.push(Edge {
                            from: i,
                            to: q,
                            kind: EdgeKind::Outcome,
                            span: attr.span,
                            class: Some(class.to_owned()),
                        });
                    }
                }
                _ => {}
            }
        }
        // Containment.
        let Some(path) = p.promiser.as_str() else {
            continue;
        };
        if matches!(p.kind, "line" | "setting" | "block") {
            for &f in index.files.get(path).map_or(&[][..], Vec::as_slice) {
                edges.push(Edge {
                    from: f,
                    to: i,
                    kind: EdgeKind::Contains,
                    span: p.span,
                    class: None,
                });
            }
        }
        if matches!(
            p.kind,
            "file" | "directory" | "link" | "line" | "setting" | "block"
        ) {
            let mut rest = path.trim_end_matches('/');
            while let Some(slash) = rest.rfind('/') {
                let dir = if slash == 0 {
                    "/"
                } else {
                    rest.get(..slash).unwrap_or("/")
                };
                if let Some(dirs) = index.directories.get(dir) {
                    for &d in dirs {
                        edges.push(Edge {
                            from: d,
                            to: i,
                            kind: EdgeKind::Contains,
                            span: p.span,
                            class: None,
                        });
                    }
                    break;
                }
                if slash == 0 {
                    break;
                }
                rest = dir;
            }
        }
    }
    edges
}

/// The class-typed attributes of each promise type met (`neighbours`
/// `on_rewrite`), found in the schema once per type: a search of the
/// schema per attribute of every promise was a tenth of the ordering
/// analysis at 1,000,000 promises (issue 22, item 4).
#[derive(Default)]
struct ClassAttrs {
    by_kind: HashMap<&'static str, Vec<&'static str>>,
}

impl ClassAttrs {
    fn of(&mut self, kind: &'static str) -> &[&'static str] {
        self.by_kind.entry(kind).or_insert_with(|| {
            converge_format::schema::promise_type(kind).map_or_else(Vec::new, |t| {
                t.all_attrs()
                    .filter(|a| a.ty == converge_format::schema::AttrType::Class)
                    .map(|a| a.name)
                    .collect()
            })
        })
    }
}

/// The account edges (see the module doc), appended to `edges`.
fn account_edges<'p>(program: &'p Program, edges: &mut Vec<Edge>) {
    let present =
        |p: &crate::ir::Promise| p.attr("ensure").and_then(Value::as_str) != Some("absent");
    let mut by_name: HashMap<(&str, &'p str), Vec<usize>> = HashMap::default();
    for (i, p) in program.promises.iter().enumerate() {
        if let (kind @ ("user" | "group"), Some(name)) = (p.kind, p.promiser.as_str()) {
            if present(p) {
                by_name.entry((kind, name)).or_default().push(i);
            }
        }
    }
    let named = |kind: &'static str, value: &'p Value| -> Vec<&'p str> {
        let names: Vec<&str> = match value {
            Value::List(items) => items.iter().filter_map(Value::as_str).collect(),
            other => other.as_str().into_iter().collect(),
        };
        names
            .into_iter()
            .filter(|n| by_name.contains_key(&(kind, *n)))
            .collect()
    };
    // Groups by a constant `gid`, for users that name theirs by id.
    let mut by_gid: HashMap<i64, Vec<usize>> = HashMap::default();
    for (i, p) in program.promises.iter().enumerate() {
        if let (true, Some(Value::Int(gid))) = (p.kind == "group" && present(p), p.attr("gid")) {
            by_gid.entry(*gid).or_default().push(i);
        }
    }
    let mut needs_group: HashSet<(usize, usize)> = HashSet::default();
    for (u, p) in program.promises.iter().enumerate() {
        if p.kind != "user" || !present(p) {
            continue;
        }
        for attr in p
            .attrs
            .iter()
            .filter(|a| matches!(a.name, "group" | "groups" | "gid"))
        {
            let mut groups: Vec<usize> = Vec::new();
            if let Value::Int(gid) = attr.value {
                groups.extend(by_gid.get(&gid).map_or(&[][..], Vec::as_slice));
            }
            for group in named("group", &attr.value) {
                groups.extend(
                    by_name
                        .get(&("group", group))
                        .map_or(&[][..], Vec::as_slice),
                );
            }
            for g in groups {
                needs_group.insert((g, u));
                edges.push(Edge {
                    from: g,
                    to: u,
                    kind: EdgeKind::Account,
                    span: attr.span,
                    class: None,
                });
            }
        }
    }
    for (g, p) in program.promises.iter().enumerate() {
        if p.kind != "group" || !present(p) {
            continue;
        }
        for attr in p.attrs.iter().filter(|a| a.name == "members") {
            for user in named("user", &attr.value) {
                for &u in by_name.get(&("user", user)).map_or(&[][..], Vec::as_slice) {
                    if !needs_group.contains(&(g, u)) {
                        edges.push(Edge {
                            from: u,
                            to: g,
                            kind: EdgeKind::Account,
                            span: attr.span,
                            class: None,
                        });
                    }
                }
            }
        }
    }
}

/// Which promises wait for a class: those whose guard names it, or names
/// a class whose definition depends on it, directly or not (`class restart
/// = changed || forced;` makes a promise under `restart` wait for
/// `changed`).
///
/// Built once in linear time: the classes each guard names, and for each
/// class the classes whose definitions name it. A question walks that
/// reverse graph once per distinct outcome class and is remembered. Before,
/// every class's transitive closure was materialised with `Vec::contains`:
/// a chain of 8,000 classes took 99 s, 100,000 never finished (issue 14,
/// item 22).
struct GuardedBy<'p> {
    /// Class -> promises whose guard names it, ascending.
    direct: HashMap<&'p str, Vec<usize>>,
    /// Class -> classes whose definition names it.
    dependents: HashMap<&'p str, Vec<&'p str>>,
}

/// The answers of [`GuardedBy::promises`] so far: one per thread.
type Answers<'p> = HashMap<&'p str, Vec<usize>>;

impl<'p> GuardedBy<'p> {
    fn new(program: &'p Program) -> Self {
        let mut direct: HashMap<&str, Vec<usize>> = HashMap::default();
        for (i, p) in program.promises.iter().enumerate() {
            if matches!(*p.guard, Guard::Const(_)) {
                continue;
            }
            let mut classes = HashSet::default();
            guard_classes(&p.guard, &mut classes);
            for class in classes {
                direct.entry(class).or_default().push(i);
            }
        }
        let mut dependents: HashMap<&str, Vec<&str>> = HashMap::default();
        for c in &program.classes {
            let Some(expr) = &c.expr else { continue };
            let mut named = HashSet::default();
            guard_classes(expr, &mut named);
            for d in named {
                dependents.entry(d).or_default().push(c.name.as_str());
            }
        }
        GuardedBy { direct, dependents }
    }

    /// The promises that wait for `class`, ascending, each once.
    fn promises<'a>(&self, class: &'p str, answers: &'a mut Answers<'p>) -> &'a [usize] {
        if !answers.contains_key(class) {
            let mut seen: HashSet<&str> = HashSet::default();
            let mut stack = vec![class];
            let mut found: Vec<usize> = Vec::new();
            seen.insert(class);
            while let Some(c) = stack.pop() {
                found.extend(self.direct.get(c).map_or(&[][..], Vec::as_slice));
                for &d in self.dependents.get(c).map_or(&[][..], Vec::as_slice) {
                    if seen.insert(d) {
                        stack.push(d);
                    }
                }
            }
            found.sort_unstable();
            found.dedup();
            answers.insert(class, found);
        }
        answers.get(class).map_or(&[][..], Vec::as_slice)
    }
}

fn guard_classes<'g>(guard: &'g Guard, out: &mut HashSet<&'g str>) {
    match guard {
        Guard::Class(name) => {
            out.insert(name);
        }
        Guard::Not(inner) => guard_classes(inner, out),
        Guard::And(items) | Guard::Or(items) => {
            for g in items {
                guard_classes(g, out);
            }
        }
        Guard::Const(_) | Guard::Compare { .. } => {}
    }
}

/// Kahn's algorithm; among the promises ready at one time, the earliest in
/// source order goes first.
fn topological(adjacency: &[Vec<usize>]) -> Vec<usize> {
    let n = adjacency.len();
    let mut indegree = vec![0usize; n];
    for out in adjacency {
        for &t in out {
            if let Some(d) = indegree.get_mut(t) {
                *d += 1;
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = indegree
        .iter()
        .enumerate()
        .filter(|(_, d)| **d == 0)
        .map(|(i, _)| Reverse(i))
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &t in adjacency.get(i).map_or(&[][..], Vec::as_slice) {
            if let Some(d) = indegree.get_mut(t) {
                *d -= 1;
                if *d == 0 {
                    ready.push(Reverse(t));
                }
            }
        }
    }
    order
}

/// The longest chain of outcome edges in the (acyclic) graph, and the
/// promises along it.
fn feedback(edges: &[Edge], order: &[usize], n: usize) -> (u32, Vec<usize>) {
    // Without an outcome edge every chain has length 0.
    if !edges.iter().any(|e| e.kind == EdgeKind::Outcome) {
        return (0, Vec::new());
    }
    let mut incoming: Vec<Vec<(usize, u32)>> = vec![Vec::new(); n];
    for e in edges {
        if let Some(list) = incoming.get_mut(e.to) {
            list.push((e.from, u32::from(e.kind == EdgeKind::Outcome)));
        }
    }
    let mut best = vec![0u32; n];
    let mut previous: Vec<Option<usize>> = vec![None; n];
    for &v in order {
        let mut value = 0;
        let mut from = None;
        for &(u, weight) in incoming.get(v).map_or(&[][..], Vec::as_slice) {
            let candidate = best.get(u).copied().unwrap_or(0) + weight;
            if candidate > value {
                value = candidate;
                from = Some(u);
            }
        }
        if let Some(slot) = best.get_mut(v) {
            *slot = value;
        }
        if let Some(slot) = previous.get_mut(v) {
            *slot = from;
        }
    }
    let Some((end, &longest)) = best
        .iter()
        .enumerate()
        .max_by_key(|(i, b)| (**b, Reverse(*i)))
    else {
        return (0, Vec::new());
    };
    if longest == 0 {
        return (0, Vec::new());
    }
    let mut chain = vec![end];
    let mut cur = end;
    while let Some(Some(p)) = previous.get(cur) {
        chain.push(*p);
        cur = *p;
    }
    chain.reverse();
    (longest, chain)
}

fn cycle_diagnostics(program: &Program, edges: &[Edge], cycles: &[Vec<usize>]) -> Vec<Diagnostic> {
    let mut seen: HashSet<Vec<Span>> = HashSet::default();
    let mut out = Vec::new();
    for cycle in cycles {
        let steps: Vec<&Edge> = cycle
            .iter()
            .enumerate()
            .filter_map(|(k, &from)| {
                let to = *cycle.get((k + 1) % cycle.len())?;
                edges.iter().find(|e| e.from == from && e.to == to)
            })
            .collect();
        // The same loop through a bundle called twice is one mistake.
        let mut key: Vec<Span> = steps.iter().map(|e| e.span).collect();
        key.sort();
        if !seen.insert(key) {
            continue;
        }
        let name = |i: usize| {
            program
                .promises
                .get(i)
                .map(describe_object)
                .unwrap_or_default()
        };
        let mut names: Vec<String> = cycle.iter().map(|&i| name(i)).collect();
        if let Some(first) = names.first().cloned() {
            names.push(first);
        }
        let mut labels = steps
            .iter()
            .map(|e| (e.span, step_label(e, &name(e.from), &name(e.to))));
        let Some((span, label)) = labels.next() else {
            continue;
        };
        let mut d = Diagnostic::new(
            Code::OrderingCycle,
            format!("promises are ordered in a cycle: {}", names.join(" -> ")),
            span,
            label,
        );
        for (span, label) in labels {
            d = d.with_secondary(span, label);
        }
        for &i in cycle {
            if let Some(p) = program.promises.get(i) {
                d = super::defaults::at_promise(d, p);
            }
        }
        out.push(d.with_help(
            "every promise in the loop must come before the next; remove one `after`/`notify`, or set the outcome class on another promise",
        ));
    }
    out
}

fn step_label(edge: &Edge, from: &str, to: &str) -> String {
    match edge.kind {
        EdgeKind::After => format!("{to} comes after {from}"),
        EdgeKind::Notify => format!("{from} notifies {to}"),
        EdgeKind::Outcome => format!(
            "{from} sets `{}`, which {to} waits for",
            edge.class.as_deref().unwrap_or("?")
        ),
        EdgeKind::Contains => format!("{to} lies inside {from}"),
        EdgeKind::Account if from.starts_with("group") => {
            format!("{to} is in {from}, which must exist first")
        }
        EdgeKind::Account => format!("{to} lists {from} as a member, who must exist first"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::goldens;

    #[test]
    fn the_edges_are_the_same_on_one_thread_and_on_three() {
        let mut kinds = HashSet::default();
        for policy in goldens::policies() {
            let (_, checked) = goldens::checked(&policy);
            let program = &checked.program;
            let objects = Objects::new(program);
            let edges = sequential_edges(program, &objects);
            assert_eq!(
                parallel_edges(program, &objects),
                edges,
                "{}",
                policy.display()
            );
            kinds.extend(edges.iter().map(|e| format!("{:?}", e.kind)));
        }
        // The goldens make every kind of edge.
        assert_eq!(kinds.len(), 5, "{kinds:?}");
    }
}
