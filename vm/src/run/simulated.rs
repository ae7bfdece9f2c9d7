//! The state a dry run would create (issue 21 item 3): one overlay over
//! the root, consulted by the same checks a real run makes.
//!
//! A dry run changes nothing, yet a later promise of the same run must see
//! what an earlier one would have done: a file owned by a user the run
//! creates is "would repair", not "unknown user"; a file below a directory
//! the run creates is checked against that directory (a world-writable one
//! is refused, as the real run refuses it). So every change an operator
//! makes in a dry run goes to this overlay instead of to the disk
//! ([`super::operators::Ctx`] is the one place that decides), and every
//! read of an operator looks here first:
//!
//! - paths: objects created, rewritten, re-moded, re-owned or removed,
//!   with their would-be metadata and content;
//! - accounts: users and groups added or changed, with the ids `useradd`
//!   and `groupadd` would give them (the root's `login.defs` ranges, the
//!   same allocation rules: next above the highest id in use, system ids
//!   downward from the top of their range, a user's own group taking the
//!   user's id when it is free);
//! - service units a promise would write, which `systemctl` cannot see.
//!
//! What is not simulated (docs/operations.md, "Dry runs"): the effect of a
//! command or of an installed package's files, and the content a `validate`
//! command would accept.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use zeroize::Zeroizing;

use crate::backend::passwd::{AccountDb, Group, User};
use crate::instance::Instance;
use crate::rootfs::{FsError, Kind, Meta, RootFs};

/// The overlay of one dry run.
#[derive(Debug)]
pub struct Simulated {
    state: RefCell<State>,
    /// The root's id ranges, for the ids of accounts the run would add.
    defs: LoginDefs,
}

#[derive(Debug, Default)]
struct State {
    /// Policy path (no trailing `/`) -> what the run would leave there.
    paths: BTreeMap<String, Entry>,
    /// Users and groups the run would add or change; an entry replaces
    /// the root's entry of the same name.
    accounts: AccountDb,
    /// Users and groups the run would remove.
    removed_users: BTreeSet<String>,
    removed_groups: BTreeSet<String>,
}

/// What the run would leave at a path.
#[derive(Clone, Debug)]
enum Entry {
    Absent,
    Present {
        meta: Meta,
        /// A file's would-be content (`None`: as on disk).
        content: Option<Zeroizing<Vec<u8>>>,
        /// A link's would-be target.
        target: Option<String>,
    },
}

fn key(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        "/"
    } else {
        trimmed
    }
}

fn parent_of(path: &str) -> Option<&str> {
    let (parent, _) = key(path).rsplit_once('/')?;
    Some(if parent.is_empty() { "/" } else { parent })
}

/// The metadata of an object that exists only in the overlay.
pub fn meta(kind: Kind, mode: u32, uid: u32, gid: u32, len: u64) -> Meta {
    let file_type = match kind {
        Kind::File => rustix::fs::FileType::RegularFile,
        Kind::Dir => rustix::fs::FileType::Directory,
        Kind::Symlink => rustix::fs::FileType::Symlink,
        Kind::Other => rustix::fs::FileType::Unknown,
    };
    Meta {
        kind,
        mode,
        uid,
        gid,
        len,
        nlink: 1,
        mtime: 0,
        mtime_nsec: 0,
        file_type,
    }
}

impl Simulated {
    /// An empty overlay over the root of `fs`.
    pub fn new(fs: &RootFs) -> Simulated {
        Simulated {
            state: RefCell::default(),
            defs: LoginDefs::read(fs),
        }
    }

    /// What the overlay knows of user `name`: `Some(Some(uid))` added or
    /// changed, `Some(None)` removed, `None` as in the root.
    pub fn user_id(&self, name: &str) -> Option<Option<u32>> {
        let state = self.state.borrow();
        if state.removed_users.contains(name) {
            return Some(None);
        }
        state.accounts.user(name).map(|u| Some(u.uid))
    }

