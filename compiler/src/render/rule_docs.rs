//! The diagnostics chapter of the book (docs/diagnostics.md), embedded, as
//! the one source of each rule's description and help in SARIF: a code's
//! section is what a reader of the book sees, what GitHub code scanning
//! shows beside an alert, and what `helpUri` links to.

use crate::diagnostic::Code;

/// Where the book is published: `helpUri` is this, `diagnostics.html`, and
/// the heading's anchor. The workspace's `repository` (Cargo.toml) with
/// `/book/`, so moving the project changes one line.
pub const BOOK_URL: &str = concat!(env!("CARGO_PKG_REPOSITORY"), "/book/");

/// The chapter, as written in the repository.
const CHAPTER: &str = include_str!("../../../docs/diagnostics.md");

/// One code's section of the chapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleDoc {
    /// The first paragraph, as plain text on one line.
    pub summary: String,
    /// The whole section as plain text (code marks and fences dropped).
    pub text: String,
    /// The whole section as written (Markdown).
    pub markdown: String,
    /// The page and anchor of the section in the published book.
    pub uri: String,
}

/// The section headed `## CODE: title`, or `None` if the chapter lacks it
/// (a test keeps every registered code documented).
pub fn rule_doc(code: Code) -> Option<RuleDoc> {
    let heading = format!("## {}: {}", code.as_str(), code.title());
    let mut lines = CHAPTER.lines().skip_while(|l| l.trim_end() != heading);
    lines.next()?;
    let body: Vec<&str> = lines.take_while(|l| !l.starts_with("## ")).collect();
    let markdown = body.join("\n").trim().to_owned();
    let summary = markdown
        .split("\n\n")
        .next()
        .map(|p| plain(&p.split_whitespace().collect::<Vec<_>>().join(" ")))
        .unwrap_or_default();
    let text = markdown
        .lines()
        .filter(|l| !l.trim_start().starts_with("```"))
        .map(plain)
        .collect::<Vec<_>>()
        .join("\n");
    Some(RuleDoc {
        summary,
        text,
        markdown,
        uri: format!(
            "{BOOK_URL}diagnostics.html#{}",
            anchor(&heading["## ".len()..])
        ),
    })
}

/// Markdown inline code marks dropped.
fn plain(markdown: &str) -> String {
    markdown.replace('`', "")
}

/// The id mdBook gives a heading: lower case, letters, digits, `_` and `-`
/// kept, whitespace made `-`, anything else dropped.
fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_described_section() {
        for code in Code::ALL {
            let doc = rule_doc(*code).unwrap_or_else(|| panic!("no section for {code}"));
            assert!(!doc.summary.trim().is_empty(), "{code}: empty summary");
            assert!(!doc.text.trim().is_empty(), "{code}: empty help");
            assert!(!doc.summary.contains('`'), "{code}: {}", doc.summary);
        }
    }

    #[test]
    fn help_uri_points_at_the_heading_anchor() {
        let doc = rule_doc(Code::UnexpectedToken).unwrap();
        assert_eq!(
            doc.uri,
            format!("{BOOK_URL}diagnostics.html#e0001-unexpected-token")
        );
        assert!(doc
            .summary
            .starts_with("A token the grammar does not allow"));
        assert!(doc.markdown.contains("```"));
        assert!(!doc.text.contains("```"));
    }

    #[test]
    fn anchors_follow_mdbook() {
        assert_eq!(
            anchor("E0103: import path must be a plain string"),
            "e0103-import-path-must-be-a-plain-string"
        );
        assert_eq!(
            anchor("E0223: `data` outside a typed let"),
            "e0223-data-outside-a-typed-let"
        );
    }
}
