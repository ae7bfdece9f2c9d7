//! What `policyc plan` knows of each host before it runs: its inventory
//! entry's name and static facts, overridden by what the host itself
//! reported: a directory of `policyvm facts --format json` files
//! (`--facts-from DIR`) or the collector's fleet view of facts
//! (`--facts-from https://COLLECTOR`).
//!
//! Nothing is guessed: a fact no source gives is absent, and a promise
//! that needs it is planned as "unknown: needs fact X" for that host
//! (`super::resolve`). A fact given as `null` (a file's way to say the
//! host could not tell) or a probe that failed on the host is absent too,
//! with that reason.

use std::collections::BTreeMap;
use std::path::Path;

use converge_format::inventory::{FactValue as InventoryValue, Host, Inventory};
use converge_format::schema::{self, AttrType};
use serde_json::Value as Json;

use crate::fleet::views::FactsList;
use crate::workspace::inventory_fact_name;

/// The format line of a `policyvm facts --format json` document.
pub const FACTS_FORMAT: &str = "converge-facts/1";

/// The most bytes of one facts file read (a host's facts are a few KiB).
pub const MAX_FACTS_FILE: u64 = 1 << 20;

/// A `sys.*` fact's value, typed as the schema declares it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SysValue {
    Str(String),
    Int(i64),
    List(Vec<String>),
}

/// One probe fact (`facts.NAME`): its value as JSON (typed against the
/// bundle's declaration when the plan resolves), or why it is unknown.
pub type ProbeFact = Result<Json, String>;

/// Everything known of one host.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KnownHost {
    /// The inventory name (also `sys.hostname` unless a source says
    /// otherwise).
    pub name: String,
    /// `sys.*` facts by full name; a fact missing here is unknown, with the
    /// reason in [`KnownHost::unknown_sys`] when a source gave one.
    pub sys: BTreeMap<String, SysValue>,
    /// Why a `sys` fact is unknown, when a source said so (`null` in a
    /// facts file).
    pub unknown_sys: BTreeMap<String, String>,
    /// Probe facts by name (without `facts.`).
    pub probes: BTreeMap<String, ProbeFact>,
    /// Where the facts came from beyond the inventory (`web-01.json`,
    /// `collector`), for the plan's header.
    pub reported: Option<String>,
}

/// Why the facts cannot be read: the plan stops (exit 66 or, for the
/// collector, 69/76 as `policyc fleet`).
#[derive(Debug, PartialEq, Eq)]
pub struct FactsError(pub String);

impl std::fmt::Display for FactsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The hosts of the inventory with their static facts, in inventory order.
/// Revoked hosts are left out: they get no bundle.
pub fn from_inventory(inventory: &Inventory) -> Result<Vec<KnownHost>, FactsError> {
    inventory
        .hosts
        .iter()
        .filter(|h| !h.revoked)
        .map(inventory_host)
        .collect()
}

fn inventory_host(host: &Host) -> Result<KnownHost, FactsError> {
    let name = host.name.get_ref().clone();
    let mut known = KnownHost {
        name: name.clone(),
        ..KnownHost::default()
    };
    known
        .sys
        .insert("sys.hostname".to_owned(), SysValue::Str(name.clone()));
    for (key, value) in &host.facts {
        let full = inventory_fact_name(key);
        let json = match value.get_ref() {
            InventoryValue::Bool(b) => Json::from(*b),
            InventoryValue::Int(i) => Json::from(*i),
            InventoryValue::Str(s) => Json::from(s.clone()),
        };
        let place = format!("inventory host `{name}`, fact `{key}`");
        known.set(&full, json, &place)?;
    }
    Ok(known)
}

