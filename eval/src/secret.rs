//! Values computed from secrets (LANGUAGE.md section 14, issue 20): what
//! the evaluator holds after a secret was opened. Opening one is the
//! [`crate::sources::Secrets`] of the caller: the VM's keyring decrypts
//! with the host's age identity; policyc never decrypts.

use std::collections::BTreeSet;
use std::fmt;

use zeroize::Zeroizing;

/// A value computed from one or more secrets: its text (wiped from memory
/// when dropped) and the names of those secrets. `Debug` and `Display`
/// print only `<secret NAME>`, so an accidental `{:?}` in a log or a
/// report cannot leak it; [`SecretText::expose`] is the one way to the
/// text, and only the file operator and the `user.password` backend call
/// it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretText {
    /// Sorted, without duplicates, never empty.
    names: Vec<String>,
    text: Zeroizing<String>,
}

impl SecretText {
    /// `names`: the secrets the text was computed from (at least one).
    pub fn new(names: BTreeSet<String>, text: Zeroizing<String>) -> Self {
        SecretText {
            names: names.into_iter().collect(),
            text,
        }
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// `<secret NAME>` (`<secret A, B>` for a value computed from two):
    /// how every output shows it.
    pub fn label(&self) -> String {
        format!("<secret {}>", self.names.join(", "))
    }

    /// The plaintext, for the two places that write it: the file operator
    /// and the `user.password` backend.
    pub fn expose(&self) -> &str {
        &self.text
    }

    pub fn len(&self) -> usize {
        self.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}

impl fmt::Debug for SecretText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

impl fmt::Display for SecretText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_show_only_the_names() {
        let names: BTreeSet<String> = ["db_password".to_owned(), "api.token".to_owned()].into();
        let text = SecretText::new(names, Zeroizing::new("hunter2-plaintext".to_owned()));
        for shown in [
            format!("{text:?}"),
            format!("{text}"),
            format!("{:?}", Some(&text)),
        ] {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("<secret api.token, db_password>"), "{shown}");
        }
        assert_eq!(text.expose(), "hunter2-plaintext");
        assert_eq!(text.len(), 17);
    }
}
