//! Turning a promise of the bundle into what one host must converge to:
//! its promiser and attribute values evaluated against the facts, the
//! classes and the current elements of its run-time loops.
//!
//! Constants are shared, never copied per instance: a 1 MiB `content` named
//! by a thousand promises is one allocation, not a gigabyte (issue 14, item
//! 4). What an instance does own (values computed on the host, lists,
//! promisers) counts against [`MAX_PASS_TEXT`].

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::bundle::format::{Body, Constant, Item, Operand, Promise};
use crate::bundle::verify::is_secret_sink;
use crate::eval::{Evaluated, Evaluator, Val};
use crate::schema::{promise_type_by_id, AttrType};

pub use crate::instance::{Instance, Value};

/// The most instances one promise's run-time loops may expand to. Run-time
/// loops range over host facts such as `sys.ipv4`; a hostile but validly
/// signed bundle could nest dozens of them to ask for more instances than
/// there are atoms (THREATS.md T14). No real host comes near this many.
pub const MAX_LOOP_INSTANCES: usize = 1 << 16;

/// The element combinations of a promise's run-time loops (one empty
/// combination when there is no loop), or why there would be too many.
pub fn loop_combinations(facts_of: &[Vec<String>]) -> Result<Vec<Vec<String>>, String> {
    let count = facts_of
        .iter()
        .try_fold(1usize, |n, list| n.checked_mul(list.len()));
    match count {
        Some(n) if n <= MAX_LOOP_INSTANCES => {}
        _ => {
            return Err(format!(
                "its loops over host facts expand to more than {MAX_LOOP_INSTANCES} instances"
            ))
        }
    }
    let mut combos: Vec<Vec<String>> = vec![Vec::new()];
    for list in facts_of {
        let mut next = Vec::with_capacity(combos.len().saturating_mul(list.len()));
        for combo in &combos {
            for item in list {
                let mut c = combo.clone();
                c.push(item.clone());
                next.push(c);
            }
        }
        combos = next;
    }
    Ok(combos)
}

/// The most bytes of text the instances of one pass may own (values
/// computed on the host, list elements, promisers; shared constants do not
/// count). Past it, the instances still to resolve fail with the reason.
/// Twice the text one program run may produce ([`crate::eval::MAX_EVAL_BYTES`]).
pub const MAX_PASS_TEXT: usize = 2 * crate::eval::MAX_EVAL_BYTES;

/// Resolves the promises of one bundle over a run: holds the constants as
/// shared values, and counts what the instances of the current pass own.
#[derive(Debug)]
pub struct Resolver<'b> {
    body: &'b Body,
    /// Per constant, how many attribute values of the body's promises name
    /// it: 0, 1, or [`SHARED`] (two or more, or one inside run-time loops,
    /// which has an instance per loop element).
    uses: Vec<u8>,
    /// The constants named more than once (and secrets, opened once per
    /// run) as shared values, made on first use. A constant named by one
    /// promise outside loops is made for its instance and held by it alone:
    /// a cache of every constant held each one twice (the body's and the
    /// cache's copy) and cost a slot per constant (issue 22, item 3).
    constants: HashMap<u32, Value>,
    /// Bytes of text the instances of this pass own.
    text: usize,
}

/// [`Resolver::uses`] of a constant its instances share.
const SHARED: u8 = 2;

impl<'b> Resolver<'b> {
    pub fn new(body: &'b Body) -> Self {
        let mut uses = vec![0u8; body.constants.len()];
        for p in body.promises.iter() {
            let add = if p.loops().is_empty() { 1 } else { SHARED };
            for a in p.attrs.iter() {
                if let Operand::Item(Item::Const(c)) = a.value {
                    if let Some(n) = uses.get_mut(c as usize) {
                        *n = n.saturating_add(add).min(SHARED);
                    }
                }
            }
        }
        Resolver {
            body,
            uses,
            constants: HashMap::new(),
            text: 0,
        }
    }

    /// Whether constant `c` is kept for the instances that name it. One
    /// the count does not know (named by a promise outside the body) is.
    fn shared(&self, c: u32) -> bool {
        self.uses.get(c as usize).is_none_or(|n| *n != 1)
    }

    /// A new pass: its instances start from an empty [`MAX_PASS_TEXT`].
    pub fn start_pass(&mut self) {
        self.text = 0;
    }

    /// Bytes of text the instances of this pass own so far.
    pub(crate) fn owned(&self) -> usize {
        self.text
    }

    /// Counts `bytes` an instance owns against [`MAX_PASS_TEXT`].
    pub(crate) fn own(&mut self, bytes: usize) -> Result<(), String> {
        self.text = self.text.saturating_add(bytes);
        if self.text > MAX_PASS_TEXT {
            return Err(format!(
                "the promises of this pass hold more than {} MiB of text computed on the host (docs/bytecode.md, Limits)",
                MAX_PASS_TEXT >> 20
            ));
        }
        Ok(())
    }

