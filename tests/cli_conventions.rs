//! Command-line conventions (issue 23, item 3; docs/operations.md,
//! "Command-line conventions"): no colour for `TERM=dumb` or `NO_COLOR`,
//! `policyc keygen` making its key directory, failures on standard error
//! (a cron line that throws standard output away still logs them), and an
//! unusable `ca_file` as a configuration error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use ::converge::binary;
use ::converge::http::serve_dir;
use ::converge::support::require_tool;

const ESC: u8 = 0x1b;

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `command` (one shell word list) on a pseudo-terminal through
/// util-linux's `script`, with `env` added, and returns what the terminal
/// showed: standard output and error both.
fn on_a_terminal(command: &[&str], env: &[(&str, &str)]) -> Vec<u8> {
    let script = require_tool("script", "bsdutils");
    let line = command
        .iter()
        .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ");
    let mut cmd = Command::new(script);
    cmd.args(["-qec", &line, "/dev/null"])
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CLICOLOR")
        // clap alone colours on a terminal whenever `CI` is set, whatever
        // `TERM` says; set it here so the test sees what CI machines see.
        .env("CI", "true")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap().stdout
}

/// Every binary, with a usage error (clap's message) and, for policyc, a
/// policy with an error (the diagnostics renderer): coloured on a colour
/// terminal, so the checks below can fail, and never with `TERM=dumb` or
/// `NO_COLOR`.
#[test]
fn no_colour_for_term_dumb_or_no_color() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.policy");
    std::fs::write(
        &bad,
        "bundle b { file \"/x\" { mode = 42; } }\npolicy { b(); }\n",
    )
    .unwrap();
    let policyc = binary("policyc").display().to_string();
    let policyvm = binary("policyvm").display().to_string();
    let collector = binary("converge-collector").display().to_string();
    let bad = bad.display().to_string();
    let cases: Vec<Vec<&str>> = vec![
        vec![&policyc, "check", &bad],
        vec![&policyc, "build", "--bogus"],
        vec![&policyvm, "run", "--bogus"],
        vec![&collector, "serve", "--bogus"],
    ];
    for case in &cases {
        let coloured = on_a_terminal(case, &[("TERM", "xterm-256color")]);
        assert!(
            coloured.contains(&ESC),
            "{case:?} shows no colour even on a colour terminal, so this test proves nothing:\n{}",
            String::from_utf8_lossy(&coloured)
        );
        for env in [
            &[("TERM", "dumb")][..],
            &[("TERM", "xterm-256color"), ("NO_COLOR", "1")][..],
        ] {
            let shown = on_a_terminal(case, env);
            assert!(!shown.is_empty(), "{case:?} {env:?} printed nothing");
            assert!(
                !shown.contains(&ESC),
                "{case:?} with {env:?} writes escape sequences:\n{}",
                String::from_utf8_lossy(&shown)
            );
        }
    }
}

