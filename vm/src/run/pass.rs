//! The instances of a pass, held compactly (issue 22, item 3).
//!
//! A pass resolves every active instance before it applies any: the
//! run-time contradiction check compares the instances of one object, and
//! a later pass checks again only the instances that changed ([`dirty`]).
//! Holding every resolved [`Instance`] for that (its promiser, attribute
//! list and values: about 280 bytes a promise) was the largest part of a
//! converged run's memory, beside the decoded body it duplicates. So a
//! pass keeps of each instance only its promise, its loop element, its
//! type and a digest of what it resolved to ([`Held`]), and resolves it
//! again when it applies it ([`Resolver::resolve_again`]: resolution is a
//! pure function of the promise, the classes and the loop element).
//!
//! What needs more than one instance at a time is gathered while they are
//! resolved ([`Gathered`]): the objects named by more than one promise
//! (only their instances are resolved again to be compared), the `mount`
//! instances, and the services and commands a `notify` may name. The few
//! operators that read every instance of the pass (a `directory` tree or
//! purge, the package batch) get them [`materialize`]d, once per pass.
//!
//! [`dirty`]: super::dirty

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};
use sha2::{Digest, Sha256};

use super::resolve::{Instance, Resolver, Value};
use super::Unresolved;
use crate::bundle::format::{Body, Constant, Item, Operand, Promise};
use crate::eval::Evaluator;

/// One instance of the pass, as resolved: its promise's index, its
/// run-time loop element, and what it resolved to (or why it did not).
pub(super) type Full = (usize, Vec<String>, Result<Instance, Unresolved>);

/// One instance of the pass as the pass holds it: 16 bytes, its promise's
/// index and, only when there is any, the rest ([`More`]). An instance of
/// constants only without a loop element, what most of a converged run's
/// instances are, is its index alone: a pass of 10,000 of them holds
/// 160 kB, where a loop element and a result inline made it 320 kB.
#[derive(Debug)]
pub(super) struct Held {
    /// Its promise's index (a body holds far fewer than `u32::MAX`).
    index: u32,
    more: Option<Box<More>>,
}

/// What an instance holds beside its promise's index, when it is not
/// nothing: its run-time loop element, and what it resolved to
/// ([`resolved`]) or why it did not.
#[derive(Debug)]
struct More {
    combo: Vec<String>,
    resolved: Result<Resolved, Unresolved>,
}

/// What a pass keeps of a resolved instance: nothing for an instance of
/// the bundle's constants only (its promise and loop element say which
/// instance it is), the [`digest`] of one that computed something.
pub(super) type Resolved = Option<[u8; 16]>;

impl Held {
    pub fn new(index: usize, combo: Vec<String>, resolved: Result<Resolved, Unresolved>) -> Self {
        let nothing = combo.is_empty() && matches!(resolved, Ok(None));
        Held {
            index: u32::try_from(index).unwrap_or(u32::MAX),
            more: (!nothing).then(|| Box::new(More { combo, resolved })),
        }
    }

    pub fn index(&self) -> usize {
        self.index as usize
    }

    pub fn combo(&self) -> &[String] {
        self.more.as_deref().map_or(&[], |m| m.combo.as_slice())
    }

    pub fn resolved(&self) -> Result<&Resolved, &Unresolved> {
        match self.more.as_deref() {
            Some(more) => more.resolved.as_ref(),
            None => Ok(&None),
        }
    }
}

/// What a pass keeps of `inst`, an instance of `promise`. The digest is
/// taken only of an instance that computed something on the host (a
/// promiser or value with a program): one whose promiser and values are
/// all the bundle's constants is the same instance in every pass (what
/// the constants resolve to depends on nothing else), so its promise and
/// loop element already say which instance it is, and a converged run of
/// constant promises digests nothing.
pub(super) fn resolved(inst: &Instance, promise: Option<&Promise>) -> Resolved {
    let constant = promise.is_some_and(|p| {
        matches!(p.promiser, Item::Const(_))
            && p.attrs.iter().all(|a| match &a.value {
                Operand::Item(i) => matches!(i, Item::Const(_)),
                Operand::List(items) => items.iter().all(|i| matches!(i, Item::Const(_))),
            })
    });
    (!constant).then(|| digest(inst))
}

