//! `policyc lsp` spoken to over JSON-RPC on stdio, as an editor would: the
//! handshake, diagnostics, hover, navigation, completion, formatting and a
//! clean shutdown; then every prefix of real files as successive edits.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::{uri, Client};
use serde_json::{json, Value};

const LIB: &str =
    "bundle motd(text: string) {\n  file \"/etc/motd\" { content = text; mode = 0o644; }\n}\n";

const MAIN: &str = r#"import "lib.policy";

bundle extra {
  file "/etc/issue" {
    mode = 0o644;

  }
}

policy {
  motd(text = "hi\n");
  extra();
}
"#;

/// LANGUAGE.md section 9: bundle b contradicts bundle a where `web` holds.
const CONTRADICTION: &str = r#"class web = sys.hostname =~ r"^web";
bundle a { file "/etc/motd" { content = "hello\n"; } }
bundle b { when web { file "/etc/motd" { content = "web\n"; } } }
policy { a(); b(); }
"#;

fn workspace() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib.policy");
    let main = dir.path().join("main.policy");
    std::fs::write(&lib, LIB).unwrap();
    std::fs::write(&main, MAIN).unwrap();
    (dir, lib, main)
}

fn pos(line: u32, character: u32) -> Value {
    json!({"line": line, "character": character})
}

fn at(uri: &str, line: u32, character: u32) -> Value {
    json!({"textDocument": {"uri": uri}, "position": pos(line, character)})
}

#[test]
fn initialize_announces_capabilities() {
    let (dir, _, _) = workspace();
    let mut client = Client::start();
    let init = client.initialize(dir.path());
    let caps = &init["capabilities"];
    assert_eq!(caps["textDocumentSync"], 1, "full document sync");
    assert_eq!(caps["renameProvider"]["prepareProvider"], true);
    for cap in [
        "hoverProvider",
        "definitionProvider",
        "referencesProvider",
        "documentSymbolProvider",
        "documentFormattingProvider",
    ] {
        assert_eq!(caps[cap], true, "{cap} in {caps}");
    }
    assert!(caps["completionProvider"].is_object());
    assert_eq!(init["serverInfo"]["name"], "policyc");
    assert!(client.shutdown().success());
}

#[test]
fn contradiction_is_published_with_both_promises_related() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("site.policy");
    std::fs::write(&path, CONTRADICTION).unwrap();
    let mut client = Client::start();
    client.initialize(dir.path());
    let uri = client.open(&path, CONTRADICTION);
    let diagnostics = client.diagnostics(&uri, 1);
    let contradiction = diagnostics
        .iter()
        .find(|d| d["code"].as_str().is_some_and(|c| c.starts_with("E03")))
        .unwrap_or_else(|| panic!("no contradiction in {diagnostics:#?}"));
    assert_eq!(contradiction["severity"], 1, "an error");
    assert_eq!(contradiction["source"], "policyc");
    let related = contradiction["relatedInformation"].as_array().unwrap();
    let lines: BTreeSet<u64> = related
        .iter()
        .filter(|r| r["location"]["uri"] == uri)
        .map(|r| r["location"]["range"]["start"]["line"].as_u64().unwrap())
        .collect();
    // Line 1 is bundle a's promise, line 2 bundle b's.
    assert!(
        lines.contains(&1) && lines.contains(&2),
        "both promises in related information: {related:#?}"
    );
    assert!(client.shutdown().success());
}

