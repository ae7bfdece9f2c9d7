//! A preview of one host: every promise of a bundle that would be active
//! there, resolved exactly as `policyvm run` resolves it (the same
//! [`Evaluator`] and [`Resolver`]: classes, guards, run-time loops,
//! rendered templates and lookups), without touching any system.
//!
//! What a preview cannot know:
//! - **Outcome classes** (`on_repaired`, `on_kept`, `on_failed`,
//!   `on_changed`, `on_rewrite`) are set by what the run does. A promise
//!   whose guard or values read one (directly or through a class defined
//!   from one) is marked [`Activity::Conditional`] with the outcome classes
//!   it reads, and resolved as the first pass sees it (no outcome class
//!   set). A test can check it, but not whether the run will apply it.
//! - **Facts not given** (an inventory host without `sys.os_family`, a
//!   probe fact a test leaves out) are unknown, never guessed: what reads
//!   one is [`Resolution::Unknown`] with the reason, and so is a hard class
//!   derived from one (`debian` when `sys.os_family` is not given).
//! - **Secrets** are never opened: with [`SecretPlaceholders`] a secret's
//!   text is `<secret NAME>`, and a value computed from one is shown so.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::bundle::format::{Body, Constant, Item, Operand};
use crate::bundle::instr::Instr;
use crate::bundle::limits::MAX_PASS_INSTANCES;
use crate::eval::{Disjunctions, Evaluator, Val};
use crate::facts::{FactSource, FactValue};
use crate::instance::Instance;
use crate::resolve::{loop_combinations, Resolver};
use crate::schema::{fact_by_id, promise_type_by_id};
use crate::sources::{ProbeFacts, SecretPlaceholders};

/// What a preview found for one host.
#[derive(Debug)]
pub struct Preview {
    /// The classes set at the start of the run: hard classes, the classes
    /// defined for the preview, and every defined class whose program is
    /// true (sorted).
    pub classes: Vec<String>,
    /// Classes whose definition could not be evaluated here, with the
    /// reason (a fact not given, a probe fact unknown, a budget).
    pub class_failures: Vec<(String, String)>,
    /// Every promise instance that is active, or may become active through
    /// outcome classes, or whose activity cannot be known here; in the
    /// bundle's order of application.
    pub promises: Vec<PreviewPromise>,
}

/// One promise instance of a [`Preview`].
#[derive(Debug)]
pub struct PreviewPromise {
    /// Index of the promise in the bundle.
    pub index: usize,
    /// The promise type's name (`file`).
    pub kind: &'static str,
    /// `file.policy:12`, as run reports name it (one string per promise,
    /// shared by its instances on every host).
    pub source: Arc<str>,
    /// The elements of the promise's run-time loops for this instance.
    pub loops: Vec<String>,
    /// The promiser, when it could be evaluated (also for a promise whose
    /// guard or values could not be: a test names it so).
    pub promiser: Option<String>,
    pub activity: Activity,
    pub resolution: Resolution,
}

/// Whether a promise applies on this host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Activity {
    /// Its guard holds (or it has none) and nothing of it reads an outcome
    /// class: the run applies it.
    Active,
    /// Its guard or values read these outcome classes of the run, which a
    /// preview cannot know. `active_at_start`: whether its guard holds
    /// before any promise ran.
    Conditional {
        active_at_start: bool,
        outcome_classes: Vec<String>,
    },
    /// Its guard could not be decided here (the reason is the
    /// [`Resolution`]).
    Undecided,
}

/// A promise instance resolved for this host.
#[derive(Debug)]
pub enum Resolution {
    /// Its promiser and attribute values, as the run's operators get them.
    /// A promise whose promiser and values are all constants resolves the
    /// same on every host: a [`Previewer`] resolves it once and shares it.
    Resolved(Arc<Instance>),
    /// A fact, probe fact or class it needs is not known here.
    Unknown(String),
    /// It fails on this host (over a budget, an enum value computed on the
    /// host that is not one of its words, a lookup without a default).
    Failed(String),
}

