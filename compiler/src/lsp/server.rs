//! The server loop: documents in, diagnostics and answers out.
//!
//! One thread does everything, in message order, so there is no locking and
//! no stale answer. Re-analysis is what costs; it is debounced by
//! coalescing: after each message the loop drains every message already
//! waiting, applies all the edits, and analyses each changed document once,
//! at its latest version. While an analysis runs, keystrokes queue up and
//! are then handled together, so a fast typist never waits for one analysis
//! per character. A request is answered after the edits before it are
//! analysed, so positions always refer to the text the editor has.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, DidSaveTextDocument,
    Notification as _, PublishDiagnostics,
};
use lsp_types::request::{
    Completion, DocumentSymbolRequest, Formatting, GotoDefinition, HoverRequest,
    PrepareRenameRequest, References, Rename, Request as _, Shutdown,
};
use lsp_types::{PublishDiagnosticsParams, Url};
use serde::de::DeserializeOwned;

use super::analysis::{Analysis, Settings};
use super::diagnostics::{shown_in, to_lsp};
use super::documents::{self, find_host};
use super::position::{LineIndex, LspPositions};
use super::{completion, format, hover, navigation, symbols};

/// An open document: the editor's text, not the disk's.
#[derive(Debug)]
pub struct Document {
    pub text: String,
    pub version: i32,
    pub path: PathBuf,
    pub lines: LineIndex,
    /// Policy source, or a data file or template a policy reads
    /// ([`documents::is_policy`]).
    pub policy: bool,
}

impl Document {
    /// An open document: policy or not by its name
    /// ([`documents::is_policy`]).
    pub fn new(path: PathBuf, text: String, version: i32) -> Document {
        Document {
            lines: LineIndex::new(&text),
            policy: documents::is_policy(&path),
            text,
            version,
            path,
        }
    }
}

/// How the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// `exit` after `shutdown`: exit status 0.
    Clean,
    /// `exit` without `shutdown`, or the client went away: exit status 1.
    Abrupt,
}

/// The server's whole state: open documents, the analysis of each, and
/// what was last published.
#[derive(Debug, Default)]
pub struct Server {
    docs: HashMap<Url, Document>,
    analyses: HashMap<Url, Analysis>,
    /// For each open data file or template that no open policy reads: the
    /// program of a policy file found near it ([`find_host`]), or `None`
    /// when the search found none. A document without an entry has not
    /// been searched for yet.
    hosts: HashMap<Url, Option<Analysis>>,
    /// What was last published for each file, to clear or skip repeats.
    published: HashMap<Url, Vec<lsp_types::Diagnostic>>,
    /// Documents edited since they were last analysed.
    dirty: Vec<Url>,
    /// A document was closed: its diagnostics must be cleared.
    republish: bool,
    shutdown: bool,
    /// `--policy-root` and the analysis deadline.
    settings: Settings,
}

impl Server {
    /// A server whose documents read files inside `policy_root` (or, when
    /// `None`, each inside its own directory).
    pub fn with_policy_root(policy_root: Option<PathBuf>) -> Server {
        Server::with_settings(Settings {
            policy_root,
            ..Settings::default()
        })
    }

    pub fn with_settings(settings: Settings) -> Server {
        Server {
            settings,
            ..Server::default()
        }
    }

    /// Serves `conn` until `exit` (or until the client goes away).
    pub fn run(mut self, conn: &Connection) -> Ending {
        while let Ok(first) = conn.receiver.recv() {
            let mut batch = vec![first];
            batch.extend(conn.receiver.try_iter());
            for message in batch {
                match message {
                    Message::Notification(n) if n.method == "exit" => {
                        return if self.shutdown {
                            Ending::Clean
                        } else {
                            Ending::Abrupt
                        };
                    }
                    Message::Notification(n) => self.notification(n),
                    Message::Request(req) => {
                        self.flush(conn);
                        let response = self.request(req);
                        let _ = conn.sender.send(Message::Response(response));
                    }
                    Message::Response(_) => {}
                }
            }
            self.flush(conn);
        }
        Ending::Abrupt
    }

