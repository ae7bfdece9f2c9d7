//! `policyc explain --facts NAME=VALUE`: what one host can get. The given
//! facts are substituted into each promise's guard and the guard is
//! evaluated as far as they decide it; classes and the facts not given stay
//! open, so a promise is left out only when its guard is false for every
//! host with these facts.

use converge_format::bundle::probe::{Probe, ProbeType};
use converge_format::schema::{self, AttrType};

use crate::diagnostic::with_article;
use crate::ir::{CompareOp, Guard, Value};

/// Fact values given on the command line.
#[derive(Debug, Default)]
pub struct HostFacts {
    /// By full name: `sys.hostname`, `facts.datacenter`.
    values: Vec<(String, Value)>,
}

impl HostFacts {
    /// Parses `hostname=web01` (or `sys.hostname=web01`) arguments, and
    /// `facts.NAME=VALUE` for the program's string, int and bool `probes`;
    /// an unknown fact, a fact with more than one value, or a value of the
    /// wrong type is an error that says what to write.
    pub fn parse(args: &[String], probes: &[Probe]) -> Result<HostFacts, String> {
        let mut values: Vec<(String, Value)> = Vec::new();
        for arg in args {
            let Some((name, value)) = arg.split_once('=') else {
                return Err(format!(
                    "`--facts {arg}`: write NAME=VALUE, for example `--facts hostname=web01`"
                ));
            };
            if let Some(probe) = name.strip_prefix("facts.") {
                let value = probe_value(arg, probe, value, probes)?;
                if values.iter().any(|(n, _)| n == name) {
                    return Err(format!("`--facts`: `{name}` is given twice"));
                }
                values.push((name.to_owned(), value));
                continue;
            }
            let full = if name.starts_with("sys.") {
                name.to_owned()
            } else {
                format!("sys.{name}")
            };
            let Some(spec) = schema::fact(&full) else {
                let names = schema::FACTS.iter().map(|f| f.name);
                let hint = crate::suggest::did_you_mean(&full, names)
                    .map(|s| format!("; did you mean `{}`?", s.trim_start_matches("sys.")))
                    .unwrap_or_default();
                return Err(format!("`--facts {arg}`: there is no fact `{full}`{hint}"));
            };
            let value = match spec.ty {
                AttrType::String => Value::Str(value.to_owned()),
                AttrType::Int => Value::Int(value.parse().map_err(|_| {
                    format!("`--facts {arg}`: `{full}` is a number, `{value}` is not")
                })?),
                _ => {
                    return Err(format!(
                        "`--facts {arg}`: `{full}` is {}; --facts takes facts with one string or number value",
                        with_article(&spec.ty.describe())
                    ))
                }
            };
            if values.iter().any(|(n, _)| n == spec.name) {
                return Err(format!("`--facts`: `{full}` is given twice"));
            }
            values.push((spec.name.to_owned(), value));
        }
        Ok(HostFacts { values })
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `sys.hostname = "web01", sys.os_family = "debian"`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .values
            .iter()
            .map(|(name, value)| format!("{name} = {}", value.display()))
            .collect();
        parts.join(", ")
    }

    /// Whether `guard` holds on a host with these facts: `Some` when the
    /// given facts decide it, `None` when it depends on classes or on facts
    /// not given.
    pub fn holds(&self, guard: &Guard) -> Option<bool> {
        match guard {
            Guard::Const(b) => Some(*b),
            Guard::Class(_) => None,
            Guard::Not(inner) => self.holds(inner).map(|b| !b),
            Guard::And(items) => {
                let mut open = false;
                for item in items {
                    match self.holds(item) {
                        Some(false) => return Some(false),
                        None => open = true,
                        Some(true) => {}
                    }
                }
                (!open).then_some(true)
            }
            Guard::Or(items) => {
                let mut open = false;
                for item in items {
                    match self.holds(item) {
                        Some(true) => return Some(true),
                        None => open = true,
                        Some(false) => {}
                    }
                }
                (!open).then_some(false)
            }
            Guard::Compare { op, lhs, rhs } => {
                let (lhs, rhs) = (self.known(lhs)?, self.known(rhs)?);
                compare(*op, &lhs, &rhs)
            }
        }
    }

