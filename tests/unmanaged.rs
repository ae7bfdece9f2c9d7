//! Two-way verification (LANGUAGE.md section 17): `unmanaged` promises on
//! sandbox roots. Accounts are read from the root's `etc/passwd` and
//! `etc/group` (removed with `userdel -R`/`groupdel -R`), services from its
//! systemd `*.wants` links or runit service directory (a runit link is
//! removed through the root's files, no tool), packages with the real
//! `apt-mark` and `dpkg` on a root with its own dpkg database. Nothing here
//! touches the machine's own accounts, services or packages.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use ::converge::binary;
use ::converge::debs::{self, build_deb};
use ::converge::support;
use converge_vm::run::operators::Outcome;
use converge_vm::run::RunReport;
use converge_vm::unmanaged::{Action, Extra};
use support::{compile, converge, failed, repaired, verified, write_trust};

const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
alice:x:1000:1000::/home/alice:/bin/sh\n\
bob:x:1001:1001::/home/bob:/bin/sh\n\
admin:x:1002:1002::/home/admin:/bin/sh\n\
svc:x:998:998::/:/usr/sbin/nologin\n\
nobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n";
const GROUP: &str = "root:x:0:\nalice:x:1000:\nbob:x:1001:\nadmin:x:1002:\nsvc:x:998:\nops:x:1500:alice\nnogroup:x:65534:\n";

/// A root with accounts (and their shadow files, for the shadow suite).
fn accounts_root(passwd: &str, group: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let shadow: String = passwd
        .lines()
        .filter_map(|l| l.split(':').next())
        .map(|n| format!("{n}:*:19000:0:99999:7:::\n"))
        .collect();
    let gshadow: String = group
        .lines()
        .filter_map(|l| l.split(':').next())
        .map(|n| format!("{n}:*::\n"))
        .collect();
    for (name, text) in [
        ("passwd", passwd),
        ("group", group),
        ("shadow", shadow.as_str()),
        ("gshadow", gshadow.as_str()),
        ("os-release", "ID=debian\nVERSION_ID=12\n"),
    ] {
        std::fs::write(etc.join(name), text).unwrap();
    }
    root
}

fn extras(r: &RunReport) -> Vec<(String, String, Action)> {
    r.extra
        .iter()
        .map(|e: &Extra| (e.kind.clone(), e.name.clone(), e.action))
        .collect()
}

fn entry(kind: &str, name: &str, action: Action) -> (String, String, Action) {
    (kind.to_owned(), name.to_owned(), action)
}

fn outcome<'r>(r: &'r RunReport, kind: &str, promiser: &str) -> &'r Outcome {
    r.promises
        .iter()
        .find(|p| p.kind() == kind && p.promiser == promiser)
        .unwrap_or_else(|| panic!("no promise {kind} {promiser}: {r:?}"))
        .outcome()
}

fn read(root: &Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path)).unwrap()
}

