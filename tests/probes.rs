//! Probes end to end (issue 18 item 3, LANGUAGE.md §15, THREATS.md T32):
//! `fact` declarations compiled into a signed bundle and run by the VM on
//! sandbox roots. Program probes are `#!/bin/sh` scripts written into the
//! root, which run chrooted into it (as `command` promises do under
//! `--root`), so those tests need root; fact files are read through the
//! root's file layer and need nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use converge::support::{
    compile, converge, failed, repaired, require_root, root_with_a_shell, verified,
};
use converge_vm::run::operators::Outcome;
use converge_vm::run::{report, RunReport};

/// A sandbox root.
struct Root {
    dir: tempfile::TempDir,
}

impl Root {
    fn new() -> Root {
        Root {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A root that can run `#!/bin/sh` probes chrooted.
    fn with_shell() -> Root {
        let r = Root::new();
        root_with_a_shell(r.dir.path());
        r
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p.trim_start_matches('/'))
    }

    /// Writes a file with `mode`, its missing directories 0755.
    fn write(&self, p: &str, content: &str, mode: u32) {
        let path = self.path(p);
        let mut dir = path.parent().unwrap().to_path_buf();
        std::fs::create_dir_all(&dir).unwrap();
        while dir != self.dir.path() {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            dir = dir.parent().unwrap().to_path_buf();
        }
        std::fs::write(&path, content).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A probe program: a shell script under `/usr/local/lib/converge/probes`.
    fn probe(&self, name: &str, script: &str) {
        self.write(
            &format!("/usr/local/lib/converge/probes/{name}"),
            &format!("#!/bin/sh\n{script}\n"),
            0o755,
        );
    }

    fn read(&self, p: &str) -> Option<String> {
        std::fs::read_to_string(self.path(p)).ok()
    }

    fn run(&self, policy: &str) -> RunReport {
        converge(&verified(&compile(policy)), self.dir.path(), false)
    }
}

/// The outcome of the promise on `promiser`.
fn outcome<'r>(r: &'r RunReport, promiser: &str) -> &'r Outcome {
    r.promises
        .iter()
        .find(|p| p.promiser == promiser)
        .unwrap_or_else(|| panic!("no promise {promiser}: {r:?}"))
        .outcome()
}

/// The reason a promise was skipped (it must have been).
fn skipped<'r>(r: &'r RunReport, promiser: &str) -> &'r str {
    match outcome(r, promiser) {
        Outcome::Skipped(why) => why,
        other => panic!("{promiser} was not skipped but {other:?}"),
    }
}

/// The probes object of the JSON report.
fn probes_json(r: &RunReport) -> serde_json::Value {
    report::json(r)["probes"].clone()
}

