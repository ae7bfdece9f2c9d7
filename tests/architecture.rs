//! Architecture invariants that a refactoring must not break silently.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

fn manifest(krate: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(krate)
        .join("Cargo.toml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The on-host VM must not link the compiler or the grammar: it stays small,
/// and its bundle reader is the trust boundary.
#[test]
fn vm_does_not_depend_on_the_compiler() {
    let vm = manifest("vm");
    for forbidden in [
        "converge-grammar",
        "converge-compiler",
        "lalrpop",
        "ariadne",
    ] {
        assert!(
            !vm.contains(forbidden),
            "vm/Cargo.toml depends on {forbidden}"
        );
    }
}

/// The grammar crate knows nothing of the compiler (the language server and
/// fuzzers parse without linking the back end).
#[test]
fn grammar_does_not_depend_on_the_compiler() {
    let grammar = manifest("grammar");
    assert!(!grammar.contains("converge-compiler"));
    assert!(!grammar.contains("converge-vm"));
}
