//! Regression tests for the compiler side of issue 14 ("Hardening II"):
//! each one replays an attack or a blow-up that worked before its fix, end
//! to end through the `policyc` binary. Named after the issue's items.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use converge::binary;

/// What a test pretends is a secret on the build machine: it must never
/// appear in a bundle, a diagnostic or any other output.
const SECRET: &str = "SECRET-KEY-MATERIAL-4f1c9a";

/// A build machine in a temporary directory: `policy/` is the policy tree,
/// `outside/secret` a file next to it that the policy must not reach, and
/// `keys/hub.key` a signing key.
struct Machine {
    dir: tempfile::TempDir,
}

impl Machine {
    fn new() -> Machine {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("policy")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        std::fs::write(dir.path().join("outside/secret"), format!("{SECRET}\n")).unwrap();
        std::fs::create_dir_all(dir.path().join("keys")).unwrap();
        let out = policyc(
            dir.path(),
            &[
                "keygen",
                "--out",
                dir.path().join("keys/hub").to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        Machine { dir }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn write(&self, relative: &str, content: &str) -> PathBuf {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    /// `policyc build policy/site.policy -o out.bundle` (plus `extra`).
    fn build(&self, extra: &[&str]) -> Output {
        let mut args = vec![
            "build",
            "policy/site.policy",
            "-o",
            "out.bundle",
            "--key",
            "keys/hub.key",
            "--serial",
            "1",
        ];
        args.extend_from_slice(extra);
        policyc(self.dir.path(), &args)
    }

    fn check(&self, extra: &[&str]) -> Output {
        let mut args = vec!["check", "policy/site.policy"];
        args.extend_from_slice(extra);
        policyc(self.dir.path(), &args)
    }

    /// Asserts that a command failed with `code`, that the secret appears
    /// nowhere (output or bundle) and that no bundle was written.
    fn refused(&self, out: &Output, code: &str) {
        let all = text(out);
        assert_ne!(out.status.code(), Some(0), "{all}");
        assert!(all.contains(code), "expected {code}:\n{all}");
        assert!(!all.contains(SECRET), "the secret leaked:\n{all}");
        assert!(!self.path("out.bundle").exists(), "a bundle was written");
    }
}

fn policyc(dir: &Path, args: &[&str]) -> Output {
    Command::new(binary("policyc"))
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn site_with(attr: &str, value: &str) -> String {
    format!(
        "bundle b {{\n  file \"/etc/app.conf\" {{ {attr} = \"{value}\"; }}\n}}\npolicy {{ b(); }}\n"
    )
}

// ------------------------------------------------------------------ item 3

#[test]
fn item03_source_with_dotdot_is_refused_and_never_embedded() {
    let m = Machine::new();
    m.write(
        "policy/site.policy",
        &site_with("source", "../outside/secret"),
    );
    m.refused(&m.build(&[]), "E0502");
    m.refused(&m.check(&[]), "E0502");
}

#[test]
fn item03_absolute_source_and_template_are_refused() {
    let m = Machine::new();
    let secret = m.path("outside/secret");
    for attr in ["source", "template"] {
        m.write(
            "policy/site.policy",
            &site_with(attr, secret.to_str().unwrap()),
        );
        m.refused(&m.build(&[]), "E0502");
        m.refused(&m.check(&[]), "E0502");
    }
}

#[test]
fn item03_links_leading_out_of_the_tree_are_refused() {
    let m = Machine::new();
    // A link to the file, and a link to its directory, both inside the tree.
    std::os::unix::fs::symlink(m.path("outside/secret"), m.path("policy/motd")).unwrap();
    std::os::unix::fs::symlink(m.path("outside"), m.path("policy/files")).unwrap();
    for (attr, value) in [
        ("source", "motd"),
        ("template", "motd"),
        ("source", "files/secret"),
    ] {
        m.write("policy/site.policy", &site_with(attr, value));
        m.refused(&m.build(&[]), "E0502");
    }
    // The root file itself a link out of its directory: refused before it
    // is parsed (parse errors would quote its lines).
    std::fs::remove_file(m.path("policy/site.policy")).unwrap();
    std::os::unix::fs::symlink(m.path("outside/secret"), m.path("policy/site.policy")).unwrap();
    m.refused(&m.build(&[]), "policy tree");
    m.refused(&m.check(&[]), "policy tree");
}

#[test]
fn item03_a_file_inside_the_tree_is_still_embedded() {
    let m = Machine::new();
    m.write("policy/files/motd", "welcome\n");
    m.write("policy/site.policy", &site_with("source", "files/motd"));
    let out = m.build(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let bundle = std::fs::read(m.path("out.bundle")).unwrap();
    assert!(bundle.windows(8).any(|w| w == b"welcome\n"));
}

#[test]
fn item03_importing_a_key_never_prints_it() {
    let m = Machine::new();
    let key = std::fs::read_to_string(m.path("keys/hub.key")).unwrap();
    let key_line = key.lines().find(|l| l.len() > 20).unwrap().to_owned();
    // Outside the tree, by `..` and by absolute path.
    for import in [
        "../keys/hub.key".to_owned(),
        m.path("keys/hub.key").to_string_lossy().into_owned(),
    ] {
        m.write(
            "policy/site.policy",
            &format!("import \"{import}\";\npolicy {{ }}\n"),
        );
        let out = m.check(&[]);
        m.refused(&out, "E0502");
        assert!(!text(&out).contains(&key_line), "{}", text(&out));
    }
    // Inside the tree but not a policy file: refused without reading it.
    std::fs::copy(m.path("keys/hub.key"), m.path("policy/hub.key")).unwrap();
    m.write("policy/site.policy", "import \"hub.key\";\npolicy { }\n");
    let out = m.check(&[]);
    m.refused(&out, "E0115");
    assert!(!text(&out).contains(&key_line), "{}", text(&out));
}

#[test]
fn item03_imports_leaving_the_tree_are_refused() {
    let m = Machine::new();
    m.write(
        "lib/common.policy",
        "class web = sys.hostname == \"web\";\n",
    );
    m.write(
        "policy/site.policy",
        "import \"../lib/common.policy\";\npolicy { }\n",
    );
    m.refused(&m.check(&[]), "E0502");
    // A link inside the tree to a policy file outside it.
    std::os::unix::fs::symlink(m.path("lib/common.policy"), m.path("policy/common.policy"))
        .unwrap();
    m.write(
        "policy/site.policy",
        "import \"common.policy\";\npolicy { }\n",
    );
    m.refused(&m.check(&[]), "E0502");
}

#[test]
fn item03_policy_root_widens_the_tree_for_every_command() {
    let m = Machine::new();
    m.write(
        "lib/common.policy",
        "class web = sys.hostname == \"web\";\n",
    );
    m.write("lib/motd", "hello\n");
    m.write(
        "policy/site.policy",
        "import \"../lib/common.policy\";\nbundle b {\n  when web { file \"/etc/motd\" { source = \"../lib/motd\"; } }\n}\npolicy { b(); }\n",
    );
    let root = m.dir.path().to_str().unwrap().to_owned();
    let out = m.check(&["--policy-root", &root]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = m.build(&["--policy-root", &root]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    for command in ["explain", "graph"] {
        let out = policyc(
            m.dir.path(),
            &[command, "policy/site.policy", "--policy-root", &root],
        );
        assert_eq!(out.status.code(), Some(0), "{command}: {}", text(&out));
        let out = policyc(m.dir.path(), &[command, "policy/site.policy"]);
        assert!(text(&out).contains("E0502"), "{command}: {}", text(&out));
    }
    let out = policyc(
        m.dir.path(),
        &[
            "publish",
            "policy/site.policy",
            "--key",
            "keys/hub.key",
            "--dir",
            "pub",
            "--policy-root",
            &root,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // A narrower root than the file's own directory refuses the file.
    let out = m.check(&["--policy-root", m.path("lib").to_str().unwrap()]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("policy tree"), "{}", text(&out));
}

// ------------------------------------------------------------------ item 10

/// Plants, for the next few thousand process ids, a link at the temporary
/// name `policyc` used to write `target` through (`.NAME.tmpPID`), each
/// pointing at `victim`.
fn plant_temp_links(target: &Path, victim: &Path) {
    let mut probe = Command::new("true").spawn().unwrap();
    let first = probe.id();
    probe.wait().unwrap();
    let name = target.file_name().unwrap().to_string_lossy().into_owned();
    for pid in first..first + 4000 {
        let link = target.with_file_name(format!(".{name}.tmp{pid}"));
        std::os::unix::fs::symlink(victim, link).unwrap();
    }
}

fn assert_regular_file(path: &Path) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    assert!(
        meta.file_type().is_file(),
        "{} is not a regular file",
        path.display()
    );
}

#[test]
fn item10_build_never_writes_through_a_planted_temp_link() {
    let m = Machine::new();
    m.write("policy/site.policy", &site_with("content", "x"));
    let victim = m.write("victim", "precious\n");
    plant_temp_links(&m.path("out.bundle"), &victim);
    let out = m.build(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_regular_file(&m.path("out.bundle"));
    // A link at the target itself is replaced, never written through.
    std::fs::remove_file(m.path("out.bundle")).unwrap();
    std::os::unix::fs::symlink(&victim, m.path("out.bundle")).unwrap();
    let out = m.build(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_regular_file(&m.path("out.bundle"));
}

#[test]
fn item10_publish_never_writes_through_planted_temp_links() {
    let m = Machine::new();
    m.write("policy/site.policy", &site_with("content", "x"));
    let victim = m.write("victim", "precious\n");
    std::fs::create_dir(m.path("pub")).unwrap();
    plant_temp_links(&m.path("pub/site.bundle"), &victim);
    plant_temp_links(&m.path("pub/site.stamp"), &victim);
    let out = policyc(
        m.dir.path(),
        &[
            "publish",
            "policy/site.policy",
            "--key",
            "keys/hub.key",
            "--dir",
            "pub",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_regular_file(&m.path("pub/site.bundle"));
    assert_regular_file(&m.path("pub/site.stamp"));
}

#[test]
fn item10_keygen_and_fmt_never_write_through_links() {
    let m = Machine::new();
    let victim = m.write("victim", "precious\n");
    // keygen: a link planted at the secret key's name.
    std::os::unix::fs::symlink(&victim, m.path("keys/new.key")).unwrap();
    let out = policyc(m.dir.path(), &["keygen", "--out", "keys/new"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(!m.path("keys/new.pub").exists());
    // fmt: a policy file that is a link is not rewritten through it.
    let outside = m.write("outside/real.policy", "class   web;\n");
    std::os::unix::fs::symlink(&outside, m.path("policy/linked.policy")).unwrap();
    let out = policyc(m.dir.path(), &["fmt", "policy/linked.policy"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "class   web;\n");
    // A regular file is formatted in place, keeping its mode.
    let file = m.write("policy/plain.policy", "class   web;\n");
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let out = policyc(m.dir.path(), &["fmt", "policy/plain.policy"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "class web;\n");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o7777, 0o640);
}

// ------------------------------------------------------------ items 11, 23

/// `policyc check` on `text` as `policy/site.policy`, in a child process
/// with its address space capped (a blow-up fails fast instead of taking
/// the machine) and `cpu_seconds` of CPU time: the bound is on work done,
/// so a loaded machine (CI, other builds) cannot make a bounded check look
/// unbounded. A wall-clock deadline ten times longer still catches a hang
/// that uses no CPU.
fn check_bounded(m: &Machine, text: &str, cpu_seconds: u64) -> Output {
    m.write("policy/site.policy", text);
    let wall = cpu_seconds * 10;
    Command::new("bash")
        .current_dir(m.dir.path())
        .env("NO_COLOR", "1")
        .arg("-c")
        .arg(format!(
            "ulimit -v 4000000; ulimit -t {cpu_seconds}; exec timeout {wall} \"$0\" check policy/site.policy"
        ))
        .arg(binary("policyc"))
        .output()
        .unwrap()
}

#[test]
fn item11_doubling_bundle_calls_stop_at_the_instance_budget() {
    let m = Machine::new();
    let mut text = String::new();
    for i in 0..40 {
        text.push_str(&format!(
            "bundle b{i}(p: string) {{ b{n}(p = \"${{p}}a\"); b{n}(p = \"${{p}}b\"); }}\n",
            n = i + 1
        ));
    }
    text.push_str("bundle b40(p: string) { file \"/etc/${p}\" { content = \"x\"; } }\npolicy { b0(p = \"x\"); }\n");
    assert!(text.len() < 4000);
    let out = check_bounded(&m, &text, 60);
    let all = text_of(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("E0601"), "{all}");
    assert!(all.contains("b0 -> b1"), "the call chain is named: {all}");
}

#[test]
fn item11_a_nest_of_for_loops_stops_at_the_instance_budget() {
    let m = Machine::new();
    let n = 12;
    let mut body = format!(
        "file \"/etc/{}\" {{ content = \"x\"; }}",
        (0..n).map(|i| format!("${{v{i}}}")).collect::<String>()
    );
    for i in (0..n).rev() {
        body = format!("for v{i} in l {{ {body} }}");
    }
    let text = format!(
        "let l: list<string> = [\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\"];\nbundle b {{ {body} }}\npolicy {{ b(); }}\n"
    );
    assert!(text.len() < 800, "{}", text.len());
    let out = check_bounded(&m, &text, 60);
    let all = text_of(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("E0601"), "{all}");
    assert!(all.contains("for v"), "the loops are named: {all}");
}

#[test]
fn item23_calls_nested_past_the_depth_limit_are_an_error_not_a_silent_drop() {
    let m = Machine::new();
    let mut text = String::new();
    for i in 0..70 {
        text.push_str(&format!(
            "bundle b{i} {{ file \"/etc/x{i}\" {{ content = \"x\"; }} b{}(); }}\n",
            i + 1
        ));
    }
    text.push_str("bundle b70 { file \"/etc/x70\" { content = \"x\"; } }\npolicy { b0(); }\n");
    let out = check_bounded(&m, &text, 60);
    let all = text_of(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("E0601"), "{all}");
    assert!(!all.contains("no errors"), "{all}");
}

fn text_of(out: &Output) -> String {
    text(out)
}

/// Pigeonhole: `pigeons` classes of which each must hold for one of
/// `holes` holes, and each hole takes at most one (an exclusive group).
/// Unsatisfiable when there are more pigeons than holes, and exponentially
/// hard for any resolution-based solver.
fn pigeonhole_policy(pigeons: usize, holes: usize) -> String {
    let mut text = String::new();
    for p in 0..pigeons {
        for h in 0..holes {
            text.push_str(&format!("class p{p}_{h};\n"));
        }
    }
    for h in 0..holes {
        let members: Vec<String> = (0..pigeons).map(|p| format!("p{p}_{h}")).collect();
        text.push_str(&format!("exclusive {{ {} }}\n", members.join(", ")));
    }
    let guard: Vec<String> = (0..pigeons)
        .map(|p| {
            let any: Vec<String> = (0..holes).map(|h| format!("p{p}_{h}")).collect();
            format!("({})", any.join(" || "))
        })
        .collect();
    text.push_str(&format!(
        "bundle b {{\n  when {} {{ file \"/etc/x\" {{ content = \"a\"; }} }}\n  file \"/etc/x\" {{ content = \"b\"; }}\n}}\npolicy {{ b(); }}\n",
        guard.join(" && ")
    ));
    text
}

#[test]
fn item11_a_guard_too_hard_to_solve_is_an_error_not_a_hang_nor_an_ok() {
    let m = Machine::new();
    // Within a minute of CPU: past it the check is killed and the exit
    // status below is not 1.
    let out = check_bounded(&m, &pigeonhole_policy(13, 12), 60);
    let all = text_of(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("E0602"), "{all}");
    assert!(all.contains("too complex to prove"), "{all}");
    // A small pigeonhole is proved exactly: the guarded promise is dead
    // (W0005), so it contradicts nothing.
    let out = check_bounded(&m, &pigeonhole_policy(4, 3), 60);
    let all = text_of(&out);
    assert!(all.contains("W0005"), "{all}");
    assert!(!all.contains("E0602") && !all.contains("E0301"), "{all}");
}

#[test]
fn item11_a_guard_over_100k_classes_is_solved_in_linear_time() {
    // One promise under the `||` of 100,000 classes, another under their
    // `&&`, on one file: both can be active, a contradiction. The solver
    // rescanned the false literals of the long clause at every step
    // (quadratic: 10 s in release at 100,000, minutes in debug).
    let m = Machine::new();
    let n = 100_000;
    let mut text: String = (0..n).map(|i| format!("class c{i};\n")).collect();
    let any: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
    text.push_str(&format!(
        "bundle b {{\n  when {} {{ file \"/etc/x\" {{ content = \"a\"; }} }}\n  when {} {{ file \"/etc/x\" {{ content = \"b\"; }} }}\n}}\npolicy {{ b(); }}\n",
        any.join(" || "),
        any.join(" && ")
    ));
    let out = check_bounded(&m, &text, 60);
    let all = text_of(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("E0301"), "{all}");
}

// ------------------------------------------------------------------ item 13

#[test]
fn item13_line_promises_that_never_settle_are_refused_at_compile_time() {
    let m = Machine::new();
    for (attrs, code) in [
        (r#"present = "a\nb";"#, "E0305"),
        (r#"replace = "x"; with = "xx";"#, "E0305"),
    ] {
        m.write(
            "policy/site.policy",
            &format!("bundle b {{ line \"/etc/motd\" {{ {attrs} }} }}\npolicy {{ b(); }}\n"),
        );
        m.refused(&m.build(&[]), code);
    }
    // What settles is still accepted.
    m.write(
        "policy/site.policy",
        "bundle b {\n  line \"/etc/motd\" { replace = \"^x$\"; with = \"xx\"; }\n  line \"/etc/issue\" { present = \"a b\"; }\n}\npolicy { b(); }\n",
    );
    let out = m.build(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}
