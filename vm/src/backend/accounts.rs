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
use crate::instance::{Instance, Value};
use crate::outcome::{Applied, Outcome};
use crate::rootfs::RootFs;
use crate::schema::{hides_value, HIDDEN_VALUE};

/// The deadline of one account tool.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// A user as `/etc/passwd`, `/etc/group` (and `/etc/shadow`) describe it.
#[derive(Clone, PartialEq, Eq)]
pub struct UserEntry {
    pub uid: u32,
    /// The primary group's id.
    pub gid: u32,
    pub gecos: String,
    pub home: String,
    pub shell: String,
    /// Supplementary groups: every group that lists the user as a member.
    pub groups: BTreeSet<String>,
    /// The hash in `/etc/shadow`, read only when the promise manages the
    /// password (`None`: not read, or no shadow entry).
    pub password: Option<String>,
}

impl std::fmt::Debug for UserEntry {
    /// Everything but the password hash, which no output shows.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserEntry")
            .field("uid", &self.uid)
            .field("gid", &self.gid)
            .field("gecos", &self.gecos)
            .field("home", &self.home)
            .field("shell", &self.shell)
            .field("groups", &self.groups)
            .field("password", &self.password.as_ref().map(|_| HIDDEN_VALUE))
            .finish()
    }
}

/// A group as `/etc/group` describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    pub gid: u32,
    /// Its supplementary members.
    pub members: BTreeSet<String>,
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
            gid: user.gid,
            gecos: user.gecos.clone(),
            home: user.home.clone(),
            shell: user.shell.clone(),
            groups: self.db.groups_of(name),
            password: None,
        })
    }

    /// A group, if it exists.
    pub fn group(&self, name: &str) -> Option<GroupEntry> {
        self.db.group(name).map(|g| GroupEntry {
            gid: g.gid,
            members: g.members.iter().cloned().collect(),
        })
    }

    /// How a primary group id is shown: `name (gid)`, or the bare id when
    /// no group has it.
    fn group_label(&self, gid: u32) -> String {
        match self.db.groups.iter().find(|g| g.gid == gid) {
            Some(g) => format!("{} ({gid})", g.name),
            None => gid.to_string(),
        }
    }
}

