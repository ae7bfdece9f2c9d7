//! `policyc lsp` on a policy with secrets (LANGUAGE.md section 14): the
//! language server holds no identity, checks secrets as opaque values
//! (taint errors are published at their place), and no hover or
//! diagnostic it sends shows the plaintext, even with the builder's
//! identity sitting in the policy tree.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use age::secrecy::ExposeSecret as _;
use common::{codes, Client};
use converge_compiler::bundle::secrets::encrypt_to;
use serde_json::{json, Value};

const PLAINTEXT: &str = "lsp-Pl41ntext-never-shown";

const POLICY: &str = "let db_password: secret = secret(\"secrets/db_password.age\");
policy {
  file \"/etc/app/db.conf\" { content = \"password=${db_password}\\n\"; mode = 0o600; }
  report \"leak\" { message = \"pw ${db_password}\"; }
}
";

fn at(uri: &str, line: u32, character: u32) -> Value {
    json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}})
}

#[test]
fn hover_and_diagnostics_never_show_the_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("secrets")).unwrap();
    let identity = age::x25519::Identity::generate();
    std::fs::write(
        dir.path().join("builder.key"),
        identity.to_string().expose_secret(),
    )
    .unwrap();
    let recipient = identity.to_public();
    let sealed = encrypt_to(
        std::iter::once(&recipient as &dyn age::Recipient),
        PLAINTEXT.as_bytes(),
    )
    .unwrap();
    std::fs::write(dir.path().join("secrets/db_password.age"), sealed).unwrap();
    let policy_path = dir.path().join("site.policy");
    std::fs::write(&policy_path, POLICY).unwrap();

    let mut client = Client::start();
    client.initialize(dir.path());
    let policy = client.open(&policy_path, POLICY);
    let shown = client.diagnostics(&policy, 1);
    assert_eq!(
        codes(&shown),
        vec![("E1001".to_owned(), 3, 28)],
        "{shown:#?}"
    );
    let mut everything = serde_json::to_string(&shown).unwrap();
    // Hover on the let, on `secret`, and on each use.
    for (line, character) in [(0, 6), (0, 28), (2, 50), (3, 40)] {
        let hover = client.request("textDocument/hover", at(&policy, line, character));
        everything.push_str(&hover.to_string());
    }
    assert!(everything.contains("secret"), "{everything}");
    assert!(!everything.contains(PLAINTEXT), "{everything}");
    client.shutdown();
}