#[test]
fn accounts_in_the_id_range_that_no_promise_names_are_reported() {
    let root = accounts_root(PASSWD, GROUP);
    let bundle = verified(&compile(
        r#"bundle b {
  user "alice" { uid = 1000; }
  unmanaged "user" { action = report; ignore = ["adm*"]; }
  unmanaged "group" { action = report; max_id = 1999; }
}
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    assert_eq!(outcome(&r, "user", "alice"), &Outcome::Kept);
    // `svc` (998) and `nobody` (65534) are outside the default range; the
    // user's own group is named by its promise, `ops` (which lists it as a
    // member in the root, not in the policy) is not.
    assert_eq!(
        extras(&r),
        [
            entry("user", "bob", Action::Reported),
            entry("group", "admin", Action::Reported),
            entry("group", "bob", Action::Reported),
            entry("group", "ops", Action::Reported),
        ]
    );
    assert_eq!(outcome(&r, "unmanaged", "user"), &Outcome::Kept);
    let json = converge_vm::run::report::json(&r);
    assert_eq!(json["summary"]["extra"], 4);
    assert_eq!(json["extra"][0]["type"], "user");
    assert_eq!(json["extra"][0]["name"], "bob");
    assert_eq!(json["extra"][0]["action"], "reported");
    let human = converge_vm::run::report::human(&r);
    assert!(
        human.contains("extra    user bob: reported (policy.policy:3)"),
        "{human}"
    );
    assert_eq!(read(root.path(), "etc/passwd"), PASSWD);
}

#[test]
fn a_run_without_unmanaged_promises_reports_no_extra_entries() {
    let root = accounts_root(PASSWD, GROUP);
    let bundle = verified(&compile(
        r#"bundle b { user "alice" { uid = 1000; } }
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert!(r.extra.is_empty());
    let json = converge_vm::run::report::json(&r);
    assert!(json.get("extra").is_none(), "{json}");
}

#[test]
fn removal_is_refused_when_a_promise_of_the_type_failed() {
    let root = accounts_root(PASSWD, GROUP);
    // `shell` must be an absolute path: this user promise fails before any
    // tool runs, so what the policy manages is not known for sure.
    let bundle = verified(&compile(
        r#"bundle b {
  user "alice" { uid = 1000; }
  user "carol" { uid = 1100; shell = "/bin/sh:x"; }
  unmanaged "user" { action = remove; }
}
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert!(matches!(outcome(&r, "user", "carol"), Outcome::Failed(_)));
    let Outcome::Failed(why) = outcome(&r, "unmanaged", "user") else {
        panic!("{r:?}")
    };
    assert!(why.contains("user \"carol\""), "{why}");
    assert!(why.contains("nothing was removed"), "{why}");
    assert_eq!(
        extras(&r),
        [
            entry("user", "admin", Action::Refused),
            entry("user", "bob", Action::Refused)
        ]
    );
    assert_eq!(read(root.path(), "etc/passwd"), PASSWD);
}

/// An accidental empty policy never removes accounts: eleven extra users,
/// and `max_remove` is 10 by default.
#[test]
fn an_empty_policy_never_removes_more_than_max_remove() {
    let mut passwd = String::from("root:x:0:0::/root:/bin/sh\n");
    for i in 0..11 {
        passwd.push_str(&format!("u{i}:x:{}:100::/home/u{i}:/bin/sh\n", 2000 + i));
    }
    let root = accounts_root(&passwd, "root:x:0:\nusers:x:100:\n");
    let bundle = verified(&compile(
        r#"bundle b { unmanaged "user" { action = remove; } }
policy { b(); }"#,
    ));
    for dry_run in [true, false] {
        let r = converge(&bundle, root.path(), dry_run);
        let Outcome::Failed(why) = outcome(&r, "unmanaged", "user") else {
            panic!("{r:?}")
        };
        assert!(why.contains("11 unmanaged users"), "{why}");
        assert!(why.contains("more than max_remove = 10"), "{why}");
        assert_eq!(r.extra.len(), 11);
        assert!(r.extra.iter().all(|e| e.action == Action::Refused));
        assert_eq!(repaired(&r), 0);
        assert_eq!(read(root.path(), "etc/passwd"), passwd);
    }
}

#[test]
fn a_dry_run_lists_what_would_be_removed_and_removes_nothing() {
    let root = accounts_root(PASSWD, GROUP);
    let bundle = verified(&compile(
        r#"bundle b {
  user "alice" { uid = 1000; groups = ["ops"]; }
  unmanaged "user" { action = remove; }
  unmanaged "group" { action = remove; max_id = 1999; ignore = ["admin"]; }
}
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), true);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    assert_eq!(
        extras(&r),
        [
            entry("user", "admin", Action::WouldRemove),
            entry("user", "bob", Action::WouldRemove),
            entry("group", "bob", Action::WouldRemove),
        ]
    );
    let human = converge_vm::run::report::human(&r);
    assert!(human.contains("extra    user bob: would remove"), "{human}");
    assert!(human.contains("userdel -R"), "{human}");
    assert_eq!(read(root.path(), "etc/passwd"), PASSWD);
    assert_eq!(read(root.path(), "etc/group"), GROUP);
}

#[test]
#[ignore = "needs root"]
fn accounts_are_removed_within_the_rules_and_a_second_run_repairs_nothing() {
    support::require_root("userdel -R");
    support::require_tool("userdel", "passwd");
    let root = accounts_root(PASSWD, GROUP);
    let bundle = verified(&compile(
        r#"bundle b {
  user "alice" { uid = 1000; }
  unmanaged "user" { action = remove; ignore = ["admin"]; }
  unmanaged "group" { action = remove; max_id = 1999; ignore = ["admin"]; }
}
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    assert_eq!(outcome(&r, "unmanaged", "user"), &Outcome::Repaired);
    assert!(extras(&r).contains(&entry("user", "bob", Action::Removed)));
    let passwd = read(root.path(), "etc/passwd");
    assert!(!passwd.contains("bob:"), "{passwd}");
    for kept in ["root:", "alice:", "admin:", "svc:", "nobody:"] {
        assert!(passwd.contains(kept), "{kept} {passwd}");
    }
    let group = read(root.path(), "etc/group");
    assert!(!group.lines().any(|l| l.starts_with("bob:")), "{group}");
    let again = converge(&bundle, root.path(), false);
    assert!(failed(&again).is_empty(), "{:?}", failed(&again));
    assert_eq!(repaired(&again), 0);
    assert!(again.extra.is_empty(), "{:?}", again.extra);
}

/// A runit root: `etc/sv/NAME` definitions, `etc/service/NAME` links.
fn runit_root(enabled: &[&str]) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("etc/service")).unwrap();
    std::fs::write(r.join("etc/os-release"), "ID=debian\n").unwrap();
    for name in enabled {
        std::fs::create_dir_all(r.join("etc/sv").join(name)).unwrap();
        std::fs::write(r.join("etc/sv").join(name).join("run"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink(format!("../sv/{name}"), r.join("etc/service").join(name))
            .unwrap();
    }
    root
}

#[test]
fn runit_services_no_promise_names_are_disabled_and_a_second_run_repairs_nothing() {
    let root = runit_root(&["web", "db", "cron", "getty-1"]);
    let r = root.path();
    let bundle = verified(&compile(
        r#"bundle b {
  service "web" { enabled = true; }
  unmanaged "service" { action = remove; ignore = ["getty-*"]; }
}
policy { b(); }"#,
    ));
    let dry = converge(&bundle, r, true);
    assert_eq!(
        extras(&dry),
        [
            entry("service", "cron", Action::WouldRemove),
            entry("service", "db", Action::WouldRemove)
        ]
    );
    assert!(std::fs::symlink_metadata(r.join("etc/service/db")).is_ok());
    let first = converge(&bundle, r, false);
    assert!(failed(&first).is_empty(), "{:?}", failed(&first));
    assert_eq!(outcome(&first, "unmanaged", "service"), &Outcome::Repaired);
    assert_eq!(
        extras(&first),
        [
            entry("service", "cron", Action::Removed),
            entry("service", "db", Action::Removed)
        ]
    );
    for gone in ["cron", "db"] {
        assert!(std::fs::symlink_metadata(r.join("etc/service").join(gone)).is_err());
        assert!(r.join("etc/sv").join(gone).is_dir(), "the definition stays");
    }
    for kept in ["web", "getty-1"] {
        assert!(std::fs::symlink_metadata(r.join("etc/service").join(kept)).is_ok());
    }
    let again = converge(&bundle, r, false);
    assert!(failed(&again).is_empty(), "{:?}", failed(&again));
    assert_eq!(repaired(&again), 0);
    assert!(again.extra.is_empty());
}

#[test]
fn enabled_systemd_units_are_reported() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let wants = r.join("etc/systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::fs::create_dir_all(r.join("etc/systemd/system/timers.target.wants")).unwrap();
    for unit in ["nginx.service", "cron.service", "ssh.service"] {
        std::os::unix::fs::symlink(format!("/lib/systemd/system/{unit}"), wants.join(unit))
            .unwrap();
    }
    std::os::unix::fs::symlink(
        "/lib/systemd/system/apt-daily.timer",
        r.join("etc/systemd/system/timers.target.wants/apt-daily.timer"),
    )
    .unwrap();
    let bundle = verified(&compile(
        r#"bundle b { unmanaged "service" { action = report; ignore = ["ssh", "*.timer"]; } }
policy { b(); }"#,
    ));
    let rep = converge(&bundle, r, false);
    assert!(failed(&rep).is_empty(), "{:?}", failed(&rep));
    assert_eq!(
        extras(&rep),
        [
            entry("service", "cron", Action::Reported),
            entry("service", "nginx", Action::Reported)
        ]
    );
}

/// Names planted on the host (an account with a terminal escape, a runit
/// service whose name forges a report line) are escaped in the human and
/// JSON reports of `policyvm run`, and never passed to a tool.
#[test]
fn extra_entry_names_are_escaped_in_every_output() {
    let root = runit_root(&["web"]);
    let r = root.path();
    std::os::unix::fs::symlink(
        "../sv/x",
        r.join("etc/service/x\nrepaired file \"etc-shadow\""),
    )
    .unwrap();
    std::fs::write(
        r.join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\nev\u{1b}[31mil:x:1200:1200::/:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(r.join("etc/group"), "root:x:0:\n").unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    write_trust(&w.join("trust"));
    std::fs::write(
        w.join("p.bundle"),
        compile(
            r#"bundle b {
  service "web" { enabled = true; }
  unmanaged "service" { action = remove; }
  unmanaged "user" { action = report; }
}
policy { b(); }"#,
        ),
    )
    .unwrap();
    let run = |format: &str| {
        support::output_when_unlocked(
            Command::new(binary("policyvm"))
                .arg("run")
                .arg(w.join("p.bundle"))
                .arg("--trust")
                .arg(w.join("trust"))
                .arg("--root")
                .arg(r)
                .arg("--state")
                .arg(w.join("state"))
                .arg("--dry-run")
                .args(["--format", format]),
        )
    };
    let human = run("human");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&human.stdout),
        String::from_utf8_lossy(&human.stderr)
    );
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(
        !text.lines().any(|l| l.starts_with("repaired file")),
        "a name wrote a line of its own: {text}"
    );
    assert!(
        text.contains("extra    user ev\\u{1b}[31mil: reported"),
        "{text}"
    );
    assert!(text.contains("x\\nrepaired file \"etc-shadow\""), "{text}");
    // Its removal is refused by name: no tool is given it.
    assert!(text.contains("is not a valid service name"), "{text}");
    let json = run("json");
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let names: Vec<&str> = value["extra"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["x\\nrepaired file \"etc-shadow\"", "ev\\u{1b}[31mil"]
    );
    assert!(
        std::fs::symlink_metadata(r.join("etc/service/x\nrepaired file \"etc-shadow\"")).is_ok()
    );
}

// Packages: the real dpkg and apt-mark on a root with its own database.

/// A root with a dpkg database holding `manual` (installed on purpose) and
/// `auto` (marked automatic, as apt marks a dependency).
fn package_root(manual: &[&str], auto: &[&str]) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let p = root.path();
    for d in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/lib/dpkg/triggers",
        "var/lib/apt/lists",
        "var/cache/apt",
        "etc/apt/sources.list.d",
        "etc/apt/preferences.d",
        "etc/apt/apt.conf.d",
        "var/log",
        "debs",
    ] {
        std::fs::create_dir_all(p.join(d)).unwrap();
    }
    std::fs::write(p.join("var/lib/dpkg/status"), "").unwrap();
    std::fs::write(p.join("var/lib/dpkg/available"), "").unwrap();
    std::fs::write(p.join("etc/apt/sources.list"), "").unwrap();
    std::fs::write(p.join("etc/os-release"), "ID=debian\nVERSION_ID=12\n").unwrap();
    let debs: Vec<_> = manual
        .iter()
        .chain(auto)
        .map(|n| build_deb(&p.join("debs"), n, "1.0", None, None))
        .collect();
    let out = debs::dpkg_in_root(p)
        .arg("--install")
        .args(&debs)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    if !auto.is_empty() {
        let out = Command::new("apt-mark")
            .arg("-o")
            .arg(format!("Dir={}/", p.display()))
            .arg("-o")
            .arg(format!(
                "Dir::State::status={}/var/lib/dpkg/status",
                p.display()
            ))
            .arg("auto")
            .args(auto)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    root
}

/// What the root's dpkg database has installed.
fn installed(root: &Path) -> Vec<String> {
    let out = Command::new("dpkg-query")
        .arg(format!("--root={}", root.display()))
        .args(["-W", "--showformat=${Package} ${Status}\\n"])
        .output()
        .unwrap();
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.ends_with(" installed"))
        .filter_map(|l| l.split(' ').next().map(str::to_owned))
        .collect();
    v.sort();
    v
}

