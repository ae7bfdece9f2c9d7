//! `user` and `group` promises: state read from `ROOT/etc/passwd` and
//! `ROOT/etc/group` (through [`RootFs`]), changes made with the shadow
//! suite (`useradd`, `usermod`, `userdel`, `groupadd`, `groupmod`,
//! `groupdel`), which keep `shadow`/`gshadow` and their locks consistent
//! where a hand edit would not. Under `--root`, each tool gets `-R ROOT`
//! (it chroots there; the root needs only its `etc` files).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use super::passwd::AccountDb;
use super::process::Cmd;
use super::{applied, check_name, check_path, perform, sandbox, Step};
use crate::rootfs::RootFs;
use crate::run::operators::Applied;
use crate::run::resolve::Instance;

/// The deadline of one account tool.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// A user as `/etc/passwd` and `/etc/group` describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserEntry {
    pub uid: u32,
    pub home: String,
    pub shell: String,
    /// Supplementary groups: every group that lists the user as a member.
    pub groups: BTreeSet<String>,
}

/// The account tables of a root ([`AccountDb`], the one parser of
/// `/etc/passwd` and `/etc/group`), as the backends ask them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tables {
    db: AccountDb,
}

impl Tables {
    pub fn read(fs: &RootFs) -> Result<Tables, String> {
        AccountDb::read(fs)
            .map(|db| Tables { db })
            .map_err(|e| e.to_string())
    }

    #[cfg(test)]
    fn from_text(passwd: &str, group: &str) -> Tables {
        Tables {
            db: AccountDb::parse(passwd, group),
        }
    }

    pub fn user(&self, name: &str) -> Option<UserEntry> {
        let user = self.db.user(name)?;
        Some(UserEntry {
            uid: user.uid,
            home: user.home.clone(),
            shell: user.shell.clone(),
            groups: self.db.groups_of(name),
        })
    }

    /// A group's id, if the group exists.
    pub fn group(&self, name: &str) -> Option<u32> {
        self.db.group(name).map(|g| g.gid)
    }
}

/// `useradd` & co. with `-R ROOT` when the root is not `/`.
fn tool(program: &str, root: &Path) -> Vec<String> {
    let mut argv = vec![program.to_owned()];
    if let Some(r) = sandbox(root) {
        argv.push("-R".to_owned());
        argv.push(r.display().to_string());
    }
    argv
}

fn finish(mut argv: Vec<String>, name: &str) -> Cmd {
    argv.push("--".to_owned());
    argv.push(name.to_owned());
    Cmd::new(&argv, TIMEOUT)
}

fn id(inst: &Instance, attr: &str) -> Result<Option<u32>, Applied> {
    match inst.int(attr) {
        None => Ok(None),
        Some(i) => u32::try_from(i)
            .ok()
            .filter(|i| *i != u32::MAX)
            .map(Some)
            .ok_or_else(|| Applied::failed(format!("`{attr} = {i}` is not a valid id"))),
    }
}

/// What to run to converge a user, from its current entry.
pub fn user_steps(
    inst: &Instance,
    current: Option<&UserEntry>,
    root: &Path,
) -> Result<Vec<Step>, Applied> {
    let name = inst.promiser.as_str();
    let uid = id(inst, "uid")?;
    let shell = inst.str("shell");
    let home = inst.str("home");
    for (attr, value) in [("shell", shell), ("home", home)] {
        if let Some(v) = value {
            check_path(attr, v)?;
        }
    }
    let groups: Option<BTreeSet<String>> = inst.list("groups").map(|g| g.iter().cloned().collect());
    for g in groups.iter().flatten() {
        check_name("group", g)?;
    }
    let joined = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(",");
    if inst.str("ensure") == Some("absent") {
        return Ok(removal(current.is_some(), "userdel", root, name));
    }
    let Some(cur) = current else {
        let mut argv = tool("useradd", root);
        let mut after = Vec::new();
        if let Some(u) = uid {
            argv.extend(["-u".to_owned(), u.to_string()]);
            after.push(format!("uid {u}"));
        }
        for (flag, attr, value) in [("-s", "shell", shell), ("-d", "home", home)] {
            if let Some(v) = value {
                argv.extend([flag.to_owned(), v.to_owned()]);
                after.push(format!("{attr} {v}"));
            }
        }
        if let Some(g) = groups.as_ref().filter(|g| !g.is_empty()) {
            argv.extend(["-G".to_owned(), joined(g)]);
            after.push(format!("groups {}", joined(g)));
        }
        let after = if after.is_empty() {
            "present".to_owned()
        } else {
            after.join(", ")
        };
        return Ok(vec![Step::new(
            "created",
            "absent",
            after,
            finish(argv, name),
        )]);
    };
    let mut argv = tool("usermod", root);
    let mut steps = Vec::new();
    let mut what = Vec::new();
    if let Some(u) = uid.filter(|u| *u != cur.uid) {
        argv.extend(["-u".to_owned(), u.to_string()]);
        what.push(("uid", cur.uid.to_string(), u.to_string()));
    }
    if let Some(s) = shell.filter(|s| *s != cur.shell) {
        argv.extend(["-s".to_owned(), s.to_owned()]);
        what.push(("shell", cur.shell.clone(), s.to_owned()));
    }
    if let Some(h) = home.filter(|h| *h != cur.home) {
        argv.extend(["-d".to_owned(), h.to_owned()]);
        what.push(("home", cur.home.clone(), h.to_owned()));
    }
    if let Some(g) = groups.as_ref().filter(|g| **g != cur.groups) {
        // `-G` without `-a` replaces the whole set: the set converges.
        argv.extend(["-G".to_owned(), joined(g)]);
        what.push(("groups", joined(&cur.groups), joined(g)));
    }
    if !what.is_empty() {
        let cmd = finish(argv, name);
        let last = what.len().saturating_sub(1);
        for (i, (attr, before, after)) in what.into_iter().enumerate() {
            // One usermod makes every change; it is attached to the last.
            let mut step = Step::new(attr, before, after, cmd.clone());
            if i != last {
                step.cmd = None;
            }
            steps.push(step);
        }
    }
    Ok(steps)
}

