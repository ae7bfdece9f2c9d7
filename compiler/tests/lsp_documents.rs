//! `policyc lsp` with data files and templates (LANGUAGE.md sections 10 to
//! 12, issue 16 item 7), spoken to over JSON-RPC as an editor would: the
//! diagnostics inside a YAML file and a template after `didOpen` and
//! `didChange`, hover on record fields and functions (in the policy and in
//! a template), completion of fields, map keys and functions.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{codes, uri, Client};
use serde_json::{json, Value};

const POLICY: &str = r#"type Site = {
  server_name: string,
  port: int = 80,
  backends: list<string>,
};

let sites: map<string, Site> = data("data/sites.yaml");
let ports = { "http": 80, "https": 443 };

bundle web {
  file "/etc/nginx/site.conf" {
    template = "templates/site.conf";
    mode = 0o644;
  }
  file "/etc/port" {
    content = "${sites[sys.hostname].port ?? ports["http"]}\n";
  }
}

policy { web(); }
"#;

const SITES: &str = "web01:
  server_name: shop.example.org
  port: 8443
  backends: [\"10.0.0.1:8080\"]
web02:
  server_name: blog.example.org
  backends: []
";

const TEMPLATE: &str = "server {
  listen ${sites[sys.hostname].port ?? 80};
  server_name ${upper(sites[sys.hostname].server_name ?? \"x\")};
}
";

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        std::fs::create_dir_all(dir.path().join("templates")).unwrap();
        std::fs::write(dir.path().join("site.policy"), POLICY).unwrap();
        std::fs::write(dir.path().join("data/sites.yaml"), SITES).unwrap();
        std::fs::write(dir.path().join("templates/site.conf"), TEMPLATE).unwrap();
        Site { dir }
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }
}

/// Opens a file that is not policy, with the language id an editor gives
/// it.
fn open_as(client: &mut Client, path: &Path, language: &str, text: &str) -> String {
    let uri = uri(path);
    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": language, "version": 1, "text": text}}),
    );
    uri
}

/// The 0-based position just after the first `needle` in `text`.
fn after(text: &str, needle: &str) -> Value {
    let end = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} in {text}"))
        + needle.len();
    let line = text[..end].matches('\n').count();
    let column = end - text[..end].rfind('\n').map_or(0, |i| i + 1);
    json!({"line": line, "character": column})
}

fn at(uri: &str, position: Value) -> Value {
    json!({"textDocument": {"uri": uri}, "position": position})
}

fn labels(items: &Value) -> BTreeSet<String> {
    items
        .as_array()
        .unwrap_or_else(|| panic!("a list of items: {items}"))
        .iter()
        .map(|i| i["label"].as_str().unwrap().to_owned())
        .collect()
}

fn hover_text(client: &mut Client, uri: &str, position: Value) -> String {
    let hover = client.request("textDocument/hover", at(uri, position));
    hover["contents"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("a hover: {hover}"))
        .to_owned()
}

#[test]
fn diagnostics_inside_a_yaml_file_and_a_template_follow_the_editor() {
    let site = Site::new();
    let mut client = Client::start();
    client.initialize(site.dir.path());
    let policy = client.open(&site.path("site.policy"), POLICY);
    assert_eq!(codes(&client.diagnostics(&policy, 1)), vec![]);

    // The YAML file is not parsed as policy: no syntax errors.
    let yaml = open_as(&mut client, &site.path("data/sites.yaml"), "yaml", SITES);
    assert_eq!(codes(&client.diagnostics(&yaml, 1)), vec![]);
    // An unsaved type error shows at its line and column in the YAML file.
    client.change(&yaml, 2, &SITES.replace("port: 8443", "port: \"x\""));
    let shown = client.diagnostics(&yaml, 2);
    assert_eq!(
        codes(&shown),
        vec![("E0704".to_owned(), 2, 8)],
        "{shown:#?}"
    );
    assert!(shown[0]["message"]
        .as_str()
        .unwrap()
        .contains("expected an int"));
    client.change(&yaml, 3, SITES);
    assert_eq!(codes(&client.diagnostics(&yaml, 3)), vec![]);

    // A misspelled variable in the template, at its place in the template.
    let template = open_as(
        &mut client,
        &site.path("templates/site.conf"),
        "nginx",
        TEMPLATE,
    );
    assert_eq!(codes(&client.diagnostics(&template, 1)), vec![]);
    client.change(
        &template,
        2,
        &TEMPLATE.replace("upper(sites", "upper(sitez"),
    );
    let shown = client.diagnostics(&template, 2);
    assert_eq!(
        codes(&shown),
        vec![("E0106".to_owned(), 2, 22)],
        "{shown:#?}"
    );
    assert!(shown[0]["message"].as_str().unwrap().contains("sitez"));

    // Formatting and the outline are for policy only.
    let edits = client.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": template}, "options": {"tabSize": 2, "insertSpaces": true}}),
    );
    assert_eq!(edits, Value::Null);
    let symbols = client.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": yaml}}),
    );
    assert_eq!(symbols, Value::Null);
    assert!(client.shutdown().success());
}

