//! A minimal LSP client for the language-server tests: spawns `policyc
//! lsp`, frames JSON-RPC with `Content-Length` headers over its stdin and
//! stdout, and waits for answers with a timeout, so a server that hangs
//! fails the test instead of hanging it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long any one answer may take (debug builds on a busy machine).
pub const TIMEOUT: Duration = Duration::from_secs(60);

pub struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    next_id: i64,
    /// Notifications received while waiting for something else.
    pub notifications: Vec<Value>,
}

impl Client {
    pub fn start() -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_policyc"))
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn policyc lsp");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(message) = read_message(&mut reader) {
                if tx.send(message).is_err() {
                    break;
                }
            }
        });
        Client {
            child,
            stdin,
            rx,
            next_id: 0,
            notifications: Vec::new(),
        }
    }

    fn send(&mut self, message: Value) {
        let body = message.to_string();
        let stdin = self.stdin.as_mut().expect("stdin open");
        write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write to server");
        stdin.flush().expect("flush");
    }

    fn next(&mut self, deadline: Instant) -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(left) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => panic!("no message from the server in {TIMEOUT:?}"),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("the server closed its output (crashed?)")
            }
        }
    }

    /// Sends a request and returns its `result` (panics on an error answer).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let response = self.request_raw(method, params);
        if let Some(err) = response.get("error") {
            panic!("{method} failed: {err}");
        }
        response.get("result").cloned().unwrap_or(Value::Null)
    }

    /// Sends a request and returns the whole response.
    pub fn request_raw(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let message = self.next(deadline);
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return message;
            }
            if message.get("method").is_some() {
                self.notifications.push(message);
            }
        }
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The first notification (already received or still to come) with this
    /// method whose params satisfy `pred`; it and those before it are
    /// consumed.
    pub fn wait_for(&mut self, method: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self
            .notifications
            .iter()
            .position(|n| n["method"] == method && pred(&n["params"]))
        {
            let found = self.notifications[i]["params"].clone();
            self.notifications.drain(..=i);
            return found;
        }
        self.notifications.clear();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let message = self.next(deadline);
            if message["method"] == method && pred(&message["params"]) {
                return message["params"].clone();
            }
        }
    }

    /// Diagnostics published for `uri` at document version `version`.
    pub fn diagnostics(&mut self, uri: &str, version: i64) -> Vec<Value> {
        let params = self.wait_for("textDocument/publishDiagnostics", |p| {
            p["uri"] == uri && p["version"] == version
        });
        params["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub fn initialize(&mut self, root: &Path) -> Value {
        let root_uri = uri(root);
        let result = self.request(
            "initialize",
            json!({"processId": null, "rootUri": root_uri, "capabilities": {}}),
        );
        self.notify("initialized", json!({}));
        result
    }

    pub fn open(&mut self, path: &Path, text: &str) -> String {
        let uri = uri(path);
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "policy", "version": 1, "text": text}}),
        );
        uri
    }

    pub fn change(&mut self, uri: &str, version: i64, text: &str) {
        self.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}),
        );
    }

    /// `shutdown`, then `exit`; the process's exit status.
    pub fn shutdown(mut self) -> ExitStatus {
        self.request("shutdown", Value::Null);
        self.notify("exit", Value::Null);
        self.stdin.take();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit after `exit`"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A `file://` URI for an absolute path.
pub fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

fn read_message(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(n) = line.strip_prefix("Content-Length: ") {
            length = n.parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

/// `(code, line, character)` of each published diagnostic, to compare
/// with what a test expects.
pub fn codes(diagnostics: &[Value]) -> Vec<(String, u64, u64)> {
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
