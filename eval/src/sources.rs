//! What the evaluator needs from outside a bundle that differs between a
//! real host and a preview: the probe facts (`fact NAME from ...`, which
//! the VM gathers by running programs) and the secrets (which the VM opens
//! with the host's age identity). The VM implements these traits for a
//! host (`converge_vm::probes::Probes`, `converge_vm::secrets::Keyring`);
//! a preview uses [`ProbeMap`] and [`SecretPlaceholders`], which never
//! decrypt anything.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use zeroize::Zeroizing;

use crate::bundle::format::{Body, Constant};
use crate::eval::Val;
use crate::secret::SecretText;

/// The probe facts a `probe` instruction reads.
pub trait ProbeFacts: std::fmt::Debug {
    /// The value at `path`: the probe's name, then fields and keys
    /// (`hw.cpus`). `Err` is the reason the fact is unknown on this host.
    fn read(&self, path: &str) -> Result<Val, String>;
}

/// Opens the secret constants of a bundle.
pub trait Secrets: std::fmt::Debug {
    /// The plaintext of secret constant `c` of `body`, or why it cannot be
    /// had (a message naming the secret, never a value).
    fn reveal(&mut self, body: &Body, c: u32) -> Result<Arc<SecretText>, String>;

    /// How many sealed keys were opened (each at most once).
    fn keys_opened(&self) -> usize {
        0
    }
}

/// No probe facts: what a bundle without `fact` declarations reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProbes;

impl ProbeFacts for NoProbes {
    fn read(&self, path: &str) -> Result<Val, String> {
        let name = path.split('.').next().unwrap_or_default();
        Err(format!("probe {name:?} was not run"))
    }
}

/// Probe facts given by value, as a test or an inventory gives them
/// (`facts.NAME`); the facts not given are unknown. A dotted path reads a
/// value given under that whole path (`hw.cpus`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeMap(pub BTreeMap<String, Val>);

impl ProbeFacts for ProbeMap {
    fn read(&self, path: &str) -> Result<Val, String> {
        self.0
            .get(path)
            .cloned()
            .ok_or_else(|| format!("probe fact `facts.{path}` is not given"))
    }
}

/// No way to open a secret: every secret fails its promise with the reason.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSecrets;

impl Secrets for NoSecrets {
    fn reveal(&mut self, body: &Body, c: u32) -> Result<Arc<SecretText>, String> {
        match body.constants.get(c as usize) {
            Some(Constant::Secret(sealed)) => Err(format!(
                "secret {}: no host identity to open it with",
                sealed.name
            )),
            _ => Err(format!("constant {c} is not a secret")),
        }
    }
}

/// Secrets shown, never opened: each secret's text is `<secret NAME>`, so
/// a preview of a template that embeds one renders the label in its place
/// and every output shows it as a secret (policyc never holds a host's
/// identity).
#[derive(Debug, Default)]
pub struct SecretPlaceholders {
    shown: HashMap<u32, Arc<SecretText>>,
}

impl Secrets for SecretPlaceholders {
    fn reveal(&mut self, body: &Body, c: u32) -> Result<Arc<SecretText>, String> {
        if let Some(text) = self.shown.get(&c) {
            return Ok(Arc::clone(text));
        }
        let Some(Constant::Secret(sealed)) = body.constants.get(c as usize) else {
            return Err(format!("constant {c} is not a secret"));
        };
        let text = Arc::new(SecretText::new(
            BTreeSet::from([sealed.name.clone()]),
            Zeroizing::new(format!("<secret {}>", sealed.name)),
        ));
        self.shown.insert(c, Arc::clone(&text));
        Ok(text)
    }
}
