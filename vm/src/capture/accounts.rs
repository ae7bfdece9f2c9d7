//! Users and groups, from the root's `/etc/passwd` and `/etc/group`
//! through the one parser the account backends use
//! ([`crate::backend::passwd`]).
//!
//! A user gets `uid`, its primary group (`group = "NAME"` when a group
//! of that id has a name that leads back to it, else `gid`), `groups`
//! (its supplementary groups, a set: `[]` when it is in none), `shell`,
//! `home` and, when not empty, `comment` (the GECOS field). Its password
//! hash is printed only with `--with-passwords`; otherwise a comment says
//! it was left out (the hash is a credential, and a captured policy is
//! often shared or committed). A group gets `gid` and `members`, unless a
//! member is no user of the root (the run refuses such a member), in which
//! case `members` is left out with a comment naming them.

use super::print::{self, Promise, Value};
use super::{checked_name, CaptureError};
use crate::backend::passwd::AccountDb;
use crate::rootfs::RootFs;

pub fn users(
    fs: &RootFs,
    names: &[String],
    with_passwords: bool,
) -> Result<Vec<Promise>, CaptureError> {
    for name in names {
        checked_name("user", name)?;
    }
    let db = AccountDb::read(fs)?;
    names
        .iter()
        .map(|name| user(fs, &db, name, with_passwords))
        .collect()
}

fn user(
    fs: &RootFs,
    db: &AccountDb,
    name: &str,
    with_passwords: bool,
) -> Result<Promise, CaptureError> {
    let u = db.user(name).ok_or_else(|| {
        CaptureError::NotFound(format!(
            "there is no user `{name}` in the root's /etc/passwd"
        ))
    })?;
    let mut p = Promise::new("user", name);
    p.set("uid", Value::Int(i64::from(u.uid)));
    match db
        .groups
        .iter()
        .find(|g| g.gid == u.gid)
        .filter(|g| db.group(&g.name).is_some_and(|first| first.gid == u.gid))
    {
        Some(g) => p.set("group", Value::Str(g.name.clone())),
        None => p.set("gid", Value::Int(i64::from(u.gid))),
    }
    p.set(
        "groups",
        Value::List(db.groups_of(name).into_iter().collect()),
    );
    for (attr, path) in [("shell", &u.shell), ("home", &u.home)] {
        match crate::backend::check_path(attr, path) {
            Ok(()) => p.set(attr, Value::Str(path.clone())),
            Err(_) => p.note(format!(
                "{attr}: not captured, `{}` is not an absolute path the run accepts",
                path.escape_debug()
            )),
        }
    }
    if !u.gecos.is_empty() {
        match print::check(&u.gecos) {
            Ok(()) => p.set("comment", Value::Str(u.gecos.clone())),
            Err(why) => p.note(format!("comment: not captured, {why}")),
        }
    }
    if with_passwords {
        match AccountDb::password_hash(fs, name)? {
            Some(hash) if !hash.is_empty() && print::check(&hash).is_ok() => {
                p.set("password", Value::Str(hash));
            }
            Some(hash) if hash.is_empty() => {
                p.note("password: not captured, it is empty (the run refuses an empty hash)");
            }
            Some(_) => p.note("password: not captured, the hash holds a control character"),
            None => p.note("password: not captured, the user has no entry in /etc/shadow"),
        }
    } else {
        p.note("password: not captured (policyvm capture --with-passwords prints the hash)");
    }
    Ok(p)
}

pub fn groups(fs: &RootFs, names: &[String]) -> Result<Vec<Promise>, CaptureError> {
    for name in names {
        checked_name("group", name)?;
    }
    let db = AccountDb::read(fs)?;
    names
        .iter()
        .map(|name| {
            let g = db.group(name).ok_or_else(|| {
                CaptureError::NotFound(format!(
                    "there is no group `{name}` in the root's /etc/group"
                ))
            })?;
            let mut p = Promise::new("group", name.as_str());
            p.set("gid", Value::Int(i64::from(g.gid)));
            let mut members = g.members.clone();
            members.sort();
            members.dedup();
            let strangers: Vec<&str> = members
                .iter()
                .filter(|m| db.user(m).is_none())
                .map(String::as_str)
                .collect();
            if strangers.is_empty() {
                p.set("members", Value::List(members));
            } else {
                p.note(format!(
                    "members: not captured, {} listed but no user of the root (the run refuses such members)",
                    strangers.join(", ")
                ));
            }
            Ok(p)
        })
        .collect()
}
