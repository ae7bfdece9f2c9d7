//! `setting`: one key's value in a keyword file (`sshd_config`,
//! `login.defs`: separator " ") or a key=value file (`sysctl.conf`, ini
//! files, systemd drop-ins: separator "="), optionally inside an ini
//! `[section]`. Placement follows LANGUAGE.md §13 "Where lines go".

use super::{Edit, EditResult, Text};

/// What a `setting` promise asks for.
#[derive(Debug, Clone)]
pub struct Setting<'a> {
    pub key: &'a str,
    pub value: &'a str,
    /// As written between key and value in a new line (" ", "=", " = ");
    /// its non-blank part (or whitespace, when it is all blank) is what
    /// separates key from value when reading.
    pub separator: &'a str,
    /// The ini section (`[name]`, or a whole `Match ...`/`Host ...` line for
    /// sshd); `None` is the part before the first header.
    pub section: Option<&'a str>,
    /// The comment prefix: lines starting with it (after blanks) are not
    /// active and are left alone; extra active copies get it prepended.
    pub comment: &'a str,
}

impl Setting<'_> {
    fn keyword_file(&self) -> bool {
        self.separator.trim().is_empty()
    }

    fn is_active(&self, line: &str) -> bool {
        let t = line.trim_start();
        !t.is_empty() && !t.starts_with(self.comment)
    }

    /// The section a header line opens, if it is one: `[name]`, and with a
    /// blank separator (sshd_config, ssh_config) a `Match` or `Host` line.
    fn header(&self, line: &str) -> Option<String> {
        let t = line.trim();
        if let Some(name) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            return Some(name.trim().to_owned());
        }
        if self.keyword_file() {
            let first = t.split_whitespace().next().unwrap_or_default();
            if first.eq_ignore_ascii_case("match") || first.eq_ignore_ascii_case("host") {
                return Some(t.to_owned());
            }
        }
        None
    }

    /// The key and value of an active line, if it has a separator.
    fn split<'l>(&self, line: &'l str) -> Option<(&'l str, &'l str)> {
        let t = line.trim();
        if self.keyword_file() {
            let (k, v) = t.split_once(|c: char| c.is_whitespace())?;
            Some((k, v.trim()))
        } else {
            let (k, v) = t.split_once(self.separator.trim())?;
            Some((k.trim(), v.trim()))
        }
    }

    /// Whether an active line is this key's line. Keywords (sshd_config,
    /// login.defs) are case-insensitive, as sshd reads them.
    fn is_key_line(&self, line: &str) -> bool {
        let key = match self.split(line) {
            Some((k, _)) => k,
            None if self.keyword_file() => line.trim(),
            None => return false,
        };
        if self.keyword_file() {
            key.eq_ignore_ascii_case(self.key)
        } else {
            key == self.key
        }
    }

    fn key_line(&self, indent: &str) -> String {
        format!("{indent}{}{}{}", self.key, self.separator, self.value)
    }

    fn header_line(&self, name: &str) -> String {
        if self.header(name).is_some_and(|n| n == name) && !name.starts_with('[') {
            name.to_owned()
        } else {
            format!("[{name}]")
        }
    }
}

/// A section of the file: its header line (none for the part before the
/// first header) and the line range of its body.
struct Region {
    name: Option<String>,
    header: Option<usize>,
    body: std::ops::Range<usize>,
}

fn regions(s: &Setting<'_>, lines: &[String]) -> Vec<Region> {
    let mut out = vec![Region {
        name: None,
        header: None,
        body: 0..lines.len(),
    }];
    for (i, l) in lines.iter().enumerate() {
        if !s.is_active(l) {
            continue;
        }
        if let Some(name) = s.header(l) {
            if let Some(prev) = out.last_mut() {
                prev.body.end = i;
            }
            out.push(Region {
                name: Some(name),
                header: Some(i),
                body: i.saturating_add(1)..lines.len(),
            });
        }
    }
    out
}

/// Refuses a file that is not in the promised format: binary (NUL bytes),
/// or active lines none of which has the separator.
fn check_format(s: &Setting<'_>, t: &Text) -> Result<(), String> {
    if let Some(n) = t.lines.iter().position(|l| l.contains('\0')) {
        return Err(format!(
            "line {} holds a NUL byte: this is a binary file, not a settings file; nothing was written",
            n.saturating_add(1)
        ));
    }
    let mut body = t
        .lines
        .iter()
        .filter(|l| s.is_active(l) && s.header(l).is_none());
    let Some(first) = body.clone().next() else {
        return Ok(());
    };
    if !s.keyword_file() && !body.any(|l| s.split(l).is_some()) {
        let n = t.lines.iter().position(|l| l == first).unwrap_or(0);
        return Err(format!(
            "no active line has the separator {:?} (line {} is {first:?}): this is not a key{}value file; nothing was written",
            s.separator.trim(),
            n.saturating_add(1),
            s.separator.trim()
        ));
    }
    Ok(())
}