#[test]
fn hover_definition_completion_and_formatting() {
    let (dir, lib, main) = workspace();
    let mut client = Client::start();
    client.initialize(dir.path());
    let main_uri = client.open(&main, MAIN);
    client.diagnostics(&main_uri, 1);

    // Hover on `mode` (line 4): its type, default and doc from the schema.
    let hover = client.request("textDocument/hover", at(&main_uri, 4, 5));
    let text = hover["contents"]["value"].as_str().unwrap();
    assert!(text.contains("mode: mode"), "{text}");
    assert!(text.contains("default: not managed"), "{text}");
    assert!(text.contains("Permission bits"), "{text}");

    // Hover on the call of `motd`: its signature, from the imported file.
    let hover = client.request("textDocument/hover", at(&main_uri, 10, 3));
    let text = hover["contents"]["value"].as_str().unwrap();
    assert!(text.contains("bundle motd(text: string)"), "{text}");

    // Definition of `motd` across the import: lib.policy, line 0.
    let def = client.request("textDocument/definition", at(&main_uri, 10, 3));
    let def = def.as_array().unwrap();
    assert_eq!(def.len(), 1, "{def:?}");
    assert_eq!(def[0]["uri"], uri(&lib));
    assert_eq!(def[0]["range"]["start"], pos(0, 7));

    // The import path leads to the file.
    let def = client.request("textDocument/definition", at(&main_uri, 0, 10));
    assert_eq!(def[0]["uri"], uri(&lib));

    // References of `motd`: the definition and the call.
    let refs = client.request(
        "textDocument/references",
        json!({"textDocument": {"uri": main_uri}, "position": pos(10, 3), "context": {"includeDeclaration": true}}),
    );
    assert_eq!(refs.as_array().unwrap().len(), 2, "{refs}");

    // Completion on the empty line of the file promise: the attributes of
    // `file` not yet set.
    let items = client.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": main_uri}, "position": pos(5, 4)}),
    );
    let labels: BTreeSet<&str> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["label"].as_str().unwrap())
        .collect();
    for expected in ["owner", "group", "content", "backup", "notify"] {
        assert!(labels.contains(expected), "{expected} in {labels:?}");
    }
    assert!(!labels.contains("mode"), "mode is already set: {labels:?}");
    assert!(!labels.contains("state"), "state is not a file attribute");

    // Formatting: one edit, the text `policyc fmt` writes.
    let formatted = converge_compiler::fmt::format(MAIN).unwrap();
    assert_ne!(formatted, MAIN);
    let edits = client.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": main_uri}, "options": {"tabSize": 2, "insertSpaces": true}}),
    );
    let edits = edits.as_array().unwrap();
    assert_eq!(edits.len(), 1);
    assert_eq!(edits[0]["newText"], formatted);
    assert_eq!(edits[0]["range"]["start"], pos(0, 0));

    // Rename the bundle: its definition in lib.policy and the call.
    let edit = client.request(
        "textDocument/rename",
        json!({"textDocument": {"uri": main_uri}, "position": pos(10, 3), "newName": "banner"}),
    );
    let changes = edit["changes"].as_object().unwrap();
    assert_eq!(changes[&uri(&lib)].as_array().unwrap().len(), 1);
    assert_eq!(changes[&main_uri].as_array().unwrap().len(), 1);
    // Editors ask first: the range of the name.
    let range = client.request(
        "textDocument/prepareRename",
        json!({"textDocument": {"uri": main_uri}, "position": pos(10, 3)}),
    );
    assert_eq!(range, json!({"start": pos(10, 2), "end": pos(10, 6)}));
    // A keyword is not a name; an attribute is not renamable.
    let refused = client.request_raw(
        "textDocument/rename",
        json!({"textDocument": {"uri": main_uri}, "position": pos(10, 3), "newName": "bundle"}),
    );
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not a valid name"));
    let refused = client.request_raw(
        "textDocument/rename",
        json!({"textDocument": {"uri": main_uri}, "position": pos(4, 5), "newName": "x"}),
    );
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("can be renamed"));

    // Document symbols: the bundle with its promise, and the policy block.
    let symbols = client.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": main_uri}}),
    );
    let symbols = symbols.as_array().unwrap();
    assert_eq!(symbols[0]["name"], "extra");
    assert_eq!(symbols[0]["children"][0]["name"], "file \"/etc/issue\"");
    assert_eq!(symbols[1]["name"], "policy");

    assert!(client.shutdown().success(), "exit status 0 after shutdown");
}

#[test]
fn editing_an_import_republishes_the_importer() {
    let (dir, lib, main) = workspace();
    let mut client = Client::start();
    client.initialize(dir.path());
    let main_uri = client.open(&main, MAIN);
    assert!(client
        .diagnostics(&main_uri, 1)
        .iter()
        .all(|d| d["code"] != "E0101"));
    let lib_uri = client.open(&lib, LIB);
    client.diagnostics(&lib_uri, 1);
    // Rename the bundle in the library only: the call in main breaks.
    client.change(&lib_uri, 2, &LIB.replace("motd(", "banner("));
    let broken = client.wait_for("textDocument/publishDiagnostics", |p| {
        p["uri"] == main_uri && !p["diagnostics"].as_array().unwrap().is_empty()
    });
    let message = broken["diagnostics"][0]["message"].as_str().unwrap();
    assert!(message.contains("motd"), "{message}");
    assert!(client.shutdown().success());
}

