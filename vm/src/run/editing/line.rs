//! `line`: one exact line present or absent, or a regex replaced on lines.

use super::{Edit, EditResult, Text};

/// Where a missing `present` line goes (LANGUAGE.md §13).
#[derive(Debug, Clone)]
pub enum Anchor {
    /// Appended at the end (the default, `at = "bottom"`).
    Bottom,
    /// Line 1 (`at = "top"`).
    Top,
    /// Right after the LAST line the regex matches; appended when none does.
    After(regex::Regex),
    /// Right before the LAST line the regex matches; appended when none does.
    Before(regex::Regex),
}

/// A `present` line: kept when a line equal to it (whole line, blanks
/// count) is anywhere in the file, whatever the anchor.
pub fn present(text: &str, wanted: &str, anchor: &Anchor) -> EditResult {
    let mut t = Text::parse(text);
    if t.lines.iter().any(|l| l == wanted) {
        return Ok(None);
    }
    let last = |re: &regex::Regex| t.lines.iter().rposition(|l| re.is_match(l));
    let end = t.lines.len();
    let at = match anchor {
        Anchor::Bottom => end,
        Anchor::Top => 0,
        Anchor::After(re) => last(re).map_or(end, |i| i.saturating_add(1)),
        Anchor::Before(re) => last(re).unwrap_or(end),
    };
    t.insert(at, [wanted.to_owned()]);
    Ok(Some(Edit {
        what: format!("added line {wanted:?}"),
        text: t.render(),
    }))
}

/// An `absent` line: every line equal to it is removed.
pub fn absent(text: &str, unwanted: &str) -> EditResult {
    let mut t = Text::parse(text);
    let before = t.lines.len();
    t.lines.retain(|l| l != unwanted);
    let removed = before.saturating_sub(t.lines.len());
    if removed == 0 {
        return Ok(None);
    }
    Ok(Some(Edit {
        what: format!("removed {removed} line(s) {unwanted:?}"),
        text: t.render(),
    }))
}

/// Whether a line is commented out: its first non-blank character is `#`
/// or `;` (shell-style and ini-style comments).
pub fn is_comment(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with('#') || t.starts_with(';')
}

/// `replace` rewrites every match of `re` with `with` on the active lines;
/// commented-out lines are left alone unless `replace_comments` asks
/// (rewriting an example in a comment changes nothing the program reads and
/// can turn documentation into a second, contradicting setting).
pub fn replace(
    text: &str,
    pattern: &str,
    re: &regex::Regex,
    with: &str,
    replace_comments: bool,
) -> EditResult {
    let mut t = Text::parse(text);
    let mut count: usize = 0;
    for l in t
        .lines
        .iter_mut()
        .filter(|l| replace_comments || !is_comment(l))
    {
        let replaced = re.replace_all(l, with).into_owned();
        if replaced != *l {
            *l = replaced;
            count = count.saturating_add(1);
        }
    }
    if count == 0 {
        return Ok(None);
    }
    Ok(Some(Edit {
        what: format!("replaced {pattern:?} on {count} line(s)"),
        text: t.render(),
    }))
}
