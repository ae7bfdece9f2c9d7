//! One host's promises as the plan compares them: each active promise of
//! one policy resolved for the host (promiser and attribute values), and
//! the promises whose resolution needs a fact the host's known facts lack.
//! Made by `super::resolve` from what the evaluator returns.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A resolved attribute value as the plan shows and compares it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Shown {
    Text(Arc<str>),
    Int(i64),
    Bool(bool),
    /// An embedded file (`source = "files/x"`): compared by its bytes,
    /// shown by its size (and diffed when both sides are UTF-8).
    Bytes(Arc<[u8]>),
    List(Vec<String>),
    /// A value computed from secrets: only its name is ever shown.
    /// `version` tells two versions of it apart (a digest of the encrypted
    /// files and of the text around them), never the plaintext.
    Secret {
        label: String,
        version: u64,
    },
}

impl Shown {
    /// How the value is printed on one line.
    pub fn display(&self) -> String {
        match self {
            Shown::Text(s) if s.len() > 200 => {
                format!("<{} lines, {} bytes>", s.lines().count(), s.len())
            }
            Shown::Text(s) => format!("{:?}", s.as_ref()),
            Shown::Int(i) => i.to_string(),
            Shown::Bool(b) => b.to_string(),
            Shown::Bytes(b) => format!("<{} bytes>", b.len()),
            Shown::List(l) => format!("{l:?}"),
            Shown::Secret { label, .. } => label.clone(),
        }
    }

    /// The text a unified diff compares, when the value is text.
    pub fn diff_text(&self) -> Option<&str> {
        match self {
            Shown::Text(s) => Some(s),
            Shown::Bytes(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// The value as JSON: secrets by their label only.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Shown::Text(s) => Value::from(s.as_ref()),
            Shown::Int(i) => Value::from(*i),
            Shown::Bool(b) => Value::from(*b),
            Shown::Bytes(b) => match std::str::from_utf8(b) {
                Ok(text) => Value::from(text),
                Err(_) => Value::from(format!("<{} bytes>", b.len())),
            },
            Shown::List(l) => Value::from(l.clone()),
            Shown::Secret { label, .. } => Value::from(label.clone()),
        }
    }
}

/// A promise's identity across the two policies: its type and promiser
/// (and which of several instances with both, in the policy's order). The
/// promiser is shared: a promise the evaluator resolves once for every
/// host (`converge_eval::preview`) is one string, not one per host.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PromiseKey {
    pub kind: &'static str,
    pub promiser: Arc<str>,
    pub occurrence: u32,
}

impl PromiseKey {
    /// `file "/etc/motd"`.
    pub fn display(&self) -> String {
        if self.occurrence == 0 {
            format!("{} {:?}", self.kind, self.promiser)
        } else {
            format!(
                "{} {:?} (#{})",
                self.kind,
                self.promiser,
                self.occurrence + 1
            )
        }
    }
}

/// One active promise, resolved for a host. Cheap to clone (shared
/// promiser and attributes): hosts on which a promise resolves the same
/// share one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub key: PromiseKey,
    /// Attribute name and value, in the bundle's order.
    pub attrs: Arc<[(&'static str, Shown)]>,
    /// Set when whether the promise runs depends on what the run does (an
    /// outcome class of another promise): the class it waits for.
    pub conditional: Option<String>,
    /// A digest of everything above: two promises with the same key and
    /// hash are taken as equal without comparing their values.
    pub hash: u64,
    /// A digest of the key's type and promiser (not its occurrence): a
    /// host whose promises' digests are all different has no promise
    /// twice, and so no occurrence to number.
    pub key_hash: u64,
}

impl Resolved {
    pub fn new(
        key: PromiseKey,
        attrs: impl Into<Arc<[(&'static str, Shown)]>>,
        conditional: Option<String>,
    ) -> Self {
        let attrs = attrs.into();
        let mut h = rustc_hash::FxHasher::default();
        attrs.hash(&mut h);
        conditional.hash(&mut h);
        let mut k = rustc_hash::FxHasher::default();
        key.kind.hash(&mut k);
        key.promiser.hash(&mut k);
        Resolved {
            key,
            attrs,
            conditional,
            hash: h.finish(),
            key_hash: k.finish(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Shown> {
        self.attrs.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

/// Equal promises hash equal: equal keys and values give equal `hash`.
impl Hash for Resolved {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key.hash(state);
        state.write_u64(self.hash);
    }
}

/// A promise that cannot be resolved for a host.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Unresolved {
    /// `file "/etc/motd"`, or `file at site.policy:12` when its promiser
    /// is computed on the host.
    pub what: String,
    /// Unknown (a fact it needs is not known) or failing on the host.
    pub failing: bool,
    /// The fact it needs, when that is why it is unknown
    /// (`sys.os_family`, `facts.datacenter`).
    pub needs: Option<String>,
    /// The evaluator's reason.
    pub reason: String,
}

impl Unresolved {
    /// A promise whose activity or values need a fact the host lacks.
    pub fn unknown(what: String, reason: String) -> Self {
        Unresolved {
            what,
            failing: false,
            needs: needed_fact(&reason),
            reason,
        }
    }

    /// A promise that would fail on the host (a budget, an enum value
    /// computed there that is not one of its words).
    pub fn fails(what: String, reason: String) -> Self {
        Unresolved {
            what,
            failing: true,
            needs: None,
            reason,
        }
    }
}

/// The fact a reason of the evaluator names (`fact `sys.os_family` is not
/// given`, `class `debian` is unknown: it is derived from fact
/// `sys.os_family`, ...`): the first fact written so.
fn needed_fact(reason: &str) -> Option<String> {
    let at = reason.find("fact `")?;
    let rest = reason.get(at + "fact `".len()..)?;
    let end = rest.find('`')?;
    rest.get(..end).map(str::to_owned)
}

/// Everything one policy gives one host.
#[derive(Clone, Debug, Default)]
pub struct HostPromises {
    /// The active promises, in the policy's order.
    pub promises: Vec<Resolved>,
    pub unresolved: Vec<Unresolved>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fact_an_unknown_needs_is_read_from_the_reason() {
        let u = Unresolved::unknown("f".into(), "fact `sys.os_family` is not given".into());
        assert_eq!(u.needs.as_deref(), Some("sys.os_family"));
        let u = Unresolved::unknown(
            "f".into(),
            "class `debian` is unknown: it is derived from fact `sys.os_family`, which is not given".into(),
        );
        assert_eq!(u.needs.as_deref(), Some("sys.os_family"));
        assert_eq!(Unresolved::unknown("f".into(), "budget".into()).needs, None);
    }
}
