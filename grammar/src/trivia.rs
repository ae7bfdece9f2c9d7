//! Comments, which the lexer skips and the tree does not hold.
//!
//! The formatter needs them back to keep them where the author put them.
//! Rather than teach the parser about comments (and change what it
//! accepts), they are found in the gaps between tokens: a gap holds only
//! whitespace and comments, never a string, so a plain scan of each gap is
//! exact.

use logos::Logos;

use crate::token::Token;

/// One `// line` or `/* block */` comment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comment {
    /// Byte offset of the `//` or `/*`.
    pub start: u32,
    /// Byte offset just past the comment (the newline of a line comment is
    /// not part of it).
    pub end: u32,
    /// The comment as written, markers included.
    pub text: String,
}

impl Comment {
    /// Whether the comment is `/* ... */` (it may sit inside a line).
    pub fn is_block(&self) -> bool {
        self.text.starts_with("/*")
    }
}

/// Every comment of `src`, in source order. On text with lexical errors the
/// result covers the gaps the lexer could delimit.
pub fn comments(src: &str) -> Vec<Comment> {
    let mut out = Vec::new();
    let mut gap_start = 0;
    for (_, span) in Token::lexer(src).spanned() {
        scan_gap(src, gap_start, span.start, &mut out);
        gap_start = span.end;
    }
    scan_gap(src, gap_start, src.len(), &mut out);
    out
}

/// Collects the comments in `src[start..end]`, a stretch between tokens.
fn scan_gap(src: &str, start: usize, end: usize, out: &mut Vec<Comment>) {
    let Some(gap) = src.get(start..end) else {
        return;
    };
    let mut i = 0;
    while let Some(rest) = gap.get(i..) {
        let Some(at) = rest.find('/') else { break };
        let begin = i + at;
        let tail = gap.get(begin..).unwrap_or("");
        let len = if tail.starts_with("//") {
            tail.find('\n').unwrap_or(tail.len())
        } else if tail.starts_with("/*") {
            tail.get(2..)
                .and_then(|t| t.find("*/"))
                .map_or(tail.len(), |e| e + 4)
        } else {
            i = begin + 1;
            continue;
        };
        let raw = tail.get(..len).unwrap_or(tail);
        // What ends a line comment (spaces, a `\r` of a CRLF file, both)
        // is not part of it: the formatter drops it, and must read its own
        // output the same way (found by the `fmt` fuzz target).
        let text = if tail.starts_with("//") {
            raw.trim_end()
        } else {
            raw
        };
        out.push(Comment {
            start: (start + begin) as u32,
            end: (start + begin + text.len()) as u32,
            text: text.to_owned(),
        });
        i = begin + len.max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_line_and_block_comments_but_not_inside_strings() {
        let src = "// a\nclass x = y; /* b */ let s = \"// no\"; /* c\n d */\n";
        let all = comments(src);
        let found: Vec<&str> = all.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(found, ["// a", "/* b */", "/* c\n d */"]);
        let first = &all[0];
        assert_eq!((first.start, first.end), (0, 4));
    }

    #[test]
    fn comment_at_end_of_file_without_newline() {
        let found = comments("class x; // end");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].text, "// end");
        assert!(!found[0].is_block());
    }

    #[test]
    fn comments_between_the_new_tokens_are_found_but_not_inside_strings() {
        let src = "type T = { a: int, // c\n};\nlet x = a /* a */ ?? b[/* b */ 0] ?? f(/* f */);\nlet s = \"${x /* in */} {# t #}\";";
        let found: Vec<String> = comments(src).into_iter().map(|c| c.text).collect();
        assert_eq!(found, ["// c", "/* a */", "/* b */", "/* f */"]);
    }
}
