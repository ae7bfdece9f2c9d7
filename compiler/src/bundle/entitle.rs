//! Which inventory hosts are entitled to a secret (LANGUAGE.md section 14):
//! those that can activate at least one promise using it.
//!
//! A promise's guard is evaluated for each host in three values: what the
//! inventory says of the host is known (its `host_` class, its `group_`
//! classes, `sys.hostname`, its static `facts`), everything else (probe
//! facts and `sys` facts it does not list, other classes, outcome classes)
//! may be either. A host is entitled unless the guard is known false for
//! it, so a secret never misses a host that needs it; a host whose
//! inventory entry rules the promise out never receives it. Revoked hosts
//! are never entitled.
//!
//! Inventory facts are named as in a guard: a key with a dot as written
//! (`sys.os_family`, `facts.datacenter`), a bare key as the `sys` fact of
//! that name if there is one (`os_family`), else as a probe fact
//! (`datacenter` is `facts.datacenter`).

use std::collections::{HashMap, HashSet};

use converge_format::inventory::{group_class, host_class, FactValue, Host, Inventory};
use regex::Regex;

use crate::ir::{ClassDecl, CompareOp, Guard, Value};
use crate::workspace::inventory_fact_name;

/// Kleene's three truth values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Truth {
    True,
    False,
    Unknown,
}

impl Truth {
    fn not(self) -> Truth {
        match self {
            Truth::True => Truth::False,
            Truth::False => Truth::True,
            Truth::Unknown => Truth::Unknown,
        }
    }

    fn of(b: bool) -> Truth {
        if b {
            Truth::True
        } else {
            Truth::False
        }
    }
}

/// What the inventory tells of one host.
#[derive(Debug)]
pub struct HostView {
    /// Its inventory name.
    pub name: String,
    /// Its `host_` class.
    class: String,
    /// Its `group_` classes.
    groups: HashSet<String>,
    /// Its static facts, by the name a guard reads them with.
    facts: HashMap<String, String>,
    pub revoked: bool,
    /// Its `age_recipient`, as written.
    pub recipient: Option<String>,
}

impl HostView {
    pub fn new(host: &Host) -> Self {
        let name = host.name.get_ref().clone();
        let mut facts: HashMap<String, String> = host
            .facts
            .iter()
            .map(|(k, v)| (inventory_fact_name(k), fact_text(v.get_ref())))
            .collect();
        facts
            .entry("sys.hostname".to_owned())
            .or_insert_with(|| name.clone());
        HostView {
            class: host_class(&name),
            groups: host
                .groups
                .iter()
                .map(|g| group_class(g.get_ref()))
                .collect(),
            facts,
            revoked: host.revoked,
            recipient: host.age_recipient.as_ref().map(|r| r.get_ref().clone()),
            name,
        }
    }
}

fn fact_text(v: &FactValue) -> String {
    match v {
        FactValue::Bool(b) => b.to_string(),
        FactValue::Int(i) => i.to_string(),
        FactValue::Str(s) => s.clone(),
    }
}

/// Evaluates guards for the hosts of an inventory.
#[derive(Debug)]
pub struct Entitlement<'p> {
    pub hosts: Vec<HostView>,
    /// The program's class definitions, by name (group classes among them,
    /// but those are answered from the inventory directly).
    classes: HashMap<&'p str, &'p ClassDecl>,
    /// Every `host_` class of the inventory.
    host_classes: HashSet<String>,
    /// Every `group_` class of the inventory.
    group_classes: HashSet<String>,
    regexes: HashMap<String, Option<Regex>>,
}

/// How deep class definitions are followed (they cannot form cycles: the
/// checker refuses those; this only bounds the work).
const MAX_CLASS_DEPTH: usize = 64;

impl<'p> Entitlement<'p> {
    pub fn new(inventory: &Inventory, classes: &'p [ClassDecl]) -> Self {
        let hosts: Vec<HostView> = inventory.hosts.iter().map(HostView::new).collect();
        Entitlement {
            host_classes: hosts.iter().map(|h| h.class.clone()).collect(),
            group_classes: hosts
                .iter()
                .flat_map(|h| h.groups.iter().cloned())
                .collect(),
            hosts,
            classes: classes.iter().map(|c| (c.name.as_str(), c)).collect(),
            regexes: HashMap::new(),
        }
    }

    /// The hosts (indices into [`Self::hosts`]) that can make `guard`
    /// true, revoked hosts excluded.
    pub fn entitled(&mut self, guard: &Guard) -> Vec<usize> {
        (0..self.hosts.len())
            .filter(|&h| {
                self.hosts.get(h).is_some_and(|host| !host.revoked)
                    && self.eval(guard, h, 0) != Truth::False
            })
            .collect()
    }

    /// The truth of `guard` on host `h`.
    pub fn eval(&mut self, guard: &Guard, h: usize, depth: usize) -> Truth {
        match guard {
            Guard::Const(b) => Truth::of(*b),
            Guard::Class(name) => self.class(name, h, depth),
            Guard::Not(inner) => self.eval(inner, h, depth).not(),
            Guard::And(items) => {
                let mut out = Truth::True;
                for g in items {
                    match self.eval(g, h, depth) {
                        Truth::False => return Truth::False,
                        Truth::Unknown => out = Truth::Unknown,
                        Truth::True => {}
                    }
                }
                out
            }
            Guard::Or(items) => {
                let mut out = Truth::False;
                for g in items {
                    match self.eval(g, h, depth) {
                        Truth::True => return Truth::True,
                        Truth::Unknown => out = Truth::Unknown,
                        Truth::False => {}
                    }
                }
                out
            }
            Guard::Compare { op, lhs, rhs } => self.compare(*op, lhs, rhs, h),
        }
    }