impl PreviewPromise {
    /// The promiser, when it could be evaluated.
    pub fn promiser(&self) -> Option<&str> {
        match &self.resolution {
            Resolution::Resolved(i) => Some(&i.promiser),
            _ => self.promiser.as_deref(),
        }
    }
}

/// Previews `body` (a verified bundle body) for a host with `facts` and
/// `probes`, with the classes `defines` set (as `policyvm run --define`).
/// An error only for a body that does not match what the verifier checks.
pub fn preview(
    body: &Body,
    facts: &dyn FactSource,
    probes: &dyn ProbeFacts,
    defines: &[String],
) -> Result<Preview, String> {
    Previewer::new(body).preview(facts, probes, defines)
}

/// A bundle prepared for previewing many hosts (`policyc plan` previews
/// every host of an inventory): what does not depend on the host is worked
/// out once (each promise's type, source and the outcome classes it reads,
/// the bundle's disjunctions of classes), and the resolver's shared
/// constants are made once, not per host. Each
/// [`Previewer::preview`] is exactly [`preview`] of one host.
#[derive(Debug)]
pub struct Previewer<'b> {
    body: &'b Body,
    /// By promise index: type name, source, outcome classes read.
    statics: Vec<PromiseStatics>,
    /// By promise index: the instance of a [`PromiseStatics::fixed`]
    /// promise, once resolved.
    fixed: Vec<Option<Fixed>>,
    disjunctions: Disjunctions,
    resolver: Resolver<'b>,
}

/// What a preview needs of one promise that no host changes.
#[derive(Debug)]
struct PromiseStatics {
    kind: &'static str,
    source: Arc<str>,
    outcome_classes: Vec<String>,
    /// Its promiser and every attribute value are constants and it has no
    /// run-time loop: where it is active, it resolves to the same instance
    /// on every host (its guard is still evaluated per host).
    fixed: bool,
}

/// A fixed promise resolved: the instance every host shares, and the bytes
/// of text its resolution counts against the pass's budget (charged again
/// on each host, so a preview's budget is exactly the run's).
#[derive(Debug)]
struct Fixed {
    instance: Arc<Instance>,
    owned: usize,
}

