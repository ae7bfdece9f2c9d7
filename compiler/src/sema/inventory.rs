//! What the inventory means to a program (LANGUAGE.md section 16).
//!
//! With an inventory (`workspace::inventory` loads it):
//! - every `host_NAME` class the policy names must be the class of an
//!   inventory host (E0807, with "did you mean"). The VM sets
//!   `host_<hostname>` from the host's own hostname, so an inventory name
//!   must be the host's hostname for its class to hold there;
//! - every group a host lists defines `group_NAME`, true on the group's
//!   members: the compiler adds it to the program as the class
//!   `host_a || host_b || ...`, so the VM evaluates it like any class and
//!   the analyses see who is in which group. A `group_NAME` no host lists
//!   is an error (E0808);
//! - a policy class may not take the name of one the inventory defines.
//!
//! Without an inventory nothing changes: `host_` classes are free hard
//! classes, and `group_` names are ordinary (undefined unless declared).

use std::collections::BTreeMap;

use converge_format::inventory::{group_class, host_class, Inventory};
use converge_grammar::{FileId, Span};

use super::check::Checker;
use super::names::{DefKind, Names};
use crate::diagnostic::{Code, Diagnostic};
use crate::ir;
use crate::suggest::did_you_mean;

/// The prefix of the class a host defines on itself.
pub const HOST_PREFIX: &str = "host_";
/// The prefix of the class a group defines on its members.
pub const GROUP_PREFIX: &str = "group_";

/// The classes an inventory defines, each with where it is defined.
#[derive(Debug)]
pub struct InventoryClasses {
    /// The inventory's file, and its name for messages.
    pub file: FileId,
    name: String,
    /// `host_NAME` by class: the span of the host's `name`.
    hosts: BTreeMap<String, Span>,
    /// `group_NAME` by class: the span of its first mention in a host's
    /// `groups`, and the classes of its members, in inventory order.
    groups: BTreeMap<String, (Span, Vec<String>)>,
    /// Each host's report keys (current, then previous) as written in the
    /// inventory, by host name; revoked hosts have none. What `neighbours`
    /// promises carry (`super::neighbours`).
    pub(crate) report_keys: BTreeMap<String, Vec<String>>,
}

impl InventoryClasses {
    pub fn new(file: FileId, name: &str, inventory: &Inventory) -> Self {
        let span = |range: std::ops::Range<usize>| {
            let at = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            Span::new(file, at(range.start), at(range.end))
        };
        let mut hosts = BTreeMap::new();
        let mut groups: BTreeMap<String, (Span, Vec<String>)> = BTreeMap::new();
        let mut report_keys = BTreeMap::new();
        for host in &inventory.hosts {
            let keys = if host.revoked {
                Vec::new()
            } else {
                std::iter::once(&host.report_key)
                    .chain(&host.previous_report_keys)
                    .map(|k| k.get_ref().clone())
                    .collect()
            };
            report_keys.insert(host.name.get_ref().clone(), keys);
            let class = host_class(host.name.get_ref());
            hosts
                .entry(class.clone())
                .or_insert_with(|| span(host.name.span()));
            for group in &host.groups {
                let entry = groups
                    .entry(group_class(group.get_ref()))
                    .or_insert_with(|| (span(group.span()), Vec::new()));
                if !entry.1.contains(&class) {
                    entry.1.push(class.clone());
                }
            }
        }
        InventoryClasses {
            file,
            name: name.to_owned(),
            hosts,
            groups,
            report_keys,
        }
    }

