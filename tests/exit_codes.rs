//! Issue 15, item 6: one exit-code table for `policyvm`. Every code that
//! docs/exit-codes.md lists is in `vm/src/cli/exit.rs` with the same
//! meaning, and a real case makes the binary return it. (`policyc`'s table
//! is checked the same way in `compiler/tests/cli.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use ::converge::binary;
use ::converge::http::{respond, Scripted};
use ::converge::support::{self, compile, keys, write_trust};
use converge_vm::bundle::envelope::{signed_prefix, signing_digest};
use converge_vm::cli::exit;
use ed25519_dalek::Signer as _;

/// The rows of the `## `NAME`` table of docs/exit-codes.md (for `policyc`
/// and `policyvm` alike).
fn documented_codes(binary: &str) -> Vec<(u8, String)> {
    let doc = std::fs::read_to_string(converge::repo_root().join("docs/exit-codes.md")).unwrap();
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with(&format!("`{binary}`")))
        .unwrap_or_else(|| panic!("no `{binary}` section in docs/exit-codes.md"));
    section
        .lines()
        .filter_map(|l| {
            let mut cells = l.strip_prefix("| ")?.split(" | ");
            let code = cells.next()?.parse().ok()?;
            Some((code, cells.next()?.trim_end_matches(" |").to_owned()))
        })
        .collect()
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A loopback server of the files in `dir`, 404 otherwise.
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

/// A port nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Signs `body` (any bytes) as a bundle of the test key.
fn signed(body: &[u8]) -> Vec<u8> {
    let secret = keys().0;
    let mut bytes = signed_prefix(secret.id, body).unwrap();
    let signature = secret.signing.sign(&signing_digest(&bytes));
    bytes.extend_from_slice(&signature.to_bytes());
    bytes
}

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let path = self.path(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    }

    fn root(&self) -> String {
        let root = self.path("root");
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("etc/hostname"), "web01\n").unwrap();
        root.display().to_string()
    }

    fn trust(&self) -> String {
        self.path("trust").display().to_string()
    }

    /// `policyc publish` of a one-file policy into `dir`, signed by the
    /// test key's twin on disk (`hub.key`, trusted in `hubtrust/`).
    fn publish(&self, dir: &str, expires: &str) {
        if !self.path("hub.key").exists() {
            let out = Command::new(binary("policyc"))
                .args(["keygen", "--out"])
                .arg(self.path("hub"))
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", text(&out));
            std::fs::create_dir_all(self.path("hubtrust")).unwrap();
            std::fs::copy(self.path("hub.pub"), self.path("hubtrust/hub.pub")).unwrap();
        }
        let source = self.file(
            "site.policy",
            b"bundle site { file \"/motd\" { content = \"hi\\n\"; } }\npolicy { site(); }\n",
        );
        let out = Command::new(binary("policyc"))
            .args(["publish", &source, "--key"])
            .arg(self.path("hub.key"))
            .arg("--dir")
            .arg(self.path(dir))
            .args(["--name", "site", "--expires", expires])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }

    fn agent_config(&self, hub: &str, state: &Path) -> String {
        self.file(
            "agent.toml",
            format!(
                "hubs = [{hub:?}]\nname = \"site\"\ntrust = {:?}\nstate = {:?}\nroot = {:?}\n\
                 timeout = \"3s\"\n",
                self.path("hubtrust"),
                state,
                self.root()
            )
            .as_bytes(),
        )
    }
}

