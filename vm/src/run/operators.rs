//! Convergent operators (LANGUAGE.md section 7, step 4): each reads the
//! current state of what its promise names, compares, and changes only
//! what differs. In a dry run the change is described, not made.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::editing;
use super::resolve::{Instance, Value};
use crate::backend::passwd::AccountDb;
use crate::backend::process::{self, Cmd};
use crate::rootfs::{FsError, Kind, RootFs};

mod directory_source;
mod directory_tree;
mod effects;
mod file_blob;
mod secret_file;
pub use directory_source::source_dirs;
pub use directory_tree::Others;

pub use crate::outcome::{Applied, Change, Outcome};

/// User and group names of the root (`ROOT/etc/passwd`, `ROOT/etc/group`).
/// Read again after a `user` or `group` promise changes them, so that a
/// file promised to a user created earlier in the run finds it.
#[derive(Clone, Debug, Default)]
pub struct Accounts {
    db: RefCell<AccountDb>,
}

impl Accounts {
    pub fn read(fs: &RootFs) -> Accounts {
        Accounts {
            db: RefCell::new(Self::db(fs)),
        }
    }

    /// Reads the tables again.
    pub fn reload(&self, fs: &RootFs) {
        *self.db.borrow_mut() = Self::db(fs);
    }

    /// The databases ([`AccountDb`], the one parser of both files); an
    /// unreadable one is empty, and names then fail as unknown.
    fn db(fs: &RootFs) -> AccountDb {
        AccountDb::read(fs).unwrap_or_default()
    }

    /// The root's account tables as read.
    pub fn tables(&self) -> AccountDb {
        self.db.borrow().clone()
    }

    fn uid(&self, name: &str) -> Result<u32, String> {
        self.db
            .borrow()
            .user(name)
            .map(|u| u.uid)
            .or_else(|| name.parse().ok())
            .ok_or_else(|| format!("no user `{name}` in the root's /etc/passwd"))
    }

    fn gid(&self, name: &str) -> Result<u32, String> {
        self.db
            .borrow()
            .group(name)
            .map(|g| g.gid)
            .or_else(|| name.parse().ok())
            .ok_or_else(|| format!("no group `{name}` in the root's /etc/group"))
    }
}

/// What an operator works with.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub fs: &'a RootFs,
    pub accounts: &'a Accounts,
    pub dry_run: bool,
    /// In a dry run, the state the run would have created
    /// ([`crate::run::simulated`]): every read and change of the operators
    /// goes through it ([`effects`]). `None` in a real run.
    pub sim: Option<&'a crate::run::simulated::Simulated>,
    /// Where backups go (`None`: `backup = true` fails).
    pub state: Option<&'a crate::state::StateDir>,
    /// The root commands are chrooted into, unless a promise says
    /// `host = true` (`None`: the root is `/`).
    pub chroot: Option<&'a Path>,
    /// `line` `replace` patterns, compiled once per run however many
    /// promises and passes use them (`docs/bytecode.md`, Limits).
    pub line_regexes: std::cell::RefCell<crate::bundle::limits::RegexCache<String>>,
    /// What `neighbours` promises found this run ([`crate::neighbours`]).
    pub neighbours: std::cell::RefCell<Vec<crate::neighbours::Entry>>,
    /// The blob directories of the run ([`crate::run::RunOptions::blobs`]).
    pub blobs: &'a [PathBuf],
}

fn digest(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    crate::bundle::error::hex(d.get(..8).unwrap_or_default())
}

/// `sha256:DIGEST` (the first 8 bytes, [`digest`]), as the reports show a
/// content; with `mode`, ` mode 0oMODE` after it (a created file). Built
/// in one string: a first run makes one per file it writes.
fn content_label(bytes: &[u8], mode: Option<u32>) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(40);
    out.push_str("sha256:");
    out.push_str(&digest(bytes));
    if let Some(mode) = mode {
        // Writing into a String cannot fail.
        let _ = write!(out, " mode 0o{mode:o}");
    }
    out
}

fn fs_failed(e: FsError) -> Applied {
    Applied::failed(e.to_string())
}