#[test]
fn utf16_positions_after_non_ascii_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.policy");
    // `é` and `😀` before the error: 1 and 2 UTF-16 units.
    let text = "// é😀\nbundle b { file \"/é😀\" { mdoe = 0o644; } }\n";
    std::fs::write(&path, text).unwrap();
    let mut client = Client::start();
    client.initialize(dir.path());
    let uri = client.open(&path, text);
    let diagnostics = client.diagnostics(&uri, 1);
    let unknown = diagnostics
        .iter()
        .find(|d| d["message"].as_str().unwrap().contains("mdoe"))
        .unwrap_or_else(|| panic!("{diagnostics:#?}"));
    // `mdoe` starts after `bundle b { file "/é😀" { `: 24 characters, but
    // 25 UTF-16 units (the emoji is a surrogate pair) and 28 bytes.
    assert_eq!(unknown["range"]["start"], pos(1, 25));
    assert_eq!(unknown["range"]["end"], pos(1, 29));
    assert!(client.shutdown().success());
}

/// The diagnostics `policyc check --format json` reports for `path`, as
/// (code, line, column) with 0-based lines and columns.
fn check_diagnostics(path: &Path) -> BTreeSet<(String, u64, u64)> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_policyc"))
        .args(["check", "--format", "json"])
        .arg(path)
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| {
            let label = d["labels"]
                .as_array()?
                .iter()
                .find(|l| l["primary"] == true)?;
            if !label["file"]
                .as_str()?
                .ends_with(path.file_name()?.to_str()?)
            {
                return None;
            }
            Some((
                d["code"].as_str()?.to_owned(),
                label["line"].as_u64()? - 1,
                label["column"].as_u64()? - 1,
            ))
        })
        .collect()
}

