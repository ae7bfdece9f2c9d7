//! `policyvm capture` (LANGUAGE.md section 17, issue 25 item 4): for each
//! case of `tests/capture/*.case` a sandbox root is built, captured, and
//! the printed policy goes the whole way: `policyc fmt --check` (the
//! printer's layout is the formatter's), `policyc check --deny-warnings`,
//! `policyc build` with a fresh key, and `policyvm run` on the SAME root,
//! which must repair nothing and fail nothing. A property test does the
//! same with random trees. Cases that expect an error check the exit code
//! and the message, that nothing is printed, and that `--out` is left as
//! it was.
//!
//! The case format (one directive a line; `#` starts a comment line;
//! a word in double quotes is a JSON string, so any name can be written):
//!
//! ```text
//! needs root                      # or systemctl, runit, rpm (the test that runs it is ignored)
//! capture file --recurse /srv     # the arguments; --root and --out are added (several
//!                                 # `capture` lines: each capture round-trips on its own)
//! dir /srv 0755                   # a directory and its mode
//! file "/srv/a b" 0644 "text\n"   # content: a JSON string, hex:00ff, or size:N (N bytes)
//! link /srv/l "../target"
//! fifo /srv/pipe
//! chown /srv/a 1001 1001          # (needs root)
//! etc passwd "alice:x:1001:..."   # a line appended to ROOT/etc/passwd (or group, shadow, os-release)
//! deb cvg-tool 1.2-3              # a package built and installed with dpkg --root (needs root)
//! rpm cvg-tool 2:1.2 3.el9        # NAME [EPOCH:]VERSION RELEASE, built with rpmbuild and
//!                                 # installed with rpm --root (needs root rpm)
//! unit web enabled                # a systemd unit file; enabled with systemctl --root (needs systemctl)
//! out file                        # --out names a regular file (or: out none, to give no --out)
//! outfile files/srv "x"           # a file already in --out before the capture
//! expect exit 66
//! expect stdout "text"            # (or: expect stderr "text", expect no-stdout "text",
//!                                 # expect once "text": exactly once in standard output)
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ::converge::rpms::{self, RpmSpec};
use ::converge::{binary, repo_root};
use ::converge::{debs, support};
use proptest::prelude::*;

/// One directive of a case file, split into words.
type Line = Vec<String>;

/// Splits a directive into words: bare words, and JSON strings in double
/// quotes.
fn words(line: &str) -> Line {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        if rest.starts_with('"') {
            // The end of the JSON string: the first unescaped quote.
            let bytes = rest.as_bytes();
            let mut i = 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            let (quoted, tail) = rest.split_at(i + 1);
            out.push(serde_json::from_str::<String>(quoted).unwrap_or_else(|e| {
                panic!("bad string {quoted}: {e}");
            }));
            rest = tail.trim_start();
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            out.push(rest[..end].to_owned());
            rest = rest[end..].trim_start();
        }
    }
    out
}

#[derive(Debug)]
struct Case {
    name: String,
    lines: Vec<Line>,
}

impl Case {
    fn directive(&self, word: &str) -> impl Iterator<Item = &Line> {
        let word = word.to_owned();
        self.lines
            .iter()
            .filter(move |l| l.first().is_some_and(|w| *w == word))
    }

    fn needs(&self) -> Vec<String> {
        self.directive("needs")
            .filter_map(|l| l.get(1).cloned())
            .collect()
    }

    fn expect(&self, what: &str) -> Vec<String> {
        self.directive("expect")
            .filter(|l| l.get(1).is_some_and(|w| w == what))
            .filter_map(|l| l.get(2).cloned())
            .collect()
    }
}

fn cases() -> Vec<Case> {
    let dir = repo_root().join("tests/capture");
    let mut cases: Vec<Case> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "case"))
        .map(|p| Case {
            name: p.file_stem().unwrap().to_string_lossy().into_owned(),
            lines: std::fs::read_to_string(&p)
                .unwrap()
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
                .map(words)
                .collect(),
        })
        .collect();
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(cases.len() >= 8, "too few cases in {}", dir.display());
    cases
}