/// A unified diff for a dry run, of text content only, and only of a file
/// anyone on the host may read both before and after (`modes`: the current
/// and the resulting mode). Reports end up in logs and CI output; the
/// content of a 0600 file (keys, password hashes, tokens) must not
/// (THREATS.md T24), so its diff is replaced by a note saying why.
fn diff(before: &[u8], after: &[u8], path: &str, modes: &[u32]) -> Option<String> {
    if let Some(mode) = modes.iter().find(|m| *m & 0o004 == 0) {
        return Some(format!(
            "{path}: content not shown (mode 0o{mode:o} is not world-readable)\n"
        ));
    }
    let (Ok(a), Ok(b)) = (std::str::from_utf8(before), std::str::from_utf8(after)) else {
        return None;
    };
    Some(
        similar::TextDiff::from_lines(a, b)
            .unified_diff()
            .header(&format!("{path} (current)"), &format!("{path} (promised)"))
            .to_string(),
    )
}

/// Owner and group ids a promise asks for (`None` where not managed).
fn owner_ids(ctx: &Ctx<'_>, inst: &Instance) -> Result<(Option<u32>, Option<u32>), String> {
    let uid = inst.str("owner").map(|n| ctx.uid(n)).transpose()?;
    let gid = inst.str("group").map(|n| ctx.gid(n)).transpose()?;
    Ok((uid, gid))
}

/// Converges mode and ownership of an existing object.
fn attributes(
    ctx: &Ctx<'_>,
    inst: &Instance,
    path: &str,
    mode: u32,
    uid: u32,
    gid: u32,
) -> Result<Vec<Change>, Applied> {
    // The owner first, then the mode: `chown` clears the setuid and setgid
    // bits, so the mode (the promised one, or the one the object had) is
    // set after it, or those bits would be lost for good when no `mode` is
    // promised.
    let mut changes = Vec::new();
    let (want_uid, want_gid) = owner_ids(ctx, inst).map_err(Applied::failed)?;
    let new_uid = want_uid.unwrap_or(uid);
    let new_gid = want_gid.unwrap_or(gid);
    let owner_changes = new_uid != uid || new_gid != gid;
    let want_mode = inst.int("mode").and_then(|m| u32::try_from(m).ok());
    let target = want_mode.unwrap_or(mode);
    let mut now = mode;
    if owner_changes {
        ctx.set_owner(path, new_uid, new_gid).map_err(fs_failed)?;
        if let Some(m) = ctx.lstat(path).map_err(fs_failed)? {
            now = m.mode;
        }
    }
    if now != target {
        ctx.set_mode(path, target).map_err(fs_failed)?;
    }
    if let Some(want) = want_mode.filter(|w| *w != mode) {
        changes.push(Change {
            what: "mode".into(),
            before: format!("0o{mode:o}"),
            after: format!("0o{want:o}"),
            diff: None,
        });
    }
    if owner_changes {
        changes.push(Change {
            what: "owner".into(),
            before: format!("{uid}:{gid}"),
            after: format!("{new_uid}:{new_gid}"),
            diff: None,
        });
    }
    Ok(changes)
}