/// Converges `text` to hold `s.key` with `s.value` in its section.
pub fn apply(text: &str, s: &Setting<'_>) -> EditResult {
    if s.key.trim().is_empty() || s.key.contains(char::is_whitespace) {
        return Err(format!(
            "the key {:?} is empty or holds blanks; nothing was written",
            s.key
        ));
    }
    if s.comment.trim().is_empty() {
        return Err(
            "`comment` is empty: without a comment prefix extra copies of the key cannot be commented out; nothing was written"
                .to_owned(),
        );
    }
    let mut t = Text::parse(text);
    check_format(s, &t)?;
    let all = regions(s, &t.lines);
    let Some(region) = all.iter().find(|r| r.name.as_deref() == s.section) else {
        // A missing section: appended at the end, header then key line.
        let name = s.section.unwrap_or_default();
        let end = t.lines.len();
        t.insert(end, [s.header_line(name), s.key_line("")]);
        return Ok(Some(Edit {
            what: format!("added section {name:?} with {}", s.key_line("")),
            text: t.render(),
        }));
    };
    let in_block = block_lines(&t.lines);
    let inside = |i: usize| in_block.get(i).copied().unwrap_or(false);
    let keys: Vec<usize> = region
        .body
        .clone()
        .filter(|&i| {
            !inside(i)
                && t.lines
                    .get(i)
                    .is_some_and(|l| s.is_active(l) && s.is_key_line(l))
        })
        .collect();
    let mut what = Vec::new();
    if let Some((&first, rest)) = keys.split_first() {
        for &i in rest {
            if let Some(l) = t.lines.get_mut(i) {
                *l = format!("{}{l}", s.comment);
                what.push(format!("commented out line {}", i.saturating_add(1)));
            }
        }
        if let Some(l) = t.lines.get_mut(first) {
            if s.split(l).map(|(_, v)| v) != Some(s.value) {
                *l = s.key_line(indent_of(l));
                what.insert(
                    0,
                    format!("set {} on line {}", s.key_line(""), first.saturating_add(1)),
                );
            }
        }
    } else {
        let mut at = insertion_point(s, &t.lines, region, all.get(1).and_then(|r| r.header));
        // Never inside a `block`'s markers: the block would remove the
        // line on every pass, and the setting add it back.
        if at.checked_sub(1).is_some_and(inside) {
            at = (at..t.lines.len())
                .find(|&i| t.lines.get(i).is_some_and(|l| l.starts_with("# END ")))
                .map_or(t.lines.len(), |end| end.saturating_add(1));
        }
        let indent = at
            .checked_sub(1)
            .and_then(|i| t.lines.get(i))
            .filter(|l| s.is_active(l) && s.header(l).is_none())
            .map(|l| indent_of(l).to_owned())
            .unwrap_or_default();
        t.insert(at, [s.key_line(&indent)]);
        what.push(format!(
            "added {} at line {}",
            s.key_line(""),
            at.saturating_add(1)
        ));
    }
    if what.is_empty() {
        return Ok(None);
    }
    Ok(Some(Edit {
        what: what.join(", "),
        text: t.render(),
    }))
}

/// Which lines lie inside a `block` promise's markers (`# BEGIN ...` up to
/// its `# END ...`, the markers included): they belong to the block, so a
/// `setting` neither rewrites a key there nor inserts one among them.
fn block_lines(lines: &[String]) -> Vec<bool> {
    let mut out = vec![false; lines.len()];
    let mut open = false;
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("# BEGIN ") {
            open = true;
        }
        if let Some(slot) = out.get_mut(i) {
            *slot = open;
        }
        if l.starts_with("# END ") {
            open = false;
        }
    }
    out
}

/// Where a missing key goes: right after the last active line of its
/// section (so before trailing blank lines and comments); in a section with
/// no active line, right after its header; in a part before the first
/// header that has no active line, at line 1 (so never inside the first
/// section), or at the end when the file has no header at all.
fn insertion_point(
    s: &Setting<'_>,
    lines: &[String],
    region: &Region,
    first_header: Option<usize>,
) -> usize {
    let last_active = region
        .body
        .clone()
        .rev()
        .find(|&i| lines.get(i).is_some_and(|l| s.is_active(l)));
    if let Some(i) = last_active {
        return i.saturating_add(1);
    }
    if let Some(h) = region.header {
        return h.saturating_add(1);
    }
    if first_header.is_some() {
        0
    } else {
        lines.len()
    }
}

/// The blanks a line starts with, kept when a line is rewritten or a new
/// one joins an indented block (sshd `Match` bodies).
fn indent_of(line: &str) -> &str {
    let n = line.len().saturating_sub(line.trim_start().len());
    line.get(..n).unwrap_or_default()
}