    // ------------------------------------------------------------ documents

    fn notification(&mut self, n: Notification) {
        match n.method.as_str() {
            DidOpenTextDocument::METHOD => {
                let Some(p) = params::<lsp_types::DidOpenTextDocumentParams>(n.params) else {
                    return;
                };
                let doc = p.text_document;
                self.set_text(doc.uri, doc.text, doc.version);
            }
            DidChangeTextDocument::METHOD => {
                let Some(p) = params::<lsp_types::DidChangeTextDocumentParams>(n.params) else {
                    return;
                };
                let uri = p.text_document.uri;
                let Some(mut text) = self.docs.get(&uri).map(|d| d.text.clone()) else {
                    return;
                };
                for change in p.content_changes {
                    match change.range {
                        // Full sync is what the server asks for; a ranged
                        // edit from a client that sends them anyway still
                        // applies.
                        Some(range) => {
                            let lines = LineIndex::new(&text);
                            let start = lines.offset(&text, range.start) as usize;
                            let end = lines.offset(&text, range.end) as usize;
                            if start <= end && end <= text.len() {
                                text.replace_range(start..end, &change.text);
                            }
                        }
                        None => text = change.text,
                    }
                }
                self.set_text(uri, text, p.text_document.version);
            }
            DidCloseTextDocument::METHOD => {
                let Some(p) = params::<lsp_types::DidCloseTextDocumentParams>(n.params) else {
                    return;
                };
                let uri = p.text_document.uri;
                self.docs.remove(&uri);
                self.analyses.remove(&uri);
                self.hosts.remove(&uri);
                // Documents that import it now read it from disk.
                let path = uri.to_file_path().ok();
                // So do the programs found for other documents: search
                // again.
                self.hosts.retain(|_, host| {
                    !host
                        .as_ref()
                        .is_some_and(|h| path.as_deref().is_some_and(|p| h.reads(p)))
                });
                let importers: Vec<Url> = self
                    .analyses
                    .iter()
                    .filter(|(_, a)| path.as_deref().is_some_and(|p| a.reads(p)))
                    .map(|(u, _)| u.clone())
                    .collect();
                self.dirty.extend(importers);
                self.republish = true;
            }
            DidSaveTextDocument::METHOD => {}
            _ => {}
        }
    }

    fn set_text(&mut self, uri: Url, text: String, version: i32) {
        let Ok(path) = uri.to_file_path() else {
            return;
        };
        self.docs
            .insert(uri.clone(), Document::new(path, text, version));
        if !self.dirty.contains(&uri) {
            self.dirty.push(uri);
        }
    }

    /// Analyses every policy document edited since the last flush, and
    /// every open policy document whose program reads one of them (an
    /// import, a data file, a template), finds the programs of the data
    /// files and templates no open policy reads, then publishes what
    /// changed.
    fn flush(&mut self, conn: &Connection) {
        if self.dirty.is_empty() && !self.republish {
            return;
        }
        self.republish = false;
        let dirty: Vec<Url> = std::mem::take(&mut self.dirty);
        let open: HashMap<PathBuf, String> = self
            .docs
            .values()
            .map(|d| (d.path.clone(), d.text.clone()))
            .collect();
        let mut todo: Vec<Url> = Vec::new();
        for uri in &dirty {
            let Some((path, policy)) = self.docs.get(uri).map(|d| (d.path.clone(), d.policy))
            else {
                continue;
            };
            // A data file or template is never analysed as the root of a
            // program: only the programs that read it are.
            if policy && !todo.contains(uri) {
                todo.push(uri.clone());
            }
            for (other, analysis) in &self.analyses {
                if other != uri && analysis.reads(&path) && !todo.contains(other) {
                    todo.push(other.clone());
                }
            }
        }
        for uri in &todo {
            let Some(doc) = self.docs.get(uri) else {
                continue;
            };
            match Analysis::run(&doc.path, &open, &self.settings) {
                Some(analysis) => {
                    self.analyses.insert(uri.clone(), analysis);
                }
                None => {
                    self.analyses.remove(uri);
                }
            }
        }
        self.rehost(&dirty, &open);
        self.publish(conn, &dirty);
    }

