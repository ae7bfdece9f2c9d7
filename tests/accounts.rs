//! `user` and `group` promises with the shadow suite (`useradd -R` & co.)
//! inside a sandbox root holding only `etc/passwd`, `etc/group`,
//! `etc/shadow` and `etc/gshadow`. The machine's own accounts are never
//! touched: the test checks them before and after.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use converge_vm::run::operators::Outcome;
use converge_vm::run::RunReport;

use ::converge::support;
use support::{compile, converge, failed, repaired, verified};

fn accounts_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    for (name, text) in [
        (
            "passwd",
            "root:x:0:0:root:/root:/bin/bash\nold:x:1300:100::/home/old:/bin/sh\n",
        ),
        ("group", "root:x:0:\nusers:x:100:\nlegacy:x:1400:old\n"),
        (
            "shadow",
            "root:*:19000:0:99999:7:::\nold:*:19000:0:99999:7:::\n",
        ),
        ("gshadow", "root:*::\nusers:*::\nlegacy:*::old\n"),
        ("os-release", "ID=debian\n"),
    ] {
        std::fs::write(etc.join(name), text).unwrap();
    }
    root
}

fn read(root: &Path, file: &str) -> String {
    std::fs::read_to_string(root.join("etc").join(file)).unwrap()
}

fn line<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    text.lines().find(|l| l.split(':').next() == Some(name))
}

fn outcome<'r>(r: &'r RunReport, kind: &str, promiser: &str) -> &'r Outcome {
    r.promises
        .iter()
        .find(|p| p.kind() == kind && p.promiser == promiser)
        .unwrap_or_else(|| panic!("no promise {kind} {promiser}: {r:?}"))
        .outcome()
}

const CREATE: &str = r#"
bundle accounts {
  group "web" { gid = 1500; }
  group "ops" { }
  group "legacy" { ensure = absent; }
  user "carol" {
    uid = 1600; shell = "/bin/bash"; home = "/srv/carol";
    groups = ["web", "ops"];
    after = [group "web", group "ops"];
  }
  user "old" { ensure = absent; }
  file "/srv/carol.txt" { content = "mine\n"; owner = "carol"; group = "web"; after = [user "carol"]; }
}
policy { accounts(); }
"#;

const MODIFY: &str = r#"
bundle accounts {
  group "web" { gid = 1510; }
  group "ops" { }
  user "carol" { uid = 1601; shell = "/bin/sh"; groups = ["ops"]; }
}
policy { accounts(); }
"#;

#[test]
#[ignore = "needs root"]
fn users_and_groups_are_created_changed_and_removed_inside_a_root() {
    support::require_root("useradd -R chroots into the root");
    let host_passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let host_group = std::fs::read_to_string("/etc/group").unwrap();
    let root = accounts_root();
    let r = root.path();
    let create = verified(&compile(CREATE));

    let dry = converge(&create, r, true);
    assert_eq!(
        outcome(&dry, "user", "carol"),
        &Outcome::Repaired,
        "{dry:?}"
    );
    let carol = dry.promises.iter().find(|p| p.promiser == "carol").unwrap();
    assert!(
        carol.changes()[0].after.contains("would run `useradd -R "),
        "{:?}",
        carol.changes()
    );
    assert!(
        line(&read(r, "passwd"), "carol").is_none(),
        "a dry run changed passwd"
    );

    let first = converge(&create, r, false);
    assert!(failed(&first).is_empty(), "{:?}", failed(&first));
    for (kind, name) in [
        ("group", "web"),
        ("group", "ops"),
        ("group", "legacy"),
        ("user", "carol"),
        ("user", "old"),
    ] {
        assert_eq!(
            outcome(&first, kind, name),
            &Outcome::Repaired,
            "{kind} {name}"
        );
    }
    let passwd = read(r, "passwd");
    assert_eq!(
        line(&passwd, "carol").unwrap(),
        "carol:x:1600:100::/srv/carol:/bin/bash"
    );
    assert!(line(&passwd, "old").is_none());
    assert!(line(&read(r, "shadow"), "carol").is_some());
    let group = read(r, "group");
    assert_eq!(line(&group, "web").unwrap(), "web:x:1500:carol");
    assert!(line(&group, "ops").unwrap().ends_with(":carol"));
    assert!(line(&group, "legacy").is_none());
    assert!(line(&read(r, "gshadow"), "web").is_some());
    // The file promised to carol, who did not exist when the run began.
    let meta = std::fs::metadata(r.join("srv/carol.txt")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 1600);
    assert_eq!(std::os::unix::fs::MetadataExt::gid(&meta), 1500);

    let second = converge(&create, r, false);
    assert_eq!(repaired(&second), 0, "{second:?}");
    assert!(failed(&second).is_empty());

    // uid, shell and the set of groups change in one usermod; the gid of
    // web in one groupmod.
    let modify = verified(&compile(MODIFY));
    let third = converge(&modify, r, false);
    assert!(failed(&third).is_empty(), "{:?}", failed(&third));
    let carol = third
        .promises
        .iter()
        .find(|p| p.promiser == "carol")
        .unwrap();
    let log = carol.output().unwrap_or_default();
    assert!(
        log.contains("usermod -R ") && log.contains(" -u 1601 -s /bin/sh -G ops -- carol"),
        "{log}"
    );
    let passwd = read(r, "passwd");
    assert_eq!(
        line(&passwd, "carol").unwrap(),
        "carol:x:1601:100::/srv/carol:/bin/sh"
    );
    let group = read(r, "group");
    assert_eq!(line(&group, "web").unwrap(), "web:x:1510:");
    assert!(line(&group, "ops").unwrap().ends_with(":carol"));
    assert_eq!(repaired(&converge(&modify, r, false)), 0);

    let remove = verified(&compile(
        r#"bundle accounts {
  user "carol" { ensure = absent; }
  group "web" { ensure = absent; after = [user "carol"]; }
}
policy { accounts(); }"#,
    ));
    let fourth = converge(&remove, r, false);
    assert!(failed(&fourth).is_empty(), "{:?}", failed(&fourth));
    assert_eq!(repaired(&fourth), 2);
    assert!(line(&read(r, "passwd"), "carol").is_none());
    assert!(line(&read(r, "group"), "web").is_none());
    assert_eq!(repaired(&converge(&remove, r, false)), 0);

    assert_eq!(std::fs::read_to_string("/etc/passwd").unwrap(), host_passwd);
    assert_eq!(std::fs::read_to_string("/etc/group").unwrap(), host_group);
}

#[test]
#[ignore = "needs root"]
fn a_failing_tool_fails_its_promise_with_the_command_and_the_run_goes_on() {
    support::require_root("useradd -R chroots into the root");
    let root = accounts_root();
    let r = root.path();
    let bundle = verified(&compile(
        r#"bundle accounts {
  user "dave" { groups = ["nosuchgroup"]; }
  user "erin" { uid = 0; }
  file "/etc/after" { content = "x\n"; }
}
policy { accounts(); }"#,
    ));
    let report = converge(&bundle, r, false);
    let failures = failed(&report);
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[0].contains("`useradd -R ")
            && failures[0].contains("-G nosuchgroup -- dave` exited with status"),
        "{failures:?}"
    );
    assert!(failures[0].contains("nosuchgroup"), "{failures:?}");
    assert!(failures[1].contains("-u 0 -- erin"), "{failures:?}");
    assert_eq!(outcome(&report, "file", "/etc/after"), &Outcome::Repaired);
    assert!(line(&read(r, "passwd"), "dave").is_none());
}
