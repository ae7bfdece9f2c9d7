//! The account databases of a root, `ROOT/etc/passwd` and
//! `ROOT/etc/group` (and, for a `user` promise that manages its password,
//! `ROOT/etc/shadow`), read through [`RootFs`] (no link followed) and
//! parsed in one place: the `user` and `group` backends read them to plan,
//! the file operators to turn `owner` and `group` names into ids.
//!
//! A line that is not a well-formed entry (a comment, an NIS `+` line, a
//! non-numeric id) names no account; it is skipped, not an error, as the C
//! library's `getpwnam` skips it.

use std::collections::BTreeSet;

use crate::rootfs::{FsError, RootFs};

/// One line of `/etc/passwd`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    /// The primary group's id (the fourth field).
    pub gid: u32,
    /// The GECOS field (the fifth): the full name, written by `comment`.
    pub gecos: String,
    pub home: String,
    pub shell: String,
}

/// One line of `/etc/group`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    pub gid: u32,
    /// Its supplementary members (the fourth field).
    pub members: Vec<String>,
}

/// Both databases of a root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccountDb {
    pub users: Vec<User>,
    pub groups: Vec<Group>,
}

impl AccountDb {
    /// Reads both files of the root; a missing file is an empty database.
    pub fn read(fs: &RootFs) -> Result<AccountDb, FsError> {
        let read = |path: &str| -> Result<String, FsError> {
            Ok(fs
                .read_file(path)?
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default())
        };
        Ok(AccountDb::parse(
            &read("/etc/passwd")?,
            &read("/etc/group")?,
        ))
    }

    /// Parses the text of `/etc/passwd` and `/etc/group`.
    pub fn parse(passwd: &str, group: &str) -> AccountDb {
        let users = passwd
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split(':').collect();
                Some(User {
                    name: non_empty(f.first())?,
                    uid: f.get(2)?.parse().ok()?,
                    gid: f.get(3)?.parse().ok()?,
                    gecos: f.get(4).copied().unwrap_or_default().to_owned(),
                    home: f.get(5).copied().unwrap_or_default().to_owned(),
                    shell: f.get(6).copied().unwrap_or_default().to_owned(),
                })
            })
            .collect();
        let groups = group
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split(':').collect();
                Some(Group {
                    name: non_empty(f.first())?,
                    gid: f.get(2)?.parse().ok()?,
                    members: f
                        .get(3)
                        .map(|m| {
                            m.split(',')
                                .filter(|m| !m.is_empty())
                                .map(str::to_owned)
                                .collect()
                        })
                        .unwrap_or_default(),
                })
            })
            .collect();
        AccountDb { users, groups }
    }

    /// The password hash of user `name` in `ROOT/etc/shadow` (the second
    /// field of its first entry), `None` when it has no entry. Read only
    /// when a promise manages the password, and never kept beyond the
    /// comparison: the hash is not part of [`AccountDb`].
    ///
    /// On a system without shadow passwords (no `/etc/shadow`, or no entry
    /// there) the hash is the second field of `/etc/passwd`, where
    /// `chpasswd -e` writes it; `x` there means "in the shadow file".
    pub fn password_hash(fs: &RootFs, name: &str) -> Result<Option<String>, FsError> {
        let read = |path: &str| -> Result<String, FsError> {
            Ok(fs
                .read_file(path)?
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default())
        };
        if let Some(hash) = shadow_hash(&read("/etc/shadow")?, name) {
            return Ok(Some(hash));
        }
        Ok(passwd_hash(&read("/etc/passwd")?, name))
    }

    /// The first entry of user `name`, as `getpwnam` finds it.
    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.iter().find(|u| u.name == name)
    }

    /// The first entry of group `name`.
    pub fn group(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// The groups that list `user` as a supplementary member.
    pub fn groups_of(&self, user: &str) -> BTreeSet<String> {
        self.groups
            .iter()
            .filter(|g| g.members.iter().any(|m| m == user))
            .map(|g| g.name.clone())
            .collect()
    }
}

/// The hash field of `name`'s first line in the text of `/etc/shadow`.
fn shadow_hash(shadow: &str, name: &str) -> Option<String> {
    shadow.lines().find_map(|line| {
        let mut f = line.split(':');
        (f.next() == Some(name)).then(|| f.next().unwrap_or_default().to_owned())
    })
}

/// The hash in `name`'s `/etc/passwd` entry, unless it is `x` ("in the
/// shadow file").
fn passwd_hash(passwd: &str, name: &str) -> Option<String> {
    shadow_hash(passwd, name).filter(|h| h != "x")
}

fn non_empty(field: Option<&&str>) -> Option<String> {
    field.filter(|f| !f.is_empty()).map(|f| (*f).to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn entries_ids_and_members() {
        let db = AccountDb::parse(
            "root:x:0:0:root:/root:/bin/bash\n# comment\n+nis\nbad:x:notanumber:0::/:/bin/sh\n\
             bob:x:1001:1001:Bob:/home/bob:/bin/sh\nbob:x:2002:2002::/other:/bin/false\n",
            "root:x:0:\nops:x:1502:bob,alice\nweb:x:1503:alice\nwheel:x:10:bob\n",
        );
        assert_eq!(
            db.user("bob"),
            Some(&User {
                name: "bob".into(),
                uid: 1001,
                gid: 1001,
                gecos: "Bob".into(),
                home: "/home/bob".into(),
                shell: "/bin/sh".into(),
            })
        );
        assert_eq!(db.user("bad"), None);
        assert_eq!(db.user("+nis"), None);
        assert_eq!(db.users.len(), 3);
        assert_eq!(db.group("ops").map(|g| g.gid), Some(1502));
        assert_eq!(db.group("root").unwrap().members, Vec::<String>::new());
        assert_eq!(
            db.groups_of("bob").into_iter().collect::<Vec<_>>(),
            ["ops", "wheel"]
        );
    }

    #[test]
    fn a_hash_without_a_shadow_entry_is_read_from_passwd() {
        let passwd = "deploy:!:2100:2100::/var/lib/deploy:/usr/sbin/nologin\nalice:x:2001:2001::/home/alice:/bin/bash\n";
        assert_eq!(passwd_hash(passwd, "deploy").as_deref(), Some("!"));
        assert_eq!(
            passwd_hash(passwd, "alice"),
            None,
            "`x` means the hash is in the shadow file"
        );
    }

    #[test]
    fn shadow_hash_of_the_first_entry() {
        let shadow = "root:*:19000:0:99999:7:::\nbob:$6$s$h:19000::::::\nbob:other:1::::::\nlocked:!:1::::::\nbo\n";
        assert_eq!(shadow_hash(shadow, "bob").as_deref(), Some("$6$s$h"));
        assert_eq!(shadow_hash(shadow, "locked").as_deref(), Some("!"));
        assert_eq!(shadow_hash(shadow, "bo").as_deref(), Some(""));
        assert_eq!(shadow_hash(shadow, "b"), None);
    }
}