/// SHA-256 of everything an instance resolved to (its promise, type,
/// promiser and each attribute's name and value), truncated to 128 bits:
/// two instances with the same digest are the same instance. A secret's
/// text is digested too (the digest stays in memory and is never shown).
pub(super) fn digest(inst: &Instance) -> [u8; 16] {
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(&(inst.index as u64).to_le_bytes());
    field(inst.kind.as_bytes());
    field(inst.promiser.as_bytes());
    for (name, value) in &inst.attrs {
        field(name.as_bytes());
        match value {
            Value::Str(s) => {
                field(b"s");
                field(s.as_bytes());
            }
            Value::Int(i) => {
                field(b"i");
                field(&i.to_le_bytes());
            }
            Value::Bool(b) => {
                field(b"b");
                field(&[u8::from(*b)]);
            }
            Value::Bytes(b) => {
                field(b"y");
                field(b);
            }
            Value::Blob(b) => {
                field(b"o");
                field(&b.sha256);
                field(&b.size.to_le_bytes());
            }
            Value::List(l) => {
                field(b"l");
                field(&(l.len() as u64).to_le_bytes());
                for item in l {
                    field(item.as_bytes());
                }
            }
            Value::Secret(s) => {
                field(b"x");
                field(s.expose().as_bytes());
            }
        }
    }
    let full: [u8; 32] = h.finalize().into();
    let mut out = [0u8; 16];
    for (o, b) in out.iter_mut().zip(full) {
        *o = b;
    }
    out
}

/// The hash of an instance's object, `(kind, promiser, part)` as
/// `ObjectGroups` compares them: equal objects hash equally, so the
/// instances of an object named by more than one promise are found among
/// those that share a hash (a collision only costs resolving them again).
fn object_hash(inst: &Instance) -> u64 {
    let mut h = FxHasher::default();
    inst.kind.hash(&mut h);
    inst.promiser.hash(&mut h);
    for name in crate::schema::part_identity(inst.kind) {
        inst.str(name).hash(&mut h);
    }
    h.finish()
}

/// The text of constant `c`, if it is a string or a word.
fn constant_text(body: &Body, c: u32) -> Option<&str> {
    match body.constants.get(c as usize) {
        Some(Constant::Str(s) | Constant::Word(s)) => Some(s),
        _ => None,
    }
}

/// Whether the pass may hold an instance of `promise` (of type `kind`)
/// without resolving it before the pass is applied: its promiser and
/// every value are the bundle's constants, its promiser and list elements
/// strings (what [`Resolver::charge_constants`] charges), and nothing
/// gathered from the pass's instances needs it resolved (it is not a
/// service, command, mount or a type `unmanaged` promises look for). Its
/// object's hash is then taken from the constants ([`Gathered::note_constants`]).
/// Resolving it only to apply it, a converged run resolves each such
/// instance once, as before the pass held digests.
pub(super) fn light(body: &Body, promise: &Promise, kind: &str) -> bool {
    let text = |i: &Item| matches!(i, Item::Const(c) if constant_text(body, *c).is_some());
    !matches!(kind, "service" | "command" | "mount")
        && !crate::schema::UNMANAGED_TYPES.contains(&kind)
        && text(&promise.promiser)
        && promise.attrs.iter().all(|a| match &a.value {
            Operand::Item(i) => matches!(i, Item::Const(_)),
            Operand::List(items) => items.iter().all(text),
        })
}

/// What the pass gathers from its instances while it resolves them.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    /// Per instance that names an object (a `line` names none): its
    /// object's hash and its position.
    objects: Vec<(u64, u32)>,
    /// The positions of the `mount` instances.
    mounts: Vec<u32>,
    /// The services and commands of the pass, by promise: `(kind,
    /// promiser)` of each instance, in pass order (what a `notify` owes).
    pub targets: FxHashMap<usize, Vec<(&'static str, String)>>,
}

impl Gathered {
    /// For a pass of about `instances` instances (one object each, most
    /// often: sized once instead of doubling).
    pub fn with_capacity(instances: usize) -> Self {
        Gathered {
            objects: Vec::with_capacity(instances),
            ..Gathered::default()
        }
    }

    /// Notes the instance at `position`.
    pub fn note(&mut self, position: usize, inst: &Instance) {
        let Ok(at) = u32::try_from(position) else {
            return;
        };
        if inst.kind != "line" {
            self.objects.push((object_hash(inst), at));
        }
        if inst.kind == "mount" {
            self.mounts.push(at);
        }
        if matches!(inst.kind, "service" | "command") {
            self.targets
                .entry(inst.index)
                .or_default()
                .push((inst.kind, inst.promiser.clone()));
        }
    }

