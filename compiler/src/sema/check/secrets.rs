//! `secret("secrets/NAME.age")` (LANGUAGE.md section 14): the file is
//! found in the policy tree and checked to be an age file now, so that
//! `policyc check` and the language server, which hold no identity, report
//! a missing or misplaced secret; only `policyc build` decrypts it
//! (`bundle::secrets`). The checker never reads a plaintext.

use std::sync::Arc;

use converge_grammar::ast::{Expr, ExprKind};
use converge_grammar::Span;

use super::*;
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::SecretRef;
use crate::policy_tree::TreeError;
use crate::workspace::outside_tree;

/// The largest secret file read (an age file of a password, a key or a
/// certificate is far smaller).
pub const MAX_SECRET_BYTES: usize = 1 << 20;

/// The first line of a binary age file.
const AGE_BINARY: &[u8] = b"age-encryption.org/v1\n";
/// The first line of an armored one.
const AGE_ARMORED: &[u8] = b"-----BEGIN AGE ENCRYPTED FILE-----";

/// Whether `bytes` start like an age file, armored or not.
pub fn looks_like_age(bytes: &[u8]) -> bool {
    bytes.starts_with(AGE_BINARY) || bytes.trim_ascii_start().starts_with(AGE_ARMORED)
}

/// Whether `name` can name a secret in a bundle: what the format's
/// verifier accepts (1 to 128 ASCII letters, digits, `_`, `-`, `.`).
pub fn is_secret_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

impl<'a> Checker<'a> {
    /// Checks a `secret(...)` call and records the file it reads.
    pub(super) fn secret_call(&mut self, args: &[Expr], span: Span) -> Type {
        let written = match args {
            [Expr {
                kind: ExprKind::Str(lit),
                ..
            }] => lit.as_plain(),
            _ => None,
        };
        let Some(written) = written else {
            self.push(
                Diagnostic::new(
                    Code::SecretUnreadable,
                    "the path of `secret(...)` must be one literal string",
                    span,
                    "not a literal path",
                )
                .with_help(
                    "secrets are read at build time: write `secret(\"secrets/db_password.age\")`",
                ),
            );
            return Type::Secret;
        };
        match self.find_secret(&written, span) {
            Ok(secret) => {
                let clash = self
                    .secrets
                    .values()
                    .find(|s| s.name == secret.name && s.path != secret.path)
                    .cloned();
                if let Some(other) = clash {
                    self.push(
                        Diagnostic::new(
                            Code::SecretNameClash,
                            format!(
                                "two secret files are named `{}`: `{}` and `{}`",
                                secret.name,
                                other.path.display(),
                                secret.path.display()
                            ),
                            span,
                            "this one",
                        )
                        .with_secondary(other.span, "and this one")
                        .with_help("every output names a secret by its file's stem: rename one of the files"),
                    );
                }
                // One file, one value: later calls share the first's origin.
                let same = self
                    .secrets
                    .values()
                    .find(|s| s.as_ref() == secret.as_ref())
                    .cloned();
                self.secrets.insert(span, same.unwrap_or(secret));
            }
            Err(d) => self.push(d),
        }
        Type::Secret
    }

    fn find_secret(&self, written: &str, span: Span) -> Result<Arc<SecretRef>, Diagnostic> {
        let unreadable = |why: String, label: String| {
            Diagnostic::new(
                Code::SecretUnreadable,
                format!("cannot read the secret `{written}`: {why}"),
                span,
                label,
            )
        };
        let file = self.symbols.ws.and_then(|ws| ws.db.get(span.file));
        let Some((from, tree)) = file.and_then(|f| Some((f.path.clone(), f.tree.as_deref()?)))
        else {
            return Err(unreadable(
                "the standard library reads no secrets".to_owned(),
                "here".to_owned(),
            ));
        };
        let path = tree
            .resolve(&from, written)
            .map_err(|err| outside_tree("secret", written, &err, tree, span))?;
        let bytes = tree.read(&path, MAX_SECRET_BYTES).map_err(|err| match err {
            err if err.is_escape() => outside_tree("secret", written, &err, tree, span),
            TreeError::TooLarge { .. } => unreadable(
                format!("larger than {} MiB", MAX_SECRET_BYTES >> 20),
                "too large".to_owned(),
            ),
            err => unreadable(err.to_string(), format!("looked for {}", path.display()))
                .with_help("create it with `policyc secret add NAME --recipient age1...` (it writes `secrets/NAME.age`)"),
        })?;
        if !looks_like_age(&bytes) {
            return Err(unreadable(
                "it is not an age-encrypted file".to_owned(),
                "not an age file".to_owned(),
            )
            .with_help("encrypt it with `policyc secret add NAME` (or `age -r age1...`); a secret is never kept in the clear in the policy tree"));
        }
        let stem = path
            .file_name()
            .and_then(|n| n.to_str())
            .map(|n| n.strip_suffix(".age").unwrap_or(n).to_owned())
            .unwrap_or_default();
        if !is_secret_name(&stem) {
            return Err(unreadable(
                format!("`{stem}` cannot name a secret"),
                "its file name".to_owned(),
            )
            .with_help(
                "name the file `NAME.age`, NAME being 1 to 128 letters, digits, `_`, `-` or `.`",
            ));
        }
        Ok(Arc::new(SecretRef {
            name: stem,
            path,
            span,
        }))
    }
}