    /// [`Simulated::user_id`] of a group.
    pub fn group_id(&self, name: &str) -> Option<Option<u32>> {
        let state = self.state.borrow();
        if state.removed_groups.contains(name) {
            return Some(None);
        }
        state.accounts.group(name).map(|g| Some(g.gid))
    }

    /// What the overlay says is at `path`: `Some(None)` when the run would
    /// have removed it (or an ancestor, or made an ancestor a non-directory);
    /// `None` when the overlay does not know (read the disk).
    fn entry(&self, path: &str) -> Option<Option<Entry>> {
        let state = self.state.borrow();
        let at = key(path);
        if let Some(e) = state.paths.get(at) {
            return Some(match e {
                Entry::Absent => None,
                present => Some(present.clone()),
            });
        }
        let mut up = parent_of(at);
        while let Some(dir) = up {
            match state.paths.get(dir) {
                Some(Entry::Absent) => return Some(None),
                Some(Entry::Present { meta, .. }) if meta.kind != Kind::Dir => return Some(None),
                _ => {}
            }
            up = parent_of(dir).filter(|p| *p != dir);
        }
        None
    }

    pub fn lstat(&self, fs: &RootFs, path: &str) -> Result<Option<Meta>, FsError> {
        match self.entry(path) {
            Some(Some(Entry::Present { meta, .. })) => Ok(Some(meta)),
            Some(_) => Ok(None),
            None => fs.lstat(path),
        }
    }

    pub fn read_file(&self, fs: &RootFs, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        match self.entry(path) {
            Some(Some(Entry::Present {
                content: Some(c), ..
            })) => Ok(Some(c.to_vec())),
            Some(Some(Entry::Present { meta, .. })) if meta.kind != Kind::File => {
                Err(FsError::NotAFile(path.to_owned()))
            }
            Some(Some(Entry::Present { .. })) => fs.read_file(path),
            Some(_) => Ok(None),
            None => fs.read_file(path),
        }
    }

    pub fn read_link(&self, fs: &RootFs, path: &str) -> Result<Option<String>, FsError> {
        match self.entry(path) {
            Some(Some(Entry::Present { target, .. })) => Ok(target),
            Some(_) => Ok(None),
            None => fs.read_link(path),
        }
    }

    /// The checks a real run makes before it changes `path`
    /// ([`RootFs::check_change`]), against the would-be state of its
    /// directory when the overlay has it: a directory the run would make
    /// world-writable is refused as the real run refuses it.
    pub fn check_change(&self, fs: &RootFs, path: &str) -> Result<(), FsError> {
        if crate::rootfs::path_problem(path).is_some() {
            return Err(FsError::BadPath(path.to_owned()));
        }
        let Some(parent) = parent_of(path) else {
            return Err(FsError::BadPath(path.to_owned()));
        };
        match self.entry(parent) {
            Some(Some(Entry::Present { meta, .. })) => match meta.kind {
                Kind::Dir if meta.mode & 0o002 != 0 => Err(FsError::SharedDirectory {
                    path: path.to_owned(),
                    dir: parent.to_owned(),
                }),
                Kind::Dir => Ok(()),
                Kind::Symlink => Err(FsError::Symlink(parent.to_owned())),
                _ => Err(FsError::NotADirectory(parent.to_owned())),
            },
            // Removed (or never there): the change creates it 0755.
            Some(None | Some(Entry::Absent)) => Ok(()),
            None => fs.check_change(path),
        }
    }

    /// The checks of a change made in place (mode, owner): those of
    /// [`Simulated::check_change`], and a regular file with other hard
    /// links is refused (`RootFs::set_mode`, `RootFs::set_owner`).
    pub fn check_in_place(&self, fs: &RootFs, path: &str) -> Result<(), FsError> {
        self.check_change(fs, path)?;
        match self.lstat(fs, path)? {
            Some(m) if m.kind == Kind::File && m.nlink > 1 => {
                Err(FsError::HardLinked(path.to_owned()))
            }
            Some(m) if m.kind == Kind::Symlink => Err(FsError::Symlink(path.to_owned())),
            _ => Ok(()),
        }
    }

