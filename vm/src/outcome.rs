//! What applying one promise did: its outcome and the changes made (or,
//! in a dry run, that would be made). Below both the run (`crate::run`)
//! and the system backends (`crate::backend`), which both produce it, so
//! that neither module depends on the other's internals.

/// How a promise ended in one pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Kept,
    Repaired,
    Failed(String),
    Skipped(String),
    /// A `watch` saw entries added, removed or modified since the last run
    /// (LANGUAGE.md section 15). Not a failure and not a repair: nothing
    /// was changed by the run, and it does not keep the passes going.
    Changed,
}

/// One thing that was (or would be) changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub what: String,
    pub before: String,
    pub after: String,
    /// A unified diff of text content (dry runs).
    pub diff: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub outcome: Outcome,
    pub changes: Vec<Change>,
    /// A command's output, or a report's message.
    pub output: Option<String>,
}

impl Applied {
    pub fn kept() -> Self {
        Applied {
            outcome: Outcome::Kept,
            changes: Vec::new(),
            output: None,
        }
    }

    pub fn failed(reason: impl Into<String>) -> Self {
        Applied {
            outcome: Outcome::Failed(reason.into()),
            changes: Vec::new(),
            output: None,
        }
    }

    pub fn from_changes(changes: Vec<Change>) -> Self {
        Applied {
            outcome: if changes.is_empty() {
                Outcome::Kept
            } else {
                Outcome::Repaired
            },
            changes,
            output: None,
        }
    }
}
