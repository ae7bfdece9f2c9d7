//! Regression tests of issue 14 ("Hardening II"), the execution side: each
//! replays one attack of the adversarial review against the real
//! `policyvm` (and `policyc`) binaries, on sandbox roots and loopback
//! servers. Each failed on the code before its fix; the test names carry
//! the item number.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::os::unix::fs::{symlink, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use ::converge::binary;
use ::converge::http::{respond, Scripted};
use ::converge::support::{self, body, compile, keys, write_trust};
use converge_compiler::bundle::seal;
use converge_vm::bundle::format::Constant;

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A work directory with the test key trusted, a `root/` and a `bin/` of
/// fake tools put first on the `PATH` of `policyvm`.
struct Work {
    dir: tempfile::TempDir,
}

impl Work {
    fn new() -> Work {
        let dir = tempfile::tempdir().unwrap();
        write_trust(&dir.path().join("trust"));
        std::fs::create_dir_all(dir.path().join("root")).unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        Work { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn root(&self) -> PathBuf {
        self.path().join("root")
    }

    /// A fake tool that appends its arguments to `bin/NAME.log`, prints
    /// `stdout` and exits 0.
    fn fake_tool(&self, name: &str, stdout: &str) {
        let bin = self.path().join("bin");
        let script = format!(
            "#!/bin/sh\necho \"$@\" >> '{}'\nprintf '%s' '{stdout}'\n",
            bin.join(format!("{name}.log")).display()
        );
        std::fs::write(bin.join(name), script).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn tool_log(&self, name: &str) -> String {
        std::fs::read_to_string(self.path().join("bin").join(format!("{name}.log")))
            .unwrap_or_default()
    }

    /// `policyvm run` of `bundle` (signed bytes) on the root, with the JSON
    /// report on standard output and `env` added to its environment.
    fn run(&self, bundle: &[u8], env: &[(&str, &str)]) -> (Output, serde_json::Value) {
        let file = self.path().join("p.bundle");
        std::fs::write(&file, bundle).unwrap();
        let path = format!(
            "{}:{}",
            self.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = support::output_when_unlocked(
            Command::new(binary("policyvm"))
                .arg("run")
                .arg(&file)
                .arg("--trust")
                .arg(self.path().join("trust"))
                .arg("--root")
                .arg(self.root())
                .args(["--format", "json"])
                .env("PATH", path)
                .envs(env.iter().copied()),
        );
        let json =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
        (out, json)
    }
}

/// The outcome and message of the promise on `promiser` in a JSON report.
fn promise<'r>(report: &'r serde_json::Value, promiser: &str) -> &'r serde_json::Value {
    report["promises"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["promiser"] == promiser)
        .unwrap_or_else(|| panic!("no promise {promiser}: {report}"))
}

/// Item 7: a link planted at `ROOT/etc/service/web` pointing out of the
/// root made `sv` act on a service directory on the host. `sv` is never
/// run; the promise fails naming the link.
#[test]
fn item07_sv_is_never_run_through_a_service_link_planted_out_of_the_root() {
    let w = Work::new();
    let outside = w.path().join("outside/web");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(w.root().join("etc/service")).unwrap();
    symlink(&outside, w.root().join("etc/service/web")).unwrap();
    w.fake_tool("sv", "run: web: (pid 4242) 10s\n");
    let bundle = compile(
        r#"bundle b { service "web" { manager = "runit"; state = stopped; } }
policy { b(); }"#,
    );
    let (out, report) = w.run(&bundle, &[]);
    let web = promise(&report, "web");
    assert_eq!(web["outcome"], "failed", "{}", text(&out));
    let reason = web.to_string();
    assert!(
        reason.contains("`/etc/service/web` is a symbolic link to")
            && reason.contains("leads out of the root"),
        "{reason}"
    );
    assert_eq!(w.tool_log("sv"), "", "sv ran through the planted link");
}

/// Builds a `.deb` holding `./srv/www/index.html` with `dpkg-deb`.
fn www_deb(dir: &Path) -> PathBuf {
    support::require_tool("dpkg-deb", "dpkg");
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    std::fs::create_dir_all(tree.join("srv/www")).unwrap();
    std::fs::write(tree.join("srv/www/index.html"), "hello\n").unwrap();
    std::fs::write(
        tree.join("DEBIAN/control"),
        "Package: cvgwww\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.invalid>\n\
         Description: test\n",
    )
    .unwrap();
    let deb = dir.join("cvgwww.deb");
    let out = Command::new("dpkg-deb")
        .args(["--root-owner-group", "--build"])
        .arg(&tree)
        .arg(&deb)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    deb
}

/// Item 7: `dpkg --root` unpacked a package's files outside the root
/// through a link planted on a directory of its file list. The file list
/// (`dpkg-deb --contents`) is checked first; `dpkg --install` never runs.
#[test]
fn item07_dpkg_never_unpacks_through_a_link_planted_on_the_packages_directories() {
    let w = Work::new();
    let r = w.root();
    for d in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "etc",
        "pkgs",
        "srv",
    ] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    std::fs::write(r.join("var/lib/dpkg/status"), "").unwrap();
    std::fs::write(r.join("etc/os-release"), "ID=debian\n").unwrap();
    std::fs::copy(www_deb(w.path()), r.join("pkgs/cvgwww.deb")).unwrap();
    let outside = w.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    symlink(&outside, r.join("srv/www")).unwrap();
    // A `dpkg` that would unpack there; `dpkg-query` and `dpkg-deb` are real.
    w.fake_tool("dpkg", "");
    let bundle = compile(
        r#"bundle b { package "cvgwww" { deb = "/pkgs/cvgwww.deb"; } }
policy { b(); }"#,
    );
    let (out, report) = w.run(&bundle, &[]);
    let pkg = promise(&report, "cvgwww");
    assert_eq!(pkg["outcome"], "failed", "{}", text(&out));
    let reason = pkg.to_string();
    assert!(
        reason.contains("`/srv/www` is a symbolic link to")
            && reason.contains("file list of `/pkgs/cvgwww.deb`"),
        "{reason}"
    );
    assert_eq!(w.tool_log("dpkg"), "", "dpkg ran through the planted link");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}

/// Item 7: `dpkg --remove` deletes the files its database lists for the
/// package; a link planted on one of their directories would make it
/// delete files outside the root. The installed file list is checked
/// first; `dpkg` never runs.
#[test]
fn item07_dpkg_never_removes_through_a_link_planted_on_an_installed_packages_directory() {
    let w = Work::new();
    let r = w.root();
    for d in ["var/lib/dpkg/info", "var/lib/dpkg/updates", "etc", "srv"] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    std::fs::write(
        r.join("var/lib/dpkg/status"),
        "Package: cvgold\nStatus: install ok installed\nVersion: 1.0\nArchitecture: all\n\
         Maintainer: t <t@example.invalid>\nDescription: test\n\n",
    )
    .unwrap();
    std::fs::write(
        r.join("var/lib/dpkg/info/cvgold.list"),
        "/.\n/srv\n/srv/data\n/srv/data/precious\n",
    )
    .unwrap();
    std::fs::write(r.join("etc/os-release"), "ID=debian\n").unwrap();
    let outside = w.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("precious"), "keep\n").unwrap();
    symlink(&outside, r.join("srv/data")).unwrap();
    w.fake_tool("dpkg", "");
    let bundle = compile(
        r#"bundle b { package "cvgold" { state = removed; } }
policy { b(); }"#,
    );
    let (out, report) = w.run(&bundle, &[]);
    let pkg = promise(&report, "cvgold");
    assert_eq!(pkg["outcome"], "failed", "{}", text(&out));
    let reason = pkg.to_string();
    assert!(
        reason.contains("`/srv/data` is a symbolic link to")
            && reason.contains("holds files of `cvgold`"),
        "{reason}"
    );
    assert_eq!(w.tool_log("dpkg"), "", "dpkg ran through the planted link");
    assert!(outside.join("precious").exists());
}

