//! `block`: exactly these lines between `# BEGIN marker` and `# END marker`
//! (Ansible's `blockinfile`).

use super::{Edit, EditResult, Text};

fn one_based(i: &usize) -> String {
    i.saturating_add(1).to_string()
}

fn numbers(v: &[usize]) -> String {
    v.iter().map(one_based).collect::<Vec<_>>().join(", ")
}

/// Converges `text` to hold `lines` between the marker lines. The markers
/// are whole lines at column 0; a present block is rewritten in place, a
/// missing one appended at the end (no blank line added). A `BEGIN`
/// without its `END` (or the reverse, or out of order), or a duplicated
/// marker pair, fails with the line numbers instead of adding a second block.
pub fn apply(text: &str, marker: &str, lines: &[String]) -> EditResult {
    let begin = format!("# BEGIN {marker}");
    let end = format!("# END {marker}");
    let mut t = Text::parse(text);
    let at = |m: &str| -> Vec<usize> {
        t.lines
            .iter()
            .enumerate()
            .filter(|(_, l)| *l == m)
            .map(|(i, _)| i)
            .collect()
    };
    let (begins, ends) = (at(&begin), at(&end));
    let wrapped = || {
        std::iter::once(begin.clone())
            .chain(lines.iter().cloned())
            .chain(std::iter::once(end.clone()))
    };
    match (begins.as_slice(), ends.as_slice()) {
        ([], []) => {
            let n = t.lines.len();
            t.insert(n, wrapped());
            Ok(Some(Edit {
                what: format!("added block {marker:?} ({} line(s)) at the end", lines.len()),
                text: t.render(),
            }))
        }
        ([b], [e]) if b < e => {
            let inside = t.lines.get(b.saturating_add(1)..*e).unwrap_or_default();
            if inside == lines {
                return Ok(None);
            }
            let tail = t.lines.split_off(e.saturating_add(1));
            t.lines.truncate(*b);
            t.lines.extend(wrapped());
            t.lines.extend(tail);
            Ok(Some(Edit {
                what: format!(
                    "rewrote block {marker:?} at lines {}-{} ({} line(s))",
                    one_based(b),
                    one_based(e),
                    lines.len()
                ),
                text: t.render(),
            }))
        }
        ([b], [e]) => Err(format!(
            "`{end}` on line {} comes before `{begin}` on line {}; fix the markers by hand, nothing was written",
            one_based(e),
            one_based(b)
        )),
        ([b], []) => Err(format!(
            "`{begin}` on line {} has no `{end}`; fix the markers by hand, nothing was written",
            one_based(b)
        )),
        ([], [e]) => Err(format!(
            "`{end}` on line {} has no `{begin}`; fix the markers by hand, nothing was written",
            one_based(e)
        )),
        _ => Err(format!(
            "the block {marker:?} appears more than once (`{begin}` on lines {}, `{end}` on lines {}); remove the extra copies by hand, nothing was written",
            numbers(&begins),
            numbers(&ends)
        )),
    }
}
