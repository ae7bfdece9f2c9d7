//! `policyvm bootstrap` end to end (issue 23, item 8): a hub on loopback
//! serving what `policyc publish` wrote, a sandbox root with the packaged
//! timer unit, then bootstrap by fingerprint, run it again (nothing
//! changes), and one agent cycle pulls and converges the root.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ::converge::http::serve_dir;
use ::converge::{binary, repo_root};

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// A hub key, a published policy, and what a new host starts with.
struct Hub {
    work: tempfile::TempDir,
    fingerprint: String,
}

impl Hub {
    /// `policyc keygen` (its printed fingerprint is what the operator
    /// passes) and `policyc publish` of a policy writing `/motd`.
    fn new() -> Hub {
        let work = tempfile::tempdir().unwrap();
        let keygen = Command::new(binary("policyc"))
            .args(["keygen", "--out"])
            .arg(work.path().join("keys/hub"))
            .output()
            .unwrap();
        assert!(keygen.status.success(), "{}", text(&keygen));
        let fingerprint = String::from_utf8_lossy(&keygen.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("fingerprint "))
            .unwrap_or_else(|| panic!("keygen printed no fingerprint: {}", text(&keygen)))
            .to_owned();
        let policy = work.path().join("site.policy");
        std::fs::write(
            &policy,
            "bundle site { file \"/motd\" { content = \"managed\\n\"; } }\npolicy { site(); }\n",
        )
        .unwrap();
        let publish = Command::new(binary("policyc"))
            .arg("publish")
            .arg(&policy)
            .arg("--key")
            .arg(work.path().join("keys/hub.key"))
            .arg("--dir")
            .arg(work.path().join("pub"))
            .output()
            .unwrap();
        assert!(publish.status.success(), "{}", text(&publish));
        Hub { work, fingerprint }
    }

    fn publish_dir(&self) -> PathBuf {
        self.work.path().join("pub")
    }

    fn public_key(&self) -> PathBuf {
        self.work.path().join("keys/hub.pub")
    }
}

/// A sandbox root as the package leaves it: a hostname, and the timer and
/// service units of vm/debian/ where the package installs them.
fn new_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(root.path().join("etc/hostname"), "web-07\n").unwrap();
    let units = root.path().join("usr/lib/systemd/system");
    std::fs::create_dir_all(&units).unwrap();
    for unit in ["converge-agent.timer", "converge-agent.service"] {
        std::fs::copy(repo_root().join("vm/debian").join(unit), units.join(unit)).unwrap();
    }
    root
}

fn bootstrap(root: &Path, args: &[&str]) -> Output {
    Command::new(binary("policyvm"))
        .arg("bootstrap")
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

/// Every file under `dir` with its modification time: what "changes
/// nothing" is checked against.
fn snapshot(dir: &Path) -> Vec<(PathBuf, i64, i64)> {
    let mut all = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                todo.push(entry.path());
            }
            all.push((entry.path(), meta.mtime(), meta.mtime_nsec()));
        }
    }
    all.sort();
    all
}