fn lsp_set(diagnostics: &[Value]) -> BTreeSet<(String, u64, u64)> {
    diagnostics
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap().to_owned(),
                d["range"]["start"]["line"].as_u64().unwrap(),
                d["range"]["start"]["character"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Types `text` into an open document one character at a time (each
/// prefix one `didChange`), waiting for each version's diagnostics: the
/// server must survive every half-typed state. Returns the last
/// diagnostics.
fn type_out(client: &mut Client, path: &Path, text: &str) -> Vec<Value> {
    let uri = client.open(path, "");
    client.diagnostics(&uri, 1);
    let mut version = 1;
    let mut last = Vec::new();
    for (i, c) in text.char_indices() {
        version += 1;
        client.change(&uri, version, &text[..i + c.len_utf8()]);
        last = client.diagnostics(&uri, version);
    }
    last
}

#[test]
fn every_prefix_of_an_example_then_the_same_diagnostics_as_check() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start();
    // motd.policy (a heredoc, interpolation, a body from the stdlib) and
    // site.policy (imports every other example).
    for name in ["motd.policy", "site.policy"] {
        let example = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples")
            .join(name);
        let example = example.canonicalize().unwrap();
        let text = std::fs::read_to_string(&example).unwrap();
        if name == "motd.policy" {
            client.initialize(example.parent().unwrap());
        }
        let last = type_out(&mut client, &example, &text);
        assert_eq!(lsp_set(&last), check_diagnostics(&example), "{name}");
    }

    // A file whose full text has errors: the same errors at the end.
    let path = dir.path().join("contradiction.policy");
    std::fs::write(&path, CONTRADICTION).unwrap();
    let last = type_out(&mut client, &path, CONTRADICTION);
    let expected = check_diagnostics(&path);
    assert!(!expected.is_empty());
    assert_eq!(lsp_set(&last), expected);
    assert!(client.shutdown().success());
}

#[test]
fn completion_contexts_and_hovers_on_classes_and_facts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.policy");
    let text = concat!(
        "class web = sys.hostname =~ r\"^web\";\n",           // 0
        "bundle app(port: int, root: string = \"/srv\") {\n", // 1
        "  package \"nginx\" { state = ; }\n",                // 2
        "  when  { }\n",                                      // 3
        "  file \"/etc/x\" { content = \"${sys.}\"; }\n",     // 4
        "  \n",                                               // 5
        "}\n",
        "policy { app(port = 80); }\n",
    );
    std::fs::write(&path, text).unwrap();
    let mut client = Client::start();
    client.initialize(dir.path());
    let uri = client.open(&path, text);
    client.diagnostics(&uri, 1);
    let labels = |client: &mut Client, line, character| -> Vec<String> {
        let items = client.request(
            "textDocument/completion",
            json!({"textDocument": {"uri": uri}, "position": pos(line, character)}),
        );
        items
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["label"].as_str().unwrap().to_owned())
            .collect()
    };
    // Enum values after `state =`.
    assert_eq!(
        labels(&mut client, 2, 28),
        ["installed", "removed", "latest"]
    );
    // Class names in `when`: the program's, then the hard classes.
    let classes = labels(&mut client, 3, 7);
    assert_eq!(classes.first().map(String::as_str), Some("web"));
    assert!(classes.iter().any(|c| c == "debian"));
    // Statement start: promise types, `when`, `for`, bundles.
    let statement = labels(&mut client, 5, 2);
    for expected in ["file", "package", "when", "for", "app"] {
        assert!(
            statement.iter().any(|l| l == expected),
            "{expected} in {statement:?}"
        );
    }
    let items = client.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": uri}, "position": pos(5, 2)}),
    );
    let app = items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["label"] == "app")
        .unwrap();
    assert_eq!(
        app["insertText"], "app(port = ${1:port});$0",
        "required parameters only"
    );
    assert_eq!(app["insertTextFormat"], 2, "a snippet");
    // Facts after `sys.`, even inside an interpolation.
    let facts = labels(&mut client, 4, 35);
    assert!(facts.iter().any(|f| f == "sys.hostname"), "{facts:?}");

    // Hover on a class use and on a fact.
    let hover = client.request("textDocument/hover", at(&uri, 0, 14));
    let text_fact = hover["contents"]["value"].as_str().unwrap();
    assert!(text_fact.contains("sys.hostname: string"), "{text_fact}");
    let hover = client.request("textDocument/hover", at(&uri, 0, 7));
    let class = hover["contents"]["value"].as_str().unwrap();
    assert!(
        class.contains("class web = sys.hostname =~ r\"^web\";"),
        "{class}"
    );
    // A named argument leads to the parameter.
    let def = client.request("textDocument/definition", at(&uri, 7, 14));
    assert_eq!(def[0]["range"]["start"], pos(1, 11));
    assert!(client.shutdown().success());
}

#[test]
fn rename_reaches_interpolations_and_heredocs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.policy");
    let text = concat!(
        "let port = 80;\n",
        "bundle b {\n",
        "  file \"/etc/${port}\" {\n",
        "    content = \"\"\"\n",
        "      listen ${port}\n",
        "      \"\"\";\n",
        "  }\n",
        "}\n",
    );
    std::fs::write(&path, text).unwrap();
    let mut client = Client::start();
    client.initialize(dir.path());
    let uri = client.open(&path, text);
    client.diagnostics(&uri, 1);
    let edit = client.request(
        "textDocument/rename",
        json!({"textDocument": {"uri": uri}, "position": pos(0, 5), "newName": "listen_port"}),
    );
    let mut starts: Vec<(u64, u64)> = edit["changes"][&uri]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["newText"], "listen_port");
            let s = &e["range"]["start"];
            let end = &e["range"]["end"];
            assert_eq!(
                end["character"].as_u64().unwrap() - s["character"].as_u64().unwrap(),
                4
            );
            (
                s["line"].as_u64().unwrap(),
                s["character"].as_u64().unwrap(),
            )
        })
        .collect();
    starts.sort();
    assert_eq!(starts, [(0, 4), (2, 15), (4, 15)]);
    assert!(client.shutdown().success());
}