    /// Records a file the run would write.
    pub fn wrote_file(&self, path: &str, bytes: &[u8], mode: u32, owner: (u32, u32)) {
        let meta = meta(Kind::File, mode, owner.0, owner.1, bytes.len() as u64);
        self.put(
            path,
            Entry::Present {
                meta,
                content: Some(Zeroizing::new(bytes.to_vec())),
                target: None,
            },
        );
    }

    /// Records a directory the run would create.
    pub fn made_dir(&self, path: &str, mode: u32, owner: (u32, u32)) {
        let meta = meta(Kind::Dir, mode, owner.0, owner.1, 0);
        self.put(
            path,
            Entry::Present {
                meta,
                content: None,
                target: None,
            },
        );
    }

    /// Records a link the run would make.
    pub fn linked(&self, path: &str, target: &str, owner: (u32, u32)) {
        let meta = meta(Kind::Symlink, 0o777, owner.0, owner.1, target.len() as u64);
        self.put(
            path,
            Entry::Present {
                meta,
                content: None,
                target: Some(target.to_owned()),
            },
        );
    }

    /// Records an object the run would remove (and everything below it).
    pub fn removed(&self, path: &str) {
        let at = key(path).to_owned();
        let below = format!("{at}/");
        let mut state = self.state.borrow_mut();
        state.paths.retain(|p, _| !p.starts_with(&below));
        state.paths.insert(at, Entry::Absent);
    }

    /// Records new metadata of an existing object (`before`: as it is now,
    /// from the disk or the overlay).
    pub fn changed_meta(&self, path: &str, before: Meta, mode: u32, uid: u32, gid: u32) {
        let at = key(path);
        let existing = self.state.borrow().paths.get(at).cloned();
        let entry = match existing {
            Some(Entry::Present {
                content, target, ..
            }) => Entry::Present {
                meta: Meta {
                    mode,
                    uid,
                    gid,
                    ..before
                },
                content,
                target,
            },
            _ => Entry::Present {
                meta: Meta {
                    mode,
                    uid,
                    gid,
                    ..before
                },
                content: None,
                target: None,
            },
        };
        self.put(path, entry);
    }

    fn put(&self, path: &str, entry: Entry) {
        self.state
            .borrow_mut()
            .paths
            .insert(key(path).to_owned(), entry);
    }

    /// Whether the run would write a regular file at one of `paths`.
    pub fn has_file(&self, paths: &[String]) -> bool {
        paths.iter().any(|p| {
            matches!(
                self.entry(p),
                Some(Some(Entry::Present { meta, .. })) if meta.kind == Kind::File
            )
        })
    }

    /// The root's account tables as the run would leave them: the root's
    /// entries, with those the run would add or change in their place.
    pub fn accounts(&self, real: &AccountDb) -> AccountDb {
        let state = self.state.borrow();
        let added = &state.accounts;
        let mut db = real.clone();
        for u in &added.users {
            match db.users.iter_mut().find(|r| r.name == u.name) {
                Some(r) => *r = u.clone(),
                None => db.users.push(u.clone()),
            }
        }
        for g in &added.groups {
            match db.groups.iter_mut().find(|r| r.name == g.name) {
                Some(r) => *r = g.clone(),
                None => db.groups.push(g.clone()),
            }
        }
        db.users.retain(|u| !state.removed_users.contains(&u.name));
        db.groups
            .retain(|g| !state.removed_groups.contains(&g.name));
        db
    }