#[test]
fn every_documented_exit_code_is_what_policyvm_returns() {
    let documented = documented_codes("policyvm");
    let table: Vec<(u8, String)> = exit::TABLE
        .iter()
        .map(|(c, m)| (*c, (*m).to_owned()))
        .collect();
    assert_eq!(
        documented, table,
        "docs/exit-codes.md and vm/src/cli/exit.rs disagree"
    );

    let f = Fixture {
        dir: tempfile::tempdir().unwrap(),
    };
    write_trust(&f.path("trust"));
    let trust = f.trust();
    let good = compile(r#"bundle b { file "/motd" { content = "hi\n"; } } policy { b(); }"#);
    let good_file = f.file("good.bundle", &good);
    let failing = f.file(
        "failing.bundle",
        &compile(
            r#"bundle b { command "no" { run = ["/bin/false"]; creates = "/never"; host = true; } }
policy { b(); }"#,
        ),
    );
    let flipping = f.file(
        "flipping.bundle",
        &compile(
            r#"bundle b {
  file "/etc/flip" { content = "${sys.hostname}\n"; }
  line "/etc/flip" { replace = r"^web01$"; with = r"b"; }
}
policy { b(); }"#,
        ),
    );
    let mut newer = good.clone();
    // The major format version (bytes 8-9, little endian), one past ours.
    let next_major = converge_vm::bundle::envelope::FORMAT_MAJOR + 1;
    newer[8..10].copy_from_slice(&next_major.to_le_bytes());
    let mut forged = good.clone();
    *forged.last_mut().unwrap() ^= 1;
    let other_trust = f.path("other-trust");
    std::fs::create_dir_all(&other_trust).unwrap();
    let other_key = Command::new(binary("policyc"))
        .args(["keygen", "--out"])
        .arg(other_trust.join("other"))
        .output()
        .unwrap();
    assert!(other_key.status.success(), "{}", text(&other_key));
    std::fs::remove_file(other_trust.join("other.key")).unwrap();

    // A hub whose stamp has expired, one that is down.
    f.publish("stale", "1s");
    let stale = file_server(f.path("stale"));
    let down = format!("http://127.0.0.1:{}", closed_port());
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let state = f.path("state");
    let hubtrust = f.path("hubtrust").display().to_string();
    let st = state.display().to_string();
    // A state directory whose lock another process holds.
    let busy_state = f.path("busy-state");
    std::fs::create_dir_all(&busy_state).unwrap();
    support::require_tool("flock", "util-linux");
    let mut holder = Command::new("flock")
        .arg(busy_state.join("lock"))
        .args(["-c", "echo held; sleep 30"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = [0u8; 5];
    std::io::Read::read_exact(holder.stdout.as_mut().unwrap(), &mut line).unwrap();

    let root = f.root();
    let run = |bundle: &str| {
        vec![
            "run".to_owned(),
            bundle.to_owned(),
            "--trust".into(),
            trust.clone(),
            "--root".into(),
            root.clone(),
        ]
    };
    let verify = |bundle: &[u8], name: &str, trust: &str| {
        vec![
            "verify".to_owned(),
            f.file(name, bundle),
            "--trust".into(),
            trust.to_owned(),
        ]
    };
    let pull = |url: &str, state: &str| {
        ["pull", url, "--name", "site", "--timeout", "3s", "--trust"]
            .into_iter()
            .map(str::to_owned)
            .chain([hubtrust.clone(), "--state".into(), state.to_owned()])
            .collect::<Vec<String>>()
    };
    let cases: Vec<(u8, Vec<String>)> = vec![
        (exit::OK, verify(&good, "ok.bundle", &trust)),
        (exit::FAILED, run(&failing)),
        (exit::NOT_CONVERGED, run(&flipping)),
        (
            exit::REFUSED,
            run(&f.file("refused.bundle", b"not a bundle")),
        ),
        (exit::STALE, pull(&stale.url(), &st)),
        (
            exit::NO_BUNDLE,
            vec![
                "agent".into(),
                "--no-splay".into(),
                "--config".into(),
                f.agent_config(&down, &f.path("agent-state")),
            ],
        ),
        (
            exit::BAD_MAGIC,
            verify(b"#!/bin/sh\n", "magic.bundle", &trust),
        ),
        (
            exit::UNSUPPORTED_VERSION,
            verify(&newer, "newer.bundle", &trust),
        ),
        (
            exit::TRUNCATED,
            verify(&good[..good.len() / 2], "half.bundle", &trust),
        ),
        (
            exit::CORRUPT,
            verify(&signed(b"\xff\xff garbage"), "corrupt.bundle", &trust),
        ),
        (
            exit::UNKNOWN_KEY,
            verify(&good, "stranger.bundle", &other_trust.display().to_string()),
        ),
        (
            exit::BAD_SIGNATURE,
            verify(&forged, "forged.bundle", &trust),
        ),
        (exit::USAGE, vec!["frobnicate".into()]),
        (
            exit::NO_INPUT,
            vec![
                "verify".into(),
                f.path("missing.bundle").display().to_string(),
                "--trust".into(),
                trust.clone(),
            ],
        ),
        (exit::UNAVAILABLE, pull(&down, &st)),
        (
            exit::CANT_CREATE,
            pull(&stale.url(), &format!("{good_file}/state")),
        ),
        (
            exit::BUSY,
            pull(&stale.url(), &busy_state.display().to_string()),
        ),
    ];
    let tried: Vec<u8> = cases.iter().map(|(c, _)| *c).collect();
    let listed: Vec<u8> = table.iter().map(|(c, _)| *c).collect();
    assert_eq!(tried, listed, "every documented code needs a case");
    let mut wrong = Vec::new();
    for (code, args) in &cases {
        let out = Command::new(binary("policyvm"))
            .args(args)
            .output()
            .unwrap();
        if out.status.code() != Some(i32::from(*code)) {
            wrong.push(format!("expected {code} from {args:?}:\n{}", text(&out)));
        }
    }
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Issue 15, item 6: one exit-code table for `policyc`. Every code the
/// documentation lists is in the binary's table with the same meaning,
/// and a real case returns it.
#[test]
fn every_documented_exit_code_is_what_policyc_returns() {
    use converge_compiler::cli::exit;
    let documented = documented_codes("policyc");
    let table: Vec<(u8, String)> = exit::TABLE
        .iter()
        .map(|(c, m)| (*c, (*m).to_owned()))
        .collect();
    assert_eq!(
        documented, table,
        "docs/exit-codes.md and cli/exit.rs disagree"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("clean.policy"),
        "bundle motd {\n  file \"/etc/motd\" { content = \"hi\\n\"; mode = 0o644; }\n}\npolicy { motd(); }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("bad.policy"),
        "bundle b { file \"/x\" { mode = \"rw\"; } }\npolicy { b(); }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("changed.policy"),
        "bundle motd {\n  file \"/etc/motd\" { content = \"hello\\n\"; mode = 0o644; }\n}\npolicy { motd(); }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("hosts.toml"),
        "[[host]]\nname = \"web-01\"\nreport_key = \"ed25519:iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w=\"\n",
    )
    .unwrap();
    let d = |name: &str| dir.path().join(name).display().to_string();
    let cases: Vec<(u8, Vec<String>)> = vec![
        (exit::OK, vec!["check".into(), d("clean.policy")]),
        (exit::ERRORS, vec!["check".into(), d("bad.policy")]),
        (
            exit::CHANGES,
            vec![
                "plan".into(),
                d("clean.policy"),
                d("changed.policy"),
                "--inventory".into(),
                d("hosts.toml"),
            ],
        ),
        (exit::USAGE, vec!["frobnicate".into()]),
        (exit::NO_INPUT, vec!["check".into(), d("missing.policy")]),
        // Nothing listens on port 1 (and without curl, 69 says to install it).
        (
            exit::UNAVAILABLE,
            vec![
                "fleet".into(),
                "status".into(),
                "--collector".into(),
                "http://127.0.0.1:1".into(),
            ],
        ),
        // keygen creates a missing directory (0700), but not below a file.
        (
            exit::CANT_CREATE,
            vec!["keygen".into(), "--out".into(), d("clean.policy/keys/key")],
        ),
        (exit::IO_ERROR, vec!["lsp".into()]),
        // `curl` here is a stand-in that answers HTML (tests/fleet_cli.rs
        // has the cases against a real collector).
        (
            exit::PROTOCOL,
            vec![
                "fleet".into(),
                "status".into(),
                "--collector".into(),
                "http://collector.invalid".into(),
            ],
        ),
    ];
    let fake_curl = tempfile::tempdir().unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        let curl = fake_curl.path().join("curl");
        std::fs::write(&curl, "#!/bin/sh\nprintf '<html>\\n200'\n").unwrap();
        std::fs::set_permissions(&curl, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let tried: Vec<u8> = cases.iter().map(|(c, _)| *c).collect();
    let listed: Vec<u8> = table.iter().map(|(c, _)| *c).collect();
    assert_eq!(tried, listed, "every documented code needs a case");
    for (code, args) in cases {
        // `lsp` with nothing on standard input: the session never starts.
        let mut cmd = Command::new(binary("policyc"));
        cmd.args(&args).stdin(Stdio::null());
        if code == exit::PROTOCOL {
            cmd.env("PATH", fake_curl.path());
        }
        let out = cmd.output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(i32::from(code)),
            "policyc {args:?}: {}",
            text(&out)
        );
    }
}
