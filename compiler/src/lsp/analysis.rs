//! Checking an open document the way `policyc check` would, with the
//! editor's unsaved texts in place of the files on disk.
//!
//! Each open document is checked as the root of a program (it and
//! everything it imports). The result keeps the loaded workspace, so that
//! navigation can look into imported files, and the diagnostics, which the
//! server merges over all open documents: a contradiction between a library
//! and the file that calls it shows in both.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use converge_grammar::FileId;

use crate::check::check;
use crate::diagnostic::{Code, Diagnostic};
use crate::policy_tree::PolicyTree;
use crate::workspace::{FileSystem, Workspace};

use super::index::Index;

/// One checked program, rooted at an open document.
#[derive(Debug)]
pub struct Analysis {
    pub ws: Workspace,
    pub root: FileId,
    pub diagnostics: Vec<Diagnostic>,
    pub index: Index,
}

/// The stack of an analysis worker (see `crate::cli::STACK_BYTES`).
const WORKER_STACK_BYTES: usize = 512 << 20;

/// How long the server waits for one analysis before it answers without
/// it, unless told otherwise ([`Settings::deadline`]).
pub const DEADLINE: Duration = Duration::from_secs(20);

/// How documents are analysed.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `--policy-root`: the policy tree of every document inside it.
    pub policy_root: Option<PathBuf>,
    /// How long to wait for one analysis.
    pub deadline: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            policy_root: None,
            deadline: DEADLINE,
        }
    }
}

/// Workers still running after their deadline; past this many, no new one
/// is started until one finishes, so a file that is slow to check cannot
/// pile up threads.
const MAX_LATE_WORKERS: usize = 2;

static LATE_WORKERS: AtomicUsize = AtomicUsize::new(0);

impl Analysis {
    /// Checks `root` with `open` (path to text) overriding the disk, on a
    /// worker thread with a large stack and a deadline, so that a file no
    /// bound foresaw can neither crash the server (a panic is reported as a
    /// diagnostic) nor keep it from answering the editor (after the
    /// deadline the server goes on, with a diagnostic saying so). `None`
    /// only when the root itself cannot be read.
    pub fn run(
        root: &Path,
        open: &HashMap<PathBuf, String>,
        settings: &Settings,
    ) -> Option<Analysis> {
        let policy_root = settings.policy_root.as_deref();
        if LATE_WORKERS.load(AtomicOrdering::SeqCst) >= MAX_LATE_WORKERS {
            return Analysis::unfinished(root, open, "earlier analyses are still running");
        }
        let (sender, receiver) = mpsc::channel();
        // Whether the server stopped waiting. The worker and the server
        // decide under this lock who accounts for a late worker, so that
        // the count never leaks.
        let abandoned = Arc::new(Mutex::new(false));
        let worker_abandoned = Arc::clone(&abandoned);
        let (path, texts) = (root.to_path_buf(), open.clone());
        let tree = policy_root.map(Path::to_path_buf);
        let spawned = std::thread::Builder::new()
            .name("policyc-analysis".to_owned())
            .stack_size(WORKER_STACK_BYTES)
            .spawn(move || {
                let result =
                    std::panic::catch_unwind(|| Analysis::check(&path, &texts, tree.as_deref()));
                let late = worker_abandoned.lock().map_or(true, |flag| *flag);
                if late {
                    LATE_WORKERS.fetch_sub(1, AtomicOrdering::SeqCst);
                } else {
                    let _ = sender.send(result);
                }
            });
        if spawned.is_err() {
            return Analysis::check(root, open, policy_root);
        }
        let outcome = match receiver.recv_timeout(settings.deadline) {
            Ok(outcome) => Some(outcome),
            Err(_) => match abandoned.lock() {
                Ok(mut flag) => match receiver.try_recv() {
                    // It finished just now.
                    Ok(outcome) => Some(outcome),
                    Err(_) => {
                        *flag = true;
                        LATE_WORKERS.fetch_add(1, AtomicOrdering::SeqCst);
                        None
                    }
                },
                Err(_) => None,
            },
        };
        match outcome {
            Some(Ok(analysis)) => analysis,
            Some(Err(_)) => Analysis::unfinished(
                root,
                open,
                "the analysis failed (a bug in policyc: please report it with this file)",
            ),
            None => Analysis::unfinished(
                root,
                open,
                &format!(
                    "the analysis did not finish within {} s",
                    settings.deadline.as_secs_f64()
                ),
            ),
        }
    }