    /// Keeps [`hosts`](Self::hosts) current: a document an open policy
    /// reads needs none; one edited, never searched for, or whose program
    /// read an edited document is checked again (its program first, then
    /// a new search).
    fn rehost(&mut self, dirty: &[Url], open: &HashMap<PathBuf, String>) {
        let dirty_paths: Vec<PathBuf> = dirty
            .iter()
            .filter_map(|u| self.docs.get(u).map(|d| d.path.clone()))
            .collect();
        let documents: Vec<(Url, PathBuf)> = self
            .docs
            .iter()
            .filter(|(_, d)| !d.policy)
            .map(|(u, d)| (u.clone(), d.path.clone()))
            .collect();
        self.hosts
            .retain(|u, _| documents.iter().any(|(d, _)| d == u));
        for (uri, path) in documents {
            if self.analyses.values().any(|a| a.reads(&path)) {
                self.hosts.remove(&uri);
                continue;
            }
            let stale = match self.hosts.get(&uri) {
                None => true,
                Some(host) => {
                    dirty.contains(&uri)
                        || host
                            .as_ref()
                            .is_some_and(|h| dirty_paths.iter().any(|p| h.reads(p)))
                }
            };
            if !stale {
                continue;
            }
            let again = self
                .hosts
                .get(&uri)
                .and_then(|h| h.as_ref())
                .and_then(|h| h.path(h.root).map(PathBuf::from))
                .and_then(|root| Analysis::run(&root, open, &self.settings))
                .filter(|a| a.reads(&path));
            let host = again.or_else(|| find_host(&path, open, &self.settings));
            self.hosts.insert(uri, host);
        }
    }

    /// Publishes each file's diagnostics: the union over every open
    /// document's program of those whose primary label is in the file.
    /// Files in `always` are published even when nothing changed (the
    /// editor asked about them); others only when their list changed.
    fn publish(&mut self, conn: &Connection, always: &[Url]) {
        let mut by_file: HashMap<Url, Vec<lsp_types::Diagnostic>> = HashMap::new();
        // The program found for a document that no open policy reads
        // shows only what falls inside that document.
        let hosted = self.hosts.iter().filter_map(|(uri, host)| {
            Some((host.as_ref()?, Some(self.docs.get(uri)?.path.as_path())))
        });
        let analyses = self.analyses.values().map(|a| (a, None)).chain(hosted);
        for (analysis, only) in analyses {
            for d in &analysis.diagnostics {
                let Some(path) = analysis.path(shown_in(analysis, d)) else {
                    continue;
                };
                if only.is_some_and(|only| only != path) {
                    continue;
                }
                let Ok(uri) = Url::from_file_path(path) else {
                    continue;
                };
                if let Some(diag) = to_lsp(analysis, d) {
                    let list = by_file.entry(uri).or_default();
                    if !list.contains(&diag) {
                        list.push(diag);
                    }
                }
            }
        }
        let mut uris: HashSet<Url> = by_file.keys().cloned().collect();
        uris.extend(self.published.keys().cloned());
        uris.extend(
            always
                .iter()
                .filter(|u| self.docs.contains_key(*u))
                .cloned(),
        );
        for uri in uris {
            let diagnostics = by_file.remove(&uri).unwrap_or_default();
            let previous = self.published.get(&uri);
            if previous == Some(&diagnostics) && !always.contains(&uri) {
                continue;
            }
            let version = self.docs.get(&uri).map(|d| d.version);
            let params = PublishDiagnosticsParams {
                uri: uri.clone(),
                diagnostics: diagnostics.clone(),
                version,
            };
            let note = Notification::new(PublishDiagnostics::METHOD.to_owned(), params);
            let _ = conn.sender.send(Message::Notification(note));
            if diagnostics.is_empty() && !self.docs.contains_key(&uri) {
                self.published.remove(&uri);
            } else {
                self.published.insert(uri, diagnostics);
            }
        }
    }

