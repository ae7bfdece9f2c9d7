//! A text file as lines plus whether it ends in a newline: the one
//! representation every line edit works on, so "a missing final newline is
//! added only when appending at the end" is decided in one place.

/// A file's lines (without their `\n`) and whether the last one ended in a
/// newline. An empty file has no lines and counts as ending in a newline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text {
    pub lines: Vec<String>,
    pub final_newline: bool,
}

impl Text {
    pub fn parse(text: &str) -> Self {
        if text.is_empty() {
            return Self {
                lines: Vec::new(),
                final_newline: true,
            };
        }
        let final_newline = text.ends_with('\n');
        let body = text.strip_suffix('\n').unwrap_or(text);
        Self {
            lines: body.split('\n').map(str::to_owned).collect(),
            final_newline,
        }
    }

    pub fn render(&self) -> String {
        let mut out = self.lines.join("\n");
        if self.final_newline && !self.lines.is_empty() {
            out.push('\n');
        }
        out
    }

    /// Inserts `new` before line index `at` (`at` past the end appends). An
    /// insertion at the end adds the missing final newline; one in the
    /// middle leaves the file's ending as it was.
    pub fn insert(&mut self, at: usize, new: impl IntoIterator<Item = String>) {
        let at = at.min(self.lines.len());
        if at == self.lines.len() {
            self.final_newline = true;
        }
        let tail = self.lines.split_off(at);
        self.lines.extend(new);
        self.lines.extend(tail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_render_round_trip() {
        for s in ["", "a", "a\n", "a\nb", "a\n\n", "\n"] {
            assert_eq!(Text::parse(s).render(), s, "{s:?}");
        }
    }
}