/// `useradd` & co. with `-R ROOT` when the root is not `/` (`gpasswd`
/// spells it `-Q`).
fn tool(program: &str, root: &Path) -> Vec<String> {
    let mut argv = vec![program.to_owned()];
    if let Some(r) = sandbox(root) {
        let flag = if program == "gpasswd" { "-Q" } else { "-R" };
        argv.push(flag.to_owned());
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

/// A value that goes into one field of `/etc/passwd` or `/etc/shadow`: no
/// `:` (the field separator) and no control character (a newline would
/// start a forged entry).
fn check_field(attr: &str, value: &str) -> Result<(), Applied> {
    if value.chars().any(|c| c == ':' || c.is_control()) {
        let shown = if hides_value(attr) {
            HIDDEN_VALUE.to_owned()
        } else {
            value.escape_debug().to_string()
        };
        return Err(Applied::failed(format!(
            "`{attr} = {shown}` is not usable: it contains `:` or a control character, which would corrupt the account files"
        )));
    }
    Ok(())
}

/// The password hash a `user` promise asks for, checked: one field of
/// `/etc/shadow`, and not empty (an empty hash lets anyone log in without
/// a password; `!` locks the account).
fn wanted_password(inst: &Instance) -> Result<Option<&str>, Applied> {
    // A `secret` hash (issue 20) is checked and used the same way; it
    // reaches `chpasswd` only on its standard input.
    let hash = match inst.get("password") {
        Some(Value::Str(s)) => s.as_ref(),
        Some(Value::Secret(s)) => s.expose(),
        _ => return Ok(None),
    };
    check_field("password", hash)?;
    if hash.is_empty() {
        return Err(Applied::failed(
            "`password = \"\"` would let anyone log in without a password; give a crypt hash (`mkpasswd -m yescrypt`), or \"!\" to lock the account",
        ));
    }
    if hash.chars().any(char::is_whitespace) {
        return Err(Applied::failed(format!(
            "`password = {HIDDEN_VALUE}` is not a crypt hash: it contains white space"
        )));
    }
    Ok(Some(hash))
}

/// `chpasswd -e [-R ROOT]` fed `name:hash` on its standard input: the hash
/// never appears in an argv (every local user can read
/// `/proc/PID/cmdline`; usermod(8) warns against `-p` for this reason) nor
/// in the command shown in reports.
fn set_password(root: &Path, name: &str, hash: &str) -> Cmd {
    let mut argv = tool("chpasswd", root);
    argv.push("-e".to_owned());
    Cmd::new(&argv, TIMEOUT).stdin(format!("{name}:{hash}\n").into_bytes())
}

fn password_step(root: &Path, name: &str, hash: &str, before: &str) -> Step {
    Step::new(
        "password",
        before,
        HIDDEN_VALUE,
        set_password(root, name, hash),
    )
}

/// The primary group a `user` promise asks for: by id, or by name.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Primary<'i> {
    Id(u32),
    Name(&'i str),
}

impl Primary<'_> {
    /// The word `useradd -g`/`usermod -g` takes.
    fn word(&self) -> String {
        match self {
            Primary::Id(g) => g.to_string(),
            Primary::Name(n) => (*n).to_owned(),
        }
    }

    /// Whether the user's current primary group id is this group
    /// (a named group that does not exist yet is not).
    fn is(&self, gid: u32, tables: &Tables) -> bool {
        match self {
            Primary::Id(g) => *g == gid,
            Primary::Name(n) => tables.group(n).is_some_and(|g| g.gid == gid),
        }
    }
}

/// What to run to converge a user, from its current entry (with its
/// password hash read when the promise manages it).
pub fn user_steps(
    inst: &Instance,
    current: Option<&UserEntry>,
    tables: &Tables,
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
    let primary = match (id(inst, "gid")?, inst.str("group")) {
        (Some(_), Some(_)) => {
            return Err(Applied::failed(
                "`gid` and `group` both name the primary group; keep one",
            ))
        }
        (Some(g), None) => Some(Primary::Id(g)),
        (None, Some(g)) => {
            check_name("group", g)?;
            Some(Primary::Name(g))
        }
        (None, None) => None,
    };
    let comment = inst.str("comment");
    if let Some(c) = comment {
        check_field("comment", c)?;
    }
    let password = wanted_password(inst)?;
    let joined = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(",");
    if inst.str("ensure") == Some("absent") {
        return Ok(removal(current.is_some(), "userdel", root, name));
    }
    let Some(cur) = current else {
        let mut argv = tool("useradd", root);
        let mut after = Vec::new();
        if inst.bool("system") == Some(true) {
            argv.push("--system".to_owned());
            after.push("system account".to_owned());
        }
        if let Some(u) = uid {
            argv.extend(["-u".to_owned(), u.to_string()]);
            after.push(format!("uid {u}"));
        }
        // Without a primary group, Debian's useradd (USERGROUPS_ENAB)
        // creates one named like the user and fails when it exists ("group
        // app exists - ... use -g"): that existing group is then the
        // primary group, as useradd itself suggests.
        let primary = primary
            .clone()
            .or_else(|| tables.group(name).is_some().then_some(Primary::Name(name)));
        if let Some(p) = &primary {
            argv.extend(["-g".to_owned(), p.word()]);
            after.push(format!("group {}", p.word()));
        }
        for (flag, attr, value) in [
            ("-s", "shell", shell),
            ("-d", "home", home),
            ("-c", "comment", comment),
        ] {
            if let Some(v) = value {
                argv.extend([flag.to_owned(), v.to_owned()]);
                after.push(format!("{attr} {v:?}"));
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
        let mut steps = vec![Step::new("created", "absent", after, finish(argv, name))];
        if let Some(hash) = password {
            steps.push(password_step(root, name, hash, "none"));
        }
        return Ok(steps);
    };
    let mut argv = tool("usermod", root);
    let mut steps = Vec::new();
    let mut what = Vec::new();
    if let Some(u) = uid.filter(|u| *u != cur.uid) {
        argv.extend(["-u".to_owned(), u.to_string()]);
        what.push(("uid", cur.uid.to_string(), u.to_string()));
    }
    if let Some(p) = primary.as_ref().filter(|p| !p.is(cur.gid, tables)) {
        argv.extend(["-g".to_owned(), p.word()]);
        what.push(("group", tables.group_label(cur.gid), p.word()));
    }
    if let Some(s) = shell.filter(|s| *s != cur.shell) {
        argv.extend(["-s".to_owned(), s.to_owned()]);
        what.push(("shell", cur.shell.clone(), s.to_owned()));
    }
    if let Some(h) = home.filter(|h| *h != cur.home) {
        argv.extend(["-d".to_owned(), h.to_owned()]);
        what.push(("home", cur.home.clone(), h.to_owned()));
    }
    if let Some(c) = comment.filter(|c| *c != cur.gecos) {
        argv.extend(["-c".to_owned(), c.to_owned()]);
        what.push(("comment", format!("{:?}", cur.gecos), format!("{c:?}")));
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
    if let Some(hash) = password.filter(|h| cur.password.as_deref() != Some(*h)) {
        let before = if cur.password.is_some() {
            HIDDEN_VALUE
        } else {
            "none"
        };
        steps.push(password_step(root, name, hash, before));
    }
    Ok(steps)
}

/// What to run to converge a group, from its current entry. `is_user`
/// says whether a member exists yet (`gpasswd -M` refuses unknown users).
///
/// A wanted member that is not a user yet is left out of the list for now,
/// with a note: a user that names this group in its `groups` is applied
/// after it (it needs the group), and the VM's next pass, which follows
/// any repair, sets the whole list. When there is nothing else to do,
/// [`group`] fails the promise naming them ([`not_yet_users`]): a member
/// that never appears is an error, never a silent "kept".
pub fn group_steps(
    inst: &Instance,
    is_user: &dyn Fn(&str) -> bool,
    current: Option<&GroupEntry>,
    root: &Path,
) -> Result<Vec<Step>, Applied> {
    let name = inst.promiser.as_str();
    let gid = id(inst, "gid")?;
    let members: Option<BTreeSet<String>> =
        inst.list("members").map(|m| m.iter().cloned().collect());
    for m in members.iter().flatten() {
        check_name("user", m)?;
    }
    let joined = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(",");
    if inst.str("ensure") == Some("absent") {
        return Ok(removal(current.is_some(), "groupdel", root, name));
    }
    // `gpasswd -M` sets the whole member list, in /etc/group and
    // /etc/gshadow (Debian 12's `groupmod -U` leaves gshadow behind).
    let missing: Vec<String> = members
        .iter()
        .flatten()
        .filter(|m| !is_user(m))
        .cloned()
        .collect();
    let members: Option<BTreeSet<String>> =
        members.map(|m| m.into_iter().filter(|m| is_user(m)).collect());
    let note = if missing.is_empty() {
        String::new()
    } else {
        format!(" (not yet users: {})", missing.join(", "))
    };
    let set_members = |want: &BTreeSet<String>, before: String| {
        let mut argv = tool("gpasswd", root);
        argv.extend(["-M".to_owned(), joined(want)]);
        Step::new(
            "members",
            before,
            format!("{}{note}", joined(want)),
            finish(argv, name),
        )
    };
    let mut steps = Vec::new();
    match current {
        None => {
            let mut argv = tool("groupadd", root);
            let mut after = Vec::new();
            if inst.bool("system") == Some(true) {
                argv.push("--system".to_owned());
                after.push("system group".to_owned());
            }
            if let Some(g) = gid {
                argv.extend(["-g".to_owned(), g.to_string()]);
                after.push(format!("gid {g}"));
            }
            let after = if after.is_empty() {
                "present".to_owned()
            } else {
                after.join(", ")
            };
            steps.push(Step::new("created", "absent", after, finish(argv, name)));
            if let Some(m) = members.as_ref().filter(|m| !m.is_empty()) {
                steps.push(set_members(m, String::new()));
            }
        }
        Some(cur) => {
            if let Some(want) = gid.filter(|g| *g != cur.gid) {
                let mut argv = tool("groupmod", root);
                argv.extend(["-g".to_owned(), want.to_string()]);
                steps.push(Step::new(
                    "gid",
                    cur.gid.to_string(),
                    want.to_string(),
                    finish(argv, name),
                ));
            }
            if let Some(m) = members.as_ref().filter(|m| **m != cur.members) {
                steps.push(set_members(m, joined(&cur.members)));
            }
        }
    }
    Ok(steps)
}

/// Converges a `user` promise. `simulated`: in a dry run, the account
/// tables as the run would have left them so far (a dry run's simulated state, issue 21),
/// planned from instead of the root's.
pub fn user(fs: &RootFs, dry_run: bool, simulated: Option<&AccountDb>, inst: &Instance) -> Applied {
    converge(fs, dry_run, simulated, |tables| {
        let mut current = tables.user(&inst.promiser);
        if let Some(cur) = current.as_mut().filter(|_| inst.get("password").is_some()) {
            cur.password = AccountDb::password_hash(fs, &inst.promiser)
                .map_err(|e| Applied::failed(e.to_string()))?;
        }
        user_steps(inst, current.as_ref(), tables, fs.path())
    })
}

/// Converges a `group` promise (`simulated`: see [`user`]).
pub fn group(
    fs: &RootFs,
    dry_run: bool,
    simulated: Option<&AccountDb>,
    inst: &Instance,
) -> Applied {
    let applied = converge(fs, dry_run, simulated, |tables| {
        let is_user = |name: &str| tables.user(name).is_some();
        group_steps(
            inst,
            &is_user,
            tables.group(&inst.promiser).as_ref(),
            fs.path(),
        )
    });
    if applied.outcome != Outcome::Kept {
        return applied;
    }
    match read_tables(fs, simulated).map(|t| not_yet_users(inst, &t)) {
        Ok(Some(why)) | Err(why) => Applied::failed(why),
        Ok(None) => applied,
    }
}

/// Why a group whose state is otherwise kept still fails: members it
/// names that are no users.
fn not_yet_users(inst: &Instance, tables: &Tables) -> Option<String> {
    let missing: Vec<&str> = inst
        .list("members")?
        .iter()
        .filter(|m| tables.user(m).is_none())
        .map(String::as_str)
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "`members` names {} of group `{}`, which {} no user (`gpasswd -M` takes only existing users); promise the user, or remove it from `members`",
            missing.join(", "),
            inst.promiser,
            if missing.len() == 1 { "is" } else { "are" }
        )
    })
}

/// Plans from the tables, runs, and plans again from the re-read tables:
/// after a real change there must be nothing left to do.
fn converge(
    fs: &RootFs,
    dry_run: bool,
    simulated: Option<&AccountDb>,
    plan: impl Fn(&Tables) -> Result<Vec<Step>, Applied>,
) -> Applied {
    let steps = match read_tables(fs, simulated)
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
                    outcome: Outcome::Failed(format!(
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

/// The root's tables, or in a dry run the simulated ones.
fn read_tables(fs: &RootFs, simulated: Option<&AccountDb>) -> Result<Tables, String> {
    match simulated {
        Some(db) => Ok(Tables { db: db.clone() }),
        None => Tables::read(fs),
    }
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
        assert_eq!(t.group("ops").map(|g| g.gid), Some(1502));
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
            argv(&user_steps(&new, t.user("carol").as_ref(), &t, root).unwrap()),
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
        let steps = user_steps(&bob, t.user("bob").as_ref(), &t, Path::new("/")).unwrap();
        assert_eq!(argv(&steps), ["usermod -G db,ops -- bob"]);
        assert_eq!(steps.len(), 1);
        // Same set in another order: nothing to do.
        let same = inst(
            "user",
            "bob",
            vec![("groups", Value::List(vec!["web".into(), "db".into()]))],
        );
        assert!(user_steps(&same, t.user("bob").as_ref(), &t, root)
            .unwrap()
            .is_empty());
        let gone = inst("user", "bob", vec![("ensure", Value::Str("absent".into()))]);
        assert_eq!(
            argv(&user_steps(&gone, t.user("bob").as_ref(), &t, root).unwrap()),
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
                user_steps(&i, t.user("bob").as_ref(), &t, Path::new("/")).is_err(),
                "{attrs:?}"
            );
        }
    }

    /// Every name is a user.
    const ALL: &dyn Fn(&str) -> bool = &|_| true;

    fn group(gid: u32, members: &[&str]) -> GroupEntry {
        GroupEntry {
            gid,
            members: members.iter().map(|m| m.to_string()).collect(),
        }
    }

    #[test]
    fn group_commands() {
        let root = Path::new("/tmp/r");
        let want = inst("group", "ops", vec![("gid", Value::Int(1600))]);
        assert_eq!(
            argv(&group_steps(&want, ALL, Some(&group(1502, &[])), root).unwrap()),
            ["groupmod -R /tmp/r -g 1600 -- ops"]
        );
        assert_eq!(
            argv(&group_steps(&want, ALL, None, root).unwrap()),
            ["groupadd -R /tmp/r -g 1600 -- ops"]
        );
        assert!(group_steps(&want, ALL, Some(&group(1600, &["x"])), root)
            .unwrap()
            .is_empty());
        let gone = inst(
            "group",
            "ops",
            vec![("ensure", Value::Str("absent".into()))],
        );
        assert_eq!(
            argv(&group_steps(&gone, ALL, Some(&group(1, &[])), Path::new("/")).unwrap()),
            ["groupdel -- ops"]
        );
        assert!(group_steps(&gone, ALL, None, root).unwrap().is_empty());
    }

    /// Members are a set: missing ones added and extra ones removed by one
    /// `gpasswd -M` (its root option is `-Q`), nothing when only the order
    /// differs; a new system group gets `--system` then its members.
    #[test]
    fn group_members_are_a_set() {
        let root = Path::new("/tmp/r");
        let want = inst(
            "group",
            "web",
            vec![("members", Value::List(vec!["bob".into(), "alice".into()]))],
        );
        let steps = group_steps(&want, ALL, Some(&group(1500, &["alice", "carol"])), root).unwrap();
        assert_eq!(argv(&steps), ["gpasswd -Q /tmp/r -M alice,bob -- web"]);
        assert_eq!(
            (
                steps.first().unwrap().change.before.as_str(),
                steps.first().unwrap().change.after.as_str()
            ),
            ("alice,carol", "alice,bob")
        );
        assert!(
            group_steps(&want, ALL, Some(&group(1500, &["bob", "alice"])), root)
                .unwrap()
                .is_empty()
        );
        let empty = inst("group", "web", vec![("members", Value::List(vec![]))]);
        assert_eq!(
            argv(&group_steps(&empty, ALL, Some(&group(1500, &["bob"])), Path::new("/")).unwrap()),
            ["gpasswd -M '' -- web"]
        );
        let new = inst(
            "group",
            "svc",
            vec![
                ("system", Value::Bool(true)),
                ("members", Value::List(vec!["bob".into()])),
            ],
        );
        assert_eq!(
            argv(&group_steps(&new, ALL, None, root).unwrap()),
            [
                "groupadd -R /tmp/r --system -- svc",
                "gpasswd -Q /tmp/r -M bob -- svc"
            ]
        );
        // Not yet a user: left out, with a note; when nothing is left to
        // do but them, the promise fails naming them.
        let only_bob: &dyn Fn(&str) -> bool = &|n| n == "bob";
        let steps = group_steps(&want, only_bob, Some(&group(1500, &[])), root).unwrap();
        assert_eq!(argv(&steps), ["gpasswd -Q /tmp/r -M bob -- web"]);
        assert_eq!(
            steps.first().unwrap().change.after,
            "bob (not yet users: alice)"
        );
        assert!(
            group_steps(&want, only_bob, Some(&group(1500, &["bob"])), root)
                .unwrap()
                .is_empty()
        );
        let t = Tables::from_text(PASSWD, GROUP);
        assert!(not_yet_users(&want, &t)
            .unwrap()
            .starts_with("`members` names alice of group `web`, which is no user"));
        let bad = inst(
            "group",
            "web",
            vec![("members", Value::List(vec!["-x".into()]))],
        );
        assert!(group_steps(&bad, ALL, None, root).is_err());
    }

    /// A password computed from a `secret` (issue 20) reaches `chpasswd`
    /// on its standard input only: no argv, no change, no `Debug` of the
    /// steps holds it, whether the user is created or changed.
    #[test]
    fn a_secret_password_is_in_no_argv_and_no_output() {
        use crate::secrets::SecretText;
        use std::sync::Arc;
        let t = Tables::from_text("bob:x:1001:100:Bob:/home/bob:/bin/sh\n", "users:x:100:\n");
        let hash = "$y$j9T$secretsalt$secrethashvalue";
        let secret = SecretText::new(
            std::collections::BTreeSet::from(["bob_hash".to_owned()]),
            zeroize::Zeroizing::new(hash.to_owned()),
        );
        let want = inst(
            "user",
            "bob",
            vec![("password", Value::Secret(Arc::new(secret)))],
        );
        let mut bob = t.user("bob").unwrap();
        bob.password = Some("$6$old$old".into());
        for current in [None, Some(&bob)] {
            let steps = user_steps(&want, current, &t, Path::new("/tmp/r")).unwrap();
            let last = steps.last().unwrap();
            let cmd = last.cmd.as_ref().unwrap();
            assert_eq!(cmd.argv, ["chpasswd", "-R", "/tmp/r", "-e"]);
            assert_eq!(
                cmd.stdin.as_ref().map(|i| i.0.to_vec()),
                Some(format!("bob:{hash}\n").into_bytes())
            );
            for s in &steps {
                let c = s.cmd.as_ref().unwrap();
                let shown = format!(
                    "{:?} {:?} {:?} {}",
                    s.change,
                    c,
                    c.executed_argv(),
                    c.shown()
                );
                assert!(!shown.contains("secrethash"), "{shown}");
            }
        }
        // Converged: the shadow hash is the secret's; nothing to run.
        bob.password = Some(hash.into());
        assert!(user_steps(&want, Some(&bob), &t, Path::new("/"))
            .unwrap()
            .is_empty());
    }

    /// The primary group by name or id, the GECOS comment, a system
    /// account, and the password through `chpasswd -e` on stdin: the hash
    /// is in no argv and in no change shown.
    #[test]
    fn primary_group_comment_system_and_password() {
        let t = Tables::from_text(
            "bob:x:1001:100:Bob:/home/bob:/bin/sh\n",
            "users:x:100:\napp:x:1500:\n",
        );
        let root = Path::new("/tmp/r");
        let hash = "$6$salt$abcdefghijkl";
        let app = inst(
            "user",
            "app",
            vec![
                ("group", Value::Str("app".into())),
                ("system", Value::Bool(true)),
                ("comment", Value::Str("App, server".into())),
                ("password", Value::Str(hash.into())),
            ],
        );
        let steps = user_steps(&app, None, &t, root).unwrap();
        assert_eq!(
            argv(&steps),
            [
                "useradd -R /tmp/r --system -g app -c 'App, server' -- app",
                "chpasswd -R /tmp/r -e"
            ]
        );
        let feed = steps
            .get(1)
            .unwrap()
            .cmd
            .as_ref()
            .and_then(|c| c.stdin.clone())
            .unwrap();
        assert_eq!(*feed.0, format!("app:{hash}\n").into_bytes());
        for s in &steps {
            let shown = format!(
                "{:?} {}",
                s.change,
                s.cmd.as_ref().map(Cmd::shown).unwrap_or_default()
            );
            assert!(!shown.contains(hash), "{shown}");
        }
        // Without a primary group, an existing group of the user's name is
        // the primary group (Debian's useradd refuses to create it again).
        let plain = inst("user", "app", vec![]);
        assert_eq!(
            argv(&user_steps(&plain, None, &t, root).unwrap()),
            ["useradd -R /tmp/r -g app -- app"]
        );
        // Drift: primary group by id, comment, password.
        let mut bob = t.user("bob").unwrap();
        bob.password = Some("$6$old$old".into());
        let want = inst(
            "user",
            "bob",
            vec![
                ("gid", Value::Int(1500)),
                ("comment", Value::Str("Bob B".into())),
                ("password", Value::Str(hash.into())),
            ],
        );
        let steps = user_steps(&want, Some(&bob), &t, Path::new("/")).unwrap();
        assert_eq!(
            argv(&steps),
            ["usermod -g 1500 -c 'Bob B' -- bob", "chpasswd -e"]
        );
        assert_eq!(steps.first().unwrap().change.before, "users (100)");
        assert_eq!(
            (
                steps.get(2).unwrap().change.before.as_str(),
                steps.get(2).unwrap().change.after.as_str()
            ),
            (HIDDEN_VALUE, HIDDEN_VALUE)
        );
        // Converged: nothing to do; the primary group by name compares ids.
        bob.password = Some(hash.into());
        bob.gid = 1500;
        bob.gecos = "Bob B".into();
        assert!(user_steps(&want, Some(&bob), &t, root).unwrap().is_empty());
        let by_name = inst("user", "bob", vec![("group", Value::Str("app".into()))]);
        assert!(user_steps(&by_name, Some(&bob), &t, root)
            .unwrap()
            .is_empty());
        assert!(!format!("{bob:?}").contains(hash));
    }

    #[test]
    fn bad_account_fields_never_reach_a_tool_nor_a_message() {
        let t = Tables::from_text(PASSWD, GROUP);
        for (attr, value) in [
            ("comment", "a:b"),
            ("comment", "a\nroot::0:0::/:/bin/sh"),
            ("password", ""),
            ("password", "$6$x$y\nroot::0"),
            ("password", "$6$x$y:0"),
            ("password", "not a hash"),
            ("group", "-g0"),
        ] {
            let i = inst("user", "bob", vec![(attr, Value::Str(value.into()))]);
            let Err(failed) = user_steps(&i, t.user("bob").as_ref(), &t, Path::new("/")) else {
                panic!("{attr} = {value:?} was accepted");
            };
            let why = format!("{:?}", failed.outcome);
            if attr == "password" && !value.is_empty() {
                assert!(!why.contains(value), "{why}");
            }
        }
        let both = inst(
            "user",
            "bob",
            vec![("gid", Value::Int(1)), ("group", Value::Str("web".into()))],
        );
        assert!(user_steps(&both, None, &t, Path::new("/")).is_err());
    }
}