    /// The file parsed but not analysed, with one diagnostic saying why.
    fn unfinished(root: &Path, open: &HashMap<PathBuf, String>, why: &str) -> Option<Analysis> {
        let mut fs = FileSystem::new();
        if let Some(text) = open.get(root) {
            fs.insert(root.to_path_buf(), text.clone());
        }
        let mut ws = Workspace::new(fs);
        let root = ws.add_root(root).ok()?;
        let diagnostic = Diagnostic::new(
            Code::InternalError,
            format!("policyc: {why}; diagnostics for this file are not up to date"),
            converge_grammar::Span::new(root, 0, 0),
            "not analysed",
        )
        .with_help("`policyc check` on this file says what the analysis finds, without a deadline");
        let index = Index::default();
        Some(Analysis {
            diagnostics: vec![diagnostic],
            ws,
            root,
            index,
        })
    }

    /// The check itself, on the calling thread.
    fn check(
        root: &Path,
        open: &HashMap<PathBuf, String>,
        policy_root: Option<&Path>,
    ) -> Option<Analysis> {
        let mut fs = FileSystem::new();
        for (path, text) in open {
            fs.insert(path.clone(), text.clone());
        }
        let mut ws = Workspace::new(fs);
        // A document outside `--policy-root` is checked in its own
        // directory, as `policyc check` would check it without the option.
        if let Some(dir) = policy_root {
            if PolicyTree::new(dir).check(root).is_ok() {
                ws.set_policy_root(dir);
            }
        }
        // A test file (`web.test.policy`) is parsed as tests and checked as
        // `policyc test` checks it: its policy, then its `test` blocks.
        if crate::testing::is_test_file(root) {
            let tests = ws.add_test_file(root).ok()?;
            let root = tests.0;
            let mut outcome = check(&ws);
            let (_, diagnostics) =
                crate::testing::suite::prepare_checked(&ws, &outcome, std::slice::from_ref(&tests));
            let index = Index::new(std::mem::take(&mut outcome.names));
            return Some(Analysis {
                diagnostics,
                ws,
                root,
                index,
            });
        }
        let root = ws.add_root(root).ok()?;
        let mut outcome = check(&ws);
        let index = Index::new(std::mem::take(&mut outcome.names));
        Some(Analysis {
            diagnostics: outcome.diagnostics,
            ws,
            root,
            index,
        })
    }

    /// Whether the program read the file at `path` (the root or an import).
    pub fn reads(&self, path: &Path) -> bool {
        self.file_id(path).is_some()
    }

    /// The id of a file of this program by its path (stdlib files have
    /// pseudo paths and never match a real one).
    pub fn file_id(&self, path: &Path) -> Option<FileId> {
        self.ws
            .db
            .iter()
            .find(|(id, f)| !self.is_stdlib(*id) && f.path == path)
            .map(|(id, _)| id)
    }

    /// The file of this program an editor document shows: the root, an
    /// import, or a data file or template the program reads (the root when
    /// the program does not read `path`).
    pub fn file_of(&self, path: &Path) -> FileId {
        self.file_id(path).unwrap_or(self.root)
    }

    /// Whether a file is the embedded standard library (it has no path an
    /// editor can open, and is never renamed into).
    pub fn is_stdlib(&self, file: FileId) -> bool {
        self.ws
            .is_stdlib
            .get(file.0 as usize)
            .copied()
            .unwrap_or(true)
    }

    /// The path of a file of the program on disk (`None` for the stdlib).
    pub fn path(&self, file: FileId) -> Option<&Path> {
        if self.is_stdlib(file) {
            return None;
        }
        self.ws.db.get(file).map(|f| f.path.as_path())
    }

    /// The text the program was checked with (the editor's, for open
    /// documents), which every span of this analysis points into.
    pub fn text(&self, file: FileId) -> &str {
        self.ws.db.get(file).map_or("", |f| f.text.as_str())
    }
}