/// Issue 15: a `bool` parameter used as a guard is the parameter, not a
/// class. Go to definition found nothing on `when enabled`, and rename left
/// the guard behind, so the renamed file failed with E0105.
#[test]
fn a_bool_parameter_in_a_guard_is_the_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.policy");
    let text = concat!(
        "bundle b(enabled: bool) {\n",                            // 0
        "  when enabled {\n",                                     // 1
        "    file \"/etc/motd\" { content = \"${enabled}\"; }\n", // 2
        "  }\n",
        "}\n",
        "policy { b(enabled = true); }\n", // 5
    );
    std::fs::write(&path, text).unwrap();
    let mut client = Client::start();
    client.initialize(dir.path());
    let uri = client.open(&path, text);
    assert!(client.diagnostics(&uri, 1).is_empty());

    let def = client.request("textDocument/definition", at(&uri, 1, 8));
    assert_eq!(def.as_array().map(Vec::len), Some(1), "{def}");
    assert_eq!(def[0]["range"]["start"], pos(0, 9));

    let edit = client.request(
        "textDocument/rename",
        json!({"textDocument": {"uri": uri}, "position": pos(0, 10), "newName": "on"}),
    );
    let mut edits: Vec<(u64, u64)> = edit["changes"][&uri]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let s = &e["range"]["start"];
            (
                s["line"].as_u64().unwrap(),
                s["character"].as_u64().unwrap(),
            )
        })
        .collect();
    edits.sort();
    assert_eq!(edits, [(0, 9), (1, 7), (2, 36), (5, 11)], "{edit}");
    assert!(client.shutdown().success());
}

/// Probe facts in the editor: completion after `facts.`, hover on a use
/// shows the declaration, definition goes to it, and rename changes the
/// declaration and every `facts.NAME` (LANGUAGE.md section 15).
#[test]
fn probe_facts_complete_hover_go_to_definition_and_rename() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.policy");
    let text = concat!(
        "fact dc: string from [\"/usr/local/lib/converge/probes/dc\"] timeout 5s;\n", // 0
        "class eu = facts.dc =~ r\"^eu-\";\n",                                        // 1
        "bundle b {\n",                                                               // 2
        "  file \"/etc/dc\" { content = \"${facts.}\"; }\n",                          // 3
        "  file \"/etc/x\" { content = \"${facts.dc}\\n\"; }\n",                      // 4
        "}\n",
        "policy { b(); }\n",
    );
    std::fs::write(&path, text).unwrap();
    let mut client = Client::start();
    client.initialize(dir.path());
    let uri = client.open(&path, text);
    client.diagnostics(&uri, 1);
    let items = client.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": uri}, "position": pos(3, 38)}),
    );
    let dc = items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["label"] == "facts.dc")
        .unwrap_or_else(|| panic!("{items}"));
    assert_eq!(dc["detail"], "string");
    let hover = client.request("textDocument/hover", at(&uri, 1, 18));
    let shown = hover["contents"]["value"].as_str().unwrap();
    assert!(shown.contains("fact dc: string from"), "{shown}");
    let def = client.request("textDocument/definition", at(&uri, 4, 38));
    assert_eq!(def[0]["range"]["start"], pos(0, 5));
    let edit = client.request(
        "textDocument/rename",
        json!({"textDocument": {"uri": uri}, "position": pos(1, 18), "newName": "site"}),
    );
    let mut starts: Vec<(u64, u64)> = edit["changes"][&uri]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["newText"], "site");
            let s = &e["range"]["start"];
            (
                s["line"].as_u64().unwrap(),
                s["character"].as_u64().unwrap(),
            )
        })
        .collect();
    starts.sort();
    assert_eq!(starts, [(0, 5), (1, 17), (4, 37)]);
    assert!(client.shutdown().success());
}

/// Hover on the attributes of a `watch` promise (issue 19): each one's
/// type, default and doc string come from the schema.
#[test]
fn hover_on_watch_attributes() {
    const POLICY: &str = "class intruded;\nbundle b {\n  watch \"/usr/local/bin\" {\n    recurse = true;\n    attributes = [content, mode];\n    on_changed = intruded;\n  }\n}\npolicy { b(); }\n";
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("main.policy");
    std::fs::write(&main, POLICY).unwrap();
    let mut client = Client::start();
    client.initialize(dir.path());
    let main_uri = client.open(&main, POLICY);
    client.diagnostics(&main_uri, 1);
    let hover = |client: &mut Client, line: u32, character: u32| {
        let hover = client.request("textDocument/hover", at(&main_uri, line, character));
        hover["contents"]["value"].as_str().unwrap().to_owned()
    };
    let text = hover(&mut client, 4, 6);
    assert!(
        text.contains("attributes: list<content | mode | owner | group | links | size | mtime>"),
        "{text}"
    );
    assert!(
        text.contains("default: [content, mode, owner, group]"),
        "{text}"
    );
    assert!(text.contains("re-read on every run"), "{text}");
    let text = hover(&mut client, 5, 6);
    assert!(text.contains("on_changed: class"), "{text}");
    assert!(text.contains("outcome `changed`"), "{text}");
    let text = hover(&mut client, 2, 4);
    assert!(text.contains("Change detection"), "{text}");
    assert!(client.shutdown().success());
}

