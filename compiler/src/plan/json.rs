//! `policyc plan --format json`: the plan for tools, `converge-plan/1`
//! (docs/schemas/converge-plan-1.schema.json). Every host is named (no
//! "and N more"); secrets appear as `<secret NAME>` only.

use serde_json::{json, Value};

use super::changes::{Change, ChangeSet};
use super::render::unified_diff;
use super::Plan;

/// The format line of the plan's JSON.
pub const PLAN_FORMAT: &str = "converge-plan/1";

pub fn plan_json(plan: &Plan) -> Value {
    let changing: usize = plan.groups.iter().map(|g| g.hosts.len()).sum();
    let groups: Vec<Value> = plan
        .groups
        .iter()
        .map(|g| {
            json!({
                "count": g.hosts.len(),
                "hosts": g.hosts,
                "unknown": g.changes.has_unknown(),
                "changes": changes(&g.changes),
            })
        })
        .collect();
    json!({
        "format": PLAN_FORMAT,
        "hosts": plan.hosts,
        "changed": changing,
        "unchanged": { "count": plan.unchanged.len(), "hosts": plan.unchanged },
        "groups": groups,
        "notes": plan.notes,
    })
}

fn changes(set: &ChangeSet) -> Vec<Value> {
    set.changes
        .iter()
        .map(|change| match change {
            Change::Added(r) => json!({
                "action": "add",
                "type": r.key.kind,
                "promiser": &*r.key.promiser,
                "conditional": r.conditional,
                "attributes": r.attrs.iter()
                    .map(|(name, value)| ((*name).to_owned(), value.to_json()))
                    .collect::<serde_json::Map<String, Value>>(),
            }),
            Change::Removed(key) => json!({
                "action": "remove",
                "type": key.kind,
                "promiser": &*key.promiser,
            }),
            Change::Changed {
                key,
                attrs,
                conditional,
            } => json!({
                "action": "change",
                "type": key.kind,
                "promiser": &*key.promiser,
                "conditional": { "before": conditional.0, "after": conditional.1 },
                "attributes": attrs.iter().map(|a| json!({
                    "name": a.name,
                    "before": a.before.as_ref().map(|v| v.to_json()),
                    "after": a.after.as_ref().map(|v| v.to_json()),
                    "diff": unified_diff(key, a),
                })).collect::<Vec<_>>(),
            }),
            Change::Unknown { side, promise } => json!({
                "action": if promise.failing { "fails" } else { "unknown" },
                "policy": side.name(),
                "promise": promise.what,
                "needs": promise.needs,
                "reason": promise.reason,
            }),
        })
        .collect()
}
