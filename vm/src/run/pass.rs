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
use crate::bundle::format::{Body, Item, Operand, Promise};
use crate::eval::Evaluator;

/// One instance of the pass, as resolved: its promise's index, its
/// run-time loop element, and what it resolved to (or why it did not).
pub(super) type Full = (usize, Vec<String>, Result<Instance, Unresolved>);

/// One instance of the pass as the pass holds it.
#[derive(Debug)]
pub(super) struct Held {
    pub index: usize,
    pub combo: Vec<String>,
    pub resolved: Result<Resolved, Unresolved>,
}

/// What a pass keeps of a resolved instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Resolved {
    pub kind: &'static str,
    /// [`digest`] of the instance, or zeros for an instance of constants
    /// only ([`resolved`]).
    pub digest: [u8; 16],
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
    Resolved {
        kind: inst.kind,
        digest: if constant { [0; 16] } else { digest(inst) },
    }
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

    /// The positions of the instances that may contradict another: those
    /// whose object hash is shared with an instance of another promise, and
    /// every `mount` (mount states are compared per mount point).
    pub fn may_contradict(&mut self, held: &[Held]) -> Vec<u32> {
        self.objects.sort_unstable();
        let index = |at: u32| held.get(at as usize).map(|h| h.index);
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
        match &held.resolved {
            Err(e) => Err(e.clone()),
            Ok(_) => {
                let Some(p) = self.body.promises.get(held.index) else {
                    return Err(Unresolved::Failed(format!(
                        "cannot evaluate: promise {}",
                        held.index
                    )));
                };
                self.resolver
                    .resolve_again(self.eval, held.index, p, self.classes, &held.combo)
                    .map_err(Unresolved::Failed)
            }
        }
    }

    /// The instances at `positions`, resolved again.
    pub fn some(&mut self, held: &[Held], positions: &[u32]) -> Vec<Full> {
        positions
            .iter()
            .filter_map(|at| held.get(*at as usize))
            .map(|h| (h.index, h.combo.clone(), self.instance(h)))
            .collect()
    }
}

/// Every instance of the pass, resolved again, in pass order: for the
/// operators that read them all.
pub(super) fn materialize(r: &mut Resolving<'_, '_, '_>, held: &[Held]) -> Vec<Full> {
    held.iter()
        .map(|h| (h.index, h.combo.clone(), r.instance(h)))
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
        Held {
            index,
            combo: Vec::new(),
            resolved: Ok(Resolved {
                kind: inst.kind,
                digest: digest(inst),
            }),
        }
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