#[test]
fn a_data_file_alone_is_checked_through_a_policy_found_near_it() {
    let site = Site::new();
    let mut client = Client::start();
    client.initialize(site.dir.path());
    // No policy is open: the server finds site.policy in the parent
    // directory, which reads this file.
    let yaml = open_as(
        &mut client,
        &site.path("data/sites.yaml"),
        "yaml",
        &SITES.replace("server_name: blog", "server_nam: blog"),
    );
    let shown = client.diagnostics(&yaml, 1);
    // `web02` (line 4) lacks `server_name`; `server_nam` (line 5) is no
    // field of `Site`.
    let found: BTreeSet<(String, u64, u64)> = codes(&shown).into_iter().collect();
    assert_eq!(
        found,
        BTreeSet::from([("E0702".to_owned(), 4, 0), ("E0703".to_owned(), 5, 2)]),
        "{shown:#?}"
    );
    // Only what falls inside the data file: the policy is not open.
    assert!(!client
        .notifications
        .iter()
        .any(|n| n["params"]["uri"] == uri(&site.path("site.policy"))));

    // A data file no policy reads shows nothing.
    std::fs::write(site.path("data/other.yaml"), "a: 1\n").unwrap();
    let other = open_as(&mut client, &site.path("data/other.yaml"), "yaml", "a: [\n");
    assert_eq!(codes(&client.diagnostics(&other, 1)), vec![]);
    assert!(client.shutdown().success());
}

#[test]
fn hover_on_fields_and_functions_in_the_policy_and_the_template() {
    let site = Site::new();
    let mut client = Client::start();
    client.initialize(site.dir.path());
    let policy = client.open(&site.path("site.policy"), POLICY);
    client.diagnostics(&policy, 1);

    // `.port` in the policy: the field's declaration and its type.
    let text = hover_text(&mut client, &policy, after(POLICY, "[sys.hostname].po"));
    assert!(text.contains("port: int = 80"), "{text}");
    assert!(text.contains("field of `Site`"), "{text}");
    // The record type itself.
    let text = hover_text(&mut client, &policy, after(POLICY, "map<string, Si"));
    assert!(text.contains("type Site = {"), "{text}");

    // In the template: a field and a function, with signature and doc.
    let template = open_as(
        &mut client,
        &site.path("templates/site.conf"),
        "nginx",
        TEMPLATE,
    );
    client.diagnostics(&template, 1);
    let text = hover_text(&mut client, &template, after(TEMPLATE, "].server_na"));
    assert!(text.contains("server_name: string"), "{text}");
    assert!(text.contains("field of `Site`"), "{text}");
    assert!(
        text.contains("site.policy`"),
        "defined in the policy: {text}"
    );
    let text = hover_text(&mut client, &template, after(TEMPLATE, "upp"));
    assert!(text.contains("upper(string) -> string"), "{text}");
    assert!(text.contains("upper case"), "{text}");
    // The `let` a template reads leads back to the policy.
    let def = client.request(
        "textDocument/definition",
        at(&template, after(TEMPLATE, "listen ${sit")),
    );
    assert_eq!(def[0]["uri"], policy, "{def}");
    assert_eq!(def[0]["range"]["start"]["line"], 6, "{def}");
    assert!(client.shutdown().success());
}

