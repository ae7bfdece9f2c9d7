//! dpkg's status database (`ROOT/var/lib/dpkg/status`), read by the VM
//! itself instead of starting `dpkg-query` for it: on a converged run of
//! 200 packages, starting `dpkg-query` cost more than everything else the
//! run did (docs/performance.md, "Toolsets").
//!
//! The answer must be the one `dpkg-query -W` gives, so this reader only
//! answers when it can be sure of that, and otherwise says so (`None`) and
//! the caller asks `dpkg-query` as before. It answers for plain package
//! names (no `:arch`) from a status file that dpkg 1.21's own parser
//! (`lib/dpkg/parse.c`, status files are parsed "lax") would read without
//! an error, with no pending journal in `updates/` (an interrupted dpkg
//! run), and only for names with at most one entry (a name installed for
//! several architectures goes to `dpkg-query`). Within that, it checks what
//! dpkg checks of every entry: the stanza syntax, a valid `Package`, the
//! three words of `Status`, a `Version` for every package past
//! `half-installed` (and one dpkg prints unchanged: see [`canonical`]),
//! `Architecture` and `Multi-Arch`, `Config-Version` and the trigger fields
//! against the status, and at most one non-co-installable instance of a
//! name. What it does not check is the syntax of the fields no answer
//! reads (`Depends`, ...), where `dpkg-query` would refuse the whole
//! database. dpkg's trigger incorporation (`triggers/Unincorp`) only moves
//! a package between `installed`, `triggers-awaited` and
//! `triggers-pending`, which [`Known::installed`] does not tell apart.

use std::collections::HashMap;

use super::Known;
use crate::rootfs::RootFs;

/// The status file, inside the root.
pub const STATUS: &str = "/var/lib/dpkg/status";
/// dpkg's journal of changes not yet folded into [`STATUS`].
pub const UPDATES: &str = "/var/lib/dpkg/updates";
/// The largest status file read here; a larger one goes to `dpkg-query`.
const MAX_STATUS: u64 = 64 << 20;

/// What the root's status database says of `names`, keyed by name as
/// [`super::apt::parse_query`] keys `dpkg-query`'s answer; `None` when
/// `dpkg-query` must be asked instead (see the module's documentation).
pub fn read(fs: &RootFs, names: &[&str]) -> Option<HashMap<String, Known>> {
    if names.iter().any(|n| n.contains(':')) {
        return None;
    }
    let pending = fs.list_dir(UPDATES).ok()?;
    if pending
        .iter()
        .any(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
    {
        return None;
    }
    let status = fs.read_file_limited(STATUS, MAX_STATUS).ok()?;
    answer(status.as_deref().unwrap_or_default(), names)
}

/// One entry of the database, as far as an answer needs it.
#[derive(Debug, Default)]
struct Entry<'a> {
    package: Option<&'a str>,
    status: Option<&'a str>,
    version: Option<&'a str>,
    architecture: Option<&'a str>,
    multi_arch: Option<&'a str>,
    config_version: bool,
    triggers_pending: bool,
    triggers_awaited: bool,
}

/// [`read`]'s answer from the text of a status file.
pub fn answer(status: &[u8], names: &[&str]) -> Option<HashMap<String, Known>> {
    let mut parser = Parser {
        data: status,
        pos: 0,
        seen: Vec::new(),
    };
    // Per package name: the installed instances that are not "Multi-Arch:
    // same", those that are, and the entries of a name asked about.
    let mut single: HashMap<&str, usize> = HashMap::new();
    let mut multi: HashMap<&str, usize> = HashMap::new();
    let mut asked: HashMap<&str, Vec<Known>> = names.iter().map(|n| (*n, Vec::new())).collect();
    while let Some(entry) = parser.stanza()? {
        let (name, known, same) = verify(&entry)?;
        if known.status != "not-installed" {
            let count = if same { &mut multi } else { &mut single };
            let n = count.entry(name).or_insert(0);
            *n = n.checked_add(1)?;
            if single.get(name).copied().unwrap_or(0) > 1
                || (single.contains_key(name) && multi.contains_key(name))
            {
                // dpkg: "multiple non-coinstallable package instances".
                return None;
            }
        }
        if let Some(found) = asked.get_mut(name) {
            found.push(known);
        }
    }
    let mut out = HashMap::new();
    for (name, mut found) in asked {
        match found.len() {
            0 => {}
            1 => {
                out.insert(name.to_owned(), found.pop()?);
            }
            _ => return None,
        }
    }
    Some(out)
}