fn require_package_tools() {
    support::require_root("dpkg --root");
    support::require_tool("dpkg", "dpkg");
    support::require_tool("apt-mark", "apt");
}

#[test]
#[ignore = "needs root"]
fn packages_installed_on_purpose_are_reported_and_removed_in_one_transaction() {
    require_package_tools();
    let root = package_root(&["cvg-keep", "cvg-extra", "cvg-other"], &["cvg-dep"]);
    let r = root.path();
    let report = verified(&compile(
        r#"bundle b {
  package "cvg-keep" { }
  unmanaged "package" { action = report; }
}
policy { b(); }"#,
    ));
    let rep = converge(&report, r, false);
    assert!(failed(&rep).is_empty(), "{:?}", failed(&rep));
    // The automatic dependency is never extra.
    assert_eq!(
        extras(&rep),
        [
            entry("package", "cvg-extra", Action::Reported),
            entry("package", "cvg-other", Action::Reported)
        ]
    );
    let remove = verified(&compile(
        r#"bundle b {
  package "cvg-keep" { }
  unmanaged "package" { action = remove; ignore = ["cvg-oth*"]; }
}
policy { b(); }"#,
    ));
    let dry = converge(&remove, r, true);
    assert_eq!(
        extras(&dry),
        [entry("package", "cvg-extra", Action::WouldRemove)]
    );
    let unmanaged = dry
        .promises
        .iter()
        .find(|p| p.kind() == "unmanaged")
        .unwrap();
    assert!(
        unmanaged.changes().iter().any(|c| c.after.contains("dpkg")),
        "{unmanaged:?}"
    );
    assert_eq!(
        installed(r),
        ["cvg-dep", "cvg-extra", "cvg-keep", "cvg-other"]
    );
    let first = converge(&remove, r, false);
    assert!(failed(&first).is_empty(), "{:?}", failed(&first));
    assert_eq!(
        extras(&first),
        [entry("package", "cvg-extra", Action::Removed)]
    );
    assert_eq!(installed(r), ["cvg-dep", "cvg-keep", "cvg-other"]);
    let again = converge(&remove, r, false);
    assert!(failed(&again).is_empty(), "{:?}", failed(&again));
    assert_eq!(repaired(&again), 0);
    assert!(again.extra.is_empty());
}