    /// Constant `c` as a shared value; a secret is opened (once per run)
    /// with the host identity the evaluator holds.
    fn constant(&mut self, eval: &mut Evaluator<'_>, c: u32) -> Result<Value, String> {
        if let Some(v) = self.constants.get(&c) {
            return Ok(v.clone());
        }
        let value = match self.body.constants.get(c as usize) {
            Some(Constant::Str(s) | Constant::Word(s)) => Value::Str(Arc::from(s.as_str())),
            Some(Constant::Int(i)) => Value::Int(*i),
            Some(Constant::Duration(s)) => Value::Int(i64::try_from(*s).unwrap_or(i64::MAX)),
            Some(Constant::Bool(b)) => Value::Bool(*b),
            Some(Constant::Blob(b)) => Value::Bytes(Arc::from(b.0.as_slice())),
            Some(Constant::BlobRef(b)) => Value::Blob(b.clone()),
            // Refused by the verifier as an attribute value; kept whole.
            Some(Constant::List(l)) => Value::List(l.0.clone()),
            // Refused by the verifier as an attribute value: only `lookup`
            // reads a table, only `probe` a probe.
            Some(Constant::Table(_) | Constant::Probe(_) | Constant::SealedSet(_)) | None => {
                return Err(format!("cannot evaluate: constant {c}"))
            }
            Some(Constant::Secret(_)) => Value::Secret(eval.reveal(c)?),
        };
        // Numbers and truth values own nothing to share.
        let owns = !matches!(value, Value::Int(_) | Value::Bool(_));
        if owns && (self.shared(c) || matches!(value, Value::Secret(_))) {
            self.constants.insert(c, value.clone());
        }
        Ok(value)
    }

    fn item(
        &mut self,
        eval: &mut Evaluator<'_>,
        item: Item,
        classes: &BTreeSet<String>,
        loops: &[String],
    ) -> Result<Value, String> {
        match item {
            Item::Const(c) => self.constant(eval, c),
            Item::Code(p) => {
                // A probe fact that is unknown here is its own reason (the
                // promise is skipped with it), not an evaluation failure.
                let value = match eval.run_sink(p, classes, loops).map_err(|e| {
                    if eval.failed_on_unknown() {
                        e.0
                    } else {
                        e.to_string()
                    }
                })? {
                    Evaluated::Plain(Val::Str(s)) => Value::Str(Arc::from(s)),
                    Evaluated::Plain(Val::Int(i)) => Value::Int(i),
                    Evaluated::Plain(Val::Bool(b)) => Value::Bool(b),
                    Evaluated::Plain(Val::List(l)) => Value::List(l),
                    Evaluated::Secret(text) => Value::Secret(Arc::new(text)),
                };
                self.own(value.bytes())?;
                Ok(value)
            }
        }
    }

    /// The text of an item as a list element or promiser.
    fn text(
        &mut self,
        eval: &mut Evaluator<'_>,
        item: Item,
        classes: &BTreeSet<String>,
        loops: &[String],
    ) -> Result<String, String> {
        // A constant string is copied straight from the body: caching it
        // as a shared value too would hold every promiser twice more
        // (issue 22, item 3).
        if let Item::Const(c) = item {
            if let Some(Constant::Str(s) | Constant::Word(s)) = self.body.constants.get(c as usize)
            {
                self.own(s.len())?;
                return Ok(s.to_string());
            }
        }
        let text = match self.item(eval, item, classes, loops)? {
            Value::Str(s) => s.as_ref().to_owned(),
            // A promiser or a list element is shown by every output.
            Value::Secret(s) => return Err(not_a_sink(&s.label())),
            other => other.display(),
        };
        self.own(text.len())?;
        Ok(text)
    }

    /// Resolves one instance of a promise: its promiser and attributes on
    /// this host, each enum value checked against the schema (a value
    /// computed on the host, `state = "${sys.hostname}"`, is only known
    /// here).
    pub fn resolve(
        &mut self,
        eval: &mut Evaluator<'_>,
        index: usize,
        promise: &Promise,
        classes: &BTreeSet<String>,
        loops: &[String],
    ) -> Result<Instance, String> {
        let pt = promise_type_by_id(promise.kind)
            .ok_or_else(|| format!("cannot evaluate: promise type {}", promise.kind))?;
        let promiser = self.text(eval, promise.promiser, classes, loops)?;
        let mut attrs = Vec::with_capacity(promise.attrs.len());
        for a in promise.attrs.iter() {
            let spec = pt
                .attr_by_id(a.attr)
                .ok_or_else(|| format!("cannot evaluate: attribute {}", a.attr))?;
            let value = match &a.value {
                Operand::Item(i) => match self.item(eval, *i, classes, loops)? {
                    Value::Secret(s) if !is_secret_sink(promise.kind, a.attr) => {
                        return Err(not_a_sink(&s.label()))
                    }
                    value => value,
                },
                Operand::List(items) => {
                    let mut list = Vec::with_capacity(items.len());
                    for i in items.iter() {
                        list.push(self.text(eval, *i, classes, loops)?);
                    }
                    Value::List(list)
                }
            };
            check_enum(spec.name, &spec.ty, &value)?;
            attrs.push((spec.name, value));
        }
        Ok(Instance {
            index,
            kind: pt.name,
            promiser,
            attrs,
        })
    }