impl KnownHost {
    /// Sets fact `full` (`sys.os_family`, `facts.datacenter`) from JSON;
    /// `null` makes it unknown. A `sys` fact of the wrong type is an error
    /// naming `place`; an unknown `sys.` name too (with did-you-mean).
    fn set(&mut self, full: &str, value: Json, place: &str) -> Result<(), FactsError> {
        if let Some(probe) = full.strip_prefix("facts.") {
            let fact = match value {
                Json::Null => Err(format!("{place} is null")),
                value => Ok(value),
            };
            self.probes.insert(probe.to_owned(), fact);
            return Ok(());
        }
        let Some(spec) = schema::fact(full) else {
            let hint = crate::suggest::did_you_mean(full, schema::FACTS.iter().map(|f| f.name))
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            return Err(FactsError(format!(
                "{place}: there is no fact `{full}`{hint} (probe facts are named `facts.NAME`)"
            )));
        };
        if value.is_null() {
            self.sys.remove(spec.name);
            self.unknown_sys
                .insert(spec.name.to_owned(), format!("{place} is null"));
            return Ok(());
        }
        let typed = match (spec.ty, &value) {
            (AttrType::String, Json::String(s)) => SysValue::Str(s.clone()),
            (AttrType::Int, Json::Number(n)) if n.as_i64().is_some() => {
                SysValue::Int(n.as_i64().unwrap_or_default())
            }
            (AttrType::List(AttrType::String), Json::Array(items))
                if items.iter().all(Json::is_string) =>
            {
                SysValue::List(
                    items
                        .iter()
                        .filter_map(|i| i.as_str().map(str::to_owned))
                        .collect(),
                )
            }
            (ty, _) => {
                return Err(FactsError(format!(
                    "{place}: `{}` is {}, not {value}",
                    spec.name,
                    crate::diagnostic::with_article(&ty.describe())
                )))
            }
        };
        self.unknown_sys.remove(spec.name);
        self.sys.insert(spec.name.to_owned(), typed);
        Ok(())
    }
}

/// `--facts-from DIR`: `DIR/HOST.json` for each host that has one, a
/// `converge-facts/1` document (`policyvm facts --format json` on that
/// host), overrides what the inventory says. Keys are full fact names;
/// besides the `sys.*` facts `policyvm facts` prints, `facts.NAME` gives a
/// probe fact. A file for a host the inventory does not list is named in
/// the returned notes (it is not planned).
pub fn overlay_dir(hosts: &mut [KnownHost], dir: &Path) -> Result<Vec<String>, FactsError> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        FactsError(format!(
            "cannot read the facts directory `{}`: {e}",
            dir.display()
        ))
    })?;
    let mut files: Vec<String> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| {
            FactsError(format!(
                "cannot read the facts directory `{}`: {e}",
                dir.display()
            ))
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".json") {
            files.push(name);
        }
    }
    files.sort();
    let mut notes = Vec::new();
    for file in files {
        let stem = file.trim_end_matches(".json");
        let Some(host) = hosts.iter_mut().find(|h| h.name == stem) else {
            notes.push(format!(
                "`{}` names no host of the inventory; not planned",
                dir.join(&file).display()
            ));
            continue;
        };
        let path = dir.join(&file);
        let text = read_bounded(&path)?;
        overlay_document(host, &text, &path.display().to_string())?;
        host.reported = Some(file);
    }
    Ok(notes)
}

fn read_bounded(path: &Path) -> Result<String, FactsError> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FACTS_FILE + 1).read_to_string(&mut text))
        .map_err(|e| FactsError(format!("cannot read `{}`: {e}", path.display())))?;
    if text.len() as u64 > MAX_FACTS_FILE {
        return Err(FactsError(format!(
            "`{}` is larger than {} KiB; a host's facts are a few KiB",
            path.display(),
            MAX_FACTS_FILE >> 10
        )));
    }
    Ok(text)
}

/// One `converge-facts/1` document over `host`'s facts.
fn overlay_document(host: &mut KnownHost, text: &str, place: &str) -> Result<(), FactsError> {
    let doc: Json = serde_json::from_str(text)
        .map_err(|e| FactsError(format!("`{place}` is not JSON: {e}")))?;
    if doc.get("format").and_then(Json::as_str) != Some(FACTS_FORMAT) {
        return Err(FactsError(format!(
            "`{place}` is not a `{FACTS_FORMAT}` document (write it with `policyvm facts --format json` on the host)"
        )));
    }
    let Some(facts) = doc.get("facts").and_then(Json::as_object) else {
        return Err(FactsError(format!("`{place}` has no `facts` object")));
    };
    for (name, value) in facts {
        host.set(name, value.clone(), &format!("`{place}`, `{name}`"))?;
    }
    Ok(())
}