    /// Notes the instance at `position` of `promise`, one the pass holds
    /// without resolving it ([`light`]): its object's hash is that of the
    /// instance it resolves to ([`object_hash`]), from the constants.
    pub fn note_constants(
        &mut self,
        position: usize,
        body: &Body,
        promise: &Promise,
        kind: &'static str,
    ) {
        let Ok(at) = u32::try_from(position) else {
            return;
        };
        if kind == "line" {
            return;
        }
        let promiser = match promise.promiser {
            Item::Const(c) => constant_text(body, c).unwrap_or_default(),
            Item::Code(_) => "",
        };
        let pt = crate::schema::promise_type_by_id(promise.kind);
        let value = |name: &str| -> Option<&str> {
            let a = promise.attrs.iter().find(|a| {
                pt.and_then(|t| t.attr_by_id(a.attr))
                    .is_some_and(|spec| spec.name == name)
            })?;
            match a.value {
                Operand::Item(Item::Const(c)) => constant_text(body, c),
                _ => None,
            }
        };
        let mut h = FxHasher::default();
        kind.hash(&mut h);
        promiser.hash(&mut h);
        for name in crate::schema::part_identity(kind) {
            value(name).hash(&mut h);
        }
        self.objects.push((h.finish(), at));
    }

    /// The positions of the instances that may contradict another: those
    /// whose object hash is shared with an instance of another promise, and
    /// every `mount` (mount states are compared per mount point).
    pub fn may_contradict(&mut self, held: &[Held]) -> Vec<u32> {
        self.objects.sort_unstable();
        let index = |at: u32| held.get(at as usize).map(Held::index);
        let mut out: Vec<u32> = Vec::new();
        for group in self.objects.chunk_by(|a, b| a.0 == b.0) {
            let first = group.first().and_then(|(_, at)| index(*at));
            if group.iter().any(|(_, at)| index(*at) != first) {
                out.extend(group.iter().map(|(_, at)| *at));
            }
        }
        out.extend_from_slice(&self.mounts);
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// The classes and evaluator a pass resolves its instances with.
pub(super) struct Resolving<'r, 'b, 'e> {
    pub body: &'b Body,
    pub resolver: &'r mut Resolver<'b>,
    pub eval: &'r mut Evaluator<'e>,
    pub classes: &'r BTreeSet<String>,
}

impl Resolving<'_, '_, '_> {
    /// Resolves `held` again: its instance, or why it did not resolve.
    pub fn instance(&mut self, held: &Held) -> Result<Instance, Unresolved> {
        if let Err(e) = held.resolved() {
            return Err(e.clone());
        }
        let Some(p) = self.body.promises.get(held.index()) else {
            return Err(Unresolved::Failed(format!(
                "cannot evaluate: promise {}",
                held.index()
            )));
        };
        self.resolver
            .resolve_again(self.eval, held.index(), p, self.classes, held.combo())
            .map_err(Unresolved::Failed)
    }

    /// The instances at `positions`, resolved again.
    pub fn some(&mut self, held: &[Held], positions: &[u32]) -> Vec<Full> {
        positions
            .iter()
            .filter_map(|at| held.get(*at as usize))
            .map(|h| (h.index(), h.combo().to_vec(), self.instance(h)))
            .collect()
    }
}