/// `policyc keygen --out DIR/NAME` makes a missing DIR (and its missing
/// parents) 0700, keeps an existing one as it is, and prints the key's
/// fingerprint.
#[test]
fn keygen_creates_the_key_directory_0700_and_prints_the_fingerprint() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("new/keys");
    let out = Command::new(binary("policyc"))
        .args(["keygen", "--out"])
        .arg(keys.join("hub"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    for d in [dir.path().join("new"), keys.clone()] {
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700, "{}", d.display());
    }
    let public = std::fs::read_to_string(keys.join("hub.pub")).unwrap();
    let key = converge_format::bundle::keys::parse_public_key(&public).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let expected = converge_format::bundle::keys::fingerprint(&key.key);
    assert!(
        stdout.contains(&format!("fingerprint {expected}\n")),
        "{stdout}"
    );

    // An existing directory keeps its mode.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(binary("policyc"))
        .args(["keygen", "--out"])
        .arg(shared.join("hub"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let mode = std::fs::metadata(&shared).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o755);

    // A directory that cannot be made: a clear error, exit 73.
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let out = Command::new(binary("policyc"))
        .args(["keygen", "--out"])
        .arg(file.join("sub/hub"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(73), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot create the key directory"),
        "{}",
        text(&out)
    );
}

/// A policy whose one promise fails (`/bin/false` on the host).
const FAILING: &str = "bundle site { command \"no\" { run = [\"/bin/false\"]; creates = \"/never\"; host = true; } }\npolicy { site(); }\n";

/// A work directory with a key, its trust directory and a sandbox root.
struct Work {
    dir: tempfile::TempDir,
}

impl Work {
    fn new() -> Work {
        let w = Work {
            dir: tempfile::tempdir().unwrap(),
        };
        let out = Command::new(binary("policyc"))
            .args(["keygen", "--out"])
            .arg(w.path("keys/hub"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        std::fs::create_dir_all(w.path("trust")).unwrap();
        std::fs::copy(w.path("keys/hub.pub"), w.path("trust/hub.pub")).unwrap();
        std::fs::create_dir_all(w.path("root/etc")).unwrap();
        std::fs::write(w.path("root/etc/hostname"), "web01\n").unwrap();
        std::fs::write(w.path("site.policy"), FAILING).unwrap();
        w
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    fn agent_config(&self, hub: &str, extra: &str) -> std::path::PathBuf {
        let path = self.path("agent.toml");
        std::fs::write(
            &path,
            format!(
                "hubs = [{hub:?}]\nname = \"site\"\ntrust = {:?}\nstate = {:?}\nroot = {:?}\n\
                 timeout = \"3s\"\n{extra}",
                self.path("trust"),
                self.path("state"),
                self.path("root"),
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path
    }
}

/// What a cron line with `>/dev/null 2>>LOG` keeps: standard error only.
fn stderr_with_stdout_discarded(cmd: &mut Command) -> (Option<i32>, String) {
    let out = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_failed_promise_reaches_the_log_when_stdout_goes_to_dev_null() {
    let w = Work::new();
    let bundle = w.path("site.bundle");
    let out = Command::new(binary("policyc"))
        .arg("build")
        .arg(w.path("site.policy"))
        .arg("--output")
        .arg(&bundle)
        .arg("--key")
        .arg(w.path("keys/hub.key"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));

    // `policyvm run`: the FAILED line on stderr, not on stdout.
    let mut run = Command::new(binary("policyvm"));
    run.arg("run")
        .arg(&bundle)
        .arg("--trust")
        .arg(w.path("trust"))
        .arg("--root")
        .arg(w.path("root"));
    let (code, log) = stderr_with_stdout_discarded(&mut run);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("FAILED   command \"no\""), "{log}");
    let out = run.stdout(Stdio::piped()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("FAILED"), "{stdout}");
    assert!(
        stdout.contains("1 failed"),
        "the summary stays on stdout: {stdout}"
    );

    // `policyvm agent` as cron runs it, against a hub on loopback.
    let out = Command::new(binary("policyc"))
        .arg("publish")
        .arg(w.path("site.policy"))
        .arg("--key")
        .arg(w.path("keys/hub.key"))
        .arg("--dir")
        .arg(w.path("pub"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let hub = serve_dir(w.path("pub"));
    let config = w.agent_config(&hub.url(), "");
    let (code, log) = stderr_with_stdout_discarded(
        Command::new(binary("policyvm"))
            .args(["agent", "--no-splay", "--config"])
            .arg(&config),
    );
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("FAILED   command \"no\""), "{log}");
}

/// An agent.toml whose `ca_file` cannot be read (or holds no certificate)
/// is refused at once with exit 66, naming the file, instead of a warning
/// per hub and then "no bundle to run".
#[test]
fn an_unusable_ca_file_is_a_configuration_error() {
    let w = Work::new();
    let ca = w.path("hub-ca.pem");
    for content in [None, Some("not a certificate\n")] {
        if let Some(c) = content {
            std::fs::write(&ca, c).unwrap();
        }
        let config = w.agent_config(
            "https://127.0.0.1:9/policy",
            &format!("ca_file = {:?}\n", ca.display().to_string()),
        );
        let out = Command::new(binary("policyvm"))
            .args(["agent", "--no-splay", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(66), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("hub-ca.pem"), "{stderr}");
        assert!(stderr.contains("agent.toml"), "{stderr}");
        assert!(!stderr.contains("no bundle to run"), "{stderr}");
        assert!(!Path::new(&w.path("state/current.bundle")).exists());
    }
}
