//! Files, directories and links, read through [`RootFs`]: no link is
//! followed, nothing outside the root is read, a name that is not UTF-8
//! (which no policy path can hold) is refused with its escaped form.
//!
//! A regular file becomes a `file` promise with its content (inline, or a
//! `source` file, [`super::INLINE_MAX`]), mode, owner and group; a
//! directory a `directory` promise with mode, owner and group (and, with
//! `--recurse`, a promise for everything below it); a link a `link`
//! promise with its target, verbatim. Owners are written as the name the
//! root's `/etc/passwd` gives the id (the name the run turns back into the
//! same id), or as the number when no name does.

use std::collections::HashSet;

use super::print::{self, Promise, Value};
use super::{CaptureError, Captured, Kind, SourceFile, INLINE_MAX};
use crate::backend::passwd::AccountDb;
use crate::rootfs::{escape_name, is_temp_name, path_problem, Kind as FsKind, Meta, RootFs};

/// What is at a path: its metadata and, for a link, its raw target.
struct Found {
    meta: Meta,
    target: Option<Vec<u8>>,
}

/// Captures every path of `names` (and, with `recurse`, what is below the
/// directories among them) into `out`.
pub fn capture(
    fs: &RootFs,
    kind: Kind,
    names: &[String],
    recurse: bool,
    out: &mut Captured,
) -> Result<(), CaptureError> {
    let owners = Owners {
        db: AccountDb::read(fs)?,
    };
    let mut seen: HashSet<String> = HashSet::new();
    for name in names {
        let path = policy_path(name)?;
        let found = look(fs, &path)?.ok_or_else(|| {
            CaptureError::NotFound(format!(
                "`{}` does not exist in the root",
                path.escape_debug()
            ))
        })?;
        let wanted = match (kind, found.meta.kind) {
            (Kind::Directory, k) if k != FsKind::Dir => Some("directory"),
            (Kind::Link, k) if k != FsKind::Symlink => Some("link"),
            _ => None,
        };
        if let Some(wanted) = wanted {
            return Err(CaptureError::Unreadable(format!(
                "`{}` is {}, not a {wanted}; capture it as `file`, which takes whatever is at a path",
                path.escape_debug(),
                describe_kind(&found.meta),
            )));
        }
        let is_dir = found.meta.kind == FsKind::Dir;
        if seen.insert(path.clone()) {
            let mut promise = describe(fs, &owners, &path, found, out)?;
            if recurse && is_dir {
                walk(fs, &owners, &path, &mut promise, &mut seen, out)?;
            } else {
                out.promises.push(promise);
            }
        }
    }
    Ok(())
}

/// A path from the command line as a policy path: absolute, no `..` or
/// `.`, no trailing `/` (but `/` itself), and text a policy string holds.
pub fn policy_path(name: &str) -> Result<String, CaptureError> {
    if let Some(why) = path_problem(name) {
        return Err(CaptureError::BadName(format!(
            "`{}` is not a path a promise can name: {why}",
            name.escape_debug()
        )));
    }
    let trimmed = name.trim_end_matches('/');
    let path = if trimmed.is_empty() { "/" } else { trimmed };
    writable(path)?;
    Ok(path.to_owned())
}

/// Refuses a path no policy string can hold.
fn writable(path: &str) -> Result<(), CaptureError> {
    print::check(path).map_err(|why| {
        CaptureError::Unreadable(format!(
            "`{}` cannot be written in a policy: {why}",
            path.escape_debug()
        ))
    })
}

/// The object at `path` itself (a link is a link), `None` if absent.
fn look(fs: &RootFs, path: &str) -> Result<Option<Found>, CaptureError> {
    let found = fs.visit_object(path, |entry| {
        let target = if entry.meta.kind == FsKind::Symlink {
            Some(entry.read_link()?)
        } else {
            None
        };
        Ok::<Found, crate::rootfs::FsError>(Found {
            meta: entry.meta,
            target,
        })
    })?;
    Ok(found.transpose()?)
}