#[test]
fn completion_of_fields_keys_and_functions() {
    let site = Site::new();
    let mut client = Client::start();
    client.initialize(site.dir.path());
    let policy = client.open(&site.path("site.policy"), POLICY);
    client.diagnostics(&policy, 1);

    // Half-typed, as in the editor: `content = sites["web01"].`
    let typing = POLICY.replace(
        "content = \"${sites[sys.hostname].port ?? ports[\"http\"]}\\n\";",
        "content = sites[\"web01\"].",
    );
    client.change(&policy, 2, &typing);
    client.diagnostics(&policy, 2);
    let items = client.request(
        "textDocument/completion",
        at(&policy, after(&typing, "sites[\"web01\"].")),
    );
    assert_eq!(
        labels(&items),
        BTreeSet::from(["server_name".into(), "port".into(), "backends".into()]),
        "{items}"
    );
    let port = items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["label"] == "port")
        .unwrap();
    assert_eq!(port["detail"], "int");

    // Keys after `[`: from the YAML file (the editor's text) and from a
    // map literal.
    let typing = POLICY.replace(
        "content = \"${sites[sys.hostname].port ?? ports[\"http\"]}\\n\";",
        "content = sites[",
    );
    client.change(&policy, 3, &typing);
    client.diagnostics(&policy, 3);
    let items = client.request(
        "textDocument/completion",
        at(&policy, after(&typing, "sites[")),
    );
    assert_eq!(
        labels(&items),
        BTreeSet::from(["\"web01\"".into(), "\"web02\"".into()]),
        "{items}"
    );
    let yaml = open_as(
        &mut client,
        &site.path("data/sites.yaml"),
        "yaml",
        &format!("{SITES}web03:\n  server_name: x\n  backends: []\n"),
    );
    client.diagnostics(&yaml, 1);
    let items = client.request(
        "textDocument/completion",
        at(&policy, after(&typing, "sites[")),
    );
    assert!(
        labels(&items).contains("\"web03\""),
        "unsaved keys: {items}"
    );

    let typing = POLICY.replace("ports[\"http\"]", "ports[\"ht");
    client.change(&policy, 4, &typing);
    client.diagnostics(&policy, 4);
    let items = client.request(
        "textDocument/completion",
        at(&policy, after(&typing, "ports[\"ht")),
    );
    assert_eq!(
        labels(&items),
        BTreeSet::from(["\"http\"".into(), "\"https\"".into()]),
        "{items}"
    );

    // Functions (with their signature) and lets where an expression starts.
    let typing = POLICY.replace(
        "content = \"${sites[sys.hostname].port ?? ports[\"http\"]}\\n\";",
        "content = ",
    );
    client.change(&policy, 5, &typing);
    client.diagnostics(&policy, 5);
    let items = client.request(
        "textDocument/completion",
        at(&policy, after(&typing, "content = ")),
    );
    let join = items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["label"] == "join")
        .unwrap_or_else(|| panic!("join in {items}"));
    assert_eq!(join["detail"], "join(list<string>, string) -> string");
    assert!(labels(&items).contains("sites"), "{items}");
    assert!(labels(&items).contains("ports"), "{items}");

    // In a template, inside `${...}`: fields, and nothing in plain text.
    let template_text = TEMPLATE.replace("].port ?? 80}", "].");
    let template = open_as(
        &mut client,
        &site.path("templates/site.conf"),
        "nginx",
        &template_text,
    );
    client.diagnostics(&template, 1);
    let items = client.request(
        "textDocument/completion",
        at(
            &template,
            after(&template_text, "listen ${sites[sys.hostname]."),
        ),
    );
    assert!(labels(&items).contains("backends"), "{items}");
    let items = client.request(
        "textDocument/completion",
        at(&template, after(&template_text, "serv")),
    );
    assert!(items.as_array().is_none_or(|a| a.is_empty()), "{items}");
    assert!(client.shutdown().success());
}
