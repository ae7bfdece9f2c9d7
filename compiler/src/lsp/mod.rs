//! `policyc lsp`: the language server, over standard input and output.
//!
//! Synchronous, on `lsp-server` (as rust-analyzer, Ruff and Gleam do): one
//! thread, no async runtime. The server checks with the same code as
//! `policyc check` ([`crate::check`]), reports the same [`Diagnostic`]s
//! (converted in [`diagnostics`]), reads hover text from the one promise-type
//! schema (`converge_format::schema`), and formats with [`crate::fmt`].
//!
//! Modules, one job each: [`server`] (the loop, documents, debouncing,
//! publishing), [`analysis`] (checking an open document with unsaved texts),
//! [`documents`] (data files and templates: which program checks them),
//! [`index`] (the checker's name table: the name under the cursor and its
//! uses), [`navigation`] (definition, references, rename), [`hover`],
//! [`completion`] (and [`expressions`]: fields, keys, functions),
//! [`symbols`] (document outline), [`format`] (formatting edits),
//! [`position`] (UTF-16 positions from the source line index).
//!
//! [`Diagnostic`]: crate::diagnostic::Diagnostic

pub mod analysis;
pub mod completion;
pub mod diagnostics;
pub mod documents;
pub mod expressions;
pub mod format;
pub mod hover;
pub mod index;
pub mod navigation;
pub mod position;
pub mod server;
pub mod symbols;

use std::process::ExitCode;

use lsp_server::Connection;
use lsp_types::{
    CompletionOptions, HoverProviderCapability, OneOf, RenameOptions, ServerCapabilities,
    ServerInfo, TextDocumentSyncCapability, TextDocumentSyncKind, WorkDoneProgressOptions,
};

/// What the server can do, announced in the `initialize` answer.
pub fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Kind(TextDocumentSyncKind::FULL)),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        rename_provider: Some(OneOf::Right(RenameOptions {
            prepare_provider: Some(true),
            work_done_progress_options: WorkDoneProgressOptions::default(),
        })),
        document_symbol_provider: Some(OneOf::Left(true)),
        document_formatting_provider: Some(OneOf::Left(true)),
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some(vec![".".to_owned(), "=".to_owned(), " ".to_owned()]),
            ..CompletionOptions::default()
        }),
        ..ServerCapabilities::default()
    }
}

/// Runs the server until the client says `exit`. Exit status 0 after a
/// proper `shutdown`, 1 otherwise (as the protocol asks).
/// `policy_root` is `--policy-root`: the policy tree of every document
/// (without it, each document's own directory, as for `policyc check`).
pub fn run(policy_root: Option<std::path::PathBuf>) -> ExitCode {
    let (conn, io_threads) = Connection::stdio();
    let init = serde_json::json!({
        "capabilities": capabilities(),
        "serverInfo": ServerInfo {
            name: "policyc".to_owned(),
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        },
    });
    let started = conn
        .initialize_start()
        .and_then(|(id, _params)| conn.initialize_finish(id, init));
    let ending = match started {
        Ok(()) => server::Server::with_policy_root(policy_root).run(&conn),
        Err(err) => {
            eprintln!("policyc lsp: {err}");
            server::Ending::Abrupt
        }
    };
    // Dropping the connection closes the writer; the reader stops at `exit`
    // or at the end of its input.
    drop(conn);
    let joined = io_threads.join();
    match (ending, joined) {
        (server::Ending::Clean, Ok(())) => ExitCode::SUCCESS,
        _ => ExitCode::from(crate::cli::exit::IO_ERROR),
    }
}