    /// Charges the pass's text what [`Resolver::resolve`] would for an
    /// instance of `promise` whose promiser and values are all constants
    /// (its promiser and each list element), without resolving it: a pass
    /// that holds such an instance only by its promise resolves it when it
    /// applies it ([`Resolver::resolve_again`]).
    pub fn charge_constants(&mut self, promise: &Promise) -> Result<(), String> {
        let text_of = |item: &Item| match item {
            Item::Const(c) => match self.body.constants.get(*c as usize) {
                Some(Constant::Str(s) | Constant::Word(s)) => s.len(),
                _ => 0,
            },
            Item::Code(_) => 0,
        };
        let mut bytes = text_of(&promise.promiser);
        for a in promise.attrs.iter() {
            if let Operand::List(items) = &a.value {
                bytes = items.iter().map(text_of).fold(bytes, usize::saturating_add);
            }
        }
        self.own(bytes)
    }

    /// Resolves again an instance this pass has already resolved (a pass
    /// keeps of each instance only its digest, and resolves it again to
    /// apply it: issue 22, item 3). Resolution is a pure function of the
    /// promise, the classes and the loop element, so the instance is the
    /// one resolved before; it is charged neither to the pass's text nor to
    /// the run's evaluation budget a second time.
    pub fn resolve_again(
        &mut self,
        eval: &mut Evaluator<'_>,
        index: usize,
        promise: &Promise,
        classes: &BTreeSet<String>,
        loops: &[String],
    ) -> Result<Instance, String> {
        let (text, steps) = (self.text, eval.steps_left());
        let again = self.resolve(eval, index, promise, classes, loops);
        self.text = text;
        eval.restore_steps(steps);
        again
    }
}

/// Why a secret is refused where the verifier should already have refused
/// it (a second line of defence: a promiser, a list element or an
/// attribute other than `file` content or template and `user` password).
fn not_a_sink(label: &str) -> String {
    format!(
        "{label} may only be the content or template of a file or the password of a user; the promise is not applied"
    )
}

