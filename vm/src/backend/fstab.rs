//! The mount-table text format of `/etc/fstab` and `/proc/mounts`
//! (fstab(5)): one mount per line, six blank-separated fields (`device
//! mount-point type options dump pass`; the last two optional in fstab),
//! blanks and backslashes inside a field written as octal escapes
//! (`\040`), `#` comments. Edits keep every line they do not change
//! byte for byte.

/// One entry, its fields unescaped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub device: String,
    pub mount_point: String,
    pub fstype: String,
    pub options: String,
    pub dump: String,
    pub pass: String,
}

impl Entry {
    /// The entry as a line (without the newline), fields escaped and
    /// separated by tabs.
    pub fn line(&self) -> String {
        [
            &self.device,
            &self.mount_point,
            &self.fstype,
            &self.options,
            &self.dump,
            &self.pass,
        ]
        .iter()
        .map(|f| escape(f))
        .collect::<Vec<_>>()
        .join("\t")
    }
}

/// One line of a mount table: an entry, or anything else (comment, blank,
/// a line too short to be an entry), kept as it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Entry { entry: Entry, raw: String },
    Other(String),
}

/// Parses a mount table.
pub fn parse(text: &str) -> Vec<Line> {
    text.lines().map(parse_line).collect()
}

fn parse_line(raw: &str) -> Line {
    let trimmed = raw.trim_start();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Line::Other(raw.to_owned());
    }
    let fields: Vec<String> = trimmed.split_whitespace().map(unescape).collect();
    match fields.as_slice() {
        [device, mount_point, fstype, rest @ ..] => {
            let field = |i: usize, default: &str| {
                rest.get(i).cloned().unwrap_or_else(|| default.to_owned())
            };
            Line::Entry {
                entry: Entry {
                    device: device.clone(),
                    mount_point: mount_point.clone(),
                    fstype: fstype.clone(),
                    options: field(0, "defaults"),
                    dump: field(1, "0"),
                    pass: field(2, "0"),
                },
                raw: raw.to_owned(),
            }
        }
        _ => Line::Other(raw.to_owned()),
    }
}

/// The text of a mount table.
pub fn render(lines: &[Line]) -> String {
    let mut out = String::new();
    for line in lines {
        out.push_str(match line {
            Line::Entry { raw, .. } | Line::Other(raw) => raw,
        });
        out.push('\n');
    }
    out
}

/// `\ooo` octal escapes to characters (`\040` is a space); anything else
/// is kept.
pub fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut i = 0usize;
    while let Some(&b) = bytes.get(i) {
        let octal = bytes
            .get(i.saturating_add(1)..i.saturating_add(4))
            .filter(|d| b == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match octal {
            Some(c) => {
                out.push(c);
                i = i.saturating_add(4);
            }
            None => {
                out.push(b);
                i = i.saturating_add(1);
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Blanks, `#` and backslashes as octal escapes.
pub fn escape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    for c in field.chars() {
        match c {
            ' ' | '\t' | '\n' | '\\' | '#' => out.push_str(&format!("\\{:03o}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_comments_and_escapes() {
        let text = "# /etc/fstab\n\
                    UUID=abcd / ext4 errors=remount-ro 0 1\n\
                    \n\
                    /dev/sdb1\t/srv/my\\040data  xfs defaults,noatime\n\
                    broken line\n";
        let lines = parse(text);
        assert_eq!(lines.len(), 5);
        let Some(Line::Entry { entry, .. }) = lines.get(3) else {
            panic!("{:?}", lines.get(3))
        };
        assert_eq!(entry.mount_point, "/srv/my data");
        assert_eq!(entry.options, "defaults,noatime");
        assert_eq!((entry.dump.as_str(), entry.pass.as_str()), ("0", "0"));
        assert!(matches!(lines.get(4), Some(Line::Other(l)) if l == "broken line"));
        // Unchanged lines are written back byte for byte.
        assert_eq!(render(&lines), text);
        assert_eq!(
            entry.line(),
            "/dev/sdb1\t/srv/my\\040data\txfs\tdefaults,noatime\t0\t0"
        );
        assert_eq!(unescape(&escape("a b\\c#d")), "a b\\c#d");
        assert_eq!(unescape("\\9x\\04"), "\\9x\\04");
    }

    /// Read-only, against this machine's real mount table: every line of
    /// /proc/PID/mounts (`/proc/mounts` is a link to it) parses as an entry with an absolute mount point, and
    /// `/` is among them.
    #[test]
    fn the_real_proc_mounts_parses() {
        let fs = crate::rootfs::RootFs::open(std::path::Path::new("/")).unwrap();
        let text = String::from_utf8(
            fs.read_file(&format!("/proc/{}/mounts", std::process::id()))
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        let lines = parse(&text);
        assert!(!lines.is_empty());
        for line in &lines {
            let Line::Entry { entry, .. } = line else {
                panic!("not an entry: {line:?}")
            };
            assert!(entry.mount_point.starts_with('/'), "{entry:?}");
        }
        assert!(lines
            .iter()
            .any(|l| matches!(l, Line::Entry { entry, .. } if entry.mount_point == "/")));
    }
}
