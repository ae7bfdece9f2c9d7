//! Pure text transformations behind the line-editing promise types
//! (`line`, `setting`, `block`): text in, edit out, no file system. The
//! placement rules are LANGUAGE.md §13 "Where lines go", measured against
//! Ansible's `lineinfile`, `ini_file` and `blockinfile`; they live here,
//! apart from the operators that read and write files, so every rule is a
//! data-driven case (tests/editing/cases/*.case) and a promise's edit can be
//! applied twice in memory to prove that it settles.

pub mod block;
pub mod line;
pub mod setting;
mod text;

#[cfg(test)]
mod case_tests;

pub use text::Text;

/// What an edit did (for the report) and the text it produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub what: String,
    pub text: String,
}

/// The outcome of one application: `Ok(None)` when the text already keeps
/// the promise, `Err` with a reason when the text cannot be edited safely
/// (nothing is written then).
pub type EditResult = Result<Option<Edit>, String>;

/// Applies `edit` to `text`, then once more to its result: an edit whose
/// second application changes the text again could never settle and would
/// change the file on every run, so it fails and nothing is written
/// (issue 14, item 13).
pub fn settled(text: &str, edit: impl Fn(&str) -> EditResult) -> EditResult {
    let Some(first) = edit(text)? else {
        return Ok(None);
    };
    match edit(&first.text) {
        Ok(None) => Ok(Some(first)),
        Ok(Some(again)) => Err(format!(
            "this promise never settles: after it {}, applying it again {}; nothing was written",
            first.what, again.what
        )),
        Err(why) => Err(format!(
            "this promise never settles: after it {}, applying it again fails: {why}; nothing was written",
            first.what
        )),
    }
}