    /// Records what a repaired `user` or `group` promise would leave in
    /// the account tables, given the tables before it (`real`: the root's)
    /// and the root's `login.defs`.
    pub fn account_changed(&self, real: &AccountDb, inst: &Instance) {
        let defs = &self.defs;
        let db = self.accounts(real);
        let name = inst.promiser.as_str();
        let absent = inst.str("ensure") == Some("absent");
        let system = inst.bool("system") == Some(true);
        let id = |attr: &str| inst.int(attr).and_then(|i| u32::try_from(i).ok());
        let mut added: Vec<Group> = Vec::new();
        let mut users: Vec<User> = Vec::new();
        if inst.kind == "group" {
            if absent {
                self.forget_account(true, name);
                return;
            }
            let mut group = match db.group(name) {
                Some(g) => g.clone(),
                None => Group {
                    name: name.to_owned(),
                    gid: id("gid").unwrap_or_else(|| defs.next_gid(&db, system, None)),
                    members: Vec::new(),
                },
            };
            if let Some(g) = id("gid") {
                group.gid = g;
            }
            if let Some(members) = inst.list("members") {
                // `gpasswd -M` takes only users that exist.
                group.members = members
                    .iter()
                    .filter(|m| db.user(m).is_some())
                    .cloned()
                    .collect();
            }
            added.push(group);
        } else {
            if absent {
                self.forget_account(false, name);
                return;
            }
            let mut user = match db.user(name) {
                Some(u) => u.clone(),
                None => {
                    let uid = id("uid").unwrap_or_else(|| defs.next_uid(&db, system));
                    let named = inst.str("group").and_then(|g| db.group(g)).map(|g| g.gid);
                    let gid = match (id("gid"), named, db.group(name)) {
                        (Some(g), _, _) | (None, Some(g), _) => g,
                        (None, None, Some(own)) => own.gid,
                        (None, None, None) if defs.user_groups => {
                            let gid = defs.next_gid(&db, system, Some(uid));
                            added.push(Group {
                                name: name.to_owned(),
                                gid,
                                members: Vec::new(),
                            });
                            gid
                        }
                        (None, None, None) => defs.default_group,
                    };
                    User {
                        name: name.to_owned(),
                        uid,
                        gid,
                        gecos: String::new(),
                        home: format!("/home/{name}"),
                        shell: String::new(),
                    }
                }
            };
            if let Some(u) = id("uid") {
                user.uid = u;
            }
            if let Some(g) = inst
                .str("group")
                .and_then(|g| db.group(g))
                .map(|g| g.gid)
                .or_else(|| id("gid"))
            {
                user.gid = g;
            }
            for (attr, field) in [
                ("home", &mut user.home),
                ("shell", &mut user.shell),
                ("comment", &mut user.gecos),
            ] {
                if let Some(v) = inst.str(attr) {
                    v.clone_into(field);
                }
            }
            if let Some(groups) = inst.list("groups") {
                // `-G` sets the whole set of supplementary groups.
                for g in &db.groups {
                    let wanted = groups.contains(&g.name);
                    let member = g.members.iter().any(|m| m == name);
                    if wanted != member {
                        let mut g = g.clone();
                        if wanted {
                            g.members.push(name.to_owned());
                        } else {
                            g.members.retain(|m| m != name);
                        }
                        added.push(g);
                    }
                }
            }
            users.push(user);
        }
        let mut state = self.state.borrow_mut();
        for u in users {
            state.removed_users.remove(&u.name);
            state.accounts.users.retain(|r| r.name != u.name);
            state.accounts.users.push(u);
        }
        for g in added {
            state.removed_groups.remove(&g.name);
            state.accounts.groups.retain(|r| r.name != g.name);
            state.accounts.groups.push(g);
        }
    }

    /// A user or group the run would remove.
    fn forget_account(&self, group: bool, name: &str) {
        let mut state = self.state.borrow_mut();
        if group {
            state.accounts.groups.retain(|g| g.name != name);
            state.removed_groups.insert(name.to_owned());
        } else {
            state.accounts.users.retain(|u| u.name != name);
            state.removed_users.insert(name.to_owned());
        }
    }
}

/// The id ranges and defaults of `ROOT/etc/login.defs` that `useradd`
/// and `groupadd` allocate from (their defaults when the file or a key is
/// missing, as shadow 4.13 has them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginDefs {
    uid: (u32, u32),
    gid: (u32, u32),
    sys_uid: (u32, u32),
    sys_gid: (u32, u32),
    /// `USERGROUPS_ENAB`: a new user without a group gets its own.
    user_groups: bool,
    /// The primary group of a new user otherwise (`GROUP` of
    /// `/etc/default/useradd`, 100).
    default_group: u32,
}

