//! `policyc explain`: what the compiler concluded about a program, for
//! people: every object with its promises and guards, the order the VM will
//! apply them in, and the pass limit with the chain that sets it. A promise
//! split on a lookup keyed by a fact says which key each instance stands
//! for, or that it takes the `??` default. With `--facts` ([`HostFacts`]),
//! only the instances a host with those facts can get are shown.

use std::fmt::Write as _;

use crate::analysis::contradictions::describe_object;
use crate::host_facts::HostFacts;
use crate::ir::{EdgeKind, Guard, LookupCase, Program, Promise, Value};
use crate::source::SourceDb;

/// `file.policy:12` for a promise.
pub fn location(db: &SourceDb, p: &Promise) -> String {
    let line = db
        .get(p.span.file)
        .map_or(0, |f| f.line_col(p.span.start).0);
    format!("{}:{line}", db.name(p.span.file))
}

pub fn explain(db: &SourceDb, program: &Program, host: &HostFacts) -> String {
    let mut out = String::new();
    // What a host with the given facts can get: every promise whose guard
    // the facts do not make false.
    let kept: Vec<bool> = program
        .promises
        .iter()
        .map(|p| host.holds(&p.guard) != Some(false))
        .collect();
    let is_kept = |i: usize| kept.get(i).copied().unwrap_or(false);
    if !host.is_empty() {
        let _ = writeln!(
            out,
            "for a host with {} (classes and other facts left open): {} of {} promises\n",
            host.describe(),
            kept.iter().filter(|k| **k).count(),
            program.promises.len()
        );
    }
    let mut objects: Vec<(String, Vec<usize>)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (i, p) in program.promises.iter().enumerate() {
        if !is_kept(i) {
            continue;
        }
        let key = describe_object(p);
        match index.get(&key) {
            Some(&slot) => {
                if let Some((_, members)) = objects.get_mut(slot) {
                    members.push(i);
                }
            }
            None => {
                index.insert(key.clone(), objects.len());
                objects.push((key, vec![i]));
            }
        }
    }
    let _ = writeln!(
        out,
        "{} promises on {} objects, {} ordering edges, pass limit {}",
        kept.iter().filter(|k| **k).count(),
        objects.len(),
        program.edges.len(),
        program.pass_limit
    );

    let _ = writeln!(out, "\nobjects:");
    for (name, members) in &objects {
        let _ = writeln!(out, "  {name}");
        for &i in members {
            let Some(p) = program.promises.get(i) else {
                continue;
            };
            let guard = match &*p.guard {
                Guard::Const(true) => "always".to_owned(),
                g => format!("when {}", g.display()),
            };
            let attrs: Vec<String> = p.attrs.iter().map(crate::ir::Attr::display).collect();
            let _ = writeln!(out, "    #{:<4} {:<28} {guard}", i + 1, location(db, p));
            if !attrs.is_empty() {
                let _ = writeln!(out, "           {}", attrs.join("; "));
            }
            for case in p.lookups() {
                let _ = writeln!(
                    out,
                    "           {}",
                    lookup_case(case, p.missing().is_some())
                );
            }
            if let Some(call) = p.chain.last() {
                let chain: Vec<&str> = p.chain.iter().map(|c| c.bundle.as_str()).collect();
                let _ = writeln!(out, "           via {}", chain.join(" -> "));
                let _ = call;
            }
        }
    }

    let _ = writeln!(out, "\norder (ties broken by source order):");
    let order = program.order.iter().filter(|i| is_kept(**i));
    for (step, &i) in order.enumerate() {
        let Some(p) = program.promises.get(i) else {
            continue;
        };
        let before: Vec<String> = program
            .edges
            .iter()
            .filter(|e| e.to == i)
            .map(|e| format!("{} #{}", edge_word(e.kind), e.from + 1))
            .collect();
        let after = if before.is_empty() {
            String::new()
        } else {
            format!("  ({})", before.join(", "))
        };
        let _ = writeln!(
            out,
            "  {:>4}. #{:<4} {}{after}",
            step + 1,
            i + 1,
            describe_object(p)
        );
    }

    let _ = writeln!(out, "\npass limit: {}", program.pass_limit);
    if program.feedback_chain.is_empty() {
        let _ = writeln!(
            out,
            "  no outcome class feeds another promise: 1 pass applies everything, 1 more confirms it (2)"
        );
    } else {
        let steps = program.feedback_chain.len().saturating_sub(1);
        let _ = writeln!(
            out,
            "  the longest chain of outcome classes has {steps} step(s), plus 2:"
        );
        for pair in program.feedback_chain.windows(2) {
            let [from, to] = pair else { continue };
            let class = program
                .edges
                .iter()
                .find(|e| e.from == *from && e.to == *to && e.kind == EdgeKind::Outcome)
                .and_then(|e| e.class.clone())
                .unwrap_or_default();
            let (Some(a), Some(b)) = (program.promises.get(*from), program.promises.get(*to))
            else {
                continue;
            };
            let _ = writeln!(
                out,
                "    {} ({}) sets `{class}` -> {} ({})",
                describe_object(a),
                location(db, a),
                describe_object(b),
                location(db, b)
            );
        }
    }
    out
}

/// Which case of a lookup an instance stands for:
/// `lookup by sys.hostname: key "web01"`, or `... sys.hostname is none of
/// the 3 keys: the ?? default`.
fn lookup_case(case: &LookupCase, missing: bool) -> String {
    let on = case.on.display();
    let keys: Vec<String> = case
        .keys
        .iter()
        .map(|k| Value::Str(k.clone()).display())
        .collect();
    let which = match keys.as_slice() {
        [] => {
            let of = match case.of {
                1 => "the 1 key".to_owned(),
                n => format!("the {n} keys"),
            };
            let takes = if missing {
                "the lookup finds nothing (no ?? default)"
            } else {
                "the ?? default"
            };
            format!("{on} is none of {of}: {takes}")
        }
        [key] => format!("key {key}"),
        many => format!("keys {} (the same values)", many.join(", ")),
    };
    format!("lookup by {on}: {which}")
}

fn edge_word(kind: EdgeKind) -> &'static str {
    match kind {
        EdgeKind::After => "after",
        EdgeKind::Notify => "notified by",
        EdgeKind::Outcome => "outcome of",
        EdgeKind::Contains => "inside",
        EdgeKind::Account => "needs the account",
    }
}