/// Removes the stale temporaries (left by a run killed with SIGKILL) of
/// the directory a promise works in, before `converge` runs; their removal
/// is a change of that promise. Nothing is removed in a dry run.
fn after_cleaning(
    ctx: &Ctx<'_>,
    inst: &Instance,
    converge: impl FnOnce(&Ctx<'_>, &Instance) -> Applied,
) -> Applied {
    if ctx.dry_run {
        return converge(ctx, inst);
    }
    let stale = match ctx.fs.clean_stale_temporaries(&inst.promiser) {
        Ok(stale) => stale,
        Err(e) => return fs_failed(e),
    };
    let mut applied = converge(ctx, inst);
    if !stale.is_empty() {
        let removed = stale.into_iter().map(|path| Change {
            what: "removed stale temporary".into(),
            before: path,
            after: "absent".into(),
            diff: None,
        });
        applied.changes.splice(0..0, removed);
        if applied.outcome == Outcome::Kept {
            applied.outcome = Outcome::Repaired;
        }
    }
    applied
}

pub fn file(ctx: &Ctx<'_>, inst: &Instance) -> Applied {
    after_cleaning(ctx, inst, converge_file)
}

fn converge_file(ctx: &Ctx<'_>, inst: &Instance) -> Applied {
    let path = inst.promiser.as_str();
    let meta = match present_or_absent(ctx, inst, |k| k != Kind::Dir, "a file") {
        Ok(m) => m,
        Err(done) => return done,
    };
    match meta.map(|m| m.kind) {
        Some(Kind::Symlink) => return fs_failed(FsError::Symlink(path.to_owned())),
        Some(Kind::Dir) => return Applied::failed(format!("`{path}` is a directory, not a file")),
        Some(Kind::Other) => return Applied::failed(format!("`{path}` is not a regular file")),
        _ => {}
    }
    // Borrowed from the instance, never copied: a kept file costs no
    // allocation for its content, and a secret's text is not duplicated.
    let desired: Option<&[u8]> = match (
        inst.get("content"),
        inst.get("source"),
        inst.get("template"),
    ) {
        (Some(Value::Str(s)), _, _) | (_, _, Some(Value::Str(s))) => Some(s.as_bytes()),
        (Some(Value::Secret(s)), _, _) | (_, _, Some(Value::Secret(s))) => {
            Some(s.expose().as_bytes())
        }
        (_, Some(Value::Bytes(b)), _) => Some(b),
        _ => None,
    };
    let secret = inst.secret("content").or_else(|| inst.secret("template"));
    let promised_mode = inst.int("mode").and_then(|m| u32::try_from(m).ok());
    if let Some(secret) = secret {
        // The mode the file will have: promised, kept, or a new file's.
        let mode = promised_mode.unwrap_or(meta.map_or(0o644, |m| m.mode));
        if let Some(why) = secret_file::mode_problem(path, secret, mode) {
            return Applied::failed(why);
        }
    }
    let (want_uid, want_gid) = match owner_ids(ctx, inst) {
        Ok(ids) => ids,
        Err(e) => return Applied::failed(e),
    };
    // A `source` stored beside the bundle (format 2.6): streamed.
    if let Some(Value::Blob(blob)) = inst.get("source") {
        return file_blob::converge(ctx, inst, blob, meta, (want_uid, want_gid));
    }
    let Some(meta) = meta else {
        if inst.bool("create") == Some(false) {
            // Only an existing file is managed: a permissions-only promise
            // on a missing key must not create an empty one (issue 17).
            return Applied {
                outcome: Outcome::Skipped("absent and create = false".into()),
                changes: Vec::new(),
                output: None,
            };
        }
        // Create it: content (or empty), mode 0644 unless promised.
        let bytes = desired.unwrap_or_default();
        let (after, diff_of) = match secret {
            Some(s) => (
                format!("{} mode 0o{:o}", s.label(), promised_mode.unwrap_or(0o644)),
                ctx.dry_run.then(|| secret_file::dry_run_note(path)),
            ),
            None => (String::new(), None),
        };
        let mode = inst
            .int("mode")
            .and_then(|m| u32::try_from(m).ok())
            .unwrap_or(0o644);
        let owner = match (want_uid, want_gid) {
            (None, None) => None,
            (u, g) => Some((u.unwrap_or_else(current_uid), g.unwrap_or_else(current_gid))),
        };
        if let Err(e) = write_validated(ctx, inst, bytes, mode, owner, secret.is_some()) {
            return e;
        }
        if let Err(e) = confirm(ctx, path, bytes) {
            return e;
        }
        if secret.is_some() {
            return Applied::from_changes(vec![Change {
                what: "created".into(),
                before: "absent".into(),
                after,
                diff: diff_of,
            }]);
        }
        return Applied::from_changes(vec![Change {
            what: "created".into(),
            before: "absent".into(),
            after: content_label(bytes, Some(mode)),
            diff: if ctx.dry_run {
                diff(b"", bytes, path, &[mode])
            } else {
                None
            },
        }]);
    };
    let mut changes = Vec::new();
    if let Some(want) = desired {
        let current = match ctx.read_file(path) {
            Ok(c) => Zeroizing::new(c.unwrap_or_default()),
            Err(e) => return fs_failed(e),
        };
        if *current != want {
            let mode = promised_mode.unwrap_or(meta.mode);
            // Never a copy of a secret in the state directory.
            let no_backup = (inst.bool("backup") == Some(true))
                .then(|| secret_file::no_backup(secret, meta.mode))
                .flatten();
            // A dry run copies nothing to the state directory (it may not
            // exist yet: the real run creates it).
            if !ctx.dry_run && inst.bool("backup") == Some(true) && no_backup.is_none() {
                // In the state directory, never beside the file (issue 17
                // item 7).
                let Some(state) = ctx.state else {
                    return Applied::failed(
                        "`backup = true` needs the VM's state directory (`--state`), where backups are kept; not rewritten",
                    );
                };
                if let Err(e) = state.backup(path, &current) {
                    return Applied::failed(format!("cannot back it up: {e}"));
                }
            }
            let owner = Some((want_uid.unwrap_or(meta.uid), want_gid.unwrap_or(meta.gid)));
            if let Err(e) = write_validated(ctx, inst, want, mode, owner, secret.is_some()) {
                return e;
            }
            if let Err(e) = confirm(ctx, path, want) {
                return e;
            }
            changes.extend(no_backup);
            if let Some(secret) = secret {
                let note = ctx.dry_run.then(|| secret_file::dry_run_note(path));
                changes.push(secret_file::content_change(secret, note));
            } else {
                changes.push(Change {
                    what: "content".into(),
                    before: content_label(&current, None),
                    after: content_label(want, None),
                    diff: if ctx.dry_run {
                        diff(&current, want, path, &[meta.mode, mode])
                    } else {
                        None
                    },
                });
            }
        }
    }
    // Mode and owner, read again after a rewrite.
    let meta = if changes.is_empty() {
        meta
    } else {
        match ctx.lstat(path) {
            Ok(Some(m)) => m,
            Ok(None) => return Applied::failed(format!("`{path}` vanished while it was written")),
            Err(e) => return fs_failed(e),
        }
    };
    match attributes(ctx, inst, path, meta.mode, meta.uid, meta.gid) {
        Ok(more) => changes.extend(more),
        Err(failed) => return failed,
    }
    Applied::from_changes(changes)
}

/// Writes the file's new content; with `validate`, the staged copy (in the
/// file's directory, with its final owner and mode) is checked first and
/// replaces the file only if the command exits 0. A refusal fails the
/// promise with the command's output; the file is untouched, so the next
/// run stages, validates and fails again until the policy is fixed. The
/// output of a command that validated a `secret` content is not shown (it
/// may quote what it checked).
fn write_validated(
    ctx: &Ctx<'_>,
    inst: &Instance,
    bytes: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
    secret: bool,
) -> Result<(), Applied> {
    let path = inst.promiser.as_str();
    let validate = inst.list("validate");
    if validate.is_none() || ctx.sim.is_some() {
        // A dry run does not run `validate` (it is listed among the
        // commands the run would run); it makes the write's checks.
        return ctx.write_file(path, bytes, mode, owner).map_err(fs_failed);
    }
    let Some(validate) = validate else {
        return Err(Applied::failed("no `validate`"));
    };
    if !validate.iter().any(|a| a == "%s") {
        return Err(Applied::failed(
            "`validate` has no argument that is exactly `%s` (the staged copy's path); not written",
        ));
    }
    let mut output = String::new();
    let written = ctx
        .fs
        .write_file_checked(path, bytes, mode, owner, |staged| {
            validate_staged(ctx, inst, validate, staged, secret, &mut output)
        });
    written.map_err(|e| Applied {
        outcome: Outcome::Failed(e.to_string()),
        changes: Vec::new(),
        output: (!output.is_empty()).then_some(output),
    })
}

/// The root a promise's commands are chrooted into: the run's `--root`
/// unless the promise says `host = true`.
fn chroot_of<'a>(ctx: &Ctx<'a>, inst: &Instance) -> Option<&'a Path> {
    ctx.chroot.filter(|_| inst.bool("host") != Some(true))
}