impl LoginDefs {
    pub fn read(fs: &RootFs) -> LoginDefs {
        let text = fs
            .read_file_limited("/etc/login.defs", 1 << 20)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        LoginDefs::parse(&text)
    }

    pub fn parse(text: &str) -> LoginDefs {
        let value = |name: &str| {
            text.lines()
                .map(str::trim)
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.split_once(char::is_whitespace))
                .filter(|(k, _)| *k == name)
                .map(|(_, v)| v.trim())
                .next_back()
        };
        let num =
            |name: &str, default: u32| value(name).and_then(|v| v.parse().ok()).unwrap_or(default);
        let uid_min = num("UID_MIN", 1000);
        let gid_min = num("GID_MIN", 1000);
        LoginDefs {
            uid: (uid_min, num("UID_MAX", 60000)),
            gid: (gid_min, num("GID_MAX", 60000)),
            sys_uid: (
                num("SYS_UID_MIN", 101),
                num("SYS_UID_MAX", uid_min.saturating_sub(1)),
            ),
            sys_gid: (
                num("SYS_GID_MIN", 101),
                num("SYS_GID_MAX", gid_min.saturating_sub(1)),
            ),
            user_groups: value("USERGROUPS_ENAB").is_some_and(|v| v.eq_ignore_ascii_case("yes")),
            default_group: 100,
        }
    }

    fn next_uid(&self, db: &AccountDb, system: bool) -> u32 {
        let used: Vec<u32> = db.users.iter().map(|u| u.uid).collect();
        next_id(
            &used,
            if system { self.sys_uid } else { self.uid },
            system,
            None,
        )
    }

    fn next_gid(&self, db: &AccountDb, system: bool, preferred: Option<u32>) -> u32 {
        let used: Vec<u32> = db.groups.iter().map(|g| g.gid).collect();
        let range = if system { self.sys_gid } else { self.gid };
        next_id(&used, range, system, preferred)
    }
}