/// What to run to converge a group, from its current id.
pub fn group_steps(
    inst: &Instance,
    current: Option<u32>,
    root: &Path,
) -> Result<Vec<Step>, Applied> {
    let name = inst.promiser.as_str();
    let gid = id(inst, "gid")?;
    if inst.str("ensure") == Some("absent") {
        return Ok(removal(current.is_some(), "groupdel", root, name));
    }
    Ok(match (current, gid) {
        (None, _) => {
            let mut argv = tool("groupadd", root);
            if let Some(g) = gid {
                argv.extend(["-g".to_owned(), g.to_string()]);
            }
            let after = gid.map_or("present".to_owned(), |g| format!("gid {g}"));
            vec![Step::new("created", "absent", after, finish(argv, name))]
        }
        (Some(cur), Some(want)) if cur != want => {
            let mut argv = tool("groupmod", root);
            argv.extend(["-g".to_owned(), want.to_string()]);
            vec![Step::new(
                "gid",
                cur.to_string(),
                want.to_string(),
                finish(argv, name),
            )]
        }
        _ => Vec::new(),
    })
}

/// Converges a `user` promise.
pub fn user(fs: &RootFs, dry_run: bool, inst: &Instance) -> Applied {
    converge(fs, dry_run, |tables| {
        let current = tables.user(&inst.promiser);
        user_steps(inst, current.as_ref(), fs.path())
    })
}

/// Converges a `group` promise.
pub fn group(fs: &RootFs, dry_run: bool, inst: &Instance) -> Applied {
    converge(fs, dry_run, |tables| {
        group_steps(inst, tables.group(&inst.promiser), fs.path())
    })
}

/// Plans from the tables, runs, and plans again from the re-read tables:
/// after a real change there must be nothing left to do.
fn converge(
    fs: &RootFs,
    dry_run: bool,
    plan: impl Fn(&Tables) -> Result<Vec<Step>, Applied>,
) -> Applied {
    let steps = match Tables::read(fs)
        .map_err(Applied::failed)
        .and_then(|t| plan(&t))
    {
        Ok(s) => s,
        Err(failed) => return failed,
    };
    let (changes, log) = match perform(dry_run, &steps) {
        Ok(done) => done,
        Err(failed) => return failed,
    };
    if !dry_run && !steps.is_empty() {
        match Tables::read(fs)
            .map_err(Applied::failed)
            .and_then(|t| plan(&t))
        {
            Ok(left) if left.is_empty() => {}
            Ok(left) => {
                let what: Vec<String> = left.iter().map(|s| s.change.what.clone()).collect();
                return Applied {
                    outcome: crate::run::operators::Outcome::Failed(format!(
                        "the account still differs after the change ({})",
                        what.join(", ")
                    )),
                    changes,
                    output: Some(log),
                };
            }
            Err(failed) => return failed,
        }
    }
    applied(changes, log)
}

