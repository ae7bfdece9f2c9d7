//! One policy resolved for one host, by the evaluator the VM runs
//! (`converge_eval::preview`: the same classes, guards, run-time loops,
//! rendered templates and lookups), with the host's known facts
//! (`super::facts`) and nothing else: a fact the host's sources do not
//! give is unknown, and so is everything that needs it.

use std::collections::HashMap;
use std::hash::{Hash as _, Hasher as _};
use std::sync::Arc;

use converge_eval::bundle::format::Body;
use converge_eval::bundle::probe::ProbeType;
use converge_eval::eval::Val;
use converge_eval::facts::{FactMap, FactValue};
use converge_eval::instance::{Instance, Value};
use converge_eval::preview::{Activity, PreviewPromise, Previewer, Resolution};
use converge_eval::sources::ProbeFacts;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::Value as Json;

use super::build::Built;
use super::facts::{KnownHost, SysValue};
use super::resolved::{HostPromises, PromiseKey, Resolved, Shown, Unresolved};

/// One side of the plan, ready to resolve hosts.
#[derive(Debug)]
pub struct Policy<'b> {
    body: &'b Body,
    /// Secret versions by name (`Built::secrets`).
    secrets: &'b HashMap<String, u64>,
    /// Each probe's declared type, by name (values given as JSON are read
    /// as it).
    probe_types: HashMap<String, Option<ProbeType>>,
}

impl<'b> Policy<'b> {
    pub fn new(built: &'b Built) -> Self {
        let probe_types = built
            .body
            .probes()
            .map(|(_, p)| (p.name.clone(), ProbeType::parse(&p.ty).ok()))
            .collect();
        Policy {
            body: &built.body,
            secrets: &built.secrets,
            probe_types,
        }
    }

    /// What one thread resolves hosts with, for this policy.
    pub fn resolver(&self) -> HostResolver<'b> {
        HostResolver {
            previewer: Previewer::new(self.body),
            shared: Vec::new(),
            keys: FxHashSet::default(),
        }
    }

    /// Everything this policy gives `host` (`resolver` is one of
    /// [`Policy::resolver`]'s).
    pub fn resolve(&self, resolver: &mut HostResolver<'b>, host: &KnownHost) -> HostPromises {
        let facts = FactMap(
            host.sys
                .iter()
                .map(|(name, value)| (name.clone(), fact_value(value)))
                .collect(),
        );
        let probes = HostProbes {
            host,
            types: &self.probe_types,
        };
        let preview = match resolver.previewer.preview(&facts, &probes, &[]) {
            Ok(preview) => preview,
            Err(reason) => {
                // Only a body the verifier would refuse gets here: the
                // whole host is unknown, with the reason.
                return HostPromises {
                    promises: Vec::new(),
                    unresolved: vec![Unresolved::fails(
                        "the policy".to_owned(),
                        format!("cannot be evaluated: {reason}"),
                    )],
                };
            }
        };
        let mut out = HostPromises {
            promises: Vec::with_capacity(preview.promises.len()),
            unresolved: Vec::new(),
        };
        for p in preview.promises {
            let conditional = match &p.activity {
                Activity::Conditional {
                    outcome_classes, ..
                } => Some(outcome_classes.join(", ")),
                Activity::Active | Activity::Undecided => None,
            };
            match p.resolution {
                Resolution::Resolved(inst) => {
                    let resolved = resolver.converted(p.index, inst, conditional, |inst, c| {
                        self.converted(inst, c)
                    });
                    out.promises.push(resolved);
                }
                Resolution::Unknown(ref reason) => out
                    .unresolved
                    .push(Unresolved::unknown(self.what(&p), reason.clone())),
                Resolution::Failed(ref reason) => out
                    .unresolved
                    .push(Unresolved::fails(self.what(&p), reason.clone())),
            }
        }
        number_occurrences(&mut out.promises, &mut resolver.keys);
        out.unresolved.sort();
        out.unresolved.dedup();
        out
    }

    /// An instance as the plan compares it.
    fn converted(&self, inst: &Instance, conditional: Option<String>) -> Resolved {
        let key = PromiseKey {
            kind: inst.kind,
            promiser: Arc::from(inst.promiser.as_str()),
            occurrence: 0,
        };
        let attrs: Arc<[_]> = inst
            .attrs
            .iter()
            .map(|(name, value)| (*name, self.shown(value.clone())))
            .collect();
        Resolved::new(key, attrs, conditional)
    }

    /// How an unresolved promise is named: by its promiser when the host
    /// can compute it (so the same promise in both policies is one entry),
    /// else by its place in the source.
    fn what(&self, p: &PreviewPromise) -> String {
        let mut what = match p.promiser() {
            Some(promiser) => format!("{} {promiser:?}", p.kind),
            None => format!("{} at {}", p.kind, p.source),
        };
        if !p.loops.is_empty() {
            what.push_str(&format!(" [{}]", p.loops.join(", ")));
        }
        what
    }

    /// A resolved value as the plan compares it. A secret's version mixes
    /// the text around it (rendered with `<secret NAME>` in its place) with
    /// the version of each secret file it reads.
    fn shown(&self, value: Value) -> Shown {
        match value {
            Value::Str(s) => Shown::Text(s),
            Value::Int(i) => Shown::Int(i),
            Value::Bool(b) => Shown::Bool(b),
            Value::Bytes(b) => Shown::Bytes(b),
            // A stored file (never made by the plan's inline build): its
            // digest stands for its bytes.
            blob @ Value::Blob(_) => Shown::Text(blob.display().into()),
            Value::List(l) => Shown::List(l),
            Value::Secret(text) => {
                let mut h = rustc_hash::FxHasher::default();
                text.expose().hash(&mut h);
                for name in text.names() {
                    name.hash(&mut h);
                    self.secrets.get(name).hash(&mut h);
                }
                Shown::Secret {
                    label: text.label(),
                    version: h.finish(),
                }
            }
        }
    }
}