fn timeout_of(inst: &Instance) -> Duration {
    Duration::from_secs(
        inst.int("timeout")
            .and_then(|t| u64::try_from(t).ok())
            .unwrap_or(60),
    )
}

/// Runs `validate` on the staged copy `staged` (a policy path) of the
/// file `inst` promises: `Ok` if it exits 0, else why (its first line of
/// output kept in `output`, unless the content is a secret).
fn validate_staged(
    ctx: &Ctx<'_>,
    inst: &Instance,
    validate: &[String],
    staged: &str,
    secret: bool,
    output: &mut String,
) -> Result<(), String> {
    let chroot = chroot_of(ctx, inst);
    let timeout = timeout_of(inst);
    // The path as the command sees it: inside the chroot, the
    // policy path; on the host, the path under the root.
    let seen = match chroot {
        Some(_) => staged.to_owned(),
        None => crate::backend::host_path(ctx.fs.path(), staged)
            .display()
            .to_string(),
    };
    let argv: Vec<String> = validate
        .iter()
        .map(|a| if a == "%s" { seen.clone() } else { a.clone() })
        .collect();
    let cwd = chroot.map_or_else(|| ctx.fs.path().to_path_buf(), |_| "/".into());
    match execute(&argv, &cwd, ctx.fs.path(), timeout, chroot) {
        Ok((Some(0), _)) => Ok(()),
        Ok((code, out)) => {
            *output = if secret { String::new() } else { out };
            let shown = validate.join(" ");
            let said = output.trim_end();
            let said = if said.is_empty() {
                String::new()
            } else {
                format!(" ({})", said.lines().next().unwrap_or_default())
            };
            Err(match code {
                Some(c) => format!(
                    "the new content failed validation: `{shown}` exited with status {c}{said}; the file was not changed"
                ),
                None => format!(
                    "the new content failed validation: `{shown}` was killed (timeout of {}s, or a signal); the file was not changed",
                    timeout.as_secs()
                ),
            })
        }
        Err(e) => Err(format!(
            "the new content could not be validated: {e}; the file was not changed"
        )),
    }
}

