//! Secrets on the host (LANGUAGE.md section 14, issue 20): a bundle carries
//! each secret sealed with age to the key of the set of hosts entitled to
//! it, and that key sealed to each of those hosts' `identity/age.key`
//! (`docs/bytecode.md`, "Secrets"). [`Keyring`] opens them, lazily and in
//! memory only; [`SecretText`] (in `converge-eval`, which the evaluator
//! shares with policyc) is what the run holds afterwards: the plaintext
//! with the names of the secrets it was computed from, which is all any
//! output shows (`<secret NAME>`).

mod keyring;

pub use converge_eval::secret::SecretText;
pub use keyring::Keyring;

#[cfg(test)]
pub(crate) use keyring::sealing;