impl<'b> Previewer<'b> {
    pub fn new(body: &'b Body) -> Self {
        let mut deps = OutcomeDeps::new(body);
        let statics: Vec<PromiseStatics> = body
            .promises
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut outcome_classes: BTreeSet<String> = BTreeSet::new();
                if let Some(g) = p.guard {
                    outcome_classes.extend(deps.of_program(g));
                }
                for a in p.attrs.iter() {
                    let items: Vec<Item> = match &a.value {
                        Operand::Item(item) => vec![*item],
                        Operand::List(items) => items.iter().copied().collect(),
                    };
                    for item in items {
                        if let Item::Code(program) = item {
                            outcome_classes.extend(deps.of_program(program));
                        }
                    }
                }
                if let Item::Code(program) = p.promiser {
                    outcome_classes.extend(deps.of_program(program));
                }
                let constant = |item: &Item| matches!(item, Item::Const(_));
                PromiseStatics {
                    kind: promise_type_by_id(p.kind).map_or("?", |t| t.name),
                    source: Arc::from(source_of(body, i)),
                    outcome_classes: outcome_classes.into_iter().collect(),
                    fixed: p.loops().is_empty()
                        && constant(&p.promiser)
                        && p.attrs.iter().all(|a| match &a.value {
                            Operand::Item(item) => constant(item),
                            Operand::List(items) => items.iter().all(constant),
                        }),
                }
            })
            .collect();
        Previewer {
            body,
            fixed: statics.iter().map(|_| None).collect(),
            statics,
            disjunctions: Disjunctions::of(body),
            resolver: Resolver::new(body),
        }
    }

    /// [`preview`] of one host.
    pub fn preview(
        &mut self,
        facts: &dyn FactSource,
        probes: &dyn ProbeFacts,
        defines: &[String],
    ) -> Result<Preview, String> {
        let body = self.body;
        let mut eval = Evaluator::sharing(body, facts, &self.disjunctions)
            .with_probes(probes)
            .with_secrets(SecretPlaceholders::default());
        let classes = eval.classes(defines).map_err(|e| e.to_string())?;
        let mut class_failures: Vec<(String, String)> = eval
            .class_failures()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        class_failures.sort();
        let resolver = &mut self.resolver;
        resolver.start_pass();
        let mut promises: Vec<PreviewPromise> =
            Vec::with_capacity(body.order.len().min(MAX_PASS_INSTANCES));
        for &i in body.order.iter() {
            let i = i as usize;
            let (Some(p), Some(statics)) = (body.promises.get(i), self.statics.get(i)) else {
                continue;
            };
            let kind = statics.kind;
            let entry =
                |loops: Vec<String>, activity: Activity, resolution: Resolution| PreviewPromise {
                    index: i,
                    kind,
                    source: Arc::clone(&statics.source),
                    loops,
                    promiser: None,
                    activity,
                    resolution,
                };
            let outcome_classes = &statics.outcome_classes;
            let mut lists: Vec<Vec<String>> = Vec::new();
            let mut missing: Option<String> = None;
            for f in p.loops().iter() {
                let spec = fact_by_id(*f);
                match spec.and_then(|s| facts.get(s.name)) {
                    Some(FactValue::List(l)) => lists.push(l),
                    Some(_) => lists.push(Vec::new()),
                    None => {
                        missing = Some(format!(
                            "it loops over fact `{}`, which is not given",
                            spec.map_or("?", |s| s.name)
                        ));
                    }
                }
            }
            if let Some(why) = missing {
                promises.push(entry(
                    Vec::new(),
                    Activity::Undecided,
                    Resolution::Unknown(why),
                ));
                continue;
            }
            // No loop (most promises): one instance, with nothing allocated.
            let mut once = std::iter::once(Vec::new());
            let mut each;
            let combos: &mut dyn Iterator<Item = Vec<String>> = if lists.is_empty() {
                &mut once
            } else {
                match loop_combinations(&lists) {
                    Ok(combos) => {
                        each = combos.into_iter();
                        &mut each
                    }
                    Err(e) => {
                        promises.push(entry(Vec::new(), Activity::Active, Resolution::Failed(e)));
                        continue;
                    }
                }
            };
            for combo in combos {
                let guard = match p.guard {
                    None => Ok(true),
                    Some(g) => match eval.run(g, &classes, &combo) {
                        Ok(v) => Ok(v == Val::Bool(true)),
                        Err(e) if eval.failed_on_unknown() => Err(Resolution::Unknown(e.0)),
                        Err(e) => Err(Resolution::Failed(format!(
                            "its guard could not be evaluated: {}",
                            e.0
                        ))),
                    },
                };
                let activity = match (&guard, outcome_classes.is_empty()) {
                    (Err(_), _) => Activity::Undecided,
                    (Ok(true), true) => Activity::Active,
                    (Ok(false), true) => continue,
                    (Ok(active), false) => Activity::Conditional {
                        active_at_start: *active,
                        outcome_classes: outcome_classes.to_vec(),
                    },
                };
                if promises.len() >= MAX_PASS_INSTANCES {
                    promises.push(entry(
                        combo,
                        activity,
                        Resolution::Failed(format!(
                            "the pass already holds {MAX_PASS_INSTANCES} promise instances, the limit (docs/bytecode.md, Limits)"
                        )),
                    ));
                    break;
                }
                let resolution = match guard {
                    Err(resolution) => resolution,
                    Ok(_) => match self.fixed.get_mut(i) {
                        Some(Some(fixed)) => match resolver.own(fixed.owned) {
                            Ok(()) => Resolution::Resolved(Arc::clone(&fixed.instance)),
                            Err(e) => Resolution::Failed(e),
                        },
                        slot => {
                            let before = resolver.owned();
                            match resolver.resolve(&mut eval, i, p, &classes, &combo) {
                                Ok(inst) => {
                                    let inst = Arc::new(inst);
                                    if let (true, Some(slot)) = (statics.fixed, slot) {
                                        *slot = Some(Fixed {
                                            instance: Arc::clone(&inst),
                                            owned: resolver.owned().saturating_sub(before),
                                        });
                                    }
                                    Resolution::Resolved(inst)
                                }
                                Err(e) if eval.failed_on_unknown() => Resolution::Unknown(e),
                                Err(e) => Resolution::Failed(e),
                            }
                        }
                    },
                };
                let promiser = match &resolution {
                    Resolution::Resolved(_) => None,
                    _ => promiser_text(body, &mut eval, p.promiser, &classes, &combo),
                };
                let mut promise = entry(combo, activity, resolution);
                promise.promiser = promiser;
                promises.push(promise);
            }
        }
        Ok(Preview {
            classes: classes.into_iter().collect(),
            class_failures,
            promises,
        })
    }
}