/// One thread's means to resolve hosts with one policy: its previewer, and
/// the instances the previewer shares between hosts (a promise whose
/// promiser and values are constants) as the plan compares them, so each
/// is converted and hashed once, not once per host.
#[derive(Debug)]
pub struct HostResolver<'b> {
    previewer: Previewer<'b>,
    /// By promise index: the shared instance last converted, and what it
    /// was converted to.
    shared: Vec<Option<(Arc<Instance>, Resolved)>>,
    /// The key digests of the host being resolved ([`number_occurrences`]).
    keys: FxHashSet<u64>,
}

impl HostResolver<'_> {
    /// `inst` (promise `index`) as the plan compares it: the conversion
    /// made for an earlier host when the previewer gave this host the very
    /// same instance (and the same condition), else `convert`'s.
    fn converted(
        &mut self,
        index: usize,
        inst: Arc<Instance>,
        conditional: Option<String>,
        convert: impl FnOnce(&Instance, Option<String>) -> Resolved,
    ) -> Resolved {
        if let Some(Some((seen, resolved))) = self.shared.get(index) {
            if Arc::ptr_eq(seen, &inst) && resolved.conditional == conditional {
                return resolved.clone();
            }
        }
        let resolved = convert(&inst, conditional);
        // Only an instance the previewer keeps (it holds another reference)
        // can come again.
        if Arc::strong_count(&inst) > 1 {
            if self.shared.len() <= index {
                self.shared.resize_with(index.saturating_add(1), || None);
            }
            if let Some(slot) = self.shared.get_mut(index) {
                *slot = Some((inst, resolved.clone()));
            }
        }
        resolved
    }
}