/// dpkg's want, error and status words.
const WANT: &[&str] = &["unknown", "install", "hold", "deinstall", "purge"];
const EFLAG: &[&str] = &["ok", "reinstreq"];
const STATES: &[&str] = &[
    "not-installed",
    "config-files",
    "half-installed",
    "unpacked",
    "half-configured",
    "triggers-awaited",
    "triggers-pending",
    "installed",
];

/// The entry's name, state and whether it is "Multi-Arch: same", when dpkg
/// would read it without an error and print it as written.
fn verify<'a>(e: &Entry<'a>) -> Option<(&'a str, Known, bool)> {
    let name = e.package.filter(|p| package_name_ok(p))?;
    let mut words = e.status?.split(' ');
    let (want, eflag, state) = (words.next()?, words.next()?, words.next()?);
    if words.next().is_some()
        || !WANT.contains(&want)
        || !EFLAG.contains(&eflag)
        || !STATES.contains(&state)
    {
        return None;
    }
    let unpacked_or_later = !matches!(state, "not-installed" | "half-installed");
    let version = match e.version {
        Some(v) if canonical(v) => v,
        Some(_) => return None,
        None if unpacked_or_later => return None,
        None => "",
    };
    if e.architecture.is_some_and(|a| !arch_ok(a)) {
        return None;
    }
    let same = match e.multi_arch {
        None | Some("no" | "foreign" | "allowed") => false,
        Some("same") => true,
        Some(_) => return None,
    };
    if same && matches!(e.architecture, None | Some("" | "all")) {
        return None;
    }
    if e.config_version && matches!(state, "installed" | "not-installed" | "triggers-pending") {
        return None;
    }
    // dpkg: awaited triggers only from `half-installed` to
    // `triggers-awaited`, and always there; pending ones only in
    // `triggers-awaited` and `triggers-pending`, and always in the latter.
    let awaits_ok = match state {
        "triggers-awaited" => e.triggers_awaited,
        "not-installed" | "config-files" | "triggers-pending" | "installed" => !e.triggers_awaited,
        _ => true,
    };
    let pending_ok = match state {
        "triggers-pending" => e.triggers_pending,
        "triggers-awaited" => true,
        _ => !e.triggers_pending,
    };
    if !awaits_ok || !pending_ok {
        return None;
    }
    // dpkg forgets all but the name of a package that is not installed
    // and wanted by no one (`pkg_parse_verify`): `dpkg-query` prints it
    // without a version.
    let forgotten = state == "not-installed"
        && eflag == "ok"
        && (matches!(want, "unknown" | "purge" | "deinstall")
            || (want == "install" && matches!(e.architecture, None | Some(""))));
    let known = Known {
        status: state.to_owned(),
        version: if forgotten { "" } else { version }.to_owned(),
    };
    Some((name, known, same))
}

/// A Debian package name as dpkg writes it (lowercase; dpkg refuses the
/// others or folds their case, which goes to `dpkg-query`).
fn package_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() >= 2
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
}

fn arch_ok(arch: &str) -> bool {
    arch.chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Whether dpkg reads `version` without an error and prints it unchanged
/// (`${Version}`: the epoch only when it is not 0 or the rest holds a
/// `:`, then the upstream version, then `-revision` when there is one):
/// `01:2`, `+1:2` or `0:1.0` would print otherwise, and go to
/// `dpkg-query`.
pub fn canonical(version: &str) -> bool {
    if version.is_empty() || version.bytes().any(|b| b.is_ascii_whitespace()) {
        return false;
    }
    let (epoch, rest) = match version.split_once(':') {
        Some((e, r)) => (Some(e), r),
        None => (None, version),
    };
    let epoch_shown = match epoch {
        None => None,
        Some(e) if e.is_empty() || !e.bytes().all(|b| b.is_ascii_digit()) => return false,
        Some(e) => match e.parse::<i32>() {
            Ok(n) if e == n.to_string() => Some(n),
            _ => return false,
        },
    };
    if rest.is_empty() {
        return false;
    }
    let upstream = match rest.rsplit_once('-') {
        Some((_, "")) => return false,
        Some((u, _)) => u,
        None => rest,
    };
    if upstream.is_empty() {
        return false;
    }
    match epoch_shown {
        // dpkg prints `0:` only when the rest holds a `:`.
        Some(0) => rest.contains(':'),
        _ => true,
    }
}

/// dpkg's deb822 stanza reader (`parse_stanza` of `lib/dpkg/parse.c`, lax
/// as for a status file), over bytes, with its notion of the current
/// character and of the end of the data.
struct Parser<'a> {
    data: &'a [u8],
    pos: usize,
    /// The field names of the current stanza (kept across stanzas so that
    /// the list is allocated once).
    seen: Vec<&'a [u8]>,
}

