#![allow(clippy::unwrap_used)]

use super::*;
use crate::instance::Value;

fn root(passwd: &str, group: &str) -> (tempfile::TempDir, RootFs) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("etc")).unwrap();
    std::fs::write(dir.path().join("etc/passwd"), passwd).unwrap();
    std::fs::write(dir.path().join("etc/group"), group).unwrap();
    let fs = RootFs::open(dir.path()).unwrap();
    (dir, fs)
}

const PASSWD: &str = "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\nbob:x:1001:1001::/home/bob:/bin/sh\ncarol:x:1002:1002::/home/carol:/bin/sh\nadmin:x:1003:1003::/home/admin:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n";
const GROUP: &str =
    "root:x:0:\nalice:x:1000:\nbob:x:1001:\ncarol:x:1002:\nadmin:x:1003:\nops:x:1500:alice\n";

fn unmanaged(kind: &str, attrs: Vec<(&'static str, Value)>) -> Instance {
    Instance {
        index: 0,
        kind: KIND,
        promiser: kind.to_owned(),
        attrs,
    }
}

fn word(w: &str) -> Value {
    Value::Str(std::sync::Arc::from(w))
}

fn user(name: &str) -> Instance {
    Instance {
        index: 1,
        kind: "user",
        promiser: name.to_owned(),
        attrs: vec![("groups", Value::List(vec!["ops".to_owned()]))],
    }
}

fn applied(
    fs: &RootFs,
    dry_run: bool,
    inst: &Instance,
    managed: &Managed,
    troubled: &BTreeMap<String, Vec<String>>,
) -> (Applied, Vec<Extra>) {
    let run = Run {
        fs,
        dry_run,
        os_family: "debian",
        managed,
        troubled,
    };
    let mut extras = Vec::new();
    let a = apply(&run, inst, "p.policy:3", &mut extras);
    (a, extras)
}

fn names(extras: &[Extra]) -> Vec<(&str, &str)> {
    extras
        .iter()
        .map(|e| (e.name.as_str(), e.action.word()))
        .collect()
}

#[test]
fn report_lists_what_no_promise_names_and_no_glob_ignores() {
    let (_d, fs) = root(PASSWD, GROUP);
    let mut managed = Managed::default();
    managed.note(&user("alice"));
    let inst = unmanaged(
        "user",
        vec![("ignore", Value::List(vec!["adm*".to_owned()]))],
    );
    let (a, extras) = applied(&fs, false, &inst, &managed, &BTreeMap::new());
    assert_eq!(a.outcome, Outcome::Kept);
    assert_eq!(names(&extras), [("bob", "reported"), ("carol", "reported")]);
    assert!(extras
        .iter()
        .all(|e| e.kind == "user" && e.source == "p.policy:3"));
    // A user names its own group and its supplementary groups.
    let (_, extras) = applied(
        &fs,
        false,
        &unmanaged("group", vec![]),
        &managed,
        &BTreeMap::new(),
    );
    assert_eq!(
        names(&extras),
        [
            ("admin", "reported"),
            ("bob", "reported"),
            ("carol", "reported")
        ]
    );
}

#[test]
fn the_id_range_bounds_the_accounts() {
    let (_d, fs) = root(PASSWD, GROUP);
    let inst = unmanaged(
        "user",
        vec![("min_id", Value::Int(1001)), ("max_id", Value::Int(1002))],
    );
    let (_, extras) = applied(&fs, false, &inst, &Managed::default(), &BTreeMap::new());
    assert_eq!(names(&extras), [("bob", "reported"), ("carol", "reported")]);
}

#[test]
fn a_dry_run_lists_what_would_be_removed_and_removes_nothing() {
    let (dir, fs) = root(PASSWD, GROUP);
    let inst = unmanaged("user", vec![("action", word("remove"))]);
    let (a, extras) = applied(&fs, true, &inst, &Managed::default(), &BTreeMap::new());
    assert_eq!(a.outcome, Outcome::Repaired, "{a:?}");
    assert_eq!(
        names(&extras),
        [
            ("admin", "would_remove"),
            ("alice", "would_remove"),
            ("bob", "would_remove"),
            ("carol", "would_remove")
        ]
    );
    assert!(a
        .changes
        .iter()
        .any(|c| c.before == "bob" && c.after.contains("userdel")));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("etc/passwd")).unwrap(),
        PASSWD
    );
}