/// Several instances with one type and promiser (a command run twice, a
/// promise in a loop whose promiser does not name the element) are told
/// apart by their order: the second is occurrence 1. Most hosts have no
/// promise twice, which their key digests show without a string hashed
/// (`seen` is a set kept between hosts).
fn number_occurrences(promises: &mut [Resolved], seen: &mut FxHashSet<u64>) {
    seen.clear();
    if promises.iter().all(|p| seen.insert(p.key_hash)) {
        return;
    }
    let mut seen: FxHashMap<(&'static str, &str), u32> = FxHashMap::default();
    let mut numbers = Vec::new();
    for (i, p) in promises.iter().enumerate() {
        let n = seen.entry((p.key.kind, &*p.key.promiser)).or_insert(0);
        if *n > 0 {
            numbers.push((i, *n));
        }
        *n = n.saturating_add(1);
    }
    for (i, n) in numbers {
        if let Some(p) = promises.get_mut(i) {
            p.key.occurrence = n;
        }
    }
}

fn fact_value(value: &SysValue) -> FactValue {
    match value {
        SysValue::Str(s) => FactValue::Str(s.clone()),
        SysValue::Int(i) => FactValue::Int(*i),
        SysValue::List(l) => FactValue::List(l.clone()),
    }
}

/// A host's probe facts, read as the bundle declares them.
#[derive(Debug)]
struct HostProbes<'h> {
    host: &'h KnownHost,
    types: &'h HashMap<String, Option<ProbeType>>,
}

impl ProbeFacts for HostProbes<'_> {
    fn read(&self, path: &str) -> Result<Val, String> {
        let mut steps = path.split('.');
        let name = steps.next().unwrap_or_default();
        let value = match self.host.probes.get(name) {
            Some(Ok(value)) => value,
            Some(Err(why)) => return Err(format!("fact `facts.{name}` is unknown: {why}")),
            None => {
                return Err(format!(
                    "fact `facts.{name}` is not given (not in the inventory nor the host's reported facts)"
                ))
            }
        };
        let steps: Vec<&str> = steps.collect();
        let declared = self.types.get(name).and_then(Option::as_ref);
        let ty = match declared.map(|t| t.at(&steps)) {
            Some(Ok(ty)) => Some(ty),
            Some(Err(why)) => return Err(format!("fact `facts.{path}`: {why}")),
            None => None,
        };
        let mut at = value;
        for step in &steps {
            at = at.get(step).ok_or_else(|| {
                format!("fact `facts.{path}` is not given: it has no key {step:?}")
            })?;
        }
        typed(at, ty).map_err(|why| format!("fact `facts.{path}` {why}"))
    }
}