/// `--facts-from https://COLLECTOR`: the collector's `/api/v1/facts`
/// view. Each host that reported gets its reported `sys` facts and probe
/// facts (a probe that failed there is unknown, with its error); hosts
/// that never reported keep the inventory's.
pub fn overlay_fleet(hosts: &mut [KnownHost], view: &FactsList) -> Result<(), FactsError> {
    for reported in &view.hosts {
        let Some(host) = hosts.iter_mut().find(|h| h.name == reported.host) else {
            continue;
        };
        if reported.reported_at.is_none() {
            continue;
        }
        let place = |name: &str| {
            format!(
                "the collector's facts of `{}`, `{name}`",
                host_label(&reported.host)
            )
        };
        if let Some(sys) = reported.sys.as_object() {
            for (name, value) in sys {
                let full = format!("sys.{name}");
                if schema::fact(&full).is_none() {
                    // A fact a newer VM reports and this policyc does not
                    // know: no policy it compiles can read it.
                    continue;
                }
                host.set(&full, value.clone(), &place(name))?;
            }
        }
        if let Some(probes) = reported.probes.as_object() {
            for (name, fact) in probes {
                let value = match (fact.get("value"), fact.get("error")) {
                    (Some(v), _) if !v.is_null() => Ok(v.clone()),
                    (_, Some(Json::String(e))) => Err(format!("its probe failed on the host: {e}")),
                    _ => Err("the host reported no value".to_owned()),
                };
                host.probes.insert(name.clone(), value);
            }
        }
        host.reported = Some("collector".to_owned());
    }
    Ok(())
}