    /// Every class the inventory defines, with the span of its definition.
    pub fn classes(&self) -> impl Iterator<Item = (&str, Span)> + '_ {
        let hosts = self.hosts.iter().map(|(c, s)| (c.as_str(), *s));
        let groups = self.groups.iter().map(|(c, (s, _))| (c.as_str(), *s));
        hosts.chain(groups)
    }

    /// The members of a group class (their `host_` classes).
    pub fn members(&self, group: &str) -> Option<&[String]> {
        self.groups.get(group).map(|(_, m)| m.as_slice())
    }

    /// The error for `name`, a `host_` or `group_` class the inventory
    /// does not define; `None` for a known class or another name.
    pub fn unknown(&self, name: &str, span: Span) -> Option<Diagnostic> {
        let (code, what, known) = if name.starts_with(HOST_PREFIX) {
            (Code::UnknownHost, "host", &self.hosts)
        } else if name.starts_with(GROUP_PREFIX) {
            let known = self.groups.keys().map(String::as_str);
            let d = self.unknown_group(name, span, known);
            return (!self.groups.contains_key(name)).then_some(d);
        } else {
            return None;
        };
        if known.contains_key(name) {
            return None;
        }
        let bare = name.strip_prefix(HOST_PREFIX).unwrap_or(name);
        let mut d = Diagnostic::new(
            code,
            format!("`{name}`: no {what} of the inventory is named `{bare}`"),
            span,
            format!("not a {what} of the inventory"),
        )
        .with_note(self.note());
        d = match closest(name, HOST_PREFIX, known.keys().map(String::as_str)) {
            Some(s) => d.with_help(format!("did you mean `{s}`?")),
            None => d.with_help(
                "add the host to the inventory (`policyvm enroll` on the host prints its entry), or correct the name: `host_` and the hostname, with characters other than letters, digits and `_` written `_`",
            ),
        };
        Some(d)
    }

    fn unknown_group<'k>(
        &self,
        name: &str,
        span: Span,
        known: impl Iterator<Item = &'k str>,
    ) -> Diagnostic {
        let bare = name.strip_prefix(GROUP_PREFIX).unwrap_or(name);
        let d = Diagnostic::new(
            Code::UnknownGroup,
            format!("`{name}`: no host of the inventory is in group `{bare}`"),
            span,
            "not a group of the inventory",
        )
        .with_note(self.note());
        match closest(name, GROUP_PREFIX, known) {
            Some(s) => d.with_help(format!("did you mean `{s}`?")),
            None => d.with_help(format!(
                "list `{bare}` in the `groups` of its hosts in the inventory, or correct the name"
            )),
        }
    }

    fn note(&self) -> String {
        format!(
            "with an inventory (`{}`), `{HOST_PREFIX}` and `{GROUP_PREFIX}` classes name its hosts and groups",
            self.name
        )
    }

    /// The group classes as class definitions of the program: each is the
    /// disjunction of its members' `host_` classes.
    pub fn class_decls(&self) -> Vec<ir::ClassDecl> {
        self.groups
            .iter()
            .map(|(name, (span, members))| {
                let mut parts: Vec<ir::Guard> = members
                    .iter()
                    .map(|m| ir::Guard::Class(m.clone()))
                    .collect();
                let expr = if parts.len() == 1 {
                    parts.pop().unwrap_or(ir::Guard::Const(false))
                } else {
                    ir::Guard::Or(parts)
                };
                ir::ClassDecl {
                    name: name.clone(),
                    expr: Some(expr),
                    span: *span,
                }
            })
            .collect()
    }
}

/// The known class closest to `name`, comparing the names without their
/// common `prefix`: `host_mail_01` is not a typo of `host_db_01`.
fn closest<'k>(name: &str, prefix: &str, known: impl Iterator<Item = &'k str>) -> Option<String> {
    let bare = |n: &'k str| n.strip_prefix(prefix).unwrap_or(n);
    let known: Vec<&str> = known.map(bare).collect();
    did_you_mean(name.strip_prefix(prefix).unwrap_or(name), known).map(|s| format!("{prefix}{s}"))
}

impl InventoryClasses {
    /// The `host_` classes the program names (in guards, or as members of
    /// a group), as an `exclusive` group: a host has one hostname, so at
    /// most one of them holds. The analyses then know that `group_web` and
    /// `host_db_01` never hold together when db-01 is not in group `web`,
    /// and do not report their promises on one file as a contradiction.
    /// Only the named hosts: the bundle carries the group, and it need not
    /// list the whole fleet.
    pub fn exclusive_hosts(&self, names: &Names) -> Vec<String> {
        let mut hosts: std::collections::BTreeSet<&str> = self
            .groups
            .values()
            .flat_map(|(_, members)| members.iter().map(String::as_str))
            .collect();
        for o in names.occurrences() {
            if o.span.file == self.file {
                continue;
            }
            if let Some(def) = names.definition(o.def) {
                if def.kind == DefKind::InventoryClass && def.name.starts_with(HOST_PREFIX) {
                    if let Some((class, _)) = self.hosts.get_key_value(def.name.as_str()) {
                        hosts.insert(class);
                    }
                }
            }
        }
        hosts.into_iter().map(str::to_owned).collect()
    }
}