fn inside(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

fn mode(word: &str) -> u32 {
    u32::from_str_radix(word.trim_start_matches("0o"), 8).unwrap()
}

fn content(word: &str) -> Vec<u8> {
    if let Some(hex) = word.strip_prefix("hex:") {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    } else if let Some(n) = word.strip_prefix("size:") {
        let n: usize = n.parse().unwrap();
        (0..n).map(|i| b"abcdefgh\n"[i % 9]).collect()
    } else {
        word.as_bytes().to_vec()
    }
}

fn run_ok(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{what} failed:\n{}", text(&out));
    out
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Installs `NAME_VERSION.deb` (one file, no scripts; `src/debs.rs`) into
/// the root with `dpkg --root`.
fn install_deb(root: &Path, name: &str, version: &str) {
    for d in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/lib/dpkg/triggers",
        "var/log",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for f in ["var/lib/dpkg/status", "var/lib/dpkg/available"] {
        if !root.join(f).exists() {
            std::fs::write(root.join(f), "").unwrap();
        }
    }
    let debs = tempfile::tempdir().unwrap();
    let deb = debs::build_deb(debs.path(), name, version, None, None);
    run_ok(
        debs::dpkg_in_root(root)
            .args(["--force-not-root", "--install"])
            .arg(&deb),
        "dpkg --install",
    );
}

/// Installs `NAME-VERSION-RELEASE.noarch.rpm` (`src/rpms.rs`; VERSION may
/// carry an epoch) into the root's own rpm database with `rpm -i`.
fn install_rpm(root: &Path, name: &str, version: &str, release: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = RpmSpec {
        release,
        ..RpmSpec::new(name, version)
    }
    .build(dir.path());
    rpms::install(root, &[file], false);
}

/// Builds the case's root; returns `--out` (`None`: not given).
fn build(case: &Case, root: &Path, work: &Path) -> Option<PathBuf> {
    std::fs::create_dir_all(root.join("etc")).unwrap();
    let mut out = Some(work.join("site"));
    std::fs::create_dir_all(work.join("site")).unwrap();
    for line in &case.lines {
        let w = |i: usize| -> &str { line.get(i).map_or("", String::as_str) };
        match w(0) {
            "dir" => {
                let p = inside(root, w(1));
                std::fs::create_dir_all(&p).unwrap();
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode(w(2)))).unwrap();
            }
            "file" => {
                let p = inside(root, w(1));
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, content(w(3))).unwrap();
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode(w(2)))).unwrap();
            }
            "link" => {
                let p = inside(root, w(1));
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::os::unix::fs::symlink(w(2), &p).unwrap();
            }
            "fifo" => {
                std::fs::create_dir_all(inside(root, w(1)).parent().unwrap()).unwrap();
                run_ok(Command::new("mkfifo").arg(inside(root, w(1))), "mkfifo");
            }
            "chown" => {
                std::os::unix::fs::lchown(
                    inside(root, w(1)),
                    Some(w(2).parse().unwrap()),
                    Some(w(3).parse().unwrap()),
                )
                .unwrap();
            }
            "etc" => {
                use std::io::Write as _;
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(root.join("etc").join(w(1)))
                    .unwrap();
                writeln!(f, "{}", w(2)).unwrap();
            }
            "deb" => install_deb(root, w(1), w(2)),
            "rpm" => install_rpm(root, w(1), w(2), w(3)),
            "unit" => {
                let units = root.join("etc/systemd/system");
                std::fs::create_dir_all(&units).unwrap();
                let install = if w(2) == "static" {
                    ""
                } else {
                    "[Install]\nWantedBy=multi-user.target\n"
                };
                std::fs::write(
                    units.join(format!("{}.service", w(1))),
                    format!("[Unit]\nDescription=test\n[Service]\nExecStart=/bin/true\n{install}"),
                )
                .unwrap();
                if w(2) == "enabled" {
                    run_ok(
                        Command::new("systemctl")
                            .arg(format!("--root={}", root.display()))
                            .args(["enable", w(1)]),
                        "systemctl enable",
                    );
                }
            }
            "outfile" => {
                let p = work.join("site").join(w(1));
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, w(2)).unwrap();
            }
            "out" => match w(1) {
                "none" => out = None,
                "file" => {
                    let f = work.join("not-a-dir");
                    std::fs::write(&f, "x").unwrap();
                    out = Some(f);
                }
                other => panic!("{}: unknown `out {other}`", case.name),
            },
            "needs" | "capture" | "expect" => {}
            other => panic!("{}: unknown directive `{other}`", case.name),
        }
    }
    out
}