/// What an object that is no file, directory or link is, in words.
fn describe_kind(meta: &Meta) -> &'static str {
    use rustix::fs::FileType;
    match (meta.kind, meta.file_type) {
        (FsKind::File, _) => "a regular file",
        (FsKind::Dir, _) => "a directory",
        (FsKind::Symlink, _) => "a symbolic link",
        (_, FileType::Fifo) => "a FIFO",
        (_, FileType::Socket) => "a socket",
        (_, FileType::CharacterDevice) => "a character device",
        (_, FileType::BlockDevice) => "a block device",
        _ => "an object of unknown type",
    }
}

/// The promise of one object.
fn describe(
    fs: &RootFs,
    owners: &Owners,
    path: &str,
    found: Found,
    out: &mut Captured,
) -> Result<Promise, CaptureError> {
    let shown = path.escape_debug().to_string();
    let meta = found.meta;
    let mut p = match meta.kind {
        FsKind::File => {
            let bytes = fs.read_file(path)?.ok_or_else(|| {
                CaptureError::NotFound(format!("`{shown}` vanished while it was read"))
            })?;
            let mut p = Promise::new("file", path);
            match inline_text(&bytes) {
                Some(text) => p.set("content", Value::Str(text)),
                None => {
                    let name = source_name(path);
                    p.set("source", Value::Str(name.clone()));
                    out.sources.push(SourceFile {
                        name,
                        content: bytes,
                        of: path.to_owned(),
                        world_readable: meta.mode & 0o004 != 0,
                    });
                }
            }
            p
        }
        FsKind::Dir => Promise::new("directory", path),
        FsKind::Symlink => {
            let raw = found.target.unwrap_or_default();
            let target = String::from_utf8(raw).map_err(|e| {
                CaptureError::Unreadable(format!(
                    "the target of the link `{shown}` is not UTF-8 (`{}`): a policy string cannot hold it",
                    escape_name(e.as_bytes())
                ))
            })?;
            print::check(&target).map_err(|why| {
                CaptureError::Unreadable(format!(
                    "the target of the link `{shown}` cannot be written in a policy: {why}"
                ))
            })?;
            let mut p = Promise::new("link", path);
            p.set("target", Value::Str(target));
            // A link's own mode and owner are no attributes of `link`.
            return Ok(p);
        }
        FsKind::Other => {
            return Err(CaptureError::Unreadable(format!(
                "`{shown}` is {}: no promise type describes it",
                describe_kind(&meta)
            )))
        }
    };
    p.set("mode", Value::Mode(meta.mode));
    p.set("owner", Value::Str(owners.user(meta.uid)));
    p.set("group", Value::Str(owners.group(meta.gid)));
    Ok(p)
}

/// The content as text for `content`, if it may be written inline: UTF-8
/// of at most [`INLINE_MAX`] bytes that a policy string can hold.
fn inline_text(bytes: &[u8]) -> Option<String> {
    if bytes.len() > INLINE_MAX {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    print::check(text).ok()?;
    Some(text.to_owned())
}

/// Where the content of the file at `path` goes, relative to the policy:
/// `files/` and the path, every byte other than ASCII letters, digits,
/// `.`, `_`, `+`, `-` and the `/` between components written `%XX` (so
/// distinct paths never share a file, and no name needs quoting).
pub fn source_name(path: &str) -> String {
    let mut name = String::from("files");
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"._+-/".contains(&b) {
            name.push(char::from(b));
        } else {
            name.push_str(&format!("%{b:02X}"));
        }
    }
    name
}