/// `^Z`, which dpkg takes as an end of line.
const MSDOS_EOF: u8 = 0x1a;

fn space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

impl<'a> Parser<'a> {
    fn at_eof(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn getc(&mut self) -> u8 {
        let c = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos = self.pos.saturating_add(1);
        c
    }

    fn text(&self, start: usize, end: usize) -> Option<&'a str> {
        std::str::from_utf8(self.data.get(start..end)?).ok()
    }

    /// The next stanza: `Ok(None)` at the end, `None` where dpkg reports
    /// an error.
    #[allow(clippy::option_option)]
    fn stanza(&mut self) -> Option<Option<Entry<'a>>> {
        let mut c = 0u8;
        while !self.at_eof() {
            c = self.getc();
            if c != b'\n' && c != MSDOS_EOF {
                break;
            }
        }
        if self.at_eof() {
            return Some(None);
        }
        let mut entry = Entry::default();
        self.seen.clear();
        loop {
            let field_start = self.pos.checked_sub(1)?;
            while !self.at_eof() && !space(c) && c != b':' && c != MSDOS_EOF {
                c = self.getc();
            }
            let field_end = self.pos.checked_sub(1)?;
            if field_end <= field_start || self.data.get(field_start) == Some(&b'-') {
                return None;
            }
            while !self.at_eof() && c != b'\n' && space(c) {
                c = self.getc();
            }
            if self.at_eof() || c != b':' {
                return None;
            }
            while !self.at_eof() {
                c = self.getc();
                if c == b'\n' || !space(c) {
                    break;
                }
            }
            if self.at_eof() || c == MSDOS_EOF {
                return None;
            }
            let value_start = self.pos.checked_sub(1)?;
            loop {
                if c == b'\n' || c == MSDOS_EOF {
                    if self.at_eof() {
                        break;
                    }
                    c = self.getc();
                    if self.at_eof() || c == b'\n' || !space(c) {
                        break;
                    }
                    self.pos = self.pos.checked_sub(1)?;
                }
                if self.at_eof() {
                    return None;
                }
                c = self.getc();
            }
            let mut value_end = self.pos.checked_sub(1)?;
            while value_end > value_start
                && self
                    .data
                    .get(value_end.checked_sub(1)?)
                    .is_some_and(|b| space(*b))
            {
                value_end = value_end.checked_sub(1)?;
            }
            let data: &'a [u8] = self.data;
            let name = data.get(field_start..field_end)?;
            if self.seen.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                // dpkg: "duplicate value for field".
                return None;
            }
            // Only the values an answer reads are decoded; a value read
            // as one word must be one line, and one that is empty goes
            // to `dpkg-query` too.
            let word = || {
                self.text(value_start, value_end)
                    .filter(|v| !v.is_empty() && !v.contains('\n'))
            };
            let field = |f: &str| name.eq_ignore_ascii_case(f.as_bytes());
            if field("Package") {
                entry.package = Some(word()?);
            } else if field("Status") {
                entry.status = Some(word()?);
            } else if field("Version") {
                entry.version = Some(word()?);
            } else if field("Architecture") {
                entry.architecture = Some(word()?);
            } else if field("Multi-Arch") {
                entry.multi_arch = Some(word()?);
            } else if field("Config-Version") {
                // dpkg refuses an empty one.
                if value_end == value_start {
                    return None;
                }
                entry.config_version = true;
            } else if field("Triggers-Pending") {
                entry.triggers_pending = value_end > value_start;
            } else if field("Triggers-Awaited") {
                entry.triggers_awaited = value_end > value_start;
            }
            self.seen.push(name);
            if self.at_eof() || c == b'\n' || c == MSDOS_EOF {
                break;
            }
        }
        Some(Some(entry))
    }
}

#[cfg(test)]
mod tests;