/// Runs `cmd` (a `policyvm` command on a root) with `HOME` and `TMPDIR` in
/// empty directories of the test, which must stay empty: a capture and the
/// run of its policy write nothing outside the root, `--out` and
/// `--state` (the host's rpm would put a database in `~/.rpmdb`).
fn isolated(cmd: &mut Command, what: &str) -> Output {
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = cmd
        .env("HOME", home.path())
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    for dir in [home.path(), tmp.path()] {
        let left: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            left.is_empty(),
            "{what} wrote {left:?} in {}",
            dir.display()
        );
    }
    out
}

/// Runs `policyvm capture` with `args` on `root`, `--out` when given.
fn capture(args: &[String], root: &Path, out: Option<&Path>) -> Output {
    let mut cmd = Command::new(binary("policyvm"));
    cmd.arg("capture").args(args).arg("--root").arg(root);
    if let Some(out) = out {
        cmd.arg("--out").arg(out);
    }
    isolated(&mut cmd, "policyvm capture")
}

/// The rest of the round trip for a captured policy saved in `site` as
/// `file`: formatted as `policyc fmt` would, checks clean, builds, and a
/// run on the same root repairs and fails nothing. Returns the run's
/// report.
fn round_trip(
    policy_text: &str,
    site: &Path,
    file: &str,
    root: &Path,
    what: &str,
) -> serde_json::Value {
    let policy = site.join(file);
    std::fs::write(&policy, policy_text).unwrap();
    let policyc = || Command::new(binary("policyc"));
    let fmt = policyc()
        .args(["fmt", "--check"])
        .arg(&policy)
        .output()
        .unwrap();
    assert!(
        fmt.status.success(),
        "{what}: the capture is not in policyc fmt's layout:\n{}\n--- policy\n{policy_text}",
        text(&fmt)
    );
    let check = policyc()
        .args(["check", "--deny-warnings"])
        .arg(&policy)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{what}: policyc check:\n{}\n--- policy\n{policy_text}",
        text(&check)
    );
    let built = support::policyc_build(&policy, &[]);
    let state = built.work.path().join("state");
    let run = isolated(
        Command::new(binary("policyvm"))
            .arg("run")
            .arg(&built.bundle)
            .arg("--trust")
            .arg(&built.trust)
            .arg("--root")
            .arg(root)
            .arg("--state")
            .arg(&state)
            .args(["--format", "json"]),
        "policyvm run",
    );
    let report: serde_json::Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("{what}: {e}\n{}", text(&run)));
    let summary = &report["summary"];
    assert_eq!(
        (summary["repaired"].as_u64(), summary["failed"].as_u64()),
        (Some(0), Some(0)),
        "{what}: the run of the capture on the same root changed something:\n{report:#}\n--- policy\n{policy_text}"
    );
    assert_eq!(run.status.code(), Some(0), "{what}: {}", text(&run));
    report
}