/// A value of an enum attribute (or a list of them) is one of its words.
fn check_enum(name: &str, ty: &AttrType, value: &Value) -> Result<(), String> {
    let (words, values): (&[&str], Vec<&str>) = match (ty, value) {
        (AttrType::Enum(words), Value::Str(s)) => (words, vec![s.as_ref()]),
        (AttrType::List(AttrType::Enum(words)), Value::List(l)) => {
            (words, l.iter().map(String::as_str).collect())
        }
        (AttrType::Enum(words) | AttrType::List(AttrType::Enum(words)), other) => {
            return Err(format!(
                "`{name}` is {} on this host, not one of {}",
                other.display(),
                words.join(", ")
            ))
        }
        _ => return Ok(()),
    };
    match values.into_iter().find(|v| !words.contains(v)) {
        None => Ok(()),
        Some(bad) => {
            let shown: String = bad.chars().take(64).collect();
            let more = if shown.len() < bad.len() { "..." } else { "" };
            Err(format!(
                "`{name}` is {shown:?}{more} on this host, not one of {}; the promise is not applied",
                words.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_expand_to_every_combination_up_to_the_cap() {
        let two = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(loop_combinations(&[]), Ok(vec![Vec::new()]));
        assert_eq!(
            loop_combinations(&[two.clone(), vec!["x".to_owned()]]),
            Ok(vec![
                vec!["a".into(), "x".into()],
                vec!["b".into(), "x".into()]
            ])
        );
        assert_eq!(
            loop_combinations(&[two.clone(), Vec::new()]),
            Ok(Vec::new())
        );
        // 2^16 instances is the cap itself; one more loop is refused before
        // anything is allocated, and so is a count that overflows.
        assert_eq!(
            loop_combinations(&vec![two.clone(); 16]).map(|c| c.len()),
            Ok(1 << 16)
        );
        assert!(loop_combinations(&vec![two.clone(); 17]).is_err());
        let err = loop_combinations(&vec![two; 200]).unwrap_err();
        assert!(err.contains("more than 65536 instances"), "{err}");
    }

    /// A body of `copies` file promises whose `content` is one 1 MiB
    /// constant, each inside `loops` run-time loops.
    fn one_content(copies: usize, loops: &[u32]) -> Body {
        use crate::bundle::format::{AttrValue, FixedList, List, SourceLoc};
        let mut body = Body::with_programs(
            vec![
                Constant::Str("/f".into()),
                Constant::Str("y".repeat(1 << 20).into()),
            ],
            Vec::new(),
        );
        let file = crate::schema::promise_type("file").unwrap();
        let content = file.all_attrs().find(|a| a.name == "content").unwrap();
        let promise = Promise::from(converge_format::bundle::format::PromiseParts {
            attrs: FixedList::from(vec![AttrValue {
                attr: content.id,
                value: Operand::Item(Item::Const(1)),
            }]),
            loops: FixedList::from(loops.to_vec()),
            ..converge_format::bundle::format::PromiseParts::new(file.id, Item::Const(0))
        });
        body.promises = List(vec![promise; copies]);
        body.sources = List(vec![SourceLoc { file: 0, line: 1 }]);
        body
    }

    /// The `content` of two instances, resolved from promises `a` and `b`
    /// of `body` (the same promise for two loop elements when `a == b`).
    fn two_contents(body: &Body, a: usize, b: usize) -> (Value, Value, Resolver<'_>) {
        let facts = crate::facts::web01();
        let mut eval = Evaluator::new(body, &facts);
        let mut resolver = Resolver::new(body);
        let mut content = |i: usize, element: &str| {
            let inst = resolver
                .resolve(
                    &mut eval,
                    i,
                    body.promises.get(i).unwrap(),
                    &BTreeSet::new(),
                    &[element.to_owned()],
                )
                .unwrap();
            inst.get("content").unwrap().clone()
        };
        let x = content(a, "eth0");
        let y = content(b, "eth1");
        (x, y, resolver)
    }

    /// Two instances naming one constant share it: resolving a thousand
    /// promises of one 1 MiB `content` holds it once.
    #[test]
    fn instances_share_the_constants_they_name() {
        let body = one_content(2, &[]);
        let (x, y, resolver) = two_contents(&body, 0, 1);
        match (x, y) {
            (Value::Str(x), Value::Str(y)) => assert!(Arc::ptr_eq(&x, &y)),
            other => panic!("{other:?}"),
        }
        // Constants count against no pass budget; only the promisers do.
        assert_eq!(resolver.text, 4);
    }

    /// The instances of one promise inside a run-time loop share its
    /// constants too: a 1 MiB `content` looped over 65,536 elements is
    /// held once, not 64 GiB.
    #[test]
    fn loop_instances_share_their_promises_constants() {
        let interfaces = crate::schema::fact("sys.ipv4").unwrap().id;
        let body = one_content(1, &[u32::from(interfaces)]);
        let (x, y, resolver) = two_contents(&body, 0, 0);
        match (x, y) {
            (Value::Str(x), Value::Str(y)) => assert!(Arc::ptr_eq(&x, &y)),
            other => panic!("{other:?}"),
        }
        assert_eq!(resolver.constants.len(), 1);
    }

    /// A constant only one promise names (outside loops) is held by its
    /// instance alone: the resolver keeps no copy of it.
    #[test]
    fn a_constant_named_once_is_not_kept_by_the_resolver() {
        let body = one_content(1, &[]);
        let facts = crate::facts::web01();
        let mut eval = Evaluator::new(&body, &facts);
        let mut resolver = Resolver::new(&body);
        let inst = resolver
            .resolve(
                &mut eval,
                0,
                body.promises.get(0).unwrap(),
                &BTreeSet::new(),
                &[],
            )
            .unwrap();
        assert!(matches!(inst.get("content"), Some(Value::Str(s)) if s.len() == 1 << 20));
        assert!(resolver.constants.is_empty());
    }

    #[test]
    fn enum_values_are_checked_against_their_words() {
        let state = AttrType::Enum(&["present", "absent"]);
        assert!(check_enum("ensure", &state, &Value::Str("absent".into())).is_ok());
        let err = check_enum("ensure", &state, &Value::Str("web01\n".into())).unwrap_err();
        assert!(
            err.contains(r#"`ensure` is "web01\n" on this host, not one of present, absent"#),
            "{err}"
        );
        let list = AttrType::List(&AttrType::Enum(&["a", "b"]));
        assert!(check_enum("l", &list, &Value::List(vec!["a".into(), "b".into()])).is_ok());
        assert!(check_enum("l", &list, &Value::List(vec!["a".into(), "c".into()])).is_err());
        assert!(check_enum("s", &AttrType::String, &Value::Str("any".into())).is_ok());
    }
}
