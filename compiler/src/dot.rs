//! `policyc graph --format dot`: the ordering graph in Graphviz DOT.
//! `dot -Tsvg` renders it. Solid edges are `after`, dashed `notify`, bold
//! red outcome classes (labelled with the class), dotted containment.

use std::fmt::Write as _;

use crate::analysis::contradictions::describe_object;
use crate::explain::location;
use crate::ir::{EdgeKind, Program};
use crate::source::SourceDb;

pub fn dot(db: &SourceDb, program: &Program) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph policy {{");
    let _ = writeln!(out, "  rankdir=LR;");
    let _ = writeln!(
        out,
        "  node [shape=box, fontname=\"monospace\", fontsize=10];"
    );
    let _ = writeln!(out, "  edge [fontname=\"monospace\", fontsize=9];");
    for (i, p) in program.promises.iter().enumerate() {
        let label = format!("{}\n{}", describe_object(p), location(db, p));
        let _ = writeln!(out, "  p{i} [label={}];", quote(&label));
    }
    for e in &program.edges {
        let style = match e.kind {
            EdgeKind::After => "label=\"after\"".to_owned(),
            EdgeKind::Notify => "style=dashed, label=\"notify\"".to_owned(),
            EdgeKind::Outcome => format!(
                "style=bold, color=red, label={}",
                quote(e.class.as_deref().unwrap_or(""))
            ),
            EdgeKind::Contains => "style=dotted".to_owned(),
            EdgeKind::Account => "style=dotted, label=\"account\"".to_owned(),
        };
        let _ = writeln!(out, "  p{} -> p{} [{style}];", e.from, e.to);
    }
    let _ = writeln!(out, "}}");
    out
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