    fn class(&mut self, name: &str, h: usize, depth: usize) -> Truth {
        let Some(host) = self.hosts.get(h) else {
            return Truth::Unknown;
        };
        if self.host_classes.contains(name) {
            return Truth::of(host.class == name);
        }
        if self.group_classes.contains(name) {
            return Truth::of(host.groups.contains(name));
        }
        if depth >= MAX_CLASS_DEPTH {
            return Truth::Unknown;
        }
        match self.classes.get(name).and_then(|c| c.expr.as_ref()) {
            Some(expr) => self.eval(expr, h, depth + 1),
            // A hard class, an outcome or `--define` class: the host
            // decides.
            None => Truth::Unknown,
        }
    }

    /// The text of `v` on host `h`, when the inventory or the policy
    /// tells it.
    fn known<'v>(&'v self, v: &'v Value, h: usize) -> Option<&'v str> {
        match v {
            Value::Str(s) | Value::Word(s) => Some(s),
            _ => {
                let fact = v.host_fact()?;
                self.hosts.get(h)?.facts.get(fact).map(String::as_str)
            }
        }
    }

    fn compare(&mut self, op: CompareOp, lhs: &Value, rhs: &Value, h: usize) -> Truth {
        let Some(left) = self.known(lhs, h).map(str::to_owned) else {
            return Truth::Unknown;
        };
        match op {
            CompareOp::Eq | CompareOp::NotEq => {
                let Some(right) = self.known(rhs, h) else {
                    return Truth::Unknown;
                };
                let equal = Truth::of(left == right);
                if op == CompareOp::Eq {
                    equal
                } else {
                    equal.not()
                }
            }
            CompareOp::In => match rhs {
                Value::List(items) => {
                    let mut out = Truth::False;
                    for item in items {
                        match self.known(item, h) {
                            Some(t) if t == left => return Truth::True,
                            Some(_) => {}
                            None => out = Truth::Unknown,
                        }
                    }
                    out
                }
                _ => Truth::Unknown,
            },
            CompareOp::Match => {
                let Some(pattern) = rhs.as_str() else {
                    return Truth::Unknown;
                };
                let re = self
                    .regexes
                    .entry(pattern.to_owned())
                    .or_insert_with(|| Regex::new(pattern).ok());
                match re {
                    Some(re) => Truth::of(re.is_match(&left)),
                    None => Truth::Unknown,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const KEY: &str = "ed25519:iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w=";

    fn inventory() -> Inventory {
        let text = format!(
            "[[host]]\nname = \"web-01\"\nreport_key = \"{KEY}\"\ngroups = [\"web\"]\nfacts = {{ datacenter = \"eu-1\", os_family = \"debian\" }}\n\
             [[host]]\nname = \"db-01\"\nreport_key = \"{KEY}\"\ngroups = [\"db\"]\nfacts = {{ datacenter = \"us-1\" }}\n\
             [[host]]\nname = \"old-01\"\nreport_key = \"{KEY}\"\ngroups = [\"db\"]\nrevoked = true\n"
        );
        Inventory::parse(&text).unwrap()
    }

    fn names(e: &mut Entitlement<'_>, g: &Guard) -> Vec<String> {
        e.entitled(g)
            .into_iter()
            .map(|h| e.hosts[h].name.clone())
            .collect()
    }

    fn class(c: &str) -> Guard {
        Guard::Class(c.to_owned())
    }

    fn eq(fact: Value, text: &str) -> Guard {
        Guard::Compare {
            op: CompareOp::Eq,
            lhs: fact,
            rhs: Value::Str(text.to_owned()),
        }
    }

    #[test]
    fn host_and_group_classes_are_known_and_revoked_hosts_get_nothing() {
        let inv = inventory();
        let mut e = Entitlement::new(&inv, &[]);
        assert_eq!(names(&mut e, &class("group_db")), ["db-01"]);
        assert_eq!(names(&mut e, &class("host_web_01")), ["web-01"]);
        assert_eq!(names(&mut e, &Guard::Const(true)), ["web-01", "db-01"]);
        assert_eq!(
            names(&mut e, &Guard::Not(Box::new(class("group_web")))),
            ["db-01"]
        );
    }

    #[test]
    fn unknown_facts_and_classes_are_assumed_possible() {
        let inv = inventory();
        let mut e = Entitlement::new(&inv, &[]);
        // A hard class the inventory does not decide: every host may have it.
        assert_eq!(names(&mut e, &class("debian")), ["web-01", "db-01"]);
        // Known false on db-01 (its datacenter is listed), known true on web-01.
        let dc = eq(
            Value::Probe {
                name: "facts.datacenter".into(),
                ty: converge_format::bundle::verify::Ty::Str,
            },
            "eu-1",
        );
        assert_eq!(names(&mut e, &dc), ["web-01"]);
        // os_family is listed for web-01 only: db-01 may be debian.
        let os = eq(Value::Fact("sys.os_family".into()), "redhat");
        assert_eq!(names(&mut e, &os), ["db-01"]);
        // false && unknown is false; true || unknown is true.
        let g = Guard::And(vec![class("group_web"), class("debian")]);
        assert_eq!(names(&mut e, &g), ["web-01"]);
        let hostname = eq(Value::Fact("sys.hostname".into()), "db-01");
        assert_eq!(names(&mut e, &hostname), ["db-01"]);
    }

    #[test]
    fn policy_classes_are_followed_to_their_definition() {
        let inv = inventory();
        let decls = vec![ClassDecl {
            name: "frontend".into(),
            expr: Some(class("group_web")),
            span: converge_grammar::Span::default(),
        }];
        let mut e = Entitlement::new(&inv, &decls);
        assert_eq!(names(&mut e, &class("frontend")), ["web-01"]);
    }
}
