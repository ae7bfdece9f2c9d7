//! `policyc explain --secrets`: which host gets which secret, and why
//! (LANGUAGE.md section 14). The same plan the build seals by
//! (`bundle::secrets::plan`): per secret, the entitled hosts grouped by the
//! promise (and its guard) that entitles them first, the revoked hosts
//! left out, and the entitled hosts the build would refuse for lack of an
//! `age_recipient`. Never a plaintext: this command reads no secret.

use std::fmt::Write as _;

use converge_format::inventory::Inventory;
use serde_json::{json, Value as Json};

use crate::bundle::secrets::{plan, uses, Plan};
use crate::explain::location;
use crate::ir::Program;
use crate::source::SourceDb;

/// One reason: a promise, and the hosts it entitles first.
struct Reason {
    promise: usize,
    hosts: Vec<usize>,
}

fn reasons(plan: &Plan, grant: usize) -> Vec<Reason> {
    let mut out: Vec<Reason> = Vec::new();
    if let Some(g) = plan.grants.get(grant) {
        for &(h, p) in &g.hosts {
            match out.iter_mut().find(|r| r.promise == p) {
                Some(r) => r.hosts.push(h),
                None => out.push(Reason {
                    promise: p,
                    hosts: vec![h],
                }),
            }
        }
    }
    out
}

/// The explanation as JSON (`--format json`).
pub fn secrets_json(db: &SourceDb, program: &Program, inventory: Option<&Inventory>) -> Json {
    let Some(inventory) = inventory else {
        let secrets: Vec<Json> = uses(program)
            .iter()
            .map(|u| json!({"name": u.secret.name, "file": db.name(u.secret.span.file), "hosts": []}))
            .collect();
        return json!({"inventory": false, "secrets": secrets});
    };
    let plan = plan(program, inventory);
    let host_name = |h: usize| plan.hosts.get(h).map_or("", |v| v.name.as_str());
    let revoked: Vec<&str> = plan
        .hosts
        .iter()
        .filter(|h| h.revoked)
        .map(|h| h.name.as_str())
        .collect();
    let secrets: Vec<Json> = plan
        .grants
        .iter()
        .enumerate()
        .map(|(g, grant)| {
            let reasons: Vec<Json> = reasons(&plan, g)
                .iter()
                .map(|r| {
                    let p = program.promises.get(r.promise);
                    json!({
                        "promise": p.map(crate::analysis::contradictions::describe_object),
                        "location": p.map(|p| location(db, p)),
                        "guard": p.map(|p| p.guard.display()),
                        "hosts": r.hosts.iter().map(|h| host_name(*h)).collect::<Vec<_>>(),
                    })
                })
                .collect();
            let without: Vec<&str> = grant
                .hosts
                .iter()
                .filter(|(h, _)| plan.hosts.get(*h).is_some_and(|v| v.recipient.is_none()))
                .map(|(h, _)| host_name(*h))
                .collect();
            json!({
                "name": grant.secret.name,
                "read_at": secret_location(db, &grant.secret),
                "hosts": grant.hosts.iter().map(|(h, _)| host_name(*h)).collect::<Vec<_>>(),
                "reasons": reasons,
                "without_recipient": without,
            })
        })
        .collect();
    json!({"inventory": true, "hosts": plan.hosts.len(), "revoked": revoked, "secrets": secrets})
}

fn secret_location(db: &SourceDb, secret: &crate::ir::SecretRef) -> String {
    let line = db
        .get(secret.span.file)
        .map_or(0, |f| f.line_col(secret.span.start).0);
    format!("{}:{line}", db.name(secret.span.file))
}

/// The explanation for people.
pub fn secrets_text(db: &SourceDb, program: &Program, inventory: Option<&Inventory>) -> String {
    let mut out = String::new();
    let Some(inventory) = inventory else {
        let _ = writeln!(
            out,
            "no inventory: a build cannot seal secrets to any host (add inventory.toml or pass --inventory)"
        );
        for u in uses(program) {
            let _ = writeln!(
                out,
                "secret {} (read at {}): used by {} promise{}",
                u.secret.name,
                secret_location(db, &u.secret),
                u.promises.len(),
                if u.promises.len() == 1 { "" } else { "s" }
            );
        }
        return out;
    };
    let plan = plan(program, inventory);
    if plan.grants.is_empty() {
        let _ = writeln!(out, "the program uses no secrets");
        return out;
    }
    let names = |hosts: &[usize]| -> String {
        const SHOWN: usize = 8;
        let mut list: Vec<&str> = hosts
            .iter()
            .take(SHOWN)
            .filter_map(|h| plan.hosts.get(*h).map(|v| v.name.as_str()))
            .collect();
        let more = hosts.len().saturating_sub(SHOWN);
        let extra = format!("and {more} more");
        if more > 0 {
            list.push(&extra);
        }
        list.join(", ")
    };
    let revoked = plan.hosts.iter().filter(|h| h.revoked).count();
    for (g, grant) in plan.grants.iter().enumerate() {
        let _ = writeln!(
            out,
            "secret {} (read at {}): {} of {} hosts",
            grant.secret.name,
            secret_location(db, &grant.secret),
            grant.hosts.len(),
            plan.hosts.len()
        );
        for r in reasons(&plan, g) {
            let Some(p) = program.promises.get(r.promise) else {
                continue;
            };
            let _ = writeln!(
                out,
                "  {} host{} by {} at {} when {}: {}",
                r.hosts.len(),
                if r.hosts.len() == 1 { "" } else { "s" },
                crate::analysis::contradictions::describe_object(p),
                location(db, p),
                p.guard.display(),
                names(&r.hosts)
            );
        }
        let without: Vec<usize> = grant
            .hosts
            .iter()
            .filter(|(h, _)| plan.hosts.get(*h).is_some_and(|v| v.recipient.is_none()))
            .map(|(h, _)| *h)
            .collect();
        if !without.is_empty() {
            let _ = writeln!(
                out,
                "  without age_recipient (a build refuses): {}",
                names(&without)
            );
        }
        if grant.hosts.is_empty() {
            let _ = writeln!(
                out,
                "  no host can activate a promise using it (a build refuses)"
            );
        }
    }
    if revoked > 0 {
        let _ = writeln!(out, "revoked hosts get no secrets: {revoked}");
    }
    out
}
