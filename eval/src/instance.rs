//! A promise resolved for this host: its kind, promiser and attribute
//! values. Made by the resolver ([`crate::resolve`]), read by the VM's operators
//! and the system backends; it lives below both.

use std::sync::Arc;

use crate::secret::SecretText;

/// A resolved attribute value. Strings and embedded files are reference
/// counted, so every instance that names one constant shares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Str(Arc<str>),
    Int(i64),
    Bool(bool),
    Bytes(Arc<[u8]>),
    /// A file stored beside the bundle (format 2.6): its digest and size,
    /// never its bytes; the file operator streams it from the host's blob
    /// store. Boxed: its 40 bytes would make every value of every instance
    /// 48 bytes instead of 32 (issue 22, item 3).
    Blob(Box<converge_format::bundle::format::BlobRef>),
    List(Vec<String>),
    /// Text computed from secrets (issue 20): never a [`Value::as_str`],
    /// shown everywhere as `<secret NAME>`; only the file operator and the
    /// `user.password` backend read its text.
    Secret(Arc<SecretText>),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s.as_ref()),
            _ => None,
        }
    }

    /// The bytes of text the value holds.
    pub(crate) fn bytes(&self) -> usize {
        match self {
            Value::Str(s) => s.len(),
            Value::Bytes(b) => b.len(),
            Value::List(l) => l.iter().map(String::len).sum(),
            Value::Secret(s) => s.len(),
            Value::Int(_) | Value::Bool(_) | Value::Blob(_) => 0,
        }
    }

    /// How the value is shown in reports.
    pub fn display(&self) -> String {
        match self {
            Value::Str(s) => {
                // A value may be megabytes long; a report line names it.
                let shown: String = s.chars().take(200).collect();
                let more = if shown.len() < s.len() { "..." } else { "" };
                format!("{shown:?}{more}")
            }
            Value::Int(i) => i.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Bytes(b) => format!("<{} bytes>", b.len()),
            Value::Blob(b) => format!("<{} bytes, sha256:{}>", b.size, b.name()),
            Value::List(l) => format!("{l:?}"),
            Value::Secret(s) => s.label(),
        }
    }
}

/// One instance of a promise on this host (a promise inside a run-time
/// loop has one instance per element).
#[derive(Clone, Debug)]
pub struct Instance {
    /// Index of the promise in the bundle.
    pub index: usize,
    pub kind: &'static str,
    pub promiser: String,
    /// Attribute name and value, in the bundle's order.
    pub attrs: Vec<(&'static str, Value)>,
}

impl Instance {
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.attrs.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    pub fn str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(Value::as_str)
    }

    pub fn int(&self, name: &str) -> Option<i64> {
        match self.get(name) {
            Some(Value::Int(i)) => Some(*i),
            _ => None,
        }
    }

    pub fn bool(&self, name: &str) -> Option<bool> {
        match self.get(name) {
            Some(Value::Bool(b)) => Some(*b),
            _ => None,
        }
    }

    /// The secret an attribute holds, if its value was computed from one.
    pub fn secret(&self, name: &str) -> Option<&SecretText> {
        match self.get(name) {
            Some(Value::Secret(s)) => Some(s),
            _ => None,
        }
    }

    pub fn list(&self, name: &str) -> Option<&[String]> {
        match self.get(name) {
            Some(Value::List(l)) => Some(l),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every attribute of every instance of a pass is a `Value`, and the
    /// resolver caches one per constant: a large variant would cost every
    /// one of them (issue 22, item 3). A `Vec` and a tag is the most.
    #[test]
    fn a_value_is_no_larger_than_a_list_and_its_tag() {
        assert!(
            std::mem::size_of::<Value>() <= 32,
            "{}",
            std::mem::size_of::<Value>()
        );
        assert_eq!(
            std::mem::size_of::<Option<Value>>(),
            std::mem::size_of::<Value>()
        );
    }
}
