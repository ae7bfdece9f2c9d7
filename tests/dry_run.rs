//! A dry run that tells the truth (issue 21 item 3): it simulates the
//! state the run would create, so a new role's dry run reports exactly
//! the repairs the real run then makes, no false failures; it refuses
//! what the real run refuses; and it changes nothing on disk.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use converge_vm::run::operators::Outcome;
use converge_vm::run::RunReport;

use ::converge::support;
use support::{compile, converge, failed, verified};

/// Every object below `root`: its path, type, mode, owner and content
/// (or link target). Two snapshots are equal only if nothing changed.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let what = if meta.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(&path).unwrap())
            } else if meta.is_dir() {
                todo.push(path.clone());
                "dir".to_owned()
            } else {
                format!("file {:?}", std::fs::read(&path).unwrap())
            };
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            out.insert(
                rel,
                format!(
                    "{what} mode {:o} owner {}:{} mtime {}",
                    meta.mode(),
                    meta.uid(),
                    meta.gid(),
                    meta.mtime()
                ),
            );
        }
    }
    out
}

/// An empty sandbox root with account tables, as a fresh image has them.
fn empty_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc");
    std::fs::create_dir_all(etc.join("systemd/system")).unwrap();
    for (name, text) in [
        ("passwd", "root:x:0:0:root:/root:/bin/bash\n"),
        ("group", "root:x:0:\nusers:x:100:\n"),
        ("shadow", "root:*:19000:0:99999:7:::\n"),
        ("gshadow", "root:*::\nusers:*::\n"),
        (
            "login.defs",
            "UID_MIN 1000\nUID_MAX 60000\nGID_MIN 1000\nGID_MAX 60000\nUSERGROUPS_ENAB yes\n",
        ),
        ("os-release", "ID=debian\n"),
    ] {
        std::fs::write(etc.join(name), text).unwrap();
    }
    root
}

/// A new role: a group, a user in it (and one with its own group), their
/// home, a directory tree, files owned by the new user (one edited by a
/// `line` promise after it is created), a link, a unit file and the
/// service that enables it.
const ROLE: &str = r#"
bundle role {
  group "appgrp" { }
  user "app" { group = "appgrp"; home = "/srv/app"; shell = "/bin/sh"; after = [group "appgrp"]; }
  user "worker" { groups = ["appgrp"]; after = [group "appgrp"]; }
  directory "/srv/app" { mode = 0o750; owner = "app"; group = "appgrp"; after = [user "app"]; }
  directory "/srv/app/conf/d" { mode = 0o755; owner = "app"; after = [directory "/srv/app"]; }
  file "/srv/app/conf/d/app.conf" {
    content = "port = 8080\n"; mode = 0o640; owner = "app"; group = "appgrp";
    after = [directory "/srv/app/conf/d"];
  }
  file "/srv/app/notes" { owner = "worker"; group = "appgrp"; after = [user "worker"]; }
  line "/srv/app/notes" { present = "written by the role"; after = [file "/srv/app/notes"]; }
  link "/srv/app/current" { target = "/srv/app/conf"; after = [directory "/srv/app"]; }
  file "/etc/systemd/system/app.service" {
    content = "[Unit]\nDescription=app\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n";
  }
  service "app" { manager = "systemd"; enabled = true; after = [file "/etc/systemd/system/app.service"]; }
}
policy { role(); }
"#;

/// One promise as the comparison sees it: what it is, its outcome, and
/// each change (what, before, after).
fn promises(r: &RunReport) -> Vec<String> {
    r.promises
        .iter()
        .map(|p| {
            let changes: Vec<String> = p
                .changes()
                .iter()
                // The account tools' own wording differs between "would
                // run" and "ran": compare what changes, from what to what.
                .map(|c| {
                    let after = c.after.split(" (would run").next().unwrap_or_default();
                    format!("{}: {} -> {}", c.what, c.before, after)
                })
                .collect();
            let outcome = match p.outcome() {
                Outcome::Failed(e) => format!("failed: {e}"),
                Outcome::Skipped(e) => format!("skipped: {e}"),
                o => format!("{o:?}"),
            };
            format!("{} {} {outcome} {changes:?}", p.kind(), p.promiser)
        })
        .collect()
}

#[test]
#[ignore = "needs root"]
fn a_new_roles_dry_run_reports_exactly_the_repairs_of_the_real_run() {
    support::require_root("useradd -R chroots into the root, files are given to new users");
    support::require_tool("useradd", "passwd");
    support::require_tool("systemctl", "systemd");
    let root = empty_root();
    let r = root.path();
    let role = verified(&compile(ROLE));

    let before = snapshot(r);
    let dry = converge(&role, r, true);
    assert_eq!(snapshot(r), before, "the dry run changed the disk");
    assert!(failed(&dry).is_empty(), "{:#?}", failed(&dry));
    assert!(dry.dry_run);

    let real = converge(&role, r, false);
    assert!(failed(&real).is_empty(), "{:#?}", failed(&real));
    let (dry, real) = (promises(&dry), promises(&real));
    assert_eq!(dry.len(), real.len(), "{dry:#?}\n{real:#?}");
    for (d, r) in dry.iter().zip(&real) {
        assert_eq!(d, r, "the dry run and the real run disagree");
    }
    assert!(
        real.iter().all(|p| p.contains(" Repaired ")),
        "every promise of a new role repairs: {real:#?}"
    );
    // And the real run did it.
    let conf = std::fs::metadata(r.join("srv/app/conf/d/app.conf")).unwrap();
    assert_eq!(conf.uid(), 1000);
    assert_eq!(
        std::fs::read_to_string(r.join("srv/app/notes")).unwrap(),
        "written by the role\n"
    );
}

