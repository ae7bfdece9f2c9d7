//! `file:line` of a promise in the run's results.
//!
//! Every result names where its promise was written. As an owned string
//! that was a heap allocation per promise (32 bytes and the string's 24,
//! issue 22, item 3); the file name is shared by every promise of the file
//! and only the line is the result's own. It is shown as `file:line`
//! wherever it is written (the human and JSON reports, the agent's).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::bundle::format::Constant;
use crate::bundle::Verified;

/// `file:line` of a promise.
/// The file name is shared by every result of the file behind one thin
/// pointer: a source is 16 bytes (with `Arc<str>`, 24).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Source {
    file: Arc<String>,
    line: u32,
}

impl Source {
    pub fn file(&self) -> &str {
        &self.file
    }

    pub fn line(&self) -> u32 {
        self.line
    }
}

impl Source {
    /// `file:line`, for tests elsewhere in the crate.
    #[cfg(test)]
    pub(crate) fn for_test(file: &str, line: u32) -> Source {
        Source {
            file: Arc::new(file.to_owned()),
            line,
        }
    }

    /// Its text ([`fmt::Display`]) at the end of `out`: the human report
    /// writes one per line, into one buffer.
    pub fn push_to(&self, out: &mut String) {
        use std::fmt::Write as _;
        if self.file.is_empty() && self.line == 0 {
            return;
        }
        out.push_str(self.file.as_str());
        // Writing into a String cannot fail.
        let _ = write!(out, ":{}", self.line);
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.file.is_empty() && self.line == 0 {
            // A promise the body does not have: nothing to show.
            return Ok(());
        }
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// As its text, `file:line` (the reports' `source`).
impl serde::Serialize for Source {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl PartialEq<str> for Source {
    fn eq(&self, other: &str) -> bool {
        other
            .rsplit_once(':')
            .is_some_and(|(file, line)| self.file.as_str() == file && line == self.line.to_string())
    }
}

impl PartialEq<&str> for Source {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

/// The file names of a bundle's promises, each made once per run.
#[derive(Debug, Default)]
pub(crate) struct SourceFiles(HashMap<u32, Arc<String>>);

impl SourceFiles {
    /// Where a promise was written, from its index into the body's
    /// sources; empty for a promise or source the body does not have (a
    /// body that bypassed the verifier).
    pub(crate) fn of(&mut self, v: &Verified, source: Option<u32>) -> Source {
        let Some(loc) = source.and_then(|at| v.body.sources.get(at as usize)) else {
            return Source::default();
        };
        let file = self
            .0
            .entry(loc.file)
            .or_insert_with(|| match v.body.constants.get(loc.file as usize) {
                Some(Constant::Str(f)) => Arc::new(f.to_string()),
                _ => Arc::default(),
            })
            .clone();
        Source {
            file,
            line: loc.line,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_reads_and_compares_as_file_colon_line() {
        let s = Source {
            file: Arc::new("site/web.policy".to_owned()),
            line: 12,
        };
        assert_eq!(s.to_string(), "site/web.policy:12");
        assert_eq!(
            serde_json::to_string(&s).ok().as_deref(),
            Some("\"site/web.policy:12\"")
        );
        assert!(s == "site/web.policy:12");
        assert!(s != "site/web.policy:13");
        assert!(s != "site/other.policy:12");
        assert!(s != "site/web.policy");
        assert_eq!(Source::default().to_string(), "");
    }
}