    /// The value of a guard operand on this host, when known.
    fn known(&self, v: &Value) -> Option<Value> {
        match v {
            Value::Fact(name) | Value::Probe { name, .. } => self
                .values
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, value)| value.clone()),
            Value::Str(_) | Value::Int(_) | Value::Bool(_) | Value::Word(_) => Some(v.clone()),
            Value::List(items) => items
                .iter()
                .map(|i| self.known(i))
                .collect::<Option<Vec<Value>>>()
                .map(Value::List),
            _ => None,
        }
    }
}

/// The value given for probe fact `facts.NAME` (a string, int or bool
/// probe of the program).
fn probe_value(arg: &str, name: &str, value: &str, probes: &[Probe]) -> Result<Value, String> {
    let Some(probe) = probes.iter().find(|p| p.name == name) else {
        let hint = crate::suggest::did_you_mean(name, probes.iter().map(|p| p.name.as_str()))
            .map(|s| format!("; did you mean `facts.{s}`?"))
            .unwrap_or_default();
        return Err(format!(
            "`--facts {arg}`: the program declares no fact `{name}`{hint}"
        ));
    };
    match ProbeType::parse(&probe.ty) {
        Ok(ProbeType::Str) => Ok(Value::Str(value.to_owned())),
        Ok(ProbeType::Int) => value
            .parse()
            .map(Value::Int)
            .map_err(|_| format!("`--facts {arg}`: `facts.{name}` is a number, `{value}` is not")),
        Ok(ProbeType::Bool) => match value {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(format!(
                "`--facts {arg}`: `facts.{name}` is `true` or `false`"
            )),
        },
        _ => Err(format!(
            "`--facts {arg}`: `facts.{name}` is {}; --facts takes facts with one string, number or truth value",
            with_article(&probe.ty.to_string())
        )),
    }
}