/// Hover and completion on an `unmanaged` promise (issue 25) come from the
/// schema: the type's doc, each attribute's type and default.
#[test]
fn hover_and_completion_on_unmanaged() {
    const POLICY: &str = "bundle b {\n  unmanaged \"user\" {\n    action = remove;\n    max_remove = 3;\n    \n  }\n}\npolicy { b(); }\n";
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("main.policy");
    std::fs::write(&main, POLICY).unwrap();
    let mut client = Client::start();
    client.initialize(dir.path());
    let main_uri = client.open(&main, POLICY);
    client.diagnostics(&main_uri, 1);
    let hover = |client: &mut Client, line: u32, character: u32| {
        let hover = client.request("textDocument/hover", at(&main_uri, line, character));
        hover["contents"]["value"].as_str().unwrap().to_owned()
    };
    let text = hover(&mut client, 1, 4);
    assert!(text.contains("Two-way verification"), "{text}");
    let text = hover(&mut client, 2, 6);
    assert!(text.contains("action: report | remove"), "{text}");
    assert!(text.contains("default: report"), "{text}");
    let text = hover(&mut client, 3, 6);
    assert!(text.contains("default: 10"), "{text}");
    let items = client.request("textDocument/completion", at(&main_uri, 4, 4));
    let labels: Vec<String> = items
        .as_array()
        .or_else(|| items["items"].as_array())
        .unwrap()
        .iter()
        .map(|i| i["label"].as_str().unwrap_or_default().to_owned())
        .collect();
    for attr in ["ignore", "min_id", "max_id"] {
        assert!(labels.iter().any(|l| l == attr), "{attr} in {labels:?}");
    }
    assert!(client.shutdown().success());
}

/// Hover on the type word of a promise lists the attributes it takes from
/// its bundle's `defaults` (LANGUAGE.md section 17): the typed block wins
/// over the untyped one, what the promise (or a body it uses) sets itself
/// is not listed, and a promise that takes nothing shows none.
#[test]
fn hover_on_a_promise_shows_its_defaults() {
    const POLICY: &str = "body private { mode = 0o600; }\nbundle web {\n  defaults { notify = [service \"nginx\"]; mode = 0o640; }\n  defaults file { mode = 0o644; owner = \"www-data\"; }\n  file \"/etc/nginx/nginx.conf\" { content = \"x\\n\"; owner = \"root\"; }\n  file \"/etc/nginx/key.pem\" { content = \"k\\n\"; use private; }\n  service \"nginx\" { state = running; }\n  package \"nginx\" { state = installed; notify = []; }\n}\npolicy { web(); }\n";
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("main.policy");
    std::fs::write(&main, POLICY).unwrap();
    let mut client = Client::start();
    client.initialize(dir.path());
    let main_uri = client.open(&main, POLICY);
    client.diagnostics(&main_uri, 1);
    let hover = |client: &mut Client, line: u32, character: u32| {
        let hover = client.request("textDocument/hover", at(&main_uri, line, character));
        hover["contents"]["value"].as_str().unwrap().to_owned()
    };
    let conf = hover(&mut client, 4, 3);
    assert!(conf.contains("from the defaults of bundle `web`"), "{conf}");
    assert!(
        conf.contains("- `mode = 0o644` (`defaults file`, line 4)"),
        "{conf}"
    );
    assert!(
        conf.contains("- `notify = [service \"nginx\"]` (`defaults`, line 3)"),
        "{conf}"
    );
    assert!(!conf.contains("owner ="), "its own owner wins: {conf}");
    assert!(!conf.contains("0o640"), "the typed default wins: {conf}");
    let key = hover(&mut client, 5, 3);
    assert!(!key.contains("mode ="), "its body sets mode: {key}");
    assert!(key.contains("owner = \"www-data\""), "{key}");
    let package = hover(&mut client, 7, 3);
    assert!(!package.contains("from the defaults"), "{package}");
    assert!(client.shutdown().success());
}