/// Item 7: the same for `apt-get` and a planted `ROOT/opt`: apt's files
/// cannot be listed before it downloads them, but every top-level
/// directory packages go to is checked.
#[test]
fn item07_apt_is_never_run_with_a_top_level_directory_planted_out_of_the_root() {
    let w = Work::new();
    let r = w.root();
    for d in ["var/lib/dpkg/info", "etc"] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    std::fs::write(r.join("var/lib/dpkg/status"), "").unwrap();
    std::fs::write(r.join("etc/os-release"), "ID=debian\n").unwrap();
    symlink(w.path(), r.join("opt")).unwrap();
    w.fake_tool(
        "apt-cache",
        "cvgapp:\n  Installed: (none)\n  Candidate: 1.0\n",
    );
    w.fake_tool("apt-get", "");
    let bundle = compile(
        r#"bundle b { package "cvgapp" { state = installed; } }
policy { b(); }"#,
    );
    let (out, report) = w.run(&bundle, &[]);
    let pkg = promise(&report, "cvgapp");
    assert_eq!(pkg["outcome"], "failed", "{}", text(&out));
    assert!(
        pkg.to_string().contains("`/opt` is a symbolic link to"),
        "{pkg}"
    );
    assert_eq!(w.tool_log("apt-get"), "", "apt-get ran");
}