/// Re-reads what was written: a repair is only a repair if it stuck.
fn confirm(ctx: &Ctx<'_>, path: &str, want: &[u8]) -> Result<(), Applied> {
    match ctx.read_file(path) {
        Ok(Some(now)) if now == want => Ok(()),
        Ok(_) => Err(Applied::failed(format!(
            "`{path}` does not hold the promised content after writing it"
        ))),
        Err(e) => Err(fs_failed(e)),
    }
}

/// `ensure = absent`: kept if nothing is there, removed if the right kind of
/// object is, failed if something else is (a directory where a file was
/// promised absent is not silently deleted with everything in it).
/// The object a `file` or `directory` promise names, after handling
/// `ensure = absent` (removing it when it is `what`): `Err` is then the
/// promise's whole outcome.
fn present_or_absent(
    ctx: &Ctx<'_>,
    inst: &Instance,
    right_kind: impl Fn(Kind) -> bool,
    what: &str,
) -> Result<Option<crate::rootfs::Meta>, Applied> {
    let path = inst.promiser.as_str();
    let meta = ctx.lstat(path).map_err(fs_failed)?;
    if inst.str("ensure") == Some("absent") {
        return Err(absent(
            ctx,
            path,
            meta.map(|m| m.kind),
            right_kind,
            what,
            "present",
        ));
    }
    Ok(meta)
}

fn absent(
    ctx: &Ctx<'_>,
    path: &str,
    kind: Option<Kind>,
    right_kind: impl Fn(Kind) -> bool,
    what: &str,
    before: &str,
) -> Applied {
    match kind {
        None => Applied::kept(),
        Some(k) if right_kind(k) => {
            if let Err(e) = ctx.remove(path) {
                return fs_failed(e);
            }
            Applied::from_changes(vec![Change {
                what: "removed".into(),
                before: before.to_owned(),
                after: "absent".into(),
                diff: None,
            }])
        }
        Some(_) => Applied::failed(format!("`{path}` is not {what}; refusing to remove it")),
    }
}

fn current_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

fn current_gid() -> u32 {
    rustix::process::getgid().as_raw()
}