/// A listing of every file under `dir` with its content, to see that a
/// failed capture left `--out` alone.
fn listing(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

fn run_case(case: &Case) {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let out = build(case, &root, work.path());
    let calls: Vec<Vec<String>> = case
        .directive("capture")
        .map(|l| l.get(1..).unwrap().to_vec())
        .collect();
    assert!(!calls.is_empty(), "{}: no `capture` line", case.name);
    let what = format!("case {}", case.name);
    let code: i32 = case
        .expect("exit")
        .first()
        .map_or(0, |c| c.parse().unwrap());
    // Each capture in turn; the expectations look at all they printed.
    let mut stdouts = Vec::new();
    let mut stdout = String::new();
    let mut stderr = String::new();
    let mut shown = String::new();
    for args in &calls {
        let before = out.as_deref().map(listing);
        let captured = capture(args, &root, out.as_deref());
        assert_eq!(
            captured.status.code(),
            Some(code),
            "{what}: capture {args:?}:\n{}",
            text(&captured)
        );
        let printed = String::from_utf8_lossy(&captured.stdout).into_owned();
        let said = String::from_utf8_lossy(&captured.stderr).into_owned();
        if code != 0 {
            assert!(
                printed.is_empty(),
                "{what}: a failed capture printed\n{printed}"
            );
            assert!(said.starts_with("error: "), "{what}: {said}");
            if let (Some(out), Some(before)) = (out.as_deref(), before) {
                assert_eq!(listing(out), before, "{what}: --out was changed");
            }
        }
        stdout.push_str(&printed);
        stderr.push_str(&said);
        shown.push_str(&text(&captured));
        stdouts.push(printed);
    }
    for want in case.expect("stdout") {
        assert!(stdout.contains(&want), "{what}: no {want:?} in\n{shown}");
    }
    for unwanted in case.expect("no-stdout") {
        assert!(
            !stdout.contains(&unwanted),
            "{what}: {unwanted:?} in\n{shown}"
        );
    }
    for once in case.expect("once") {
        assert_eq!(
            stdout.matches(&once).count(),
            1,
            "{what}: {once:?} not exactly once in\n{shown}"
        );
    }
    for want in case.expect("stderr") {
        assert!(stderr.contains(&want), "{what}: no {want:?} in\n{shown}");
    }
    if code != 0 {
        return;
    }
    let site = out.unwrap_or_else(|| {
        let site = work.path().join("site");
        std::fs::create_dir_all(&site).unwrap();
        site
    });
    for (i, printed) in stdouts.iter().enumerate() {
        let file = format!("captured-{i}.policy");
        round_trip(
            printed,
            &site,
            &file,
            &root,
            &format!("{what}, capture {i}"),
        );
    }
}

fn run_cases(select: impl Fn(&[String]) -> bool) -> usize {
    let mut ran = 0;
    for case in cases() {
        if select(&case.needs()) {
            run_case(&case);
            ran += 1;
        }
    }
    ran
}

/// Every case that needs nothing but the binaries.
#[test]
fn every_case_round_trips_or_fails_as_expected() {
    let ran = run_cases(<[String]>::is_empty);
    assert!(ran >= 6, "only {ran} cases ran");
}

/// Whether a case needs exactly the things of `set` (each of them, and
/// nothing else).
fn needs_exactly(needs: &[String], set: &[&str]) -> bool {
    set.iter().all(|n| needs.iter().any(|m| m == n))
        && needs.iter().all(|n| set.contains(&n.as_str()))
}

/// Cases with owners other than the test's own user, and packages
/// installed with `dpkg --root`; a whole Debian-like root (packages,
/// users and groups, systemd units, files, directories and links).
#[test]
#[ignore = "needs root, dpkg, systemctl"]
fn cases_that_need_root() {
    support::require_root("chown, dpkg --root");
    support::require_tool("dpkg-deb", "dpkg");
    support::require_tool("systemctl", "systemd");
    let ran = run_cases(|needs| {
        needs_exactly(needs, &["root"]) || needs_exactly(needs, &["root", "systemctl"])
    });
    assert!(ran >= 3, "only {ran} cases ran");
}

/// Cases of Red Hat family roots whose packages are installed with `rpm
/// --root` into the root's own database (`rpm -i` chroots: root).
#[test]
#[ignore = "needs root, rpm, rpmbuild, systemctl"]
fn cases_that_need_rpm() {
    support::require_root("rpm --root");
    support::require_tool("rpm", "rpm");
    support::require_tool("rpmbuild", "rpm");
    support::require_tool("systemctl", "systemd");
    let ran = run_cases(|needs| needs.iter().any(|n| n == "rpm"));
    assert!(ran >= 2, "only {ran} cases ran");
}

/// Cases of services: systemd units in a root (`systemctl --root`), runit
/// service directories (`sv status`).
#[test]
#[ignore = "needs systemctl and runit"]
fn cases_that_need_service_managers() {
    support::require_tool("systemctl", "systemd");
    support::require_tool("sv", "runit");
    let ran = run_cases(|needs| {
        !needs.is_empty() && needs.iter().all(|n| n == "systemctl" || n == "runit")
    });
    assert!(ran >= 2, "only {ran} cases ran");
}

#[test]
fn an_unknown_type_lists_the_valid_ones() {
    let root = tempfile::tempdir().unwrap();
    let out = capture(&["widget".into(), "x".into()], root.path(), None);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for kind in [
        "file",
        "directory",
        "link",
        "package",
        "service",
        "user",
        "group",
    ] {
        assert!(stderr.contains(kind), "{kind} not listed: {stderr}");
    }
    assert!(out.stdout.is_empty());
}

#[test]
fn a_name_that_is_not_utf8_is_refused_with_a_message() {
    use std::os::unix::ffi::OsStrExt as _;
    let root = tempfile::tempdir().unwrap();
    let out = Command::new(binary("policyvm"))
        .arg("capture")
        .arg("file")
        .arg(std::ffi::OsStr::from_bytes(b"/bad\xffname"))
        .arg("--root")
        .arg(root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not UTF-8"),
        "{}",
        text(&out)
    );
    assert!(out.stdout.is_empty());
}

/// A name inside a captured directory that is not UTF-8 stops the capture
/// with its escaped path (case files are UTF-8, so this one is here).
#[test]
fn a_non_utf8_name_inside_a_directory_stops_the_capture() {
    use std::os::unix::ffi::OsStrExt as _;
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("srv")).unwrap();
    std::fs::write(
        root.path()
            .join("srv")
            .join(std::ffi::OsStr::from_bytes(b"caf\xe9")),
        "x",
    )
    .unwrap();
    let out = capture(
        &["file".into(), "--recurse".into(), "/srv".into()],
        root.path(),
        None,
    );
    assert_eq!(out.status.code(), Some(66), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("/srv/caf\\xe9") && stderr.contains("not UTF-8"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

/// A link leading out of the root is captured as a link (its target
/// verbatim), never followed: the host's file behind it is not read.
#[test]
fn a_link_out_of_the_root_is_not_followed() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::os::unix::fs::symlink("/etc", root.path().join("etc/host")).unwrap();
    let out = capture(
        &["file".into(), "/etc/host/hostname".into()],
        root.path(),
        None,
    );
    assert_eq!(out.status.code(), Some(66), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("symbolic link"),
        "{}",
        text(&out)
    );
    let out = capture(&["link".into(), "/etc/host".into()], root.path(), None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("target = \"/etc\";"));
}

// ------------------------------------------------------------ properties

/// One entry of a random tree: a path below `/t` and what is there.
#[derive(Clone, Debug)]
enum Entry {
    Dir(u32),
    File(u32, Vec<u8>),
    Link(String),
}

/// Pieces of text that strings and templates treat specially: quotes,
/// backslashes, interpolation and tag openers (whole and cut), line ends,
/// tabs, non-ASCII letters.
const FRAGMENTS: &[&str] = &[
    "a",
    "Zz",
    " ",
    "\n",
    "\t",
    "\r\n",
    "\"",
    "\\",
    "$",
    "${x}",
    "${",
    "{",
    "}",
    "{%",
    "%}",
    "{% if x %}",
    "{#",
    "#}",
    "{# c #}",
    "$${y}",
    "ü",
    "✓",
    "%",
    "#",
];

fn fragments(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..max).prop_map(|f| f.concat())
}

/// Names with the characters a policy string must escape or quote (after a
/// letter, so never `.`, `..` or a VM temporary).
fn name() -> impl Strategy<Value = String> {
    fragments(6).prop_map(|f| format!("n{f}"))
}

fn contents() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Text, with what templates and strings treat specially.
        fragments(24).prop_map(String::into_bytes),
        // Binary.
        prop::collection::vec(any::<u8>(), 0..64),
        // Text above the inline bound.
        (4090usize..4200).prop_map(|n| vec![b'x'; n]),
    ]
}