/// A bundle whose `command` has `cwd = CWD`, forged past the compiler
/// (which refuses a bad one) and signed with the trusted key.
fn command_with_cwd(cwd: &str) -> Vec<u8> {
    let good = r#"bundle b { command "where" { run = ["/bin/pwd"]; cwd = "/placeholder"; creates = "/done"; host = true; } }
policy { b(); }"#;
    let mut forged = body(good);
    for c in forged.constants.0.iter_mut() {
        if *c == Constant::Str("/placeholder".into()) {
            *c = Constant::Str(cwd.to_owned().into());
        }
    }
    seal(&forged, &keys().0).unwrap()
}

/// Item 12: `cwd = "/../../etc"` ran the command in the host's `/etc`. The
/// compiler refuses it like a bad promiser, and so does the VM, in a
/// bundle signed anyway; a link planted as the `cwd` that leads out of the
/// root is refused too.
#[test]
fn item12_a_command_cwd_outside_the_root_is_refused_by_both() {
    let policy = r#"bundle b { command "where" { run = ["/bin/pwd"]; cwd = "/../../etc"; creates = "/done"; } }
policy { b(); }"#;
    let outcome = support::check_text(policy);
    assert!(
        outcome
            .diagnostics
            .iter()
            .any(|d| d.code.to_string() == "E0205" && d.message.contains("cwd")),
        "policyc accepted it: {:?}",
        outcome.diagnostics
    );

    let w = Work::new();
    let (out, report) = w.run(&command_with_cwd("/../../etc"), &[]);
    let cmd = promise(&report, "where");
    assert_eq!(cmd["outcome"], "failed", "{}", text(&out));
    assert!(
        cmd.to_string().contains("`cwd = /../../etc` is not usable"),
        "{cmd}"
    );
    assert!(!cmd.to_string().contains("\"/etc\\n"), "it ran: {cmd}");

    std::fs::create_dir_all(w.path().join("outside")).unwrap();
    symlink(w.path().join("outside"), w.root().join("work")).unwrap();
    let (out, report) = w.run(&command_with_cwd("/work"), &[]);
    let cmd = promise(&report, "where");
    assert_eq!(cmd["outcome"], "failed", "{}", text(&out));
    assert!(
        cmd.to_string().contains("`/work` is a symbolic link to"),
        "{cmd}"
    );

    // A real directory inside the root is where the command runs.
    std::fs::create_dir_all(w.root().join("srv/app")).unwrap();
    let (out, report) = w.run(&command_with_cwd("/srv/app"), &[]);
    let cmd = promise(&report, "where");
    assert_eq!(cmd["outcome"], "repaired", "{}", text(&out));
    assert!(cmd.to_string().contains("/root/srv/app"), "{cmd}");
}

/// Item 20: a command's output went into the report with the whole
/// environment of `policyvm` (an operator's token with it). Programs get
/// the documented environment only.
#[test]
fn item20_commands_never_see_the_environment_of_policyvm() {
    let w = Work::new();
    let bundle = compile(
        r#"bundle b { command "env" { run = ["/usr/bin/env"]; creates = "/done"; host = true; } }
policy { b(); }"#,
    );
    let (out, report) = w.run(&bundle, &[("CVG_SECRET_TOKEN", "hunter2")]);
    let env = promise(&report, "env");
    assert_eq!(env["outcome"], "repaired", "{}", text(&out));
    let output = env["output"].as_str().unwrap_or_default();
    assert!(!output.contains("hunter2"), "{output}");
    assert!(
        output.contains("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"),
        "{output}"
    );
    assert!(output.contains("LANG=C.UTF-8\n"), "{output}");
    assert!(
        output.contains(&format!("CONVERGE_ROOT={}\n", w.root().display())),
        "{output}"
    );
}