/// Every type from fact files: scalars trimmed, a list one item per line,
/// a map and a record as JSON; the values reach content, classes and
/// guards, go into the report, and a second run repairs nothing.
#[test]
fn fact_files_are_parsed_as_their_declared_types() {
    let root = Root::new();
    let d = "/etc/converge/facts.d";
    root.write(&format!("{d}/dc"), "  eu-west-1\n", 0o644);
    root.write(&format!("{d}/rack"), "12\n", 0o644);
    root.write(&format!("{d}/vm"), "true\n", 0o644);
    root.write(&format!("{d}/servers"), "a.example\n\nb.example\n", 0o644);
    root.write(
        &format!("{d}/labels"),
        r#"{"role": "db", "tier": "gold"}"#,
        0o644,
    );
    root.write(&format!("{d}/hw"), r#"{"cpus": 8, "model": "x86"}"#, 0o644);
    let policy = r#"
type Hw = { cpus: int, model: string };
fact dc: string from file "/etc/converge/facts.d/dc";
fact rack: int from file "/etc/converge/facts.d/rack";
fact vm: bool from file "/etc/converge/facts.d/vm";
fact servers: list<string> from file "/etc/converge/facts.d/servers";
fact labels: map<string, string> from file "/etc/converge/facts.d/labels";
fact hw: Hw from file "/etc/converge/facts.d/hw";
class eu = facts.dc =~ r"^eu-";
bundle b {
  file "/etc/facts.txt" {
    content = "dc=${facts.dc} rack=${facts.rack} role=${facts.labels.role} cpus=${facts.hw.cpus} model=${facts.hw.model} servers=${join(facts.servers, ",")}\n";
  }
  when eu { file "/etc/eu" { content = "eu\n"; } }
  when facts.vm && facts.rack == 12 { file "/etc/vm12" { content = "yes\n"; } }
}
policy { b(); }
"#;
    let r = root.run(policy);
    assert_eq!(failed(&r), Vec::<String>::new());
    assert_eq!(
        root.read("/etc/facts.txt").unwrap(),
        "dc=eu-west-1 rack=12 role=db cpus=8 model=x86 servers=a.example,b.example\n"
    );
    assert_eq!(root.read("/etc/eu").unwrap(), "eu\n");
    assert_eq!(root.read("/etc/vm12").unwrap(), "yes\n");
    let probes = probes_json(&r);
    assert_eq!(probes["dc"]["value"], "eu-west-1");
    assert_eq!(probes["rack"]["value"], 12);
    assert_eq!(
        probes["servers"]["value"],
        serde_json::json!(["a.example", "b.example"])
    );
    assert_eq!(
        probes["hw"]["value"],
        serde_json::json!({"cpus": 8, "model": "x86"})
    );
    assert_eq!(probes["labels"]["error"], serde_json::Value::Null);
    assert!(probes["hw"]["duration_ms"].is_u64());
    let again = root.run(policy);
    assert_eq!(repaired(&again), 0, "{again:?}");
}

/// Output of another type (an int that is not a number, a record missing
/// a field) is refused: the fact is unknown, what needs it is skipped with
/// the reason, everything else applies.
#[test]
fn a_value_of_the_wrong_type_makes_the_fact_unknown() {
    let root = Root::new();
    root.write("/etc/facts.d/rack", "twelve\n", 0o644);
    root.write("/etc/facts.d/hw", r#"{"cpus": 8}"#, 0o644);
    let r = root.run(
        r#"
type Hw = { cpus: int, model: string };
fact rack: int from file "/etc/facts.d/rack";
fact hw: Hw from file "/etc/facts.d/hw";
bundle b {
  file "/etc/rack" { content = "${facts.rack}\n"; }
  when facts.hw.cpus == 8 { file "/etc/big" { content = "big\n"; } }
  file "/etc/other" { content = "applied\n"; }
}
policy { b(); }
"#,
    );
    assert_eq!(
        skipped(&r, "/etc/rack"),
        "probe \"rack\" failed: expected an int, got \"twelve\""
    );
    assert_eq!(
        skipped(&r, "/etc/big"),
        "probe \"hw\" failed: missing field `.model`"
    );
    assert_eq!(root.read("/etc/other").unwrap(), "applied\n");
    assert!(root.read("/etc/rack").is_none() && root.read("/etc/big").is_none());
    assert_eq!(failed(&r), Vec::<String>::new());
    let human = report::human(&r);
    assert!(
        human.contains("UNKNOWN  facts.rack: probe failed: expected an int, got \"twelve\""),
        "{human}"
    );
    assert_eq!(
        probes_json(&r)["rack"],
        serde_json::json!({"value": null, "error": "expected an int, got \"twelve\"", "duration_ms": probes_json(&r)["rack"]["duration_ms"]})
    );
}

/// T32: a fact file (or a directory above it) writable by its group or
/// others is refused, as is a missing one; never read as a value.
#[test]
fn t32_group_writable_or_missing_fact_files_are_refused() {
    let root = Root::new();
    root.write("/etc/facts.d/dc", "eu-1\n", 0o664);
    root.write("/srv/open/dc", "eu-2\n", 0o644);
    std::fs::set_permissions(
        root.path("/srv/open"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let r = root.run(
        r#"
fact dc: string from file "/etc/facts.d/dc";
fact dc2: string from file "/srv/open/dc";
fact gone: string from file "/etc/facts.d/none";
bundle b {
  file "/etc/dc" { content = "${facts.dc}\n"; }
  file "/etc/dc2" { content = "${facts.dc2}\n"; }
  file "/etc/gone" { content = "${facts.gone}\n"; }
}
policy { b(); }
"#,
    );
    assert!(
        skipped(&r, "/etc/dc").contains(
            "probe \"dc\" failed: refused to read it: `/etc/facts.d/dc` is writable by its group or others (mode 0o664"
        ),
        "{r:?}"
    );
    assert!(
        skipped(&r, "/etc/dc2").contains("`/srv/open` is writable by its group or others"),
        "{r:?}"
    );
    assert!(
        skipped(&r, "/etc/gone").contains("`/etc/facts.d/none` does not exist"),
        "{r:?}"
    );
    assert!(root.read("/etc/dc").is_none());
}

/// A class defined from an unknown fact is unknown: the promises it
/// guards are skipped with the reason (never taken as false), and so is a
/// class defined from that class; a `!` of it does not make anything
/// active either.
#[test]
fn a_class_from_an_unknown_fact_skips_what_it_guards() {
    let root = Root::new();
    let r = root.run(
        r#"
fact dc: string from file "/etc/facts.d/dc";
class eu = facts.dc =~ r"^eu-";
class eu_web = eu && sys.os == "linux";
bundle b {
  when eu { file "/etc/eu" { content = "eu\n"; } }
  when !eu { file "/etc/not-eu" { content = "elsewhere\n"; } }
  when eu_web { file "/etc/eu-web" { content = "x\n"; } }
  file "/etc/always" { content = "yes\n"; }
}
policy { b(); }
"#,
    );
    for p in ["/etc/eu", "/etc/not-eu"] {
        assert!(
            skipped(&r, p).starts_with("class `eu` is unknown: probe \"dc\" failed: "),
            "{p}: {r:?}"
        );
    }
    assert!(skipped(&r, "/etc/eu-web").starts_with("class `eu` is unknown"));
    assert_eq!(root.read("/etc/always").unwrap(), "yes\n");
    assert!(root.read("/etc/not-eu").is_none());
}

/// A probe program that does not exist: the fact is unknown (nothing is
/// run), the promise that needs it is skipped, the others apply.
#[test]
fn a_missing_probe_program_makes_its_fact_unknown() {
    let root = Root::new();
    let r = root.run(
        r#"
fact dc: string from ["/usr/local/lib/converge/probes/dc"] timeout 2s;
bundle b {
  file "/etc/dc" { content = "${facts.dc}\n"; }
  file "/etc/other" { content = "x\n"; }
}
policy { b(); }
"#,
    );
    assert_eq!(
        skipped(&r, "/etc/dc"),
        "probe \"dc\" failed: refused to run it: `/usr/local/lib/converge/probes/dc` does not exist"
    );
    assert_eq!(root.read("/etc/other").unwrap(), "x\n");
}

/// Program probes of every type, chrooted into the root: the script sees
/// the root as `/`, its arguments as given, nothing on stdin; values reach
/// a class and content; a second run repairs nothing and runs them again.
#[test]
#[ignore = "needs root"]
fn program_probes_give_each_type_chrooted_into_the_root() {
    require_root("probes under --root run chrooted, through `unshare --root`");
    let root = Root::with_shell();
    root.write("/etc/marker", "inside\n", 0o644);
    root.probe("dc", r#"read m < /etc/marker; echo "eu-$m-$1""#);
    root.probe("cpus", "echo 8");
    root.probe("list", "echo a; echo b");
    root.probe("stdin", "if read x; then echo read; else echo closed; fi");
    root.probe("hw", r#"echo '{"cpus": 4, "tags": {"role": "db"}}'"#);
    let policy = r#"
type Hw = { cpus: int, tags: map<string, string> };
fact dc: string from ["/usr/local/lib/converge/probes/dc", "x y"] timeout 5s;
fact cpus: int from ["/usr/local/lib/converge/probes/cpus"];
fact names: list<string> from ["/usr/local/lib/converge/probes/list"];
fact stdin: string from ["/usr/local/lib/converge/probes/stdin"];
fact hw: Hw from ["/usr/local/lib/converge/probes/hw"];
class eu = facts.dc =~ r"^eu-";
bundle b {
  when eu {
    file "/etc/out" { content = "${facts.dc}|${facts.cpus}|${join(facts.names, ",")}|${facts.stdin}|${facts.hw.tags.role}\n"; }
  }
}
policy { b(); }
"#;
    let r = root.run(policy);
    assert_eq!(failed(&r), Vec::<String>::new());
    assert_eq!(
        root.read("/etc/out").unwrap(),
        "eu-inside-x y|8|a,b|closed|db\n"
    );
    assert_eq!(probes_json(&r)["hw"]["value"]["cpus"], 4);
    let again = root.run(policy);
    assert_eq!(repaired(&again), 0, "{again:?}");
}

/// A probe that hangs (with a child holding its output open) is killed
/// at its deadline and the run finishes promptly; one that floods its
/// output past 64 KiB is refused (an endless one is killed at the cap, not
/// at its deadline); one that fails says its status and
/// standard error. Each skips only what needs it.
#[test]
#[ignore = "needs root"]
fn hanging_flooding_and_failing_probes_are_refused_with_the_reason() {
    require_root("probes under --root run chrooted, through `unshare --root`");
    let root = Root::with_shell();
    root.probe("hang", "(while :; do :; done) & while :; do :; done");
    root.probe(
        "flood",
        "i=0; while [ $i -lt 2000 ]; do echo 0123456789012345678901234567890123456789012345678901234567890123456789; i=$((i+1)); done",
    );
    root.probe(
        "endless",
        "while :; do echo 0123456789012345678901234567890123456789; done",
    );
    root.probe("fail", "echo broken >&2; exit 3");
    let started = Instant::now();
    let r = root.run(
        r#"
fact hang: string from ["/usr/local/lib/converge/probes/hang"] timeout 1s;
fact flood: string from ["/usr/local/lib/converge/probes/flood"];
fact endless: string from ["/usr/local/lib/converge/probes/endless"] timeout 30s;
fact fail: string from ["/usr/local/lib/converge/probes/fail"];
bundle b {
  file "/etc/hang" { content = "${facts.hang}\n"; }
  file "/etc/flood" { content = "${facts.flood}\n"; }
  file "/etc/endless" { content = "${facts.endless}\n"; }
  file "/etc/fail" { content = "${facts.fail}\n"; }
  file "/etc/other" { content = "x\n"; }
}
policy { b(); }
"#,
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        skipped(&r, "/etc/hang"),
        "probe \"hang\" failed: timed out after 1s"
    );
    assert_eq!(
        skipped(&r, "/etc/flood"),
        "probe \"flood\" failed: it printed more than 64 KiB"
    );
    assert_eq!(
        skipped(&r, "/etc/endless"),
        "probe \"endless\" failed: it printed more than 64 KiB"
    );
    assert_eq!(
        skipped(&r, "/etc/fail"),
        "probe \"fail\" failed: it exited with status 3: broken"
    );
    assert_eq!(root.read("/etc/other").unwrap(), "x\n");
    let probes = probes_json(&r);
    assert_eq!(probes["hang"]["error"], "timed out after 1s");
    assert!(probes["hang"]["duration_ms"].as_u64().unwrap() >= 1000);
}

/// T32: a probe program that is group-writable, or in a directory others
/// may write, or a link, is never run.
#[test]
#[ignore = "needs root"]
fn t32_writable_or_linked_probe_programs_are_never_run() {
    require_root("probes under --root run chrooted, through `unshare --root`");
    let root = Root::with_shell();
    root.probe("gw", "touch /ran-gw; echo x");
    std::fs::set_permissions(
        root.path("/usr/local/lib/converge/probes/gw"),
        std::fs::Permissions::from_mode(0o775),
    )
    .unwrap();
    root.write("/opt/open/p", "#!/bin/sh\ntouch /ran-open; echo x\n", 0o755);
    std::fs::set_permissions(
        root.path("/opt/open"),
        std::fs::Permissions::from_mode(0o1777),
    )
    .unwrap();
    root.probe("real", "touch /ran-link; echo x");
    std::os::unix::fs::symlink(
        "/usr/local/lib/converge/probes/real",
        root.path("/usr/local/lib/converge/probes/link"),
    )
    .unwrap();
    let r = root.run(
        r#"
fact gw: string from ["/usr/local/lib/converge/probes/gw"];
fact open: string from ["/opt/open/p"];
fact link: string from ["/usr/local/lib/converge/probes/link"];
bundle b {
  file "/etc/gw" { content = "${facts.gw}\n"; }
  file "/etc/open" { content = "${facts.open}\n"; }
  file "/etc/link" { content = "${facts.link}\n"; }
}
policy { b(); }
"#,
    );
    assert!(skipped(&r, "/etc/gw").contains("is writable by its group or others (mode 0o775"));
    assert!(skipped(&r, "/etc/open").contains("`/opt/open` is writable by its group or others"));
    assert!(
        skipped(&r, "/etc/link").contains(
            "`/usr/local/lib/converge/probes/link` is a symbolic link, not a regular file"
        ),
        "{r:?}"
    );
    for ran in ["/ran-gw", "/ran-open", "/ran-link"] {
        assert!(!root.path(ran).exists(), "{ran} ran");
    }
}

/// The bundle carries the probe table whether or not anything reads a
/// fact: declared facts are gathered and reported on every host.
#[test]
fn declared_facts_are_gathered_even_when_unread() {
    let root = Root::new();
    root.write("/etc/facts.d/owner", "team-a\n", 0o644);
    let r = root.run(
        r#"
fact owner: string from file "/etc/facts.d/owner";
bundle b { file "/etc/x" { content = "x\n"; } }
policy { b(); }
"#,
    );
    assert_eq!(probes_json(&r)["owner"]["value"], "team-a");
}
