//! The language server on mangled text: every example file, cut, spliced
//! and sprinkled with stray tokens (deterministically), with hover,
//! completion, definition, references, rename (and its preparation),
//! symbols and formatting asked at random positions (some past the end)
//! after each edit. The server runs in this process on an in-memory
//! connection, so a panic anywhere in it fails the test; every request must
//! get an answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use converge_compiler::lsp::server::{Ending, Server};
use lsp_server::{Connection, Message, Notification, Request, RequestId};
use serde_json::json;

/// A small deterministic generator (xorshift), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const STRAY: &[&str] = &[
    "{",
    "}",
    "\"",
    ";",
    "=",
    "when ",
    "sys.",
    "é😀",
    "/*",
    "\"\"\"",
    "${",
    "(",
    ")",
    "[",
    ",",
    "file \"/x\" { ",
    "use ",
    "bundle ",
    "class c = ",
    "0o",
    "\n",
    "//",
];

/// Cuts, duplicates or inserts at char boundaries.
fn mutate(rng: &mut Rng, text: &str) -> String {
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let a = bounds[rng.below(bounds.len())];
    let b = bounds[rng.below(bounds.len())];
    let (a, b) = (a.min(b), a.max(b).min(a.min(b) + 200));
    let b = *bounds.iter().find(|&&x| x >= b).unwrap_or(&text.len());
    match rng.below(3) {
        0 => format!("{}{}", &text[..a], &text[b..]),
        1 => format!("{}{}{}", &text[..b], &text[a..b], &text[b..]),
        _ => format!(
            "{}{}{}",
            &text[..a],
            STRAY[rng.below(STRAY.len())],
            &text[a..]
        ),
    }
}

#[test]
fn mangled_examples_never_crash_the_server() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<_> = std::fs::read_dir(&examples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "policy"))
        .collect();
    files.sort();
    let (server, client) = Connection::memory();
    let handle = std::thread::spawn(move || Server::default().run(&server));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut id = 0;
    let methods = [
        "textDocument/hover",
        "textDocument/completion",
        "textDocument/definition",
        "textDocument/references",
        "textDocument/rename",
        "textDocument/prepareRename",
        "textDocument/documentSymbol",
        "textDocument/formatting",
    ];
    for path in &files {
        let path = path.canonicalize().unwrap();
        let uri = format!("file://{}", path.display());
        let mut text = std::fs::read_to_string(&path).unwrap();
        let send = |m: Message| client.sender.send(m).unwrap();
        send(Message::Notification(Notification::new(
            "textDocument/didOpen".to_owned(),
            json!({"textDocument": {"uri": uri, "languageId": "policy", "version": 1, "text": text}}),
        )));
        for version in 2..82 {
            text = mutate(&mut rng, &text);
            send(Message::Notification(Notification::new(
                "textDocument/didChange".to_owned(),
                json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}),
            )));
            let lines = text.lines().count() as u64 + 2;
            for _ in 0..4 {
                id += 1;
                let method = methods[rng.below(methods.len())];
                let position = json!({"line": rng.next() % lines, "character": rng.next() % 90});
                let params = json!({
                    "textDocument": {"uri": uri},
                    "position": position,
                    "context": {"includeDeclaration": true},
                    "newName": "renamed",
                    "options": {"tabSize": 2, "insertSpaces": true},
                });
                send(Message::Request(Request::new(
                    RequestId::from(id),
                    method.to_owned(),
                    params,
                )));
                let answered = loop {
                    match client
                        .receiver
                        .recv_timeout(std::time::Duration::from_secs(60))
                    {
                        Ok(Message::Response(r)) => break r,
                        Ok(_) => {}
                        Err(e) => panic!("no answer to {method} on {uri} v{version}: {e}"),
                    }
                };
                assert_eq!(answered.id, RequestId::from(id));
            }
        }
        send(Message::Notification(Notification::new(
            "textDocument/didClose".to_owned(),
            json!({"textDocument": {"uri": uri}}),
        )));
    }
    id += 1;
    client
        .sender
        .send(Message::Request(Request::new(
            RequestId::from(id),
            "shutdown".to_owned(),
            json!(null),
        )))
        .unwrap();
    client
        .sender
        .send(Message::Notification(Notification::new(
            "exit".to_owned(),
            json!(null),
        )))
        .unwrap();
    let ending = handle.join().expect("the server panicked");
    assert_eq!(ending, Ending::Clean);
}