/// A `directory` promise: the directory itself, then the tree copied from
/// its `source` ([`directory_source`]), then (with `recurse`) the tree
/// below it ([`directory_tree`]), except what `others` manage.
pub fn directory(ctx: &Ctx<'_>, inst: &Instance, others: &Others) -> Applied {
    let path = inst.promiser.as_str();
    let meta = match present_or_absent(ctx, inst, |k| k == Kind::Dir, "a directory") {
        Ok(m) => m,
        Err(done) => return done,
    };
    let top = match meta {
        None => {
            let mode = inst
                .int("mode")
                .and_then(|m| u32::try_from(m).ok())
                .unwrap_or(0o755);
            if let Err(e) = ctx.create_dir(path, mode) {
                return fs_failed(e);
            }
            let mut changes = vec![Change {
                what: "created".into(),
                before: "absent".into(),
                after: format!("directory mode 0o{mode:o}"),
                diff: None,
            }];
            if inst.str("owner").is_some() || inst.str("group").is_some() {
                match attributes(ctx, inst, path, mode, current_uid(), current_gid()) {
                    Ok(more) => changes.extend(more),
                    Err(failed) => return failed,
                }
            }
            Applied::from_changes(changes)
        }
        Some(m) if m.kind == Kind::Symlink => fs_failed(FsError::Symlink(path.to_owned())),
        Some(m) if m.kind != Kind::Dir => {
            Applied::failed(format!("`{path}` exists and is not a directory"))
        }
        Some(m) => match attributes(ctx, inst, path, m.mode, m.uid, m.gid) {
            Ok(changes) => Applied::from_changes(changes),
            Err(failed) => failed,
        },
    };
    if !matches!(top.outcome, Outcome::Kept | Outcome::Repaired) {
        return top;
    }
    let copied = directory_source::converge_source(ctx, inst, others, top);
    if !matches!(copied.outcome, Outcome::Kept | Outcome::Repaired) {
        return copied;
    }
    directory_tree::converge_tree(ctx, inst, others, copied)
}

pub fn link(ctx: &Ctx<'_>, inst: &Instance) -> Applied {
    after_cleaning(ctx, inst, converge_link)
}

fn converge_link(ctx: &Ctx<'_>, inst: &Instance) -> Applied {
    let path = inst.promiser.as_str();
    let meta = match ctx.lstat(path) {
        Ok(m) => m,
        Err(e) => return fs_failed(e),
    };
    let current = match ctx.read_link(path) {
        Ok(t) => t,
        Err(e) => return fs_failed(e),
    };
    if inst.str("ensure") == Some("absent") {
        let before = current.unwrap_or_default();
        return absent(
            ctx,
            path,
            meta.map(|m| m.kind),
            |k| k == Kind::Symlink,
            "a link",
            &before,
        );
    }
    let Some(target) = inst.str("target") else {
        return Applied::failed("a link needs a `target`");
    };
    match (meta, current) {
        (_, Some(t)) if t == target => Applied::kept(),
        (Some(m), None) if m.kind == Kind::Dir => {
            Applied::failed(format!("`{path}` is a directory, not a link"))
        }
        (_, before) => {
            if let Err(e) = ctx.symlink(path, target) {
                return fs_failed(e);
            }
            Applied::from_changes(vec![Change {
                what: "target".into(),
                before: before.unwrap_or_else(|| "absent".into()),
                after: target.to_owned(),
                diff: None,
            }])
        }
    }
}

pub fn line(ctx: &Ctx<'_>, inst: &Instance) -> Applied {
    after_cleaning(ctx, inst, |ctx, inst| {
        let edit = match line_edit(ctx, inst) {
            Ok(edit) => edit,
            Err(why) => return Applied::failed(why),
        };
        converge_text(ctx, inst, edit)
    })
}

/// A `setting` promise: one key's value in a keyword or key=value file.
pub fn setting(ctx: &Ctx<'_>, inst: &Instance) -> Applied {
    let (Some(key), Some(value)) = (inst.str("key"), inst.str("value")) else {
        return Applied::failed("a setting needs `key` and `value`");
    };
    let wanted = editing::setting::Setting {
        key,
        value,
        separator: inst.str("separator").unwrap_or("="),
        section: inst.str("section"),
        comment: inst.str("comment").unwrap_or("#"),
    };
    after_cleaning(ctx, inst, |ctx, inst| {
        converge_text(
            ctx,
            inst,
            Box::new(move |t| editing::setting::apply(t, &wanted)),
        )
    })
}