/// How shadow allocates an id in `range`: a free `preferred` one first;
/// a system id is the highest free one; any other is one above the
/// highest in use (the lowest free one when that is past the range).
fn next_id(used: &[u32], (min, max): (u32, u32), system: bool, preferred: Option<u32>) -> u32 {
    if let Some(p) = preferred.filter(|p| !used.contains(p) && (min..=max).contains(p)) {
        return p;
    }
    let free = |id: &u32| !used.contains(id);
    if system {
        return (min..=max).rev().find(free).unwrap_or(max);
    }
    let highest = used.iter().filter(|u| (min..=max).contains(*u)).max();
    match highest {
        None => min,
        Some(h) if *h < max => h.saturating_add(1),
        Some(_) => (min..=max).find(free).unwrap_or(max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ids `useradd -R` and `groupadd -R` of Debian 12 gave in a
    /// sandbox root (tests/dry_run.rs compares with the real tools).
    #[test]
    fn ids_follow_the_shadow_allocation() {
        let defs = LoginDefs::parse("UID_MIN 1000\nUSERGROUPS_ENAB yes\n");
        let used = [0, 100, 1000, 1001];
        assert_eq!(next_id(&used, defs.uid, false, None), 1002);
        assert_eq!(next_id(&used, defs.sys_uid, true, None), 999);
        assert_eq!(next_id(&[999], defs.sys_uid, true, None), 998);
        assert_eq!(next_id(&used, defs.gid, false, Some(1002)), 1002);
        assert_eq!(next_id(&used, defs.gid, false, Some(1000)), 1002);
        assert_eq!(next_id(&[0], defs.uid, false, None), 1000);
        assert!(defs.user_groups);
        assert!(!LoginDefs::parse("").user_groups);
    }

    fn inst(
        kind: &'static str,
        name: &str,
        attrs: Vec<(&'static str, crate::instance::Value)>,
    ) -> Instance {
        Instance {
            index: 0,
            kind,
            promiser: name.to_owned(),
            attrs,
        }
    }

    /// Accounts a run would add get the ids `useradd -R` gave in a sandbox
    /// with the same tables (Debian 12): the next uid of the range, a
    /// user's own group with the user's id, system ids from the top; a
    /// removed account is gone until a later promise adds it again.
    #[test]
    fn accounts_the_run_would_add_have_the_ids_useradd_gives() {
        use crate::instance::Value;
        let dir = tempfile::tempdir().unwrap();
        let etc = dir.path().join("etc");
        std::fs::create_dir(&etc).unwrap();
        std::fs::write(etc.join("passwd"), "root:x:0:0::/root:/bin/sh\n").unwrap();
        std::fs::write(etc.join("group"), "root:x:0:\nusers:x:100:\n").unwrap();
        std::fs::write(etc.join("login.defs"), "USERGROUPS_ENAB yes\n").unwrap();
        let fs = RootFs::open(dir.path()).unwrap();
        let real = AccountDb::read(&fs).unwrap();
        let sim = Simulated::new(&fs);
        sim.account_changed(&real, &inst("group", "appgrp", vec![]));
        sim.account_changed(
            &real,
            &inst("user", "app", vec![("group", Value::Str("appgrp".into()))]),
        );
        sim.account_changed(
            &real,
            &inst(
                "user",
                "worker",
                vec![("groups", Value::List(vec!["appgrp".into()]))],
            ),
        );
        sim.account_changed(
            &real,
            &inst("user", "daemon1", vec![("system", Value::Bool(true))]),
        );
        assert_eq!(sim.group_id("appgrp"), Some(Some(1000)));
        assert_eq!(sim.user_id("app"), Some(Some(1000)));
        assert_eq!(sim.user_id("worker"), Some(Some(1001)));
        assert_eq!(sim.group_id("worker"), Some(Some(1001)));
        assert_eq!(sim.user_id("daemon1"), Some(Some(999)));
        assert_eq!(sim.group_id("daemon1"), Some(Some(999)));
        let db = sim.accounts(&real);
        assert_eq!(db.user("app").unwrap().gid, 1000);
        assert_eq!(
            db.group("appgrp").unwrap().members,
            vec!["worker".to_owned()]
        );
        assert_eq!(sim.user_id("root"), None, "the root's own: read the disk");

        let gone = inst(
            "user",
            "worker",
            vec![("ensure", Value::Str("absent".into()))],
        );
        sim.account_changed(&real, &gone);
        assert_eq!(sim.user_id("worker"), Some(None));
        assert!(sim.accounts(&real).user("worker").is_none());
        sim.account_changed(&real, &inst("user", "worker", vec![]));
        assert!(sim.user_id("worker").is_some_and(|id| id.is_some()));
    }

    /// What the overlay says is there shadows the disk: a file below a
    /// directory the run would remove is gone; below one it would create,
    /// a change is checked against the would-be mode.
    #[test]
    fn the_overlay_shadows_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        std::fs::write(dir.path().join("etc/a"), "disk").unwrap();
        let fs = RootFs::open(dir.path()).unwrap();
        let sim = Simulated::new(&fs);
        assert_eq!(sim.read_file(&fs, "/etc/a").unwrap().unwrap(), b"disk");
        sim.removed("/etc");
        assert_eq!(sim.read_file(&fs, "/etc/a").unwrap(), None);
        assert_eq!(sim.lstat(&fs, "/etc/a").unwrap(), None);
        sim.made_dir("/srv/drop", 0o1777, (0, 0));
        assert!(matches!(
            sim.check_change(&fs, "/srv/drop/f"),
            Err(FsError::SharedDirectory { .. })
        ));
        sim.made_dir("/srv/ok", 0o755, (0, 0));
        sim.wrote_file("/srv/ok/f", b"new", 0o640, (5, 6));
        let m = sim.lstat(&fs, "/srv/ok/f").unwrap().unwrap();
        assert_eq!((m.kind, m.mode, m.uid, m.gid), (Kind::File, 0o640, 5, 6));
        assert_eq!(sim.read_file(&fs, "/srv/ok/f").unwrap().unwrap(), b"new");
        assert!(!dir.path().join("srv").exists(), "the disk was changed");
    }
}