    // ------------------------------------------------------------ requests

    fn request(&mut self, req: Request) -> Response {
        let id = req.id.clone();
        let result = match req.method.as_str() {
            Shutdown::METHOD => {
                self.shutdown = true;
                Ok(serde_json::Value::Null)
            }
            HoverRequest::METHOD => self.with(req, |s, p: lsp_types::HoverParams| {
                let at = &p.text_document_position_params;
                let (analysis, doc) = s.context(&at.text_document.uri)?;
                Some(hover::hover(analysis, doc, at.position))
            }),
            GotoDefinition::METHOD => self.with(req, |s, p: lsp_types::GotoDefinitionParams| {
                let at = &p.text_document_position_params;
                let (analysis, doc) = s.context(&at.text_document.uri)?;
                Some(navigation::definition(analysis, doc, at.position))
            }),
            References::METHOD => self.with(req, |s, p: lsp_types::ReferenceParams| {
                let at = &p.text_document_position;
                let (analysis, doc) = s.context(&at.text_document.uri)?;
                let others: Vec<&Analysis> = s.analyses.values().collect();
                Some(navigation::references(
                    analysis,
                    &others,
                    doc,
                    at.position,
                    p.context.include_declaration,
                ))
            }),
            Rename::METHOD => {
                let id = req.id.clone();
                let Some(p) = params::<lsp_types::RenameParams>(req.params) else {
                    return invalid_params(id);
                };
                let at = &p.text_document_position;
                let Some((analysis, doc)) = self.context(&at.text_document.uri) else {
                    return Response::new_ok(id, serde_json::Value::Null);
                };
                let others: Vec<&Analysis> = self.analyses.values().collect();
                match navigation::rename(analysis, &others, doc, at.position, &p.new_name) {
                    Ok(edit) => Ok(serde_json::to_value(edit).unwrap_or_default()),
                    Err(message) => {
                        return Response::new_err(id, ErrorCode::RequestFailed as i32, message)
                    }
                }
            }
            PrepareRenameRequest::METHOD => {
                let id = req.id.clone();
                let Some(p) = params::<lsp_types::TextDocumentPositionParams>(req.params) else {
                    return invalid_params(id);
                };
                let Some((analysis, doc)) = self.context(&p.text_document.uri) else {
                    return Response::new_ok(id, serde_json::Value::Null);
                };
                match navigation::prepare_rename(analysis, doc, p.position) {
                    Ok(range) => Ok(serde_json::to_value(range).unwrap_or_default()),
                    Err(message) => {
                        return Response::new_err(id, ErrorCode::RequestFailed as i32, message)
                    }
                }
            }
            Completion::METHOD => self.with(req, |s, p: lsp_types::CompletionParams| {
                let at = &p.text_document_position;
                let (analysis, doc) = s.context(&at.text_document.uri)?;
                Some(completion::complete(analysis, doc, at.position))
            }),
            DocumentSymbolRequest::METHOD => {
                self.with(req, |s, p: lsp_types::DocumentSymbolParams| {
                    let (analysis, doc) = s.context(&p.text_document.uri)?;
                    if !doc.policy {
                        return None;
                    }
                    Some(symbols::document_symbols(analysis, doc))
                })
            }
            Formatting::METHOD => {
                let id = req.id.clone();
                let Some(p) = params::<lsp_types::DocumentFormattingParams>(req.params) else {
                    return invalid_params(id);
                };
                // Data files and templates are left to their own tools.
                let Some(doc) = self.docs.get(&p.text_document.uri).filter(|d| d.policy) else {
                    return Response::new_ok(id, serde_json::Value::Null);
                };
                match format::edits(doc) {
                    Ok(edits) => Ok(serde_json::to_value(edits).unwrap_or_default()),
                    Err(message) => {
                        return Response::new_err(id, ErrorCode::RequestFailed as i32, message)
                    }
                }
            }
            _ => Err((
                ErrorCode::MethodNotFound,
                format!("unknown method {}", req.method),
            )),
        };
        match result {
            Ok(value) => Response::new_ok(id, value),
            Err((code, message)) => Response::new_err(id, code as i32, message),
        }
    }