/// The text of a promiser, if it can be evaluated on this host.
fn promiser_text(
    body: &Body,
    eval: &mut Evaluator<'_>,
    item: Item,
    classes: &BTreeSet<String>,
    loops: &[String],
) -> Option<String> {
    match item {
        Item::Const(c) => match body.constants.get(c as usize) {
            Some(Constant::Str(s) | Constant::Word(s)) => Some(s.to_string()),
            _ => None,
        },
        Item::Code(program) => match eval.run(program, classes, loops) {
            Ok(Val::Str(s)) => Some(s),
            _ => None,
        },
    }
}

/// `file.policy:12` of promise `index`.
pub fn source_of(body: &Body, index: usize) -> String {
    body.promises
        .get(index)
        .and_then(|p| body.sources.get(p.source as usize))
        .map(|s| {
            let file = match body.constants.get(s.file as usize) {
                Some(Constant::Str(f)) => f.as_str(),
                _ => "",
            };
            format!("{file}:{}", s.line)
        })
        .unwrap_or_default()
}

/// Which outcome classes a program reads: directly (`class` of one), through
/// a class defined from one, or in a program its `each` runs.
#[derive(Debug)]
struct OutcomeDeps<'b> {
    body: &'b Body,
    /// Every class a promise of the bundle may set by its outcome.
    outcome: HashSet<String>,
    /// The program of each defined class.
    defined: HashMap<String, u32>,
    /// Program -> the outcome classes it reads, once computed.
    memo: HashMap<u32, BTreeSet<String>>,
}

impl<'b> OutcomeDeps<'b> {
    fn new(body: &'b Body) -> Self {
        let word = |c: u32| match body.constants.get(c as usize) {
            Some(Constant::Word(n) | Constant::Str(n)) => Some(n.to_string()),
            _ => None,
        };
        let mut outcome: HashSet<String> = HashSet::new();
        for p in body.promises.iter() {
            for c in [p.on_repaired(), p.on_kept(), p.on_failed()]
                .into_iter()
                .flatten()
            {
                outcome.extend(word(c));
            }
            // `on_changed` (watch) and `on_rewrite` (neighbours) are
            // carried as attribute values.
            let Some(pt) = promise_type_by_id(p.kind) else {
                continue;
            };
            for a in p.attrs.iter() {
                let named = pt
                    .attr_by_id(a.attr)
                    .is_some_and(|s| matches!(s.name, "on_changed" | "on_rewrite"));
                if let (true, Operand::Item(Item::Const(c))) = (named, &a.value) {
                    outcome.extend(word(*c));
                }
            }
        }
        let defined = body
            .classes
            .iter()
            .filter_map(|c| Some((word(c.name)?, c.program?)))
            .collect();
        OutcomeDeps {
            body,
            outcome,
            defined,
            memo: HashMap::new(),
        }
    }