/// A host name from the collector, safe to print.
fn host_label(name: &str) -> String {
    crate::fleet::tables::clean(name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const KEY: &str = "ed25519:iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w=";

    fn inventory(extra: &str) -> Inventory {
        Inventory::parse(&format!(
            "[[host]]\nname = \"web-01\"\nreport_key = \"{KEY}\"\n{extra}\n\
             [[host]]\nname = \"gone\"\nreport_key = \"{KEY}\"\nrevoked = true\n"
        ))
        .unwrap()
    }

    #[test]
    fn inventory_facts_are_named_as_guards_read_them() {
        let hosts = from_inventory(&inventory(
            "facts = { os_family = \"debian\", datacenter = \"eu-1\", rack = 12, \"sys.cpus\" = 4 }",
        ))
        .unwrap();
        assert_eq!(hosts.len(), 1, "revoked hosts are not planned");
        let web = &hosts[0];
        assert_eq!(web.name, "web-01");
        assert_eq!(web.sys["sys.hostname"], SysValue::Str("web-01".into()));
        assert_eq!(web.sys["sys.os_family"], SysValue::Str("debian".into()));
        assert_eq!(web.sys["sys.cpus"], SysValue::Int(4));
        assert_eq!(web.probes["datacenter"], Ok(Json::from("eu-1")));
        assert_eq!(web.probes["rack"], Ok(Json::from(12)));
        assert!(!web.sys.contains_key("sys.arch"), "never guessed");
    }

    #[test]
    fn an_inventory_fact_of_the_wrong_type_is_an_error_naming_it() {
        let err = from_inventory(&inventory("facts = { os_family = 12 }")).unwrap_err();
        assert!(
            err.0
                .contains("inventory host `web-01`, fact `os_family`: `sys.os_family` is a string"),
            "{err}"
        );
        let err = from_inventory(&inventory("facts = { \"sys.os_famly\" = \"x\" }")).unwrap_err();
        assert!(err.0.contains("did you mean `sys.os_family`?"), "{err}");
    }

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn a_facts_file_overrides_the_inventory_and_null_makes_a_fact_unknown() {
        let mut hosts =
            from_inventory(&inventory("facts = { os_family = \"redhat\", cpus = 2 }")).unwrap();
        let dir = dir_with(&[
            (
                "web-01.json",
                r#"{"format":"converge-facts/1","facts":{"sys.hostname":"web-01",
                   "sys.os_family":"debian","sys.ipv4":["10.0.0.1"],"sys.cpus":null,
                   "facts.datacenter":"eu-2"},"classes":["any"]}"#,
            ),
            (
                "stranger.json",
                r#"{"format":"converge-facts/1","facts":{}}"#,
            ),
            ("README.txt", "not a facts file"),
        ]);
        let notes = overlay_dir(&mut hosts, dir.path()).unwrap();
        let web = &hosts[0];
        assert_eq!(web.sys["sys.os_family"], SysValue::Str("debian".into()));
        assert_eq!(web.sys["sys.ipv4"], SysValue::List(vec!["10.0.0.1".into()]));
        assert!(!web.sys.contains_key("sys.cpus"));
        assert!(web.unknown_sys["sys.cpus"].contains("is null"));
        assert_eq!(web.probes["datacenter"], Ok(Json::from("eu-2")));
        assert_eq!(web.reported.as_deref(), Some("web-01.json"));
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("stranger.json` names no host"),
            "{notes:?}"
        );
    }

    #[test]
    fn a_file_that_is_not_a_facts_document_says_so() {
        let mut hosts = from_inventory(&inventory("")).unwrap();
        for (text, expected) in [
            ("{", "is not JSON"),
            (
                r#"{"format":"converge-run/1"}"#,
                "not a `converge-facts/1` document",
            ),
            (r#"{"format":"converge-facts/1"}"#, "has no `facts` object"),
            (
                r#"{"format":"converge-facts/1","facts":{"sys.cpus":"four"}}"#,
                "`sys.cpus` is an int, not \"four\"",
            ),
        ] {
            let dir = dir_with(&[("web-01.json", text)]);
            let err = overlay_dir(&mut hosts, dir.path()).unwrap_err();
            assert!(err.0.contains(expected), "{text}: {err}");
            assert!(err.0.contains("web-01.json"), "{err}");
        }
        let err = overlay_dir(&mut hosts, Path::new("/nonexistent/facts")).unwrap_err();
        assert!(err.0.contains("cannot read the facts directory"), "{err}");
    }

    #[test]
    fn the_collectors_facts_override_for_hosts_that_reported() {
        let mut hosts = from_inventory(&inventory("facts = { os_family = \"redhat\" }")).unwrap();
        let view: FactsList = serde_json::from_str(
            r#"{"hosts":[
              {"host":"web-01","reported_at":"2026-11-24T00:00:00Z",
               "sys":{"hostname":"web-01","os_family":"debian","cpus":8,"new_fact":1},
               "probes":{"datacenter":{"value":"eu-3"},"rack":{"error":"exit status 1"}},
               "classes":["any"]},
              {"host":"db-01","reported_at":"2026-11-24T00:00:00Z","sys":{"hostname":"db-01"}}
            ]}"#,
        )
        .unwrap();
        overlay_fleet(&mut hosts, &view).unwrap();
        let web = &hosts[0];
        assert_eq!(web.sys["sys.os_family"], SysValue::Str("debian".into()));
        assert_eq!(web.sys["sys.cpus"], SysValue::Int(8));
        assert_eq!(web.probes["datacenter"], Ok(Json::from("eu-3")));
        assert_eq!(
            web.probes["rack"],
            Err("its probe failed on the host: exit status 1".to_owned())
        );
        assert_eq!(web.reported.as_deref(), Some("collector"));
    }

    #[test]
    fn a_host_that_never_reported_keeps_the_inventorys_facts() {
        let mut hosts = from_inventory(&inventory("facts = { os_family = \"redhat\" }")).unwrap();
        let view: FactsList =
            serde_json::from_str(r#"{"hosts":[{"host":"web-01","reported_at":null}]}"#).unwrap();
        overlay_fleet(&mut hosts, &view).unwrap();
        assert_eq!(
            hosts[0].sys["sys.os_family"],
            SysValue::Str("redhat".into())
        );
        assert_eq!(hosts[0].reported, None);
    }
}
