//! `line` placement, `setting` and `block` converging real configuration
//! files in a sandbox root (LANGUAGE.md §13 "Where lines go"): the exact end
//! state, a second run that repairs nothing, a dry run that shows a diff and
//! writes nothing, and files not in the promised format refused with
//! nothing written. The placement rules themselves are the data-driven
//! cases of tests/editing/*.case (run by `converge-vm`'s unit tests).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use converge_vm::run::operators::Outcome;

use ::converge::support;
use support::{compile, converge, failed, repaired, verified};

const SSHD: &str = "\
# Debian sshd_config
Include /etc/ssh/sshd_config.d/*.conf
#PermitRootLogin prohibit-password
PasswordAuthentication yes
KbdInteractiveAuthentication no
UsePAM yes
PasswordAuthentication yes
Subsystem sftp /usr/lib/openssh/sftp-server

# Example of overriding settings on a per-user basis
Match User anoncvs
\tX11Forwarding no
\tPermitTTY no
";

const SSHD_AFTER: &str = "\
# Debian sshd_config
Include /etc/ssh/sshd_config.d/*.conf
#PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM yes
#PasswordAuthentication yes
Subsystem sftp /usr/lib/openssh/sftp-server
PermitRootLogin no

# Example of overriding settings on a per-user basis
Banner /etc/issue.net
Match User anoncvs
\tX11Forwarding no
\tPermitTTY no
\tAllowTcpForwarding no
";

const SYSCTL: &str = "\
# /etc/sysctl.conf
#net.ipv4.ip_forward=1
vm.swappiness = 60

# end
";

const PHP: &str = "\
[PHP]
memory_limit = 128M
;upload_max_filesize = 2M

[Date]
;date.timezone =
";

const LOGIN_DEFS: &str = "\
MAIL_DIR\t/var/mail
#PASS_MAX_DAYS\t99999
PASS_MAX_DAYS\t99999
";

const DROP_IN: &str = "[Service]\nRestart=no\n";

const POLICY: &str = r##"bundle b {
  setting "/etc/ssh/sshd_config" { key = "PermitRootLogin"; value = "no"; separator = " "; }
  setting "/etc/ssh/sshd_config" { key = "PasswordAuthentication"; value = "no"; separator = " "; }
  setting "/etc/ssh/sshd_config" { key = "AllowTcpForwarding"; value = "no"; separator = " "; section = "Match User anoncvs"; }
  line "/etc/ssh/sshd_config" { present = "Banner /etc/issue.net"; insert_before = "^Match "; }
  setting "/etc/sysctl.conf" { key = "net.ipv4.ip_forward"; value = "1"; separator = " = "; }
  setting "/etc/sysctl.conf" { key = "vm.swappiness"; value = "10"; separator = " = "; }
  setting "/etc/php/php.ini" { key = "date.timezone"; value = "UTC"; separator = " = "; section = "Date"; comment = ";"; }
  setting "/etc/php/php.ini" { key = "upload_max_filesize"; value = "64M"; separator = " = "; section = "PHP"; comment = ";"; }
  setting "/etc/php/php.ini" { key = "session.save_handler"; value = "files"; separator = " = "; section = "Session"; comment = ";"; }
  setting "/etc/login.defs" { key = "PASS_MAX_DAYS"; value = "90"; separator = "\t"; }
  setting "/etc/login.defs" { key = "PASS_MIN_DAYS"; value = "1"; separator = "\t"; }
  setting "/etc/systemd/system/app.service.d/override.conf" { key = "Restart"; value = "always"; section = "Service"; }
  setting "/etc/systemd/system/app.service.d/override.conf" { key = "LimitNOFILE"; value = "65536"; section = "Service"; }
  block "/etc/hosts" { marker = "converge cluster"; lines = ["10.0.0.1 db", "10.0.0.2 cache"]; }
}
policy { b(); }"##;

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn read(root: &Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path.trim_start_matches('/'))).unwrap()
}

fn fixture() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    write(r, "/etc/ssh/sshd_config", SSHD);
    write(r, "/etc/sysctl.conf", SYSCTL);
    write(r, "/etc/php/php.ini", PHP);
    write(r, "/etc/login.defs", LOGIN_DEFS);
    write(
        r,
        "/etc/systemd/system/app.service.d/override.conf",
        DROP_IN,
    );
    write(r, "/etc/hosts", "127.0.0.1 localhost");
    root
}

#[test]
fn real_files_converge_to_the_exact_end_state_and_stay() {
    let root = fixture();
    let r = root.path();
    let bundle = verified(&compile(POLICY));
    let first = converge(&bundle, r, false);
    assert!(failed(&first).is_empty(), "{:?}", failed(&first));
    assert_eq!(read(r, "/etc/ssh/sshd_config"), SSHD_AFTER);
    assert_eq!(
        read(r, "/etc/sysctl.conf"),
        "# /etc/sysctl.conf\n#net.ipv4.ip_forward=1\nvm.swappiness = 10\nnet.ipv4.ip_forward = 1\n\n# end\n"
    );
    assert_eq!(
        read(r, "/etc/php/php.ini"),
        "[PHP]\nmemory_limit = 128M\nupload_max_filesize = 64M\n;upload_max_filesize = 2M\n\n[Date]\ndate.timezone = UTC\n;date.timezone =\n[Session]\nsession.save_handler = files\n"
    );
    assert_eq!(
        read(r, "/etc/login.defs"),
        "MAIL_DIR\t/var/mail\n#PASS_MAX_DAYS\t99999\nPASS_MAX_DAYS\t90\nPASS_MIN_DAYS\t1\n"
    );
    assert_eq!(
        read(r, "/etc/systemd/system/app.service.d/override.conf"),
        "[Service]\nRestart=always\nLimitNOFILE=65536\n"
    );
    assert_eq!(
        read(r, "/etc/hosts"),
        "127.0.0.1 localhost\n# BEGIN converge cluster\n10.0.0.1 db\n10.0.0.2 cache\n# END converge cluster\n"
    );
    let second = converge(&bundle, r, false);
    assert_eq!(repaired(&second), 0, "the second run repairs nothing");
    assert!(failed(&second).is_empty(), "{:?}", failed(&second));
}

#[test]
fn a_shrinking_block_leaves_no_stale_lines() {
    let root = fixture();
    let r = root.path();
    let three = r##"bundle b { block "/etc/hosts" { marker = "m"; lines = ["a", "b", "c"]; } } policy { b(); }"##;
    let one =
        r##"bundle b { block "/etc/hosts" { marker = "m"; lines = ["b"]; } } policy { b(); }"##;
    converge(&verified(&compile(three)), r, false);
    let r2 = converge(&verified(&compile(one)), r, false);
    assert!(failed(&r2).is_empty(), "{:?}", failed(&r2));
    assert_eq!(
        read(r, "/etc/hosts"),
        "127.0.0.1 localhost\n# BEGIN m\nb\n# END m\n"
    );
}

#[test]
fn a_dry_run_shows_a_diff_and_writes_nothing() {
    let root = fixture();
    let r = root.path();
    let report = converge(&verified(&compile(POLICY)), r, true);
    assert!(failed(&report).is_empty(), "{:?}", failed(&report));
    assert_eq!(read(r, "/etc/ssh/sshd_config"), SSHD, "nothing written");
    assert_eq!(read(r, "/etc/php/php.ini"), PHP, "nothing written");
    let sshd = report
        .promises
        .iter()
        .find(|p| p.kind() == "setting" && *p.outcome() == Outcome::Repaired)
        .expect("a setting would repair");
    let diff = sshd
        .changes()
        .iter()
        .find_map(|c| c.diff.clone())
        .expect("a diff");
    assert!(diff.contains("+PermitRootLogin no"), "{diff}");
}

#[test]
fn files_not_in_the_format_fail_with_a_reason_and_stay_untouched() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let binary = b"\x7fELF\0\0key=1\n";
    write(r, "/etc/prose.conf", "this is prose\nnot settings\n");
    std::fs::write(r.join("etc/bin.conf"), binary).unwrap();
    write(r, "/etc/blocks", "# BEGIN m\nx\n");
    let report = converge(
        &verified(&compile(
            r#"bundle b {
  setting "/etc/prose.conf" { key = "a"; value = "1"; }
  setting "/etc/bin.conf" { key = "a"; value = "1"; }
  block "/etc/blocks" { marker = "m"; lines = ["y"]; }
}
policy { b(); }"#,
        )),
        r,
        false,
    );
    let why = failed(&report).join("\n");
    assert!(
        why.contains("no active line has the separator \"=\""),
        "{why}"
    );
    assert!(why.contains("holds a NUL byte"), "{why}");
    assert!(
        why.contains("`# BEGIN m` on line 1 has no `# END m`"),
        "{why}"
    );
    assert_eq!(read(r, "/etc/prose.conf"), "this is prose\nnot settings\n");
    assert_eq!(std::fs::read(r.join("etc/bin.conf")).unwrap(), binary);
    assert_eq!(read(r, "/etc/blocks"), "# BEGIN m\nx\n");
}

#[test]
fn replace_leaves_comments_alone_unless_asked() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    write(r, "/etc/a", "#PermitRootLogin yes\nPermitRootLogin yes\n");
    write(r, "/etc/b", "#PermitRootLogin yes\nPermitRootLogin yes\n");
    let report = converge(
        &verified(&compile(
            r#"bundle b {
  line "/etc/a" { replace = r"yes$"; with = "no"; }
  line "/etc/b" { replace = r"yes$"; with = "no"; replace_comments = true; }
}
policy { b(); }"#,
        )),
        r,
        false,
    );
    assert!(failed(&report).is_empty(), "{:?}", failed(&report));
    assert_eq!(
        read(r, "/etc/a"),
        "#PermitRootLogin yes\nPermitRootLogin no\n"
    );
    assert_eq!(
        read(r, "/etc/b"),
        "#PermitRootLogin no\nPermitRootLogin no\n"
    );
}

/// Settings are one object per key and section: two giving one key
/// different values (one computed on the host) both fail at run time with
/// nothing written; a third, of another key, computed the same way, is
/// applied. (Before settings had a part identity, every two settings of one
/// file contradicted each other at run time.)
#[test]
fn a_run_time_contradiction_is_per_key() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    write(r, "/etc/hostname", "web01\n");
    write(r, "/etc/app.conf", "name=old\n");
    let report = converge(
        &verified(&compile(
            r#"bundle b {
  setting "/etc/app.conf" { key = "name"; value = "static"; }
  setting "/etc/app.conf" { key = "name"; value = "${sys.hostname}"; }
  setting "/etc/app.conf" { key = "host"; value = "${sys.hostname}"; }
}
policy { b(); }"#,
        )),
        r,
        false,
    );
    let f = failed(&report);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(
        f.iter().all(|m| m.contains("contradiction at run time")),
        "{f:?}"
    );
    assert_eq!(read(r, "/etc/app.conf"), "name=old\nhost=web01\n");
}

/// A `setting` and a `block` on a file another promise creates, written
/// before it in the source, converge in one run with nothing failed.
#[test]
fn edits_run_after_the_file_promise_that_creates_the_file() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("etc")).unwrap();
    let report = converge(
        &verified(&compile(
            r#"bundle b {
  setting "/etc/app.conf" { key = "port"; value = "8080"; }
  block "/etc/app.conf" { marker = "extra"; lines = ["debug=0"]; }
  file "/etc/app.conf" { mode = 0o640; }
}
policy { b(); }"#,
        )),
        r,
        false,
    );
    assert!(failed(&report).is_empty(), "{:?}", failed(&report));
    assert_eq!(
        read(r, "/etc/app.conf"),
        "port=8080\n# BEGIN extra\ndebug=0\n# END extra\n"
    );
}