/// A `block` promise: exactly these lines between its marker lines.
pub fn block(ctx: &Ctx<'_>, inst: &Instance) -> Applied {
    let (Some(marker), Some(lines)) = (inst.str("marker"), inst.list("lines")) else {
        return Applied::failed("a block needs `marker` and `lines`");
    };
    after_cleaning(ctx, inst, |ctx, inst| {
        converge_text(
            ctx,
            inst,
            Box::new(move |t| editing::block::apply(t, marker, lines)),
        )
    })
}

/// One application of a text promise's edit (see [`editing`]).
type TextEdit<'a> = Box<dyn Fn(&str) -> editing::EditResult + 'a>;

/// The edit a `line` promise makes, with its regexes compiled once per run.
fn line_edit<'a>(ctx: &Ctx<'_>, inst: &'a Instance) -> Result<TextEdit<'a>, String> {
    let regex = |name: &str| -> Result<Option<regex::Regex>, String> {
        let Some(pattern) = inst.str(name) else {
            return Ok(None);
        };
        match ctx
            .line_regexes
            .borrow_mut()
            .get(&pattern.to_owned(), pattern)
        {
            Ok(re) => Ok(Some(re.clone())),
            Err(e) => Err(format!("invalid regex in `{name}`: {e}")),
        }
    };
    if let Some(wanted) = inst.str("present") {
        let anchor = match (
            regex("insert_after")?,
            regex("insert_before")?,
            inst.str("at"),
        ) {
            (Some(re), _, _) => editing::line::Anchor::After(re),
            (_, Some(re), _) => editing::line::Anchor::Before(re),
            (_, _, Some("top")) => editing::line::Anchor::Top,
            _ => editing::line::Anchor::Bottom,
        };
        return Ok(Box::new(move |t| {
            editing::line::present(t, wanted, &anchor)
        }));
    }
    if let Some(unwanted) = inst.str("absent") {
        return Ok(Box::new(move |t| editing::line::absent(t, unwanted)));
    }
    match (inst.str("replace"), regex("replace")?, inst.str("with")) {
        (Some(pattern), Some(re), Some(with)) => {
            let comments = inst.bool("replace_comments").unwrap_or(false);
            Ok(Box::new(move |t| {
                editing::line::replace(t, pattern, &re, with, comments)
            }))
        }
        _ => Err("a line needs `present`, `absent` or `replace` with `with`".to_owned()),
    }
}

/// Reads the promised text file, applies `edit` (twice in memory: an edit
/// that would change the text again never settles, issue 14 item 13) and
/// writes the result in place, keeping mode and owner; a dry run shows the
/// diff and writes nothing. A failed edit writes nothing.
fn converge_text(ctx: &Ctx<'_>, inst: &Instance, edit: TextEdit<'_>) -> Applied {
    let path = inst.promiser.as_str();
    // In a dry run, a file an earlier promise would create is there.
    let meta = match ctx.lstat(path) {
        Ok(Some(m)) if m.kind == Kind::File => m,
        Ok(Some(m)) if m.kind == Kind::Symlink => {
            return fs_failed(FsError::Symlink(path.to_owned()))
        }
        Ok(Some(_)) => return Applied::failed(format!("`{path}` is not a regular file")),
        Ok(None) => {
            return Applied::failed(format!("`{path}` does not exist; promise the file too"))
        }
        Err(e) => return fs_failed(e),
    };
    let bytes = match ctx.read_file(path) {
        Ok(b) => b.unwrap_or_default(),
        Err(e) => return fs_failed(e),
    };
    let Ok(text) = String::from_utf8(bytes.clone()) else {
        return Applied::failed(format!(
            "`{path}` is not UTF-8 text (a binary file?); nothing was written"
        ));
    };
    let (what, new_text) = match editing::settled(&text, &edit) {
        Ok(Some(done)) => (done.what, done.text),
        Ok(None) => return Applied::kept(),
        Err(why) => return Applied::failed(format!("`{path}`: {why}")),
    };
    let new_bytes = new_text.into_bytes();
    if let Err(e) = ctx.write_file(path, &new_bytes, meta.mode, Some((meta.uid, meta.gid))) {
        return fs_failed(e);
    }
    Applied::from_changes(vec![Change {
        what,
        before: content_label(&bytes, None),
        after: content_label(&new_bytes, None),
        diff: if ctx.dry_run {
            diff(&bytes, &new_bytes, path, &[meta.mode])
        } else {
            None
        },
    }])
}

