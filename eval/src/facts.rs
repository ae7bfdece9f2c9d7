//! Facts as the evaluator reads them: a [`FactValue`] per schema name
//! (`sys.hostname`), from a [`FactSource`]. The VM gathers its source from
//! the running host (`converge_vm::facts::Facts`); policyc builds a
//! [`FactMap`] from a test's `facts { ... }` or an inventory. The hard
//! classes (LANGUAGE.md section 3) are derived here, once, for both.

use std::collections::BTreeMap;

use converge_format::schema::{self, ARCHITECTURES, OS_FAMILIES, WEEKDAYS};

/// A fact's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FactValue {
    Str(String),
    Int(i64),
    List(Vec<String>),
}

/// Where the evaluator reads facts from.
pub trait FactSource: std::fmt::Debug {
    /// A fact by its schema name; `None` when it is not known for this host
    /// (a real host knows every fact; a test or an inventory may leave some
    /// out, and what needs them is then *unknown*, never guessed).
    fn get(&self, name: &str) -> Option<FactValue>;

    /// Whether fact `name` is known for this host, without reading it
    /// (what [`unknown_class`] asks, once per fact for a whole disjunction
    /// of classes; `crate::eval::disjunction`). Overridden where `get`
    /// copies.
    fn knows(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The hard classes these facts define ([`hard_classes`]).
    fn hard_classes(&self) -> Vec<String> {
        hard_classes(|name| self.get(name))
    }
}

/// Why `class`, which is not set, may still hold on a host with `facts`:
/// it is a hard class derived from a fact that is not known (`debian` when
/// `sys.os_family` is not given). `None`: it is known not to hold. One
/// rule for every [`FactSource`], which only says which facts it knows.
pub fn unknown_class(facts: &(impl FactSource + ?Sized), class: &str) -> Option<String> {
    let fact = hard_class_fact(class)?;
    (!facts.knows(fact)).then(|| {
        format!("class `{class}` is unknown: it is derived from fact `{fact}`, which is not given")
    })
}

/// The hard classes of a host whose facts `get` reads, sorted: `any`, the
/// kernel, the OS family, the architecture, the weekday, the hour and
/// `host_<hostname>`. A class whose fact is not known is left out (and is
/// [`unknown_class`]).
pub fn hard_classes(get: impl Fn(&str) -> Option<FactValue>) -> Vec<String> {
    let text = |name: &str| match get(name) {
        Some(FactValue::Str(s)) => Some(s),
        _ => None,
    };
    let mut classes = vec!["any".to_owned()];
    if text("sys.os").as_deref() == Some("linux") {
        classes.push("linux".to_owned());
    }
    if let Some(family) = text("sys.os_family").filter(|f| OS_FAMILIES.contains(&f.as_str())) {
        classes.push(family);
    }
    if let Some(arch) = text("sys.arch").filter(|a| ARCHITECTURES.contains(&a.as_str())) {
        classes.push(arch);
    }
    if let Some(weekday) = text("sys.time.weekday") {
        classes.push(weekday);
    }
    if let Some(FactValue::Int(hour)) = get("sys.time.hour") {
        classes.push(format!("hr{:02}", hour.clamp(0, 23)));
    }
    if let Some(hostname) = text("sys.hostname") {
        classes.push(format!("host_{}", class_name(&hostname)));
    }
    classes.sort();
    classes.dedup();
    classes
}

/// The fact a hard class is derived from, if it is one that depends on a
/// fact (`any` does not).
pub fn hard_class_fact(class: &str) -> Option<&'static str> {
    if class == "linux" {
        Some("sys.os")
    } else if OS_FAMILIES.contains(&class) {
        Some("sys.os_family")
    } else if ARCHITECTURES.contains(&class) {
        Some("sys.arch")
    } else if WEEKDAYS.contains(&class) {
        Some("sys.time.weekday")
    } else if class.starts_with("host_") {
        Some("sys.hostname")
    } else if schema::is_hard_class(class) && class.starts_with("hr") {
        Some("sys.time.hour")
    } else {
        None
    }
}

/// A hostname as a class name: characters that cannot be in an identifier
/// become `_` (`web-01.example` -> `web_01_example`).
pub fn class_name(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Facts given by name, as a test or an inventory gives them; the facts
/// not given are unknown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FactMap(pub BTreeMap<String, FactValue>);

impl FactSource for FactMap {
    fn get(&self, name: &str) -> Option<FactValue> {
        self.0.get(name).cloned()
    }

    fn knows(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }
}

/// The facts of a Debian host `web01` with two addresses, for tests.
#[cfg(test)]
pub(crate) fn web01() -> FactMap {
    let s = |v: &str| FactValue::Str(v.to_owned());
    FactMap(BTreeMap::from([
        ("sys.hostname".to_owned(), s("web01")),
        ("sys.fqdn".to_owned(), s("web01.example")),
        ("sys.os".to_owned(), s("linux")),
        ("sys.os_family".to_owned(), s("debian")),
        ("sys.os_release".to_owned(), s("12")),
        ("sys.arch".to_owned(), s("x86_64")),
        (
            "sys.ipv4".to_owned(),
            FactValue::List(vec!["10.0.0.1".into(), "10.0.0.2".into()]),
        ),
        ("sys.cpus".to_owned(), FactValue::Int(4)),
        ("sys.memory_mb".to_owned(), FactValue::Int(2048)),
        ("sys.time.weekday".to_owned(), s("monday")),
        ("sys.time.hour".to_owned(), FactValue::Int(3)),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, FactValue)]) -> FactMap {
        FactMap(
            entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn hard_classes_come_from_the_facts_given() {
        let facts = map(&[
            ("sys.os", FactValue::Str("linux".into())),
            ("sys.os_family", FactValue::Str("debian".into())),
            ("sys.arch", FactValue::Str("x86_64".into())),
            ("sys.time.weekday", FactValue::Str("monday".into())),
            ("sys.time.hour", FactValue::Int(3)),
            ("sys.hostname", FactValue::Str("web-01".into())),
        ]);
        assert_eq!(
            facts.hard_classes(),
            [
                "any",
                "debian",
                "host_web_01",
                "hr03",
                "linux",
                "monday",
                "x86_64"
            ]
        );
        assert_eq!(unknown_class(&facts, "redhat"), None, "known not to hold");
        assert_eq!(unknown_class(&facts, "host_db"), None);
    }

    #[test]
    fn a_class_from_a_fact_not_given_is_unknown_not_false() {
        let facts = map(&[("sys.hostname", FactValue::Str("db".into()))]);
        assert_eq!(facts.hard_classes(), ["any", "host_db"]);
        for (class, fact) in [
            ("linux", "sys.os"),
            ("redhat", "sys.os_family"),
            ("aarch64", "sys.arch"),
            ("friday", "sys.time.weekday"),
            ("hr23", "sys.time.hour"),
        ] {
            let why = unknown_class(&facts, class).unwrap_or_default();
            assert!(why.contains(fact), "{class}: {why}");
        }
        assert_eq!(unknown_class(&facts, "any"), None);
        assert_eq!(
            unknown_class(&facts, "webservers"),
            None,
            "not a hard class"
        );
        assert_eq!(unknown_class(&facts, "hr24"), None, "not a hard class");
    }

    #[test]
    fn class_names_replace_what_an_identifier_cannot_hold() {
        assert_eq!(class_name("web-01.example"), "web_01_example");
    }
}