/// Captures everything below the directory at `top` (whose promise is
/// `promise`), depth first, in name order: each directory's promise comes
/// before what is inside it.
fn walk(
    fs: &RootFs,
    owners: &Owners,
    top: &str,
    promise: &mut Promise,
    seen: &mut HashSet<String>,
    out: &mut Captured,
) -> Result<(), CaptureError> {
    out.promises.push(promise.clone());
    // Directories still to list, the next one last.
    let mut stack: Vec<String> = vec![top.to_owned()];
    while let Some(dir) = stack.pop() {
        let mut subdirs = Vec::new();
        for raw in fs.list_dir(&dir)? {
            let child_shown = join(&dir, &escape_name(&raw));
            let Ok(name) = String::from_utf8(raw.clone()) else {
                return Err(CaptureError::Unreadable(format!(
                    "`{child_shown}` is not UTF-8: a policy path is text; rename it, or capture \
                     the paths beside it instead of the whole directory"
                )));
            };
            if is_temp_name(&raw) {
                // A temporary of an interrupted run: the next run removes it.
                continue;
            }
            let child = join(&dir, &name);
            writable(&child)?;
            let Some(found) = look(fs, &child)? else {
                continue;
            };
            if !seen.insert(child.clone()) {
                continue;
            }
            let is_dir = found.meta.kind == FsKind::Dir;
            let p = describe(fs, owners, &child, found, out)?;
            out.promises.push(p);
            if is_dir {
                subdirs.push(child);
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Owner and group names as the run resolves them.
struct Owners {
    db: AccountDb,
}

impl Owners {
    /// The name of user `uid`, if that name leads back to `uid` (the run
    /// takes the first entry of a name); else the number.
    fn user(&self, uid: u32) -> String {
        self.db
            .users
            .iter()
            .find(|u| u.uid == uid)
            .filter(|u| self.db.user(&u.name).is_some_and(|first| first.uid == uid))
            .map_or_else(|| uid.to_string(), |u| u.name.clone())
    }

    fn group(&self, gid: u32) -> String {
        self.db
            .groups
            .iter()
            .find(|g| g.gid == gid)
            .filter(|g| self.db.group(&g.name).is_some_and(|first| first.gid == gid))
            .map_or_else(|| gid.to_string(), |g| g.name.clone())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn source_names_are_distinct_and_need_no_quoting() {
        assert_eq!(source_name("/etc/ssl/cert.pem"), "files/etc/ssl/cert.pem");
        assert_eq!(source_name("/a b/\"q\"\n"), "files/a%20b/%22q%22%0A");
        assert_eq!(source_name("/50%"), "files/50%25");
        assert_ne!(source_name("/a%20b"), source_name("/a b"));
        assert_eq!(source_name("/ü"), "files/%C3%BC");
    }

    #[test]
    fn paths_from_the_command_line() {
        assert_eq!(policy_path("/etc/").unwrap(), "/etc");
        assert_eq!(policy_path("/").unwrap(), "/");
        assert!(matches!(
            policy_path("etc/motd"),
            Err(CaptureError::BadName(_))
        ));
        assert!(matches!(
            policy_path("/etc/../x"),
            Err(CaptureError::BadName(_))
        ));
        assert!(matches!(
            policy_path("/bell\u{7}"),
            Err(CaptureError::Unreadable(_))
        ));
    }

    #[test]
    fn inline_only_small_writable_text() {
        assert_eq!(inline_text(b"hi\n").as_deref(), Some("hi\n"));
        assert_eq!(inline_text(&[0xff, 0xfe]), None);
        assert_eq!(inline_text(b"nul\0"), None);
        assert!(inline_text(&vec![b'a'; INLINE_MAX]).is_some());
        assert_eq!(inline_text(&vec![b'a'; INLINE_MAX + 1]), None);
    }

    #[test]
    fn owners_lead_back_to_their_ids() {
        let owners = Owners {
            db: AccountDb::parse(
                "root:x:0:0::/root:/bin/sh\nalias:x:0:0::/:/bin/sh\nbob:x:1000:1000::/:/bin/sh\nbob:x:1001:1001::/:/bin/sh\n",
                "root:x:0:\nstaff:x:50:\n",
            ),
        };
        assert_eq!(owners.user(0), "root");
        assert_eq!(owners.user(1000), "bob");
        // The second `bob` is not the one the run finds by name.
        assert_eq!(owners.user(1001), "1001");
        assert_eq!(owners.user(4242), "4242");
        assert_eq!(owners.group(50), "staff");
        assert_eq!(owners.group(7), "7");
    }
}