/// Runs a command unless `creates` exists or `unless` succeeds; a
/// `notified` command runs regardless.
pub fn command(ctx: &Ctx<'_>, inst: &Instance, notified: bool) -> Applied {
    let Some(run) = inst.list("run").filter(|r| !r.is_empty()) else {
        return Applied::failed("a command needs `run`");
    };
    if let Some(creates) = inst.str("creates").filter(|_| !notified) {
        match ctx.lstat(creates) {
            Ok(Some(_)) => return Applied::kept(),
            Ok(None) => {}
            Err(e) => return fs_failed(e),
        }
    }
    let timeout = timeout_of(inst);
    let chroot = chroot_of(ctx, inst);
    let cwd = match (inst.str("cwd"), chroot) {
        // Chrooted: the working directory is a path inside the root
        // (checked like any other path of the root first).
        (Some(dir), Some(_)) => match crate::backend::contain::working_dir(ctx.fs, dir) {
            Ok(_) => dir.into(),
            Err(why) => return Applied::failed(why),
        },
        (Some(dir), None) => match crate::backend::contain::working_dir(ctx.fs, dir) {
            Ok(cwd) => cwd,
            Err(why) => return Applied::failed(why),
        },
        (None, Some(_)) => "/".into(),
        (None, None) => ctx.fs.path().to_path_buf(),
    };
    if let Some(unless) = inst.list("unless").filter(|u| !u.is_empty() && !notified) {
        match execute(unless, &cwd, ctx.fs.path(), timeout, chroot) {
            Ok((Some(0), _)) => return Applied::kept(),
            Ok(_) => {}
            Err(e) => return Applied::failed(format!("`unless` could not run: {e}")),
        }
    }
    let shown = run.join(" ");
    if ctx.dry_run {
        return Applied::from_changes(vec![Change {
            what: "run".into(),
            before: String::new(),
            after: shown,
            diff: None,
        }]);
    }
    match execute(run, &cwd, ctx.fs.path(), timeout, chroot) {
        Ok((Some(0), output)) => Applied {
            outcome: Outcome::Repaired,
            changes: vec![Change {
                what: "ran".into(),
                before: String::new(),
                after: shown,
                diff: None,
            }],
            output: Some(output),
        },
        Ok((code, output)) => Applied {
            outcome: Outcome::Failed(match code {
                Some(c) => format!("`{shown}` exited with status {c}"),
                None => format!(
                    "`{shown}` was killed (timeout of {}s, or a signal)",
                    timeout.as_secs()
                ),
            }),
            changes: Vec::new(),
            output: Some(output),
        },
        Err(e) => Applied::failed(e.to_string()),
    }
}

/// Runs an argv without a shell, in `cwd`, with `CONVERGE_ROOT` set
/// (`/` when chrooted into the root: that is where the root is then);
/// kills it (and what it started) after `timeout`. Returns the exit code
/// (`None` if killed) and the captured output (bounded).
fn execute(
    argv: &[String],
    cwd: &Path,
    root: &Path,
    timeout: Duration,
    chroot: Option<&Path>,
) -> std::io::Result<(Option<i32>, String)> {
    let seen_root = if chroot.is_some() {
        Path::new("/")
    } else {
        root
    };
    let cmd = Cmd {
        argv: argv.to_vec(),
        env: vec![("CONVERGE_ROOT".to_owned(), seen_root.display().to_string())],
        cwd: Some(cwd.to_path_buf()),
        timeout,
        chroot: chroot.map(Path::to_path_buf),
        stdin: None,
        stop_at_output_cap: false,
    };
    let ran = process::run(&cmd).map_err(std::io::Error::other)?;
    let mut output = ran.stdout;
    output.push_str(&ran.stderr);
    Ok((ran.code, output))
}