    /// Decodes the parameters and runs `f`; `None` from `f` (a document that
    /// is not open) answers `null`.
    fn with<P: DeserializeOwned, R: serde::Serialize>(
        &self,
        req: Request,
        f: impl FnOnce(&Self, P) -> Option<R>,
    ) -> Result<serde_json::Value, (ErrorCode, String)> {
        let Some(p) = params::<P>(req.params) else {
            return Err((ErrorCode::InvalidParams, "invalid parameters".to_owned()));
        };
        Ok(f(self, p)
            .and_then(|r| serde_json::to_value(r).ok())
            .unwrap_or(serde_json::Value::Null))
    }

    /// The analysis of an open document and the document: a policy
    /// document's own; for a data file or template, that of an open policy
    /// that reads it (the first by URI, so the answer does not change from
    /// one request to the next), else the program found for it.
    fn context(&self, uri: &Url) -> Option<(&Analysis, &Document)> {
        let doc = self.docs.get(uri)?;
        if doc.policy {
            return Some((self.analyses.get(uri)?, doc));
        }
        let reader = self
            .analyses
            .iter()
            .filter(|(_, a)| a.reads(&doc.path))
            .min_by_key(|(u, _)| u.as_str())
            .map(|(_, a)| a);
        let analysis = match reader {
            Some(a) => a,
            None => self.hosts.get(uri)?.as_ref()?,
        };
        Some((analysis, doc))
    }
}

fn params<P: DeserializeOwned>(value: serde_json::Value) -> Option<P> {
    serde_json::from_value(value).ok()
}