    fn of_program(&mut self, program: u32) -> BTreeSet<String> {
        if let Some(known) = self.memo.get(&program) {
            return known.clone();
        }
        // Placed first so that a cycle (which the verifier refuses) ends.
        self.memo.insert(program, BTreeSet::new());
        let mut found = BTreeSet::new();
        let code: Vec<Instr> = self
            .body
            .programs
            .get(program as usize)
            .map(|p| p.code.iter().copied().collect())
            .unwrap_or_default();
        for instr in code {
            match instr {
                Instr::Class(c) => {
                    let Some(Constant::Word(n) | Constant::Str(n)) =
                        self.body.constants.get(c as usize)
                    else {
                        continue;
                    };
                    if self.outcome.contains(n.as_str()) {
                        found.insert(n.to_string());
                    }
                    if let Some(&defining) = self.defined.get(n.as_str()) {
                        found.extend(self.of_program(defining));
                    }
                }
                Instr::Each(q) => found.extend(self.of_program(q)),
                _ => {}
            }
        }
        self.memo.insert(program, found.clone());
        found
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use crate::bundle::format::{
        AttrValue, Bytes, ClassEntry, FixedList, List, Promise, Sealed, SealedSet, SourceLoc,
    };
    use crate::facts::FactMap;
    use crate::instance::Instance;
    use crate::sources::NoProbes;

    fn fact(name: &str) -> u32 {
        u32::from(crate::schema::fact(name).unwrap().id)
    }

    fn attr(kind: &str, name: &str) -> u16 {
        crate::schema::promise_type(kind)
            .unwrap()
            .all_attrs()
            .find(|a| a.name == name)
            .unwrap()
            .id
    }

    fn file(promiser: Item, content: Item, guard: Option<u32>) -> Promise {
        let kind = crate::schema::promise_type("file").unwrap().id;
        Promise::from(converge_format::bundle::format::PromiseParts {
            attrs: FixedList::from(vec![AttrValue {
                attr: attr("file", "content"),
                value: Operand::Item(content),
            }]),
            guard,
            ..converge_format::bundle::format::PromiseParts::new(kind, promiser)
        })
    }

    /// A bundle of five file promises: one everywhere whose content is
    /// rendered from `sys.hostname`; one on `debian`; one on `redhat`; one
    /// on class `reloaded`, which the first sets when it repairs; one whose
    /// content is a secret. Class `web` is defined as `host_web01`.
    fn bundle() -> Body {
        let constants = vec![
            Constant::Str("main.policy".into()), // 0
            Constant::Str("/etc/motd".into()),   // 1
            Constant::Str("hello ".into()),      // 2
            Constant::Word("debian".into()),     // 3
            Constant::Word("redhat".into()),     // 4
            Constant::Word("reloaded".into()),   // 5
            Constant::Str("/etc/deb".into()),    // 6
            Constant::Str("/etc/rh".into()),     // 7
            Constant::Str("/etc/after".into()),  // 8
            Constant::Str("x".into()),           // 9
            Constant::SealedSet(Box::new(SealedSet {
                ciphertext: Bytes(b"age-encryption.org/v1\n".to_vec()),
            })), // 10
            Constant::Secret(Box::new(Sealed {
                name: "db".into(),
                set: 10,
                index: 0,
            })), // 11
            Constant::Str("/etc/db.conf".into()), // 12
            Constant::Word("web".into()),        // 13
            Constant::Word("host_web01".into()), // 14
            Constant::Str("password=".into()),   // 15
        ];
        let programs = vec![
            vec![
                Instr::Const(2),
                Instr::Fact(fact("sys.hostname")),
                Instr::Concat(2),
            ],
            vec![Instr::Class(3)],
            vec![Instr::Class(4)],
            vec![Instr::Class(5)],
            vec![Instr::Class(14)],
            vec![Instr::Const(15), Instr::Const(11), Instr::Concat(2)],
        ];
        let mut body = Body::with_programs(constants, programs);
        body.classes = List(vec![ClassEntry {
            name: 13,
            program: Some(4),
        }]);
        let mut first = converge_format::bundle::format::PromiseParts::from(file(
            Item::Const(1),
            Item::Code(0),
            None,
        ));
        first.on_repaired = Some(5);
        let first = Promise::from(first);
        body.promises = List(vec![
            first,
            file(Item::Const(6), Item::Const(9), Some(1)),
            file(Item::Const(7), Item::Const(9), Some(2)),
            file(Item::Const(8), Item::Const(9), Some(3)),
            file(Item::Const(12), Item::Code(5), None),
        ]);
        body.order = List(vec![0, 1, 2, 3, 4]);
        body.sources = List(vec![SourceLoc { file: 0, line: 7 }]);
        body
    }

    fn host(entries: &[(&str, &str)]) -> FactMap {
        FactMap(
            entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), FactValue::Str((*v).to_owned())))
                .collect(),
        )
    }

    fn content(p: &PreviewPromise) -> String {
        match &p.resolution {
            Resolution::Resolved(i) => i.get("content").map(|v| match v {
                crate::instance::Value::Str(s) => s.to_string(),
                other => other.display(),
            }),
            other => panic!("{other:?}"),
        }
        .unwrap_or_default()
    }

    #[test]
    fn active_promises_are_resolved_as_the_host_would() {
        let body = bundle();
        let facts = host(&[("sys.hostname", "web01"), ("sys.os_family", "debian")]);
        let p = preview(&body, &facts, &NoProbes, &[]).unwrap();
        let promisers: Vec<&str> = p.promises.iter().filter_map(|p| p.promiser()).collect();
        assert_eq!(
            promisers,
            ["/etc/motd", "/etc/deb", "/etc/after", "/etc/db.conf"],
            "the redhat promise is not active"
        );
        assert_eq!(content(&p.promises[0]), "hello web01", "rendered");
        assert_eq!(p.promises[0].activity, Activity::Active);
        assert_eq!(&*p.promises[0].source, "main.policy:7");
        assert_eq!(
            p.promises[2].activity,
            Activity::Conditional {
                active_at_start: false,
                outcome_classes: vec!["reloaded".into()]
            }
        );
        assert!(p.classes.contains(&"web".to_owned()), "{:?}", p.classes);
        assert!(p.classes.contains(&"debian".to_owned()));
    }

    /// A secret is shown, never opened: its text is its label, and the value
    /// computed from it is a secret named `db`.
    #[test]
    fn a_secret_is_a_placeholder() {
        let body = bundle();
        let facts = host(&[("sys.hostname", "web01"), ("sys.os_family", "debian")]);
        let p = preview(&body, &facts, &NoProbes, &[]).unwrap();
        let Resolution::Resolved(inst) = &p.promises[3].resolution else {
            panic!("{:?}", p.promises[3]);
        };
        let secret = inst.secret("content").unwrap();
        assert_eq!(secret.expose(), "password=<secret db>");
        assert_eq!(secret.names(), ["db"]);
    }

    /// Facts not given are unknown, never guessed: a template reading
    /// `sys.hostname` and guards on `debian`/`redhat` without
    /// `sys.os_family` are unknown with the fact named.
    #[test]
    fn what_needs_a_fact_not_given_is_unknown() {
        let body = bundle();
        let p = preview(&body, &FactMap::default(), &NoProbes, &[]).unwrap();
        let unknown: Vec<(usize, String)> = p
            .promises
            .iter()
            .filter_map(|p| match &p.resolution {
                Resolution::Unknown(why) => Some((p.index, why.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(unknown.len(), 3, "{unknown:?}");
        assert!(
            unknown[0].1.contains("fact `sys.hostname` is not given"),
            "{unknown:?}"
        );
        assert!(unknown[1].1.contains("sys.os_family"), "{unknown:?}");
        assert!(unknown[2].1.contains("sys.os_family"), "{unknown:?}");
        let deb = p.promises.iter().find(|p| p.index == 1).unwrap();
        assert_eq!(deb.promiser(), Some("/etc/deb"), "named though unknown");
        assert!(p
            .promises
            .iter()
            .all(|p| p.index != 3 || p.activity != Activity::Active));
        let web = p.class_failures.iter().find(|(c, _)| c == "web");
        assert!(
            web.is_some_and(|(_, why)| why.contains("sys.hostname")),
            "{:?}",
            p.class_failures
        );
    }

    /// A promise whose promiser and values are constants is resolved once
    /// per previewer and shared by every host it is active on (its guard is
    /// still evaluated per host); a rendered one is resolved per host. Each
    /// host's preview equals the one-off [`preview`] of it.
    #[test]
    fn fixed_promises_are_resolved_once_and_shared() {
        let body = body_for_sharing();
        let mut previewer = Previewer::new(&body);
        let web = host(&[("sys.hostname", "web01"), ("sys.os_family", "debian")]);
        let db = host(&[("sys.hostname", "db1"), ("sys.os_family", "redhat")]);
        let other = host(&[("sys.hostname", "web02"), ("sys.os_family", "debian")]);
        let a = previewer.preview(&web, &NoProbes, &[]).unwrap();
        let b = previewer.preview(&db, &NoProbes, &[]).unwrap();
        let c = previewer.preview(&other, &NoProbes, &[]).unwrap();
        let resolved = |p: &Preview, path: &str| -> Arc<Instance> {
            let found = p.promises.iter().find(|p| p.promiser() == Some(path));
            match found.map(|p| &p.resolution) {
                Some(Resolution::Resolved(i)) => Arc::clone(i),
                other => panic!("{path}: {other:?}"),
            }
        };
        assert!(Arc::ptr_eq(
            &resolved(&a, "/etc/deb"),
            &resolved(&c, "/etc/deb")
        ));
        assert!(!b.promises.iter().any(|p| p.promiser() == Some("/etc/deb")));
        assert!(Arc::ptr_eq(
            &resolved(&b, "/etc/rh"),
            &resolved(&b, "/etc/rh")
        ));
        let (motd_a, motd_c) = (resolved(&a, "/etc/motd"), resolved(&c, "/etc/motd"));
        assert!(!Arc::ptr_eq(&motd_a, &motd_c), "rendered per host");
        assert_eq!(motd_c.str("content"), Some("hello web02"));
        for (facts, shared) in [(&web, &a), (&db, &b), (&other, &c)] {
            let alone = preview(&body, facts, &NoProbes, &[]).unwrap();
            assert_eq!(format!("{alone:?}"), format!("{shared:?}"));
        }
        // The promisers a shared instance holds count against each host's
        // pass as they would resolved there.
        let mut fresh = Previewer::new(&body);
        fresh.preview(&other, &NoProbes, &[]).unwrap();
        assert_eq!(previewer.resolver.owned(), fresh.resolver.owned());
        assert!(fresh.resolver.owned() > "/etc/motd/etc/deb".len());
    }

    /// [`bundle`] with the promise on `redhat` there twice (two instances
    /// of one shared resolution on a host).
    fn body_for_sharing() -> Body {
        let mut body = bundle();
        body.order = List(vec![0, 1, 2, 2, 3, 4]);
        body
    }

    /// `define` sets a class as `policyvm run --define` does.
    #[test]
    fn defined_classes_make_promises_active() {
        let body = bundle();
        let facts = host(&[("sys.hostname", "db1"), ("sys.os_family", "alpine")]);
        let p = preview(&body, &facts, &NoProbes, &["redhat".into()]).unwrap();
        assert!(p.promises.iter().any(|p| p.promiser() == Some("/etc/rh")));
        assert!(!p.promises.iter().any(|p| p.promiser() == Some("/etc/deb")));
        assert!(!p.classes.contains(&"web".to_owned()));
    }
}
