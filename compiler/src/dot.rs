//! `policyc graph --format dot`: the ordering graph in Graphviz DOT.
//! `dot -Tsvg` renders it. Solid edges are `after`, dashed `notify`, bold
//! red outcome classes (labelled with the class), dotted containment and
//! accounts; a legend drawn with the graph says so.
//!
//! Each edge is drawn once, however many times the program states it (a
//! class that several promises set, an `after` written twice). Promises
//! that would read the same (the instances of one promise in a loop, or of
//! a lookup split by host) get a third label line that tells them apart.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use crate::analysis::contradictions::describe_object;
use crate::explain::location;
use crate::ir::{EdgeKind, Program, Promise};
use crate::source::SourceDb;

/// The longest third label line; longer ones are cut with `...`.
const MAX_DETAIL_CHARS: usize = 48;

pub fn dot(db: &SourceDb, program: &Program) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph policy {{");
    let _ = writeln!(out, "  rankdir=LR;");
    let _ = writeln!(
        out,
        "  node [shape=box, fontname=\"monospace\", fontsize=10];"
    );
    let _ = writeln!(out, "  edge [fontname=\"monospace\", fontsize=9];");
    legend(&mut out);
    for (i, label) in labels(db, program).iter().enumerate() {
        let _ = writeln!(out, "  p{i} [label={}];", quote(label));
    }
    let mut drawn = HashSet::new();
    for e in &program.edges {
        if !drawn.insert((e.from, e.to, e.kind, e.class.as_deref())) {
            continue;
        }
        let _ = writeln!(
            out,
            "  p{} -> p{} [{}];",
            e.from,
            e.to,
            style(e.kind, e.class.as_deref())
        );
    }
    let _ = writeln!(out, "}}");
    out
}

/// The attributes of an edge of this kind.
fn style(kind: EdgeKind, class: Option<&str>) -> String {
    match kind {
        EdgeKind::After => "label=\"after\"".to_owned(),
        EdgeKind::Notify => "style=dashed, label=\"notify\"".to_owned(),
        EdgeKind::Outcome => format!(
            "style=bold, color=red, label={}",
            quote(class.unwrap_or(""))
        ),
        EdgeKind::Contains => "style=dotted, label=\"contains\"".to_owned(),
        EdgeKind::Account => "style=dotted, label=\"account\"".to_owned(),
    }
}

/// A box in the corner that draws one edge of each style with its meaning.
fn legend(out: &mut String) {
    let rows = [
        (EdgeKind::After, None, "runs after (after = [...])"),
        (EdgeKind::Notify, None, "notifies when repaired"),
        (
            EdgeKind::Outcome,
            Some("CLASS"),
            "sets CLASS, which activates",
        ),
        (EdgeKind::Contains, None, "is inside the directory of"),
        (EdgeKind::Account, None, "needs the account of"),
    ];
    let _ = writeln!(out, "  subgraph cluster_legend {{");
    let _ = writeln!(
        out,
        "    label=\"legend\"; fontname=\"monospace\"; fontsize=10; style=dashed;"
    );
    let _ = writeln!(out, "    node [shape=plaintext, fontsize=9];");
    for (i, (kind, class, meaning)) in rows.iter().enumerate() {
        let _ = writeln!(out, "    legend{i}a [label=\"A\"];");
        let _ = writeln!(
            out,
            "    legend{i}b [label={}];",
            quote(&format!("B: A {meaning} B"))
        );
        let _ = writeln!(
            out,
            "    legend{i}a -> legend{i}b [{}];",
            style(*kind, *class)
        );
    }
    let _ = writeln!(out, "  }}");
}

/// Each promise's label: what it is and where, and for promises that would
/// otherwise read the same, what sets each apart.
fn labels(db: &SourceDb, program: &Program) -> Vec<String> {
    let base: Vec<String> = program
        .promises
        .iter()
        .map(|p| format!("{}\n{}", describe_object(p), location(db, p)))
        .collect();
    let mut same: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, label) in base.iter().enumerate() {
        same.entry(label.as_str()).or_default().push(i);
    }
    let mut labels = base.clone();
    for group in same.values().filter(|g| g.len() > 1) {
        let promises: Vec<&Promise> = group
            .iter()
            .filter_map(|&i| program.promises.get(i))
            .collect();
        let details = distinguish(&promises);
        for (&i, detail) in group.iter().zip(details) {
            if let Some(label) = labels.get_mut(i) {
                label.push('\n');
                label.push_str(&detail);
            }
        }
    }
    labels
}

/// One line per promise of a group that would read the same, telling them
/// apart: the shortest attribute whose value differs between them, else the
/// lookup keys each stands for; numbered when that is still not enough.
fn distinguish(group: &[&Promise]) -> Vec<String> {
    let by_attr: Vec<Option<String>> = group.iter().map(|p| differing_attr(p, group)).collect();
    let by_lookup: Vec<Option<String>> = group.iter().map(|p| lookup_cases(p)).collect();
    for candidate in [&by_attr, &by_lookup] {
        let lines: Vec<String> = candidate
            .iter()
            .filter_map(|d| d.as_deref().map(shorten))
            .collect();
        let distinct: HashSet<&String> = lines.iter().collect();
        if lines.len() == group.len() && distinct.len() == lines.len() {
            return lines;
        }
    }
    let n = group.len();
    by_attr
        .iter()
        .zip(&by_lookup)
        .enumerate()
        .map(|(k, (attr, lookup))| {
            let number = format!("instance {} of {n}", k + 1);
            match attr.as_deref().or(lookup.as_deref()) {
                Some(detail) => format!("{} ({number})", shorten(detail)),
                None => number,
            }
        })
        .collect()
}

/// The shortest `name = value` of `p` whose value another promise of the
/// group does not share.
fn differing_attr(p: &Promise, group: &[&Promise]) -> Option<String> {
    p.attrs
        .iter()
        .filter(|attr| {
            group
                .iter()
                .any(|other| other.attr(attr.name) != Some(&attr.value))
        })
        .map(|attr| attr.display())
        .min_by_key(String::len)
}

/// The lookup keys an instance split by host stands for.
fn lookup_cases(p: &Promise) -> Option<String> {
    let cases: Vec<String> = p
        .lookups()
        .iter()
        .map(|case| {
            if case.keys.is_empty() {
                format!("{}: any other", case.on.display())
            } else {
                format!("{}: {}", case.on.display(), case.keys.join(", "))
            }
        })
        .collect();
    (!cases.is_empty()).then(|| cases.join("; "))
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= MAX_DETAIL_CHARS {
        return text.to_owned();
    }
    let cut: String = text.chars().take(MAX_DETAIL_CHARS - 3).collect();
    format!("{cut}...")
}

/// A DOT string literal.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