fn entry() -> impl Strategy<Value = Entry> {
    prop_oneof![
        prop::sample::select(vec![0o755u32, 0o700, 0o750, 0o2775, 0o1755]).prop_map(Entry::Dir),
        (
            prop::sample::select(vec![0o644u32, 0o600, 0o400, 0o755, 0o4755, 0o640]),
            contents()
        )
            .prop_map(|(m, c)| Entry::File(m, c)),
        fragments(6)
            .prop_map(|f| format!("../t{f}"))
            .prop_map(Entry::Link),
    ]
}

/// A random tree: up to 8 entries, each under a random earlier directory
/// (or the top).
fn tree() -> impl Strategy<Value = Vec<(usize, String, Entry)>> {
    prop::collection::vec((any::<usize>(), name(), entry()), 1..8)
}

fn make_tree(root: &Path, spec: &[(usize, String, Entry)]) -> Vec<String> {
    let top = root.join("t");
    std::fs::create_dir_all(&top).unwrap();
    let mut dirs: Vec<PathBuf> = vec![top];
    let mut made = Vec::new();
    for (pick, name, entry) in spec {
        let parent = dirs[pick % dirs.len()].clone();
        let path = parent.join(name);
        if path.symlink_metadata().is_ok() {
            continue;
        }
        match entry {
            Entry::Dir(mode) => {
                std::fs::create_dir(&path).unwrap();
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode)).unwrap();
                dirs.push(path.clone());
            }
            Entry::File(mode, content) => {
                std::fs::write(&path, content).unwrap();
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode)).unwrap();
            }
            Entry::Link(target) => std::os::unix::fs::symlink(target, &path).unwrap(),
        }
        made.push(path.display().to_string());
    }
    made
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random trees (text and binary files, modes with set-id and sticky
    /// bits, nested directories, links, names with quotes, backslashes,
    /// `${`, `{%`, line breaks and non-ASCII letters) round-trip: the
    /// capture is formatted, checks clean, builds, and a run on the same
    /// root repairs nothing.
    #[test]
    fn random_trees_round_trip(spec in tree()) {
        let work = tempfile::tempdir().unwrap();
        let root = work.path().join("root");
        let made = make_tree(&root, &spec);
        let site = work.path().join("site");
        std::fs::create_dir_all(&site).unwrap();
        let out = capture(
            &["file".into(), "--recurse".into(), "/t".into()],
            &root,
            Some(&site),
        );
        prop_assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let policy = String::from_utf8(out.stdout.clone()).unwrap();
        let report = round_trip(&policy, &site, "captured.policy", &root, &format!("tree {made:?}"));
        // Every object of the tree (and the top) is a promise of the run.
        prop_assert_eq!(
            report["promises"].as_array().map(Vec::len),
            Some(made.len() + 1),
            "{}", policy
        );
    }
}
