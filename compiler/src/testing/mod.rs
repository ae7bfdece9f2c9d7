//! `policyc test` (LANGUAGE.md section 16): `*.test.policy` files describe
//! hosts (facts, classes) and what the policy must give them; each test
//! resolves the policy for its host exactly as the VM would, with the VM's
//! own evaluator (`converge_eval::preview`: classes, guards, run-time
//! loops, rendered templates, lookups), and checks its expectations.
//!
//! In pipeline order: [`suite`] loads the test files and the policy each
//! imports, checks them ([`sema`], diagnostics `E11xx`) and compiles the
//! policy in memory; [`verdict`] runs each test; [`report`] prints the
//! results for people, tools (JSON) and CI (JUnit XML); [`fixture`] runs
//! the real VM on a test's fixture root (`policyc test --run`).

pub mod fixture;
pub mod model;
pub mod report;
pub mod sema;
pub mod suite;
pub mod verdict;

/// The file name ending of a test file.
pub const TEST_SUFFIX: &str = ".test.policy";

/// Whether `path` names a test file (`web.test.policy`), which is never
/// part of a policy: `policyc check DIR` and `build` leave it out.
pub fn is_test_file(path: &std::path::Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(TEST_SUFFIX))
}