#[test]
fn bootstrap_by_fingerprint_then_one_agent_cycle_converges_the_root() {
    let hub = Hub::new();
    let server = serve_dir(hub.publish_dir());
    let root = new_root();
    let r = root.path();
    let url = server.url();
    let collector = "http://127.0.0.1:9/";
    let args = [
        "--hub",
        &url,
        "--trust-fingerprint",
        &hub.fingerprint,
        "--collector",
        collector,
    ];
    let first = bootstrap(r, &args);
    assert!(first.status.success(), "{}", text(&first));
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(stdout.contains("[[host]]\nname = \"web-07\""), "{stdout}");
    assert!(stdout.contains("bootstrapped"), "{stdout}");

    // The files, with their modes.
    let config = r.join("etc/converge/agent.toml");
    assert_eq!(mode(&config), 0o644);
    let trust = r.join("etc/converge/trusted");
    assert_eq!(mode(&trust), 0o755);
    let keys: Vec<_> = std::fs::read_dir(&trust)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert_eq!(mode(&keys[0]), 0o644);
    assert_eq!(
        std::fs::read_to_string(&keys[0]).unwrap(),
        std::fs::read_to_string(hub.public_key()).unwrap(),
        "the trusted key is the hub's"
    );
    let identity = r.join("var/lib/converge/identity");
    assert_eq!(mode(&r.join("var/lib/converge")), 0o700);
    assert_eq!(mode(&identity), 0o700);
    assert_eq!(mode(&identity.join("report.key")), 0o600);
    let link = r.join("etc/systemd/system/timers.target.wants/converge-agent.timer");
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new("/usr/lib/systemd/system/converge-agent.timer")
    );
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(
        written.contains(&format!("hubs = [\"{url}\"]")),
        "{written}"
    );
    assert!(
        written.contains(&format!("collectors = [\"{collector}\"]")),
        "{written}"
    );

    // Again: every step unchanged, not a file touched.
    let before = snapshot(r);
    let second = bootstrap(r, &args);
    assert!(second.status.success(), "{}", text(&second));
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(stdout.contains("nothing to change"), "{stdout}");
    assert!(!stdout.contains("done "), "{stdout}");
    assert!(
        stdout.contains("[[host]]\nname = \"web-07\""),
        "the entry again: {stdout}"
    );
    assert_eq!(snapshot(r), before, "a second bootstrap changed files");

    // One agent cycle, as the timer starts it: pulls and converges.
    let agent = Command::new(binary("policyvm"))
        .args(["agent", "--no-splay", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(agent.status.code(), Some(0), "{}", text(&agent));
    assert!(
        String::from_utf8_lossy(&agent.stdout).contains("pull: installed serial"),
        "{}",
        text(&agent)
    );
    assert_eq!(
        std::fs::read_to_string(r.join("motd")).unwrap(),
        "managed\n"
    );
    assert!(r.join("var/lib/converge/current.bundle").is_file());
}

#[test]
fn a_conflicting_configuration_is_refused_unless_forced() {
    let hub = Hub::new();
    let server = serve_dir(hub.publish_dir());
    let root = new_root();
    let r = root.path();
    let key = hub.public_key().display().to_string();
    let url = server.url();
    let first = bootstrap(r, &["--hub", &url, "--trust", &key]);
    assert!(first.status.success(), "{}", text(&first));
    let config = r.join("etc/converge/agent.toml");
    let before = std::fs::read_to_string(&config).unwrap();

    let other = "http://127.0.0.1:1/policy";
    let refused = bootstrap(r, &["--hub", other, "--trust", &key]);
    assert_eq!(refused.status.code(), Some(73), "{}", text(&refused));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("already configures this host differently"),
        "{stderr}"
    );
    assert!(stderr.contains("--force"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);

    let forced = bootstrap(r, &["--hub", other, "--trust", &key, "--force"]);
    assert!(forced.status.success(), "{}", text(&forced));
    assert!(std::fs::read_to_string(&config).unwrap().contains(other));
    // The identity stays: the host keeps its name and keys.
    assert!(String::from_utf8_lossy(&forced.stdout).contains("unchanged enroll"));
}

#[test]
fn a_wrong_fingerprint_or_an_unreachable_hub_writes_nothing() {
    let hub = Hub::new();
    let server = serve_dir(hub.publish_dir());
    let root = new_root();
    let r = root.path();
    let wrong = format!("SHA256:{}", "ab".repeat(32));
    let out = bootstrap(r, &["--hub", &server.url(), "--trust-fingerprint", &wrong]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("has fingerprint {}", hub.fingerprint)),
        "{stderr}"
    );
    assert!(!r.join("etc/converge").exists());
    assert!(!r.join("var/lib/converge").exists());

    let down = "http://127.0.0.1:9/policy";
    let out = bootstrap(r, &["--hub", down, "--trust-fingerprint", &hub.fingerprint]);
    assert_eq!(out.status.code(), Some(69), "{}", text(&out));
    assert!(!r.join("etc/converge").exists());

    let out = bootstrap(r, &["--hub", down, "--trust-fingerprint", "SHA256:12"]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a key fingerprint"));
}