/// Every instance of the pass, resolved again, in pass order: for the
/// operators that read them all.
pub(super) fn materialize(r: &mut Resolving<'_, '_, '_>, held: &[Held]) -> Vec<Full> {
    held.iter()
        .map(|h| (h.index(), h.combo().to_vec(), r.instance(h)))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn file(index: usize, path: &str, content: &str) -> Instance {
        Instance {
            index,
            kind: "file",
            promiser: path.to_owned(),
            attrs: vec![("content", Value::Str(Arc::from(content)))],
        }
    }

    fn held(index: usize, inst: &Instance) -> Held {
        Held::new(index, Vec::new(), Ok(Some(digest(inst))))
    }

    /// The digest stands for the whole instance: whatever differs, the
    /// digest does (the incremental rule carries a check over only for
    /// the same instance).
    #[test]
    fn the_digest_changes_with_every_part_of_the_instance() {
        let a = file(0, "/a", "x");
        assert_eq!(digest(&a), digest(&a.clone()));
        let mut others = vec![file(1, "/a", "x"), file(0, "/b", "x"), file(0, "/a", "y")];
        let mut kind = a.clone();
        kind.kind = "directory";
        others.push(kind);
        let mut name = a.clone();
        name.attrs = vec![("source", Value::Str(Arc::from("x")))];
        others.push(name);
        let mut typed = a.clone();
        typed.attrs = vec![("content", Value::Bytes(Arc::from(&b"x"[..])))];
        others.push(typed);
        let mut list = a.clone();
        list.attrs = vec![("content", Value::List(vec!["x".into()]))];
        others.push(list);
        // Field boundaries are part of what is digested.
        let mut split = a.clone();
        split.attrs = vec![("content", Value::List(vec!["ab".into(), "c".into()]))];
        let mut joined = a.clone();
        joined.attrs = vec![("content", Value::List(vec!["a".into(), "bc".into()]))];
        assert_ne!(digest(&split), digest(&joined));
        for other in &others {
            assert_ne!(digest(&a), digest(other), "{other:?}");
        }
    }

    /// A pass holds 16 bytes per instance of constants only (it held a
    /// whole resolved instance, about 280 bytes for a file with content
    /// and mode), and the rest only when there is any.
    #[test]
    fn a_held_instance_is_small() {
        assert_eq!(std::mem::size_of::<Held>(), 16);
        let plain = Held::new(7, Vec::new(), Ok(None));
        assert!(plain.more.is_none());
        assert_eq!(
            (plain.index(), plain.combo(), plain.resolved()),
            (7, &[][..], Ok(&None))
        );
        let looped = Held::new(7, vec!["10.0.0.1".into()], Ok(Some([1; 16])));
        assert_eq!(looped.combo(), ["10.0.0.1"]);
        assert_eq!(looped.resolved(), Ok(&Some([1; 16])));
        let failed = Held::new(7, Vec::new(), Err(Unresolved::Failed("no".into())));
        assert!(failed.resolved().is_err());
    }

    /// An instance held without being resolved is grouped by the hash of
    /// the object it resolves to: a `setting` by its file, section and key.
    #[test]
    fn an_unresolved_instance_hashes_as_the_instance_it_resolves_to() {
        use crate::bundle::format::{AttrValue, FixedList, List, PromiseParts, SourceLoc};
        use crate::facts::Facts;
        let mut body = Body::with_programs(
            vec![
                Constant::Str("/etc/app.ini".into()),
                Constant::Str("main".into()),
                Constant::Str("port".into()),
                Constant::Str("80".into()),
            ],
            Vec::new(),
        );
        let setting = crate::schema::promise_type("setting").unwrap();
        let attr = |name: &str, c: u32| AttrValue {
            attr: setting.all_attrs().find(|a| a.name == name).unwrap().id,
            value: Operand::Item(Item::Const(c)),
        };
        let promise = Promise::from(PromiseParts {
            attrs: FixedList::from(vec![attr("section", 1), attr("key", 2), attr("value", 3)]),
            ..PromiseParts::new(setting.id, Item::Const(0))
        });
        body.promises = List(vec![promise.clone()]);
        body.sources = List(vec![SourceLoc { file: 0, line: 1 }]);
        assert!(light(&body, &promise, "setting"));
        let root = tempfile::tempdir().unwrap();
        let facts = Facts::gather(root.path());
        let mut eval = Evaluator::new(&body, &facts);
        let mut resolver = Resolver::new(&body);
        let inst = resolver
            .resolve(&mut eval, 0, &promise, &BTreeSet::new(), &[])
            .unwrap();
        let mut gathered = Gathered::default();
        gathered.note_constants(0, &body, &promise, "setting");
        assert_eq!(gathered.objects, [(object_hash(&inst), 0)]);
    }

    /// Only objects named by more than one promise are resolved again to
    /// be compared; instances of one promise never contradict each other.
    #[test]
    fn only_objects_of_several_promises_may_contradict() {
        let instances = [
            file(0, "/a", "x"),
            file(1, "/b", "x"),
            file(2, "/a", "y"),
            file(3, "/c", "x"),
            file(3, "/c", "y"),
        ];
        let mut gathered = Gathered::default();
        let held: Vec<Held> = instances
            .iter()
            .enumerate()
            .map(|(at, inst)| {
                gathered.note(at, inst);
                held(inst.index, inst)
            })
            .collect();
        assert_eq!(gathered.may_contradict(&held), [0, 2]);
    }
}