/// A JSON value as the evaluator's value of the declared type (a number
/// given as text is read as the number, as the VM parses a probe's
/// output); anything else that does not fit is refused with the reason.
fn typed(value: &Json, ty: Option<&ProbeType>) -> Result<Val, String> {
    match (ty, value) {
        (Some(ProbeType::Str) | None, Json::String(s)) => Ok(Val::Str(s.clone())),
        (Some(ProbeType::Str), Json::Number(n)) => Ok(Val::Str(n.to_string())),
        (Some(ProbeType::Str), Json::Bool(b)) => Ok(Val::Str(b.to_string())),
        (Some(ProbeType::Int) | None, Json::Number(n)) if n.as_i64().is_some() => {
            Ok(Val::Int(n.as_i64().unwrap_or_default()))
        }
        (Some(ProbeType::Int), Json::String(s)) if s.trim().parse::<i64>().is_ok() => {
            Ok(Val::Int(s.trim().parse().unwrap_or_default()))
        }
        (Some(ProbeType::Bool) | None, Json::Bool(b)) => Ok(Val::Bool(*b)),
        (Some(ProbeType::List) | None, Json::Array(items)) if items.iter().all(Json::is_string) => {
            Ok(Val::List(
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_owned))
                    .collect(),
            ))
        }
        (Some(ProbeType::Map(_) | ProbeType::Record(_)), Json::Object(_))
        | (None, Json::Object(_)) => Err("is a map, not a value".to_owned()),
        (Some(ty), other) => Err(format!("is given as {other}, not a {ty}")),
        (None, other) => Err(format!("is given as {other}, which no fact type holds")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn file(path: &str) -> Resolved {
        Resolved::new(
            PromiseKey {
                kind: "file",
                promiser: path.into(),
                occurrence: 0,
            },
            Vec::new(),
            None,
        )
    }

    /// Distinct promises keep occurrence 0 (found by their digests alone);
    /// a promise twice is numbered in order, as before.
    #[test]
    fn occurrences_number_only_promises_given_twice() {
        let mut seen = FxHashSet::default();
        let mut host = vec![file("/a"), file("/b"), file("/c")];
        number_occurrences(&mut host, &mut seen);
        assert!(host.iter().all(|p| p.key.occurrence == 0));
        let mut host = vec![file("/a"), file("/b"), file("/a"), file("/a")];
        number_occurrences(&mut host, &mut seen);
        let numbers: Vec<u32> = host.iter().map(|p| p.key.occurrence).collect();
        assert_eq!(numbers, [0, 0, 1, 2]);
    }

    /// The previewer's shared instance is converted once per thread; a
    /// different instance, or the same under another condition, is
    /// converted again; an instance nobody keeps is not remembered.
    #[test]
    fn a_shared_instance_is_converted_once() {
        let body = Body::with_programs(Vec::new(), Vec::new());
        let previewer = Previewer::new(&body);
        let mut resolver = HostResolver {
            previewer,
            shared: Vec::new(),
            keys: FxHashSet::default(),
        };
        let inst = |path: &str| {
            Arc::new(Instance {
                index: 3,
                kind: "file",
                promiser: path.to_owned(),
                attrs: Vec::new(),
            })
        };
        let kept = inst("/a");
        let mut made = 0;
        let mut convert = |i: &Instance, c: Option<String>| {
            made += 1;
            let mut r = file(&i.promiser);
            r.conditional = c;
            r
        };
        let first = resolver.converted(3, Arc::clone(&kept), None, &mut convert);
        let again = resolver.converted(3, Arc::clone(&kept), None, &mut convert);
        assert_eq!(first, again);
        let _ = resolver.converted(3, Arc::clone(&kept), Some("x".into()), &mut convert);
        let _ = resolver.converted(3, inst("/a"), None, &mut convert);
        let _ = resolver.converted(3, inst("/a"), None, &mut convert);
        assert_eq!(made, 4);
    }

    #[test]
    fn json_fact_values_are_read_as_their_declared_type() {
        let int = ProbeType::Int;
        assert_eq!(typed(&Json::from("12"), Some(&int)), Ok(Val::Int(12)));
        assert_eq!(typed(&Json::from(12), Some(&int)), Ok(Val::Int(12)));
        assert!(typed(&Json::from("twelve"), Some(&int))
            .unwrap_err()
            .contains("not a int"));
        assert_eq!(
            typed(&Json::from(12), Some(&ProbeType::Str)),
            Ok(Val::Str("12".into()))
        );
        assert_eq!(
            typed(&serde_json::json!(["a", "b"]), Some(&ProbeType::List)),
            Ok(Val::List(vec!["a".into(), "b".into()]))
        );
        assert!(typed(&serde_json::json!({"a": 1}), None).is_err());
    }

    #[test]
    fn probe_facts_say_why_they_are_unknown() {
        let mut host = KnownHost::default();
        host.probes.insert(
            "dc".into(),
            Ok(serde_json::json!({"name": "eu-1", "rack": "7"})),
        );
        host.probes.insert(
            "broken".into(),
            Err("its probe failed on the host: exit 1".into()),
        );
        let types: HashMap<String, Option<ProbeType>> = [(
            "dc".to_owned(),
            Some(ProbeType::parse("{name:string,rack:int}").unwrap()),
        )]
        .into();
        let probes = HostProbes {
            host: &host,
            types: &types,
        };
        assert_eq!(probes.read("dc.name"), Ok(Val::Str("eu-1".into())));
        assert_eq!(probes.read("dc.rack"), Ok(Val::Int(7)));
        assert!(probes.read("dc").unwrap_err().contains("is a map"));
        assert_eq!(
            probes.read("broken").unwrap_err(),
            "fact `facts.broken` is unknown: its probe failed on the host: exit 1"
        );
        assert!(probes
            .read("missing")
            .unwrap_err()
            .starts_with("fact `facts.missing` is not given"));
    }
}
