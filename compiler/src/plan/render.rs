//! The plan for people: a summary line, then each group of hosts once
//! (count and first names), its changes with `+` added, `-` removed, `~`
//! changed (text as a unified diff), `?` unknown; then the unchanged hosts.
//! Secrets show as `<secret NAME>`, changed or not, never their text.

use converge_format::schema::{self, AttrType};

use super::changes::{AttrChange, Change, ChangeSet, Side};
use super::group::host_list;
use super::resolved::{PromiseKey, Shown, Unresolved};
use super::Plan;

/// The plan as text; `shown` host names per group.
pub fn human(plan: &Plan, shown: usize) -> String {
    let mut out = String::new();
    out.push_str(&summary(plan));
    out.push('\n');
    for note in &plan.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    for group in &plan.groups {
        out.push('\n');
        let noun = if group.hosts.len() == 1 {
            "host"
        } else {
            "hosts"
        };
        out.push_str(&format!(
            "{} {noun}: {}\n",
            group.hosts.len(),
            host_list(&group.hosts, shown)
        ));
        out.push_str(&changes(&group.changes));
    }
    if !plan.unchanged.is_empty() {
        out.push('\n');
        out.push_str(&format!(
            "{} unchanged: {}\n",
            plan.unchanged.len(),
            host_list(&plan.unchanged, shown)
        ));
    }
    out
}

/// `Plan: 12 hosts; 9 change (3 change sets, 1 with unknowns), 3 unchanged.`
pub fn summary(plan: &Plan) -> String {
    let changing: usize = plan.groups.iter().map(|g| g.hosts.len()).sum();
    let unknown: usize = plan
        .groups
        .iter()
        .filter(|g| g.changes.has_unknown())
        .map(|g| g.hosts.len())
        .sum();
    let sets = plan.groups.len();
    let mut text = format!(
        "Plan: {} hosts; {changing} change ({sets} change set{}",
        plan.hosts,
        if sets == 1 { "" } else { "s" }
    );
    if unknown > 0 {
        text.push_str(&format!(", {unknown} with unknowns"));
    }
    text.push_str(&format!("), {} unchanged.", plan.unchanged.len()));
    text
}

/// One group's changes, indented under its host line.
pub fn changes(set: &ChangeSet) -> String {
    let mut out = String::new();
    for change in &set.changes {
        match change {
            Change::Added(r) => {
                out.push_str(&format!(
                    "  + {}{}\n",
                    r.key.display(),
                    when(&r.conditional)
                ));
                for (name, value) in r.attrs.iter() {
                    out.push_str(&format!(
                        "      {name} = {}\n",
                        value_text(r.key.kind, name, value)
                    ));
                }
            }
            Change::Removed(key) => out.push_str(&format!("  - {}\n", key.display())),
            Change::Changed {
                key,
                attrs,
                conditional,
            } => {
                out.push_str(&format!("  ~ {}\n", key.display()));
                if conditional.0 != conditional.1 {
                    out.push_str(&format!(
                        "      runs: {} -> {}\n",
                        condition(&conditional.0),
                        condition(&conditional.1)
                    ));
                }
                for attr in attrs {
                    out.push_str(&attr_change(key, attr));
                }
            }
            Change::Unknown { side, promise } => out.push_str(&unresolved(*side, promise)),
        }
    }
    out
}

/// `? unknown: needs fact sys.os_family: file "/etc/x" (new policy)`, or
/// `! fails: REASON: ...` for a promise that would fail on the host.
fn unresolved(side: Side, promise: &Unresolved) -> String {
    let policy = match side {
        Side::Both => "both policies".to_owned(),
        side => format!("{} policy", side.name()),
    };
    match (&promise.needs, promise.failing) {
        (_, true) => format!(
            "  ! fails: {}: {} ({policy})\n",
            promise.what, promise.reason
        ),
        (Some(fact), false) => format!(
            "  ? unknown: needs fact {fact}: {} ({policy})\n",
            promise.what
        ),
        (None, false) => format!(
            "  ? unknown: {}: {} ({policy})\n",
            promise.what, promise.reason
        ),
    }
}

fn when(conditional: &Option<String>) -> String {
    match conditional {
        Some(classes) => format!(" (depends on outcome classes of the run: {classes})"),
        None => String::new(),
    }
}

fn condition(conditional: &Option<String>) -> String {
    match conditional {
        Some(classes) => format!("depending on outcome classes of the run ({classes})"),
        None => "always".to_owned(),
    }
}