/// A dry run without the simulation saw no user `app` and failed the
/// file (issue 21); with it, the would-be ids are those `useradd` gives.
#[test]
fn a_file_owned_by_a_user_the_run_creates_would_be_repaired() {
    let root = empty_root();
    let r = root.path();
    let before = snapshot(r);
    // No `useradd` runs in a dry run: this needs neither root nor the tool.
    let dry = converge(&verified(&compile(ROLE)), r, true);
    assert_eq!(snapshot(r), before, "the dry run changed the disk");
    let conf = dry
        .promises
        .iter()
        .find(|p| p.promiser == "/srv/app/conf/d/app.conf")
        .unwrap();
    assert_eq!(*conf.outcome(), Outcome::Repaired, "{conf:?}");
    let dir = dry
        .promises
        .iter()
        .find(|p| p.promiser == "/srv/app")
        .unwrap();
    let owner = dir.changes().iter().find(|c| c.what == "owner").unwrap();
    // app: uid 1000; appgrp: gid 1000 (the first of GID_MIN).
    assert_eq!(owner.after, "1000:1000", "{dir:?}");
    let notes = dry
        .promises
        .iter()
        .find(|p| p.kind() == "line" && p.promiser == "/srv/app/notes")
        .unwrap();
    assert_eq!(*notes.outcome(), Outcome::Repaired, "{notes:?}");
}

/// A world-writable directory the run creates: the real run refuses to
/// write a file directly in it, and so does the dry run, with the same
/// reason. An existing world-writable directory likewise, for a write and
/// for a purge.
#[test]
fn a_world_writable_parent_fails_the_dry_run_as_it_fails_the_real_run() {
    let policy = verified(&compile(
        r#"
bundle b {
  directory "/srv/drop" { mode = 0o1777; }
  file "/srv/drop/config" { content = "x\n"; after = [directory "/srv/drop"]; }
  file "/var/tmp/stamp" { content = "y\n"; }
  directory "/var/shared" { purge = true; }
}
policy { b(); }
"#,
    ));
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("var/tmp")).unwrap();
    std::fs::set_permissions(
        r.join("var/tmp"),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    std::fs::create_dir_all(r.join("var/shared")).unwrap();
    std::fs::set_permissions(
        r.join("var/shared"),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    std::fs::write(r.join("var/shared/junk"), "j").unwrap();
    let before = snapshot(r);
    let dry = converge(&policy, r, true);
    assert_eq!(snapshot(r), before, "the dry run changed the disk");
    let real = converge(&policy, r, false);
    for report in [&dry, &real] {
        let f = failed(report);
        assert_eq!(f.len(), 3, "{f:#?}");
        assert!(
            f.iter().any(|e| e.starts_with("directory /var/shared")
                && e.contains("cannot purge")
                && e.contains("world-writable")),
            "{f:#?}"
        );
        assert!(
            f.iter()
                .any(|e| e.starts_with("file /srv/drop/config") && e.contains("world-writable")),
            "{f:#?}"
        );
        assert!(
            f.iter()
                .any(|e| e.starts_with("file /var/tmp/stamp") && e.contains("world-writable")),
            "{f:#?}"
        );
    }
    assert_eq!(promises(&dry), promises(&real));
}

/// What a dry run changes in the overlay never reaches the disk, even for
/// removals, links, modes and owners of existing objects.
#[test]
fn a_dry_run_changes_nothing_on_disk() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("srv/old/deep")).unwrap();
    std::fs::write(r.join("srv/old/deep/f"), "old").unwrap();
    std::fs::write(r.join("srv/mode"), "m").unwrap();
    std::fs::write(r.join("srv/gone"), "g").unwrap();
    std::fs::create_dir_all(r.join("etc")).unwrap();
    std::fs::write(r.join("etc/motd"), "hello\n").unwrap();
    let policy = verified(&compile(
        r#"
bundle b {
  directory "/srv/old" { ensure = absent; }
  file "/srv/gone" { ensure = absent; }
  file "/srv/mode" { mode = 0o600; }
  link "/srv/l" { target = "/etc/motd"; }
  line "/etc/motd" { present = "welcome"; }
  file "/srv/new/tree/f" { content = "n\n"; }
}
policy { b(); }
"#,
    ));
    let before = snapshot(r);
    let dry = converge(&policy, r, true);
    assert_eq!(snapshot(r), before, "the dry run changed the disk");
    assert!(failed(&dry).is_empty(), "{:#?}", failed(&dry));
    let real = converge(&policy, r, false);
    assert_eq!(promises(&dry), promises(&real));
    assert_ne!(snapshot(r), before);
}