/// Item 20: `policyvm run --report FILE` wrote through a link planted at
/// FILE. The report replaces the link; its target is untouched.
#[test]
fn item20_the_report_file_replaces_a_planted_link_instead_of_following_it() {
    let w = Work::new();
    let victim = w.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let report = w.path().join("report.json");
    symlink(&victim, &report).unwrap();
    let bundle = w.path().join("p.bundle");
    std::fs::write(
        &bundle,
        compile(r#"bundle b { file "/motd" { content = "hi\n"; } } policy { b(); }"#),
    )
    .unwrap();
    let out = support::output_when_unlocked(
        Command::new(binary("policyvm"))
            .arg("run")
            .arg(&bundle)
            .arg("--trust")
            .arg(w.path().join("trust"))
            .arg("--root")
            .arg(w.root())
            .arg("--report")
            .arg(&report),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let meta = std::fs::symlink_metadata(&report).unwrap();
    assert!(meta.file_type().is_file(), "the link is still there");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(json["promises"][0]["promiser"], "/motd", "{json}");
    // No temporary file is left beside it.
    let left: Vec<_> = std::fs::read_dir(w.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".report"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A loopback server of the files in `dir` (GET /NAME), 404 otherwise.
fn file_server(dir: PathBuf) -> Scripted {
    Scripted::start(move |path, stream| {
        let name = path.trim_start_matches('/');
        match std::fs::read(dir.join(name)) {
            Ok(body) if !name.contains('/') => respond(stream, "", &body),
            _ => {
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        }
    })
}

/// Item 9: a frozen mirror kept serving the expired stamp of the bundle in
/// force, and the agent took it as "current" and never asked the next
/// mirror, which had newer policy. An expired stamp is never current.
#[test]
fn item09_a_frozen_mirror_serving_the_expired_stamp_in_force_is_passed_over() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let run = |cmd: &mut Command| {
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        out
    };
    run(Command::new(binary("policyc"))
        .args(["keygen", "--out"])
        .arg(w.join("hub")));
    std::fs::create_dir_all(w.join("trust")).unwrap();
    std::fs::copy(w.join("hub.pub"), w.join("trust/hub.pub")).unwrap();
    let publish = |motd: &str, dir: &str, serial: &str, expires: &str| {
        let source = w.join(format!("{motd}.policy"));
        std::fs::write(
            &source,
            format!(
                "bundle site {{ file \"/etc/motd\" {{ content = \"{motd}\\n\"; }} }}\n\
                 policy {{ site(); }}\n"
            ),
        )
        .unwrap();
        run(Command::new(binary("policyc"))
            .arg("publish")
            .arg(&source)
            .arg("--key")
            .arg(w.join("hub.key"))
            .arg("--dir")
            .arg(w.join(dir))
            .args(["--name", "site", "--serial", serial, "--expires", expires]));
    };
    publish("frozen", "frozen", "1", "2s");
    let published = std::time::Instant::now();
    let frozen = file_server(w.join("frozen"));
    let fresh = file_server(w.join("fresh"));
    let root = w.join("root");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    let config = |hubs: &[String]| {
        let path = w.join("agent.toml");
        let hubs: Vec<String> = hubs.iter().map(|h| format!("{h:?}")).collect();
        std::fs::write(
            &path,
            format!(
                "hubs = [{}]\nname = \"site\"\ntrust = {:?}\nstate = {:?}\nroot = {:?}\n\
                 timeout = \"3s\"\n",
                hubs.join(", "),
                w.join("trust"),
                w.join("state"),
                root
            ),
        )
        .unwrap();
        path
    };
    let agent = |config: &Path| {
        Command::new(binary("policyvm"))
            .args(["agent", "--no-splay", "--config"])
            .arg(config)
            .output()
            .unwrap()
    };
    let out = agent(&config(&[frozen.url()]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(root.join("etc/motd")).unwrap(),
        "frozen\n"
    );

    // The publisher moves on; only the second mirror has it. The first
    // keeps serving serial 1, whose stamp now expires.
    publish("fresh", "fresh", "2", "7d");
    std::thread::sleep(Duration::from_secs(3).saturating_sub(published.elapsed()));
    let out = agent(&config(&[frozen.url(), fresh.url()]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("installed serial 2"),
        "the agent stopped at the frozen mirror: {}",
        text(&out)
    );
    assert!(text(&out).contains("stale: stamp"), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(root.join("etc/motd")).unwrap(),
        "fresh\n"
    );
}