#[test]
fn removal_is_refused_when_a_promise_of_the_type_failed() {
    let (_d, fs) = root(PASSWD, GROUP);
    let inst = unmanaged("user", vec![("action", word("remove"))]);
    let troubled = BTreeMap::from([(
        "user".to_owned(),
        vec!["user \"dave\" (p.policy:2)".to_owned()],
    )]);
    let (a, extras) = applied(&fs, true, &inst, &Managed::default(), &troubled);
    let Outcome::Failed(why) = &a.outcome else {
        panic!("{a:?}")
    };
    assert!(why.contains("user \"dave\" (p.policy:2)"), "{why}");
    assert!(why.contains("nothing was removed"), "{why}");
    assert!(a.changes.is_empty());
    assert!(extras.iter().all(|e| e.action == Action::Refused));
    // A failure of another type does not matter.
    let other = BTreeMap::from([("group".to_owned(), vec!["group x".to_owned()])]);
    let (a, _) = applied(&fs, true, &inst, &Managed::default(), &other);
    assert_eq!(a.outcome, Outcome::Repaired);
}

#[test]
fn removal_is_refused_over_max_remove() {
    let (_d, fs) = root(PASSWD, GROUP);
    let inst = unmanaged(
        "user",
        vec![("action", word("remove")), ("max_remove", Value::Int(3))],
    );
    let (a, extras) = applied(&fs, true, &inst, &Managed::default(), &BTreeMap::new());
    let Outcome::Failed(why) = &a.outcome else {
        panic!("{a:?}")
    };
    assert!(why.contains("more than max_remove = 3"), "{why}");
    assert_eq!(extras.len(), 4);
    assert!(extras.iter().all(|e| e.action == Action::Refused));
    // Exactly max_remove is allowed.
    let mut managed = Managed::default();
    managed.note(&user("alice"));
    let (a, _) = applied(&fs, true, &inst, &managed, &BTreeMap::new());
    assert_eq!(a.outcome, Outcome::Repaired, "{a:?}");
}

#[test]
fn a_name_no_tool_may_see_fails_its_removal_alone() {
    let (_d, fs) = root(
        "ev\u{1b}[31mil:x:1200:1200::/:/bin/sh\nbob:x:1001:1001::/:/bin/sh\n",
        "",
    );
    let inst = unmanaged("user", vec![("action", word("remove"))]);
    let (a, extras) = applied(&fs, true, &inst, &Managed::default(), &BTreeMap::new());
    let Outcome::Failed(why) = &a.outcome else {
        panic!("{a:?}")
    };
    assert!(why.contains("ev\\u{1b}[31mil"), "{why}");
    assert!(!why.contains('\u{1b}'), "{why}");
    assert_eq!(
        names(&extras),
        [("bob", "would_remove"), ("ev\\u{1b}[31mil", "failed")]
    );
}

#[test]
fn bad_settings_fail_the_promise() {
    let (_d, fs) = root(PASSWD, GROUP);
    for (inst, expect) in [
        (unmanaged("file", vec![]), "cannot verify `file`"),
        (
            unmanaged("user", vec![("ignore", Value::List(vec!["[x".to_owned()]))]),
            "`ignore` glob `[x`",
        ),
        (
            unmanaged("user", vec![("max_remove", Value::Int(-1))]),
            "below 0",
        ),
        (
            unmanaged(
                "user",
                vec![("min_id", Value::Int(5)), ("max_id", Value::Int(4))],
            ),
            "holds no id",
        ),
    ] {
        let (a, extras) = applied(&fs, false, &inst, &Managed::default(), &BTreeMap::new());
        match &a.outcome {
            Outcome::Failed(why) => assert!(why.contains(expect), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(extras.is_empty());
    }
}

#[test]
fn names_compare_without_service_suffix_or_architecture() {
    let mut managed = Managed::default();
    for (kind, name) in [("service", "nginx.service"), ("package", "libc6:i386")] {
        managed.note(&Instance {
            index: 0,
            kind,
            promiser: name.to_owned(),
            attrs: vec![],
        });
    }
    assert!(managed.names("service", "nginx"));
    assert!(managed.names("service", "nginx.service"));
    assert!(managed.names("package", "libc6"));
    assert!(!managed.names("package", "nginx"));
    assert!(!managed.names("user", "nginx"));
}