/// `ensure = absent` for an account: one `userdel`/`groupdel` step while it
/// exists, nothing once it is gone.
fn removal(exists: bool, command: &str, root: &Path, name: &str) -> Vec<Step> {
    if !exists {
        return Vec::new();
    }
    vec![Step::new(
        "removed",
        "present",
        "absent",
        finish(tool(command, root), name),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::resolve::Value;

    fn inst(kind: &'static str, name: &str, attrs: Vec<(&'static str, Value)>) -> Instance {
        Instance {
            index: 0,
            kind,
            promiser: name.to_owned(),
            attrs,
        }
    }

    fn argv(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .filter_map(|s| s.cmd.as_ref().map(Cmd::shown))
            .collect()
    }

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\nbob:x:1001:100::/home/bob:/bin/sh\n";
    const GROUP: &str = "root:x:0:\nweb:x:1500:alice,bob\ndb:x:1501:bob\nops:x:1502:\n";

    #[test]
    fn tables_give_ids_and_supplementary_groups() {
        let t = Tables::from_text(PASSWD, GROUP);
        let bob = t.user("bob").unwrap();
        assert_eq!(bob.uid, 1001);
        assert_eq!(bob.shell, "/bin/sh");
        assert_eq!(
            bob.groups,
            ["db", "web"].iter().map(|s| s.to_string()).collect()
        );
        assert_eq!(t.user("bo"), None);
        assert_eq!(t.group("ops"), Some(1502));
        assert_eq!(t.group("op"), None);
    }

    #[test]
    fn user_commands_are_argv_with_root_and_double_dash() {
        let t = Tables::from_text(PASSWD, GROUP);
        let root = Path::new("/tmp/r");
        let new = inst(
            "user",
            "carol",
            vec![
                ("uid", Value::Int(1200)),
                ("shell", Value::Str("/bin/bash".into())),
                ("groups", Value::List(vec!["web".into(), "db".into()])),
            ],
        );
        assert_eq!(
            argv(&user_steps(&new, t.user("carol").as_ref(), root).unwrap()),
            ["useradd -R /tmp/r -u 1200 -s /bin/bash -G db,web -- carol"]
        );
        // The set of groups converges: ops added, web dropped, in one usermod.
        let bob = inst(
            "user",
            "bob",
            vec![
                ("shell", Value::Str("/bin/sh".into())),
                ("groups", Value::List(vec!["db".into(), "ops".into()])),
            ],
        );
        let steps = user_steps(&bob, t.user("bob").as_ref(), Path::new("/")).unwrap();
        assert_eq!(argv(&steps), ["usermod -G db,ops -- bob"]);
        assert_eq!(steps.len(), 1);
        // Same set in another order: nothing to do.
        let same = inst(
            "user",
            "bob",
            vec![("groups", Value::List(vec!["web".into(), "db".into()]))],
        );
        assert!(user_steps(&same, t.user("bob").as_ref(), root)
            .unwrap()
            .is_empty());
        let gone = inst("user", "bob", vec![("ensure", Value::Str("absent".into()))]);
        assert_eq!(
            argv(&user_steps(&gone, t.user("bob").as_ref(), root).unwrap()),
            ["userdel -R /tmp/r -- bob"]
        );
    }

    #[test]
    fn bad_values_never_reach_a_tool() {
        let t = Tables::from_text(PASSWD, GROUP);
        for attrs in [
            vec![("groups", Value::List(vec!["-oX".into()]))],
            vec![("groups", Value::List(vec!["a,b".into()]))],
            vec![("shell", Value::Str("/bin/sh:0:0".into()))],
            vec![("home", Value::Str("relative".into()))],
            vec![("uid", Value::Int(-1))],
        ] {
            let i = inst("user", "bob", attrs.clone());
            assert!(
                user_steps(&i, t.user("bob").as_ref(), Path::new("/")).is_err(),
                "{attrs:?}"
            );
        }
    }

    #[test]
    fn group_commands() {
        let root = Path::new("/tmp/r");
        let want = inst("group", "ops", vec![("gid", Value::Int(1600))]);
        assert_eq!(
            argv(&group_steps(&want, Some(1502), root).unwrap()),
            ["groupmod -R /tmp/r -g 1600 -- ops"]
        );
        assert_eq!(
            argv(&group_steps(&want, None, root).unwrap()),
            ["groupadd -R /tmp/r -g 1600 -- ops"]
        );
        assert!(group_steps(&want, Some(1600), root).unwrap().is_empty());
        let gone = inst(
            "group",
            "ops",
            vec![("ensure", Value::Str("absent".into()))],
        );
        assert_eq!(
            argv(&group_steps(&gone, Some(1), Path::new("/")).unwrap()),
            ["groupdel -- ops"]
        );
        assert!(group_steps(&gone, None, root).unwrap().is_empty());
    }
}