/// One changed attribute: `mode: 0o644 -> 0o600`, a secret as changed, text
/// of several lines as a unified diff.
fn attr_change(key: &PromiseKey, attr: &AttrChange) -> String {
    let name = attr.name;
    if let (Some(Shown::Secret { label: a, .. }), Some(Shown::Secret { label: b, .. })) =
        (&attr.before, &attr.after)
    {
        return if a == b {
            format!("      {name}: {a} changed\n")
        } else {
            format!("      {name}: {a} -> {b} (changed)\n")
        };
    }
    if let Some(diff) = unified_diff(key, attr) {
        let mut out = format!("      {name}:\n");
        for line in diff.lines() {
            out.push_str(&format!("        {line}\n"));
        }
        return out;
    }
    let side = |v: &Option<Shown>| match v {
        Some(v) => value_text(key.kind, name, v),
        None => "(not set)".to_owned(),
    };
    format!(
        "      {name}: {} -> {}\n",
        side(&attr.before),
        side(&attr.after)
    )
}

/// A unified diff of a text value (both sides text, one of them longer
/// than a line); `None` for anything else.
pub fn unified_diff(key: &PromiseKey, attr: &AttrChange) -> Option<String> {
    let before = match &attr.before {
        Some(v) => v.diff_text()?,
        None => "",
    };
    let after = match &attr.after {
        Some(v) => v.diff_text()?,
        None => "",
    };
    let multiline = |s: &str| s.contains('\n') || s.len() > 80;
    if !multiline(before) && !multiline(after) {
        return None;
    }
    let diff = similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .header(
            &format!("{} (old)", key.promiser),
            &format!("{} (new)", key.promiser),
        )
        .to_string();
    Some(diff)
}

/// A value as the policy would write it: modes in octal.
pub fn value_text(kind: &str, attr: &str, value: &Shown) -> String {
    let ty = schema::promise_type(kind)
        .and_then(|t| t.attr(attr))
        .map(|a| a.ty);
    match (ty, value) {
        (Some(AttrType::Mode), Shown::Int(m)) => format!("0o{m:o}"),
        (Some(AttrType::Duration), Shown::Int(s)) => format!("{s}s"),
        (Some(AttrType::Enum(_)), Shown::Text(word)) => word.to_string(),
        _ => value.display(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::plan::changes::compare;
    use crate::plan::resolved::{HostPromises, Resolved};

    fn key(path: &str) -> PromiseKey {
        PromiseKey {
            kind: "file",
            promiser: path.into(),
            occurrence: 0,
        }
    }

    fn host(promises: Vec<Resolved>) -> HostPromises {
        HostPromises {
            promises,
            unresolved: Vec::new(),
        }
    }

    #[test]
    fn a_change_set_reads_as_additions_removals_diffs_and_unknowns() {
        let motd = |content: &str, mode: i64| {
            Resolved::new(
                key("/etc/motd"),
                vec![
                    ("content", Shown::Text(content.into())),
                    ("mode", Shown::Int(mode)),
                ],
                None,
            )
        };
        let old = host(vec![
            motd("hello\nworld\n", 0o644),
            Resolved::new(key("/etc/old"), vec![], None),
        ]);
        let mut new = host(vec![
            motd("hello\nthere\n", 0o600),
            Resolved::new(
                key("/etc/db.conf"),
                vec![(
                    "content",
                    Shown::Secret {
                        label: "<secret db>".into(),
                        version: 1,
                    },
                )],
                None,
            ),
        ]);
        new.unresolved.push(Unresolved::unknown(
            "file \"/etc/dc\"".into(),
            "fact `facts.datacenter` is not given".into(),
        ));
        let text = changes(&compare(&old, &new));
        assert_eq!(
            text,
            "  ? unknown: needs fact facts.datacenter: file \"/etc/dc\" (new policy)
  + file \"/etc/db.conf\"
      content = <secret db>
  ~ file \"/etc/motd\"
      content:
        --- /etc/motd (old)
        +++ /etc/motd (new)
        @@ -1,2 +1,2 @@
         hello
        -world
        +there
      mode: 0o644 -> 0o600
  - file \"/etc/old\"
"
        );
    }

    #[test]
    fn a_changed_secret_is_named_never_shown() {
        let secret = |version| {
            Resolved::new(
                key("/etc/db.conf"),
                vec![(
                    "content",
                    Shown::Secret {
                        label: "<secret db>".into(),
                        version,
                    },
                )],
                None,
            )
        };
        let text = changes(&compare(&host(vec![secret(1)]), &host(vec![secret(2)])));
        assert_eq!(
            text,
            "  ~ file \"/etc/db.conf\"\n      content: <secret db> changed\n"
        );
        assert!(changes(&compare(&host(vec![secret(1)]), &host(vec![secret(1)]))).is_empty());
    }
}