/// `lhs op rhs` on known values, as the VM evaluates it (`=~` unanchored).
fn compare(op: CompareOp, lhs: &Value, rhs: &Value) -> Option<bool> {
    match op {
        CompareOp::Eq => Some(lhs == rhs),
        CompareOp::NotEq => Some(lhs != rhs),
        CompareOp::In => match rhs {
            Value::List(items) => Some(items.contains(lhs)),
            _ => None,
        },
        CompareOp::Match => match (lhs, rhs) {
            (Value::Str(text), Value::Str(pattern)) => {
                regex::Regex::new(pattern).ok().map(|re| re.is_match(text))
            }
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn facts(args: &[&str]) -> HostFacts {
        HostFacts::parse(
            &args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>(),
            &[],
        )
        .unwrap()
    }

    fn eq(fact: &str, value: &str) -> Guard {
        Guard::Compare {
            op: CompareOp::Eq,
            lhs: Value::Fact(fact.into()),
            rhs: Value::Str(value.into()),
        }
    }

    fn member(fact: &str, keys: &[&str]) -> Guard {
        Guard::Compare {
            op: CompareOp::In,
            lhs: Value::Fact(fact.into()),
            rhs: Value::List(keys.iter().map(|k| Value::Str((*k).into())).collect()),
        }
    }

    #[test]
    fn given_facts_decide_guards_and_the_rest_stays_open() {
        let host = facts(&["hostname=web01", "sys.cpus=4"]);
        assert_eq!(host.holds(&eq("sys.hostname", "web01")), Some(true));
        assert_eq!(host.holds(&eq("sys.hostname", "web02")), Some(false));
        assert_eq!(
            host.holds(&member("sys.hostname", &["a", "web01"])),
            Some(true)
        );
        let others = Guard::Not(Box::new(member("sys.hostname", &["web01", "web02"])));
        assert_eq!(host.holds(&others), Some(false));
        // A class, or a fact not given, leaves it open ...
        assert_eq!(host.holds(&Guard::Class("web".into())), None);
        assert_eq!(host.holds(&eq("sys.os_family", "debian")), None);
        // ... unless the given facts decide it anyway.
        let both = Guard::And(vec![Guard::Class("web".into()), eq("sys.hostname", "x")]);
        assert_eq!(host.holds(&both), Some(false));
        let either = Guard::Or(vec![
            Guard::Class("web".into()),
            eq("sys.hostname", "web01"),
        ]);
        assert_eq!(host.holds(&either), Some(true));
        let regex = Guard::Compare {
            op: CompareOp::Match,
            lhs: Value::Fact("sys.hostname".into()),
            rhs: Value::Str("^web".into()),
        };
        assert_eq!(host.holds(&regex), Some(true));
        let cpus = Guard::Compare {
            op: CompareOp::Eq,
            lhs: Value::Fact("sys.cpus".into()),
            rhs: Value::Int(4),
        };
        assert_eq!(host.holds(&cpus), Some(true));
        assert_eq!(host.describe(), "sys.hostname = \"web01\", sys.cpus = 4");
    }

    #[test]
    fn bad_facts_say_what_to_write() {
        let err = |args: &[&str]| {
            HostFacts::parse(
                &args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>(),
                &[],
            )
            .unwrap_err()
        };
        assert!(err(&["hostname"]).contains("NAME=VALUE"));
        assert!(err(&["hostnme=x"]).contains("did you mean `hostname`"));
        assert!(err(&["cpus=four"]).contains("is a number"));
        assert!(err(&["hostname=a", "hostname=b"]).contains("twice"));
    }

    /// `facts.NAME=VALUE` for the program's scalar probe facts decides
    /// guards on them like a `sys` fact.
    #[test]
    fn probe_facts_are_given_by_their_declared_type() {
        use converge_format::bundle::probe::ProbeSource;
        let probe = |name: &str, ty: &str| Probe {
            name: name.into(),
            ty: ty.into(),
            source: ProbeSource::File("/x".into()),
            timeout_secs: 10,
        };
        let probes = [
            probe("dc", "string"),
            probe("rack", "int"),
            probe("vm", "bool"),
            probe("hw", "{cpus:int}"),
        ];
        let parse = |args: &[&str]| {
            HostFacts::parse(
                &args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>(),
                &probes,
            )
        };
        let host = parse(&["facts.dc=eu-1", "facts.rack=3", "facts.vm=true"]).unwrap();
        let read = |name: &str, ty| Value::Probe {
            name: name.into(),
            ty,
        };
        use converge_format::bundle::verify::Ty;
        let dc = Guard::Compare {
            op: CompareOp::Eq,
            lhs: read("facts.dc", Ty::Str),
            rhs: Value::Str("eu-1".into()),
        };
        assert_eq!(host.holds(&dc), Some(true));
        let rack = Guard::Compare {
            op: CompareOp::Eq,
            lhs: read("facts.rack", Ty::Int),
            rhs: Value::Int(4),
        };
        assert_eq!(host.holds(&rack), Some(false));
        assert_eq!(
            host.describe(),
            "facts.dc = \"eu-1\", facts.rack = 3, facts.vm = true"
        );
        assert!(parse(&["facts.dcc=x"])
            .unwrap_err()
            .contains("did you mean `facts.dc`"));
        assert!(parse(&["facts.rack=x"])
            .unwrap_err()
            .contains("is a number"));
        assert!(parse(&["facts.vm=yes"])
            .unwrap_err()
            .contains("`true` or `false`"));
        assert!(parse(&["facts.hw={}"])
            .unwrap_err()
            .contains("is a {cpus:int}"));
        assert!(parse(&["facts.dc=a", "facts.dc=b"])
            .unwrap_err()
            .contains("twice"));
    }
}
