//! `policyc lsp` with an inventory (LANGUAGE.md section 16, docs/fleet.md),
//! spoken to over JSON-RPC as an editor would: a misspelt `host_` class is
//! reported in the policy; the inventory's own errors are published on
//! `inventory.toml` at their line and column as the editor's unsaved text
//! changes; hover and completion know the inventory's hosts and groups.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{codes, uri, Client};
use serde_json::{json, Value};

const INVENTORY: &str = "[[host]]
name = \"web-01\"
report_key = \"ed25519:iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w=\"
groups = [\"web\"]

[[host]]
name = \"db-01\"
report_key = \"ed25519:gTl3Dqh9F19Wo1Rmw0x+zMuNipG07jeiXfYPW4/Js5Q=\"
";

const POLICY: &str = "bundle b {
  when group_web { file \"/etc/role\" { content = \"web\\n\"; } }
  when host_db_1 { file \"/etc/db\" { content = \"db\\n\"; } }
}
policy { b(); }
";

fn at(uri: &str, line: u32, character: u32) -> Value {
    json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}})
}

#[test]
fn the_inventory_is_checked_hovered_and_completed_in_the_editor() {
    let dir = tempfile::tempdir().unwrap();
    let policy_path = dir.path().join("site.policy");
    let inventory_path = dir.path().join("inventory.toml");
    std::fs::write(&policy_path, POLICY).unwrap();
    std::fs::write(&inventory_path, INVENTORY).unwrap();
    let mut client = Client::start();
    client.initialize(dir.path());

    let policy = client.open(&policy_path, POLICY);
    let shown = client.diagnostics(&policy, 1);
    assert_eq!(
        codes(&shown),
        vec![("E0807".to_owned(), 2, 7)],
        "{shown:#?}"
    );
    let message = shown[0]["message"].as_str().unwrap();
    assert!(message.contains("did you mean `host_db_01`?"), "{message}");

    // Hover on a group class says what it is and where it comes from.
    let hover = client.request("textDocument/hover", at(&policy, 1, 10));
    let text = hover["contents"]["value"].as_str().unwrap();
    assert!(text.contains("group class"), "{text}");
    assert!(text.contains("inventory.toml"), "{text}");

    // Completion in a guard being typed offers the inventory's hosts and
    // groups.
    client.change(
        &policy,
        2,
        &POLICY.replace("}\npolicy", "  when  { }\n}\npolicy"),
    );
    client.diagnostics(&policy, 2);
    let items = client.request("textDocument/completion", at(&policy, 3, 7));
    let labels: Vec<&str> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["label"].as_str().unwrap())
        .collect();
    for expected in ["host_web_01", "host_db_01", "group_web"] {
        assert!(labels.contains(&expected), "{expected} in {labels:?}");
    }

    // The inventory in the editor: an unsaved misspelt field shows at its
    // place in inventory.toml; fixing it clears it.
    let inventory = uri(&inventory_path);
    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": inventory, "languageId": "toml", "version": 1, "text": INVENTORY}}),
    );
    assert_eq!(codes(&client.diagnostics(&inventory, 1)), vec![]);
    client.change(&inventory, 2, &INVENTORY.replace("groups", "group"));
    let shown = client.diagnostics(&inventory, 2);
    assert_eq!(
        codes(&shown),
        vec![("E0802".to_owned(), 3, 0)],
        "{shown:#?}"
    );
    client.change(&inventory, 3, INVENTORY);
    assert_eq!(codes(&client.diagnostics(&inventory, 3)), vec![]);
    assert!(client.shutdown().success());
}