fn invalid_params(id: RequestId) -> Response {
    Response::new_err(
        id,
        ErrorCode::InvalidParams as i32,
        "invalid parameters".to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_server::Connection;
    use serde_json::json;

    fn notification(method: &str, params: serde_json::Value) -> Message {
        Message::Notification(Notification::new(method.to_owned(), params))
    }

    /// Edits already waiting when the server looks are analysed once, at
    /// the last version: one publication, not one per keystroke.
    #[test]
    fn queued_changes_are_coalesced_into_one_analysis() {
        let (server, client) = Connection::memory();
        let dir = std::env::temp_dir();
        let uri = Url::from_file_path(dir.join("coalesce.policy")).unwrap();
        let text = "bundle b { file \"/x\" { mode = 0o644; } }\n";
        client
            .sender
            .send(notification(
                DidOpenTextDocument::METHOD,
                json!({"textDocument": {"uri": uri, "languageId": "policy", "version": 1, "text": ""}}),
            ))
            .unwrap();
        for (i, end) in (1..=text.len()).enumerate() {
            client
                .sender
                .send(notification(
                    DidChangeTextDocument::METHOD,
                    json!({"textDocument": {"uri": uri, "version": i + 2},
                           "contentChanges": [{"text": &text[..end]}]}),
                ))
                .unwrap();
        }
        // A request makes the server analyse what is pending before it
        // answers; `exit` alone would end the loop first.
        client
            .sender
            .send(Message::Request(Request::new(
                RequestId::from(1),
                Shutdown::METHOD.to_owned(),
                json!(null),
            )))
            .unwrap();
        client
            .sender
            .send(notification("exit", json!(null)))
            .unwrap();
        assert_eq!(Server::default().run(&server), Ending::Clean);
        let published: Vec<lsp_server::Notification> = client
            .receiver
            .try_iter()
            .filter_map(|m| match m {
                Message::Notification(n) if n.method == PublishDiagnostics::METHOD => Some(n),
                _ => None,
            })
            .collect();
        assert_eq!(published.len(), 1, "{published:?}");
        assert_eq!(published[0].params["version"], text.len() + 1);
    }

    /// Queues, for a server on the other end of `client`: open `text` as
    /// `uri`, then shut down and exit (the server runs until it reads them).
    fn open_then_exit(client: &Connection, uri: &Url, text: &str) {
        client
            .sender
            .send(notification(
                DidOpenTextDocument::METHOD,
                json!({"textDocument": {"uri": uri, "languageId": "policy", "version": 1, "text": text}}),
            ))
            .unwrap();
        client
            .sender
            .send(Message::Request(Request::new(
                RequestId::from(1),
                Shutdown::METHOD.to_owned(),
                json!(null),
            )))
            .unwrap();
        client
            .sender
            .send(notification("exit", json!(null)))
            .unwrap();
    }

    /// A file with chains long enough to overflow a recursive pass (issue
    /// 14, items 21 and 24) is analysed on a worker thread with a large
    /// stack, by passes that do not recurse: the server publishes its
    /// diagnostics and answers the next request, instead of dying.
    #[test]
    fn a_file_with_100k_long_chains_does_not_kill_the_server() {
        let (server, client) = Connection::memory();
        let uri = Url::from_file_path(std::env::temp_dir().join("chains.policy")).unwrap();
        let n = 100_000;
        let mut text = String::from("let l0 = \"x\";\nbody b0 { mode = 0o644; }\n");
        for i in 1..n {
            text.push_str(&format!(
                "let l{i} = l{};\nbody b{i} {{ use b{}; }}\n",
                i - 1,
                i - 1
            ));
        }
        text.push_str(&format!(
            "bundle x {{ file \"/etc/x\" {{ content = l{}; use b{}; }} }}\npolicy {{ x(); }}\n",
            n - 1,
            n - 1
        ));
        open_then_exit(&client, &uri, &text);
        // A deadline no loaded test machine reaches: this test is about
        // the result, not the time.
        let settings = Settings {
            deadline: std::time::Duration::from_secs(600),
            ..Settings::default()
        };
        assert_eq!(Server::with_settings(settings).run(&server), Ending::Clean);
        let published: Vec<lsp_server::Notification> = client
            .receiver
            .try_iter()
            .filter_map(|m| match m {
                Message::Notification(n) if n.method == PublishDiagnostics::METHOD => Some(n),
                _ => None,
            })
            .collect();
        assert_eq!(published.len(), 1, "{published:?}");
        assert_eq!(
            published[0].params["diagnostics"],
            json!([]),
            "{published:?}"
        );
    }

    /// `policyc lsp --policy-root DIR` reads what `policyc check
    /// --policy-root DIR` reads; without it, a document's tree is its own
    /// directory and an import out of it is E0502 in the editor too.
    #[test]
    fn the_policy_root_bounds_what_documents_import() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("policy")).unwrap();
        std::fs::create_dir_all(dir.path().join("lib")).unwrap();
        std::fs::write(dir.path().join("lib/common.policy"), "class web;\n").unwrap();
        let uri = Url::from_file_path(dir.path().join("policy/site.policy")).unwrap();
        let text = "import \"../lib/common.policy\";\nclass app = web;\n";
        let published = |root: Option<PathBuf>| {
            let (server, client) = Connection::memory();
            client
                .sender
                .send(notification(
                    DidOpenTextDocument::METHOD,
                    json!({"textDocument": {"uri": uri, "languageId": "policy", "version": 1, "text": text}}),
                ))
                .unwrap();
            client
                .sender
                .send(Message::Request(Request::new(
                    RequestId::from(1),
                    Shutdown::METHOD.to_owned(),
                    json!(null),
                )))
                .unwrap();
            client
                .sender
                .send(notification("exit", json!(null)))
                .unwrap();
            assert_eq!(Server::with_policy_root(root).run(&server), Ending::Clean);
            client
                .receiver
                .try_iter()
                .filter_map(|m| match m {
                    Message::Notification(n) if n.method == PublishDiagnostics::METHOD => {
                        Some(n.params["diagnostics"].to_string())
                    }
                    _ => None,
                })
                .collect::<Vec<String>>()
                .join("\n")
        };
        assert!(published(None).contains("E0502"));
        assert!(!published(Some(dir.path().to_path_buf())).contains("E0"));
    }

    /// An analysis past its deadline does not hold the editor up: the
    /// server publishes a diagnostic saying so and answers the next request
    /// (the worker finishes on its own).
    #[test]
    fn an_analysis_past_its_deadline_does_not_block_the_server() {
        let (server, client) = Connection::memory();
        let uri = Url::from_file_path(std::env::temp_dir().join("slow.policy")).unwrap();
        let mut text = String::from("class c0;\n");
        for i in 1..20_000 {
            text.push_str(&format!(
                "class c{i} = c{} || sys.hostname == \"h{i}\";\n",
                i - 1
            ));
        }
        text.push_str(
            "bundle b { when c19999 { file \"/etc/x\" { content = \"x\"; } } }\npolicy { b(); }\n",
        );
        open_then_exit(&client, &uri, &text);
        let settings = Settings {
            deadline: std::time::Duration::from_millis(1),
            ..Settings::default()
        };
        assert_eq!(Server::with_settings(settings).run(&server), Ending::Clean);
        let messages: Vec<Message> = client.receiver.try_iter().collect();
        let published = messages.iter().find_map(|m| match m {
            Message::Notification(n) if n.method == PublishDiagnostics::METHOD => {
                Some(n.params["diagnostics"].to_string())
            }
            _ => None,
        });
        assert!(
            published
                .as_deref()
                .is_some_and(|d| d.contains("did not finish")),
            "{published:?}"
        );
        assert!(messages.iter().any(|m| matches!(m, Message::Response(_))));
    }

    /// Requests are answered in order, after the edits before them.
    #[test]
    fn a_request_sees_the_edits_sent_before_it() {
        let (server, client) = Connection::memory();
        let uri = Url::from_file_path(std::env::temp_dir().join("order.policy")).unwrap();
        client
            .sender
            .send(notification(
                DidOpenTextDocument::METHOD,
                json!({"textDocument": {"uri": uri, "languageId": "policy", "version": 1, "text": "class a;\n"}}),
            ))
            .unwrap();
        client
            .sender
            .send(notification(
                DidChangeTextDocument::METHOD,
                json!({"textDocument": {"uri": uri, "version": 2},
                       "contentChanges": [{"text": "class a;\nbundle b {}\n"}]}),
            ))
            .unwrap();
        client
            .sender
            .send(Message::Request(Request::new(
                RequestId::from(1),
                DocumentSymbolRequest::METHOD.to_owned(),
                json!({"textDocument": {"uri": uri}}),
            )))
            .unwrap();
        client
            .sender
            .send(Message::Request(Request::new(
                RequestId::from(2),
                Shutdown::METHOD.to_owned(),
                json!(null),
            )))
            .unwrap();
        client
            .sender
            .send(notification("exit", json!(null)))
            .unwrap();
        assert_eq!(Server::default().run(&server), Ending::Clean);
        let symbols = client
            .receiver
            .try_iter()
            .find_map(|m| match m {
                Message::Response(r) if r.id == RequestId::from(1) => r.result,
                _ => None,
            })
            .unwrap();
        assert_eq!(symbols[1]["name"], "b", "{symbols}");
    }
}