impl Checker<'_> {
    /// Resolves `name`, a class the policy does not define, against the
    /// inventory: recorded when the inventory defines it, reported when it
    /// is a `host_` or `group_` class the inventory lacks. `false` when
    /// the inventory has nothing to say (there is none, or the name has
    /// neither prefix): the caller goes on with hard classes.
    pub(crate) fn inventory_class(&mut self, name: &str, span: Span) -> bool {
        let symbols = self.symbols;
        let Some(inventory) = &symbols.inventory else {
            return false;
        };
        if let Some(id) = self.names.find(DefKind::InventoryClass, name) {
            self.names.record(span, id);
            return true;
        }
        match inventory.unknown(name, span) {
            Some(d) => {
                self.push(d);
                true
            }
            None => false,
        }
    }

    /// A policy class named like one the inventory defines would silently
    /// replace it (or be replaced): an error at both.
    pub(crate) fn check_inventory_clashes(&mut self) {
        let symbols = self.symbols;
        let Some(inventory) = &symbols.inventory else {
            return;
        };
        let mut found = Vec::new();
        for (class, span) in inventory.classes() {
            if let Some(def) = self.symbols.classes.get(class) {
                found.push(
                    Diagnostic::new(
                        Code::DuplicateDefinition,
                        format!("class `{class}` is defined by the inventory"),
                        def.name.span,
                        "defined again here",
                    )
                    .with_secondary(span, "defined by the inventory here")
                    .with_help(format!(
                        "rename the policy's class; `{HOST_PREFIX}` and `{GROUP_PREFIX}` classes are the inventory's hosts and groups"
                    )),
                );
            }
        }
        for d in found {
            self.push(d);
        }
    }

    /// The classes the inventory defines, for "did you mean" over every
    /// class name.
    pub(crate) fn inventory_class_names(&self) -> Vec<&str> {
        self.symbols
            .inventory
            .as_ref()
            .map(|i| i.classes().map(|(c, _)| c).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use converge_format::inventory::format_report_key;

    fn key(seed: u8) -> String {
        format_report_key(&ed25519_dalek::SigningKey::from_bytes(&[seed; 32]).verifying_key())
    }

    fn classes() -> InventoryClasses {
        let text = format!(
            "[[host]]\nname = \"web-01\"\nreport_key = \"{}\"\ngroups = [\"web\", \"eu\"]\n\
             [[host]]\nname = \"web-02\"\nreport_key = \"{}\"\ngroups = [\"web\"]\n\
             [[host]]\nname = \"db-01\"\nreport_key = \"{}\"\ngroups = [\"eu\", \"eu\"]\n",
            key(1),
            key(2),
            key(3)
        );
        InventoryClasses::new(
            FileId(7),
            "inventory.toml",
            &Inventory::parse(&text).unwrap(),
        )
    }

    #[test]
    fn groups_are_the_disjunction_of_their_members() {
        let decls = classes().class_decls();
        let shown: Vec<(String, String)> = decls
            .iter()
            .map(|d| (d.name.clone(), format!("{:?}", d.expr.as_ref().unwrap())))
            .collect();
        assert_eq!(
            shown,
            vec![
                (
                    "group_eu".to_owned(),
                    "Or([Class(\"host_web_01\"), Class(\"host_db_01\")])".to_owned()
                ),
                (
                    "group_web".to_owned(),
                    "Or([Class(\"host_web_01\"), Class(\"host_web_02\")])".to_owned()
                ),
            ]
        );
        assert!(decls.iter().all(|d| d.span.file == FileId(7)));
    }

    #[test]
    fn a_typo_gets_the_closest_inventory_class() {
        let c = classes();
        let at = Span::new(FileId(0), 0, 1);
        assert!(c.unknown("host_web_01", at).is_none());
        assert!(c.unknown("group_eu", at).is_none());
        assert!(c.unknown("debian", at).is_none(), "not the inventory's");
        let d = c.unknown("host_web_1", at).unwrap();
        assert_eq!(d.code, Code::UnknownHost);
        assert_eq!(d.help.as_deref(), Some("did you mean `host_web_01`?"));
        let d = c.unknown("group_wbe", at).unwrap();
        assert_eq!(d.code, Code::UnknownGroup);
        assert_eq!(d.help.as_deref(), Some("did you mean `group_web`?"));
        let d = c.unknown("host_mail_01", at).unwrap();
        assert!(
            d.help.unwrap().contains("policyvm enroll"),
            "not `host_db_01`"
        );
    }
}