/// A link planted in the root that leads out of it (here the root's
/// `/var/log`, where dpkg writes its log) stops the removal of the extras
/// before dpkg runs, as it stops a `package` promise's: the removal fails
/// naming the link, the package stays, nothing is written outside.
#[test]
#[ignore = "needs root"]
fn no_removal_of_extras_through_a_link_out_of_the_root() {
    require_package_tools();
    let root = package_root(&["cvg-keep", "cvg-extra"], &[]);
    let r = root.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::remove_dir_all(r.join("var/log")).unwrap();
    std::os::unix::fs::symlink(outside.path(), r.join("var/log")).unwrap();
    let remove = verified(&compile(
        r#"bundle b {
  package "cvg-keep" { }
  unmanaged "package" { action = remove; }
}
policy { b(); }"#,
    ));
    let run = converge(&remove, r, false);
    let Outcome::Failed(why) = outcome(&run, "unmanaged", "package") else {
        panic!("{run:?}")
    };
    assert!(why.contains("/var/log"), "the link is named: {why}");
    assert_eq!(installed(r), ["cvg-extra", "cvg-keep"]);
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written through the link"
    );
}

/// An accidental empty policy never uninstalls a host: eleven packages
/// installed on purpose, a policy of nothing but `unmanaged "package" {
/// action = remove; }`, and every package is still there.
#[test]
#[ignore = "needs root"]
fn an_empty_policy_never_uninstalls_packages() {
    require_package_tools();
    let names: Vec<String> = (0..11).map(|i| format!("cvg-p{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let root = package_root(&refs, &[]);
    let r = root.path();
    let before = installed(r);
    assert_eq!(before.len(), 11);
    let bundle = verified(&compile(
        r#"bundle b { unmanaged "package" { action = remove; } }
policy { b(); }"#,
    ));
    let run = converge(&bundle, r, false);
    let Outcome::Failed(why) = outcome(&run, "unmanaged", "package") else {
        panic!("{run:?}")
    };
    assert!(why.contains("more than max_remove = 10"), "{why}");
    assert_eq!(run.extra.len(), 11);
    assert_eq!(installed(r), before);
}

#[test]
#[ignore = "needs root"]
fn package_removal_is_refused_when_a_package_promise_failed() {
    require_package_tools();
    let root = package_root(&["cvg-keep", "cvg-extra"], &[]);
    let r = root.path();
    let bundle = verified(&compile(
        r#"bundle b {
  package "cvg-keep" { }
  package "cvg-missing" { deb = "/debs/cvg-missing_1.0.deb"; }
  unmanaged "package" { action = remove; }
}
policy { b(); }"#,
    ));
    let run = converge(&bundle, r, false);
    assert!(matches!(
        outcome(&run, "package", "cvg-missing"),
        Outcome::Failed(_)
    ));
    let Outcome::Failed(why) = outcome(&run, "unmanaged", "package") else {
        panic!("{run:?}")
    };
    assert!(why.contains("cvg-missing"), "{why}");
    assert_eq!(
        extras(&run),
        [entry("package", "cvg-extra", Action::Refused)]
    );
    assert_eq!(installed(r), ["cvg-extra", "cvg-keep"]);
}

/// Issue 25, performance: `unmanaged "package"` adds at most one query to
/// a converged run. Programs first on the VM's `PATH` log each call and
/// hand over to the real one: the package batch reads dpkg's status file
/// (no `dpkg-query`), and the unmanaged promise is one `apt-mark
/// showmanual`; nothing installs or removes.
#[test]
#[ignore = "needs root"]
fn unmanaged_package_adds_at_most_one_query_to_a_converged_run() {
    use std::os::unix::fs::PermissionsExt as _;
    require_package_tools();
    let root = package_root(&["cvg-keep", "cvg-two"], &["cvg-dep"]);
    let shims = tempfile::tempdir().unwrap();
    let log = shims.path().join("calls");
    for tool in ["dpkg-query", "apt-mark", "dpkg", "apt-get", "apt-cache"] {
        let real = support::find_tool(tool).unwrap();
        let shim = shims.path().join(tool);
        std::fs::write(
            &shim,
            format!(
                "#!/bin/sh\necho \"{tool} $*\" >> {}\nexec {} \"$@\"\n",
                log.display(),
                real.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let tree = tempfile::tempdir().unwrap();
    let calls = |unmanaged: &str| -> Vec<String> {
        let path = tree.path().join("site.policy");
        std::fs::write(
            &path,
            format!(
                "bundle b {{\n  package \"cvg-keep\" {{ }}\n  package \"cvg-two\" {{ }}\n  {unmanaged}\n}}\npolicy {{ b(); }}\n"
            ),
        )
        .unwrap();
        let build = support::policyc_build(&path, &[]);
        let out = support::output_when_unlocked(
            Command::new(binary("policyvm"))
                .arg("run")
                .arg(&build.bundle)
                .arg("--trust")
                .arg(&build.trust)
                .arg("--root")
                .arg(root.path())
                .args(["--format", "json"])
                .env(
                    "PATH",
                    format!(
                        "{}:{}",
                        shims.path().display(),
                        std::env::var("PATH").unwrap_or_default()
                    ),
                ),
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(report["summary"]["repaired"], 0, "{report:#}");
        assert_eq!(report["summary"]["failed"], 0, "{report:#}");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        text.lines()
            .map(|l| l.split(' ').next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(calls(""), Vec::<String>::new());
    assert_eq!(
        calls("unmanaged \"package\" { action = report; }"),
        ["apt-mark"]
    );
}
