//! The Debian packages (issue 23, item 7; docs/operations.md, "Packages"),
//! built, checked and installed for real:
//!
//! 1. one `cargo build --release` of the three binaries, the man pages and
//!    completions generated into `target/cli-assets`
//!    (`converge-cli-assets`), then `cargo deb --no-build` per package into
//!    `target/debian/`;
//! 2. `lintian` on each: no error;
//! 3. `dpkg --root SANDBOX --force-script-chrootless` installs all three
//!    into an empty sandbox root with its own dpkg database (the host's is
//!    never read or written; the maintainer scripts run with
//!    `DPKG_ROOT=SANDBOX` and touch only the sandbox); the files, their
//!    modes, the conffiles and what the postinst made are checked;
//! 4. `systemd-analyze verify --root SANDBOX` on the installed units, with
//!    the host's own systemd units copied into the sandbox first (what the
//!    systemd package would have put there: the targets the units name).
//!
//! `#[ignore]`d: it needs cargo-deb, lintian, dpkg and systemd-analyze (and
//! a release build, minutes long). `.ci/run` installs them and runs it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ::converge::http::serve_dir;
use ::converge::repo_root;
use ::converge::support::{require_root, require_tool};

const PACKAGES: &[(&str, &str)] = &[
    ("converge-compiler", "converge-policyc"),
    ("converge-vm", "converge-policyvm"),
    ("converge-collector", "converge-collector"),
];

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}\n{}", text(&out));
    out
}

fn cargo() -> Command {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(repo_root());
    cmd
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// Builds the three packages; returns their paths by package name.
fn build_packages() -> Vec<(&'static str, PathBuf)> {
    let mut build = cargo();
    build.args(["build", "--release", "--locked"]);
    for (krate, _) in PACKAGES {
        build.args(["-p", krate]);
    }
    run(&mut build);
    // Where the crates' `[package.metadata.deb]` assets name them
    // (`../target/cli-assets`), whatever CARGO_TARGET_DIR says.
    let assets = repo_root().join("target/cli-assets");
    let _ = std::fs::remove_dir_all(&assets);
    run(cargo()
        .args(["run", "--locked", "-q", "-p", "converge-cli-assets", "--"])
        .arg(&assets));
    let out_dir = target_dir().join("debian");
    std::fs::create_dir_all(&out_dir).unwrap();
    PACKAGES
        .iter()
        .map(|(krate, name)| {
            let out = run(cargo()
                // The release profile keeps line tables (backtraces); the
                // packages ship stripped binaries (lintian). --fast: lighter
                // compression, the test checks contents, not size.
                .args([
                    "deb",
                    "--no-build",
                    "--strip",
                    "--fast",
                    "--locked",
                    "-p",
                    krate,
                ])
                .arg("--output")
                .arg(&out_dir));
            // cargo-deb prints the path of the .deb it wrote.
            let deb = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::trim)
                .rfind(|l| l.ends_with(".deb"))
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("cargo deb -p {krate} named no .deb:\n{}", text(&out)));
            assert!(deb.is_file(), "{}", deb.display());
            (*name, deb)
        })
        .collect()
}

/// An empty sandbox root with its own dpkg database.
fn sandbox() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let admin = root.path().join("var/lib/dpkg");
    for dir in ["info", "updates", "triggers"] {
        std::fs::create_dir_all(admin.join(dir)).unwrap();
    }
    std::fs::write(admin.join("status"), "").unwrap();
    std::fs::write(admin.join("available"), "").unwrap();
    root
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

#[test]
#[ignore = "needs cargo-deb, lintian, dpkg"]
fn packages_build_pass_lintian_install_into_a_sandbox_and_their_units_verify() {
    require_root("dpkg --root installs files owned by root");
    require_tool("cargo-deb", "cargo install cargo-deb --locked");
    let lintian = require_tool("lintian", "lintian");
    let dpkg = require_tool("dpkg", "dpkg");
    let dpkg_query = require_tool("dpkg-query", "dpkg");
    let analyze = require_tool("systemd-analyze", "systemd");
    let debs = build_packages();

    // lintian: no error. Warnings and notes are printed (and documented in
    // docs/operations.md, "Packages").
    for (name, deb) in &debs {
        let out = Command::new(&lintian)
            .args(["--fail-on", "error", "--tag-display-limit", "0"])
            .arg(deb)
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&out.stdout);
        eprintln!("lintian {name}:\n{report}");
        assert!(
            out.status.success() && !report.lines().any(|l| l.starts_with("E: ")),
            "lintian finds errors in {name}:\n{}",
            text(&out)
        );
    }

    // Installed for real, into the sandbox only.
    let root = sandbox();
    let r = root.path();
    let mut install = Command::new(&dpkg);
    install
        .arg(format!("--root={}", r.display()))
        .arg(format!("--log={}", r.join("dpkg.log").display()))
        .args([
            "--force-not-root",
            "--force-script-chrootless",
            // libc6 and friends are the host's, not in the sandbox's
            // database.
            "--force-depends",
            "--no-triggers",
            "-i",
        ]);
    for (_, deb) in &debs {
        install.arg(deb);
    }
    run(&mut install);
    let status = run(Command::new(&dpkg_query)
        .arg(format!("--admindir={}", r.join("var/lib/dpkg").display()))
        .args(["-W", "-f", "${Package} ${Status}\n"]));
    let status = String::from_utf8_lossy(&status.stdout);
    for (name, _) in &debs {
        assert!(
            status.contains(&format!("{name} install ok installed")),
            "{status}"
        );
    }

    for (path, expected) in [
        ("usr/bin/policyc", 0o755),
        ("usr/bin/policyvm", 0o755),
        ("usr/bin/converge-collector", 0o755),
        ("etc/converge/agent.toml", 0o644),
        ("etc/default/converge-collector", 0o644),
        ("usr/lib/systemd/system/converge-agent.service", 0o644),
        ("usr/lib/systemd/system/converge-agent.timer", 0o644),
        ("usr/lib/systemd/system/converge-collector.service", 0o644),
        ("usr/lib/tmpfiles.d/converge-policyvm.conf", 0o644),
        ("usr/share/man/man1/policyc.1.gz", 0o644),
        ("usr/share/man/man1/policyc-check.1.gz", 0o644),
        ("usr/share/man/man1/policyvm-bootstrap.1.gz", 0o644),
        ("usr/share/man/man1/converge-collector-serve.1.gz", 0o644),
        ("usr/share/bash-completion/completions/policyc", 0o644),
        ("usr/share/bash-completion/completions/policyvm", 0o644),
        (
            "usr/share/bash-completion/completions/converge-collector",
            0o644,
        ),
        ("usr/share/zsh/vendor-completions/_policyvm", 0o644),
        ("usr/share/fish/vendor_completions.d/policyvm.fish", 0o644),
        ("usr/share/doc/converge-policyvm/copyright", 0o644),
        // Made by the postinst (systemd-tmpfiles --root) from tmpfiles.d.
        ("var/lib/converge", 0o700),
    ] {
        assert_eq!(mode(&r.join(path)), expected, "{path}");
    }
    // The configuration files are conffiles: an upgrade keeps the
    // operator's edits (bootstrap's agent.toml).
    let conffiles = run(Command::new(&dpkg_query)
        .arg(format!("--admindir={}", r.join("var/lib/dpkg").display()))
        .args(["-W", "-f", "${Conffiles}\n"]));
    let conffiles = String::from_utf8_lossy(&conffiles.stdout);
    for file in [
        "/etc/converge/agent.toml",
        "/etc/default/converge-collector",
    ] {
        assert!(
            conffiles.contains(file),
            "{file} is no conffile: {conffiles}"
        );
    }
    // The installed binaries run, and the placeholder configuration tells
    // the operator what to do.
    let version = run(Command::new(r.join("usr/bin/policyvm")).arg("--version"));
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("policyvm "));
    let agent = Command::new(r.join("usr/bin/policyvm"))
        .args(["agent", "--config"])
        .arg(r.join("etc/converge/agent.toml"))
        .output()
        .unwrap();
    assert_eq!(agent.status.code(), Some(66), "{}", text(&agent));
    assert!(
        String::from_utf8_lossy(&agent.stderr).contains("policyvm bootstrap"),
        "{}",
        text(&agent)
    );

    // The two commands: the packages are installed, now bootstrap
    // the sandbox against a hub on loopback with the installed binaries,
    // and one agent cycle converges it.
    bootstrap_the_sandbox(r);

    // The units, against the sandbox: every ExecStart binary, user and
    // directive is checked there. The targets they name come from the
    // systemd package, which the sandbox lacks: copy the host's.
    let units = r.join("usr/lib/systemd/system");
    for dir in ["/usr/lib/systemd/system", "/lib/systemd/system"] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let to = units.join(entry.file_name());
            if entry.path().is_file() && !to.exists() {
                std::fs::copy(entry.path(), to).unwrap();
            }
        }
    }
    let verify = Command::new(&analyze)
        .arg("verify")
        .arg("--man=no")
        .arg(format!("--root={}", r.display()))
        .args(
            [
                "converge-agent.service",
                "converge-agent.timer",
                "converge-collector.service",
            ]
            .map(|u| units.join(u)),
        )
        .output()
        .unwrap();
    assert!(
        verify.status.success() && verify.stderr.is_empty() && verify.stdout.is_empty(),
        "systemd-analyze verify:\n{}",
        text(&verify)
    );
}

/// `policyc keygen` and `policyc publish` (the installed policyc) into a
/// hub on loopback, then the installed `policyvm bootstrap --root` by
/// fingerprint over the package's placeholder agent.toml, and one agent
/// cycle.
fn bootstrap_the_sandbox(r: &Path) {
    let hub = tempfile::tempdir().unwrap();
    let policyc = r.join("usr/bin/policyc");
    let policyvm = r.join("usr/bin/policyvm");
    let keygen = run(Command::new(&policyc)
        .args(["keygen", "--out"])
        .arg(hub.path().join("keys/hub")));
    let fingerprint = String::from_utf8_lossy(&keygen.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("fingerprint "))
        .unwrap()
        .to_owned();
    let policy = hub.path().join("site.policy");
    std::fs::write(
        &policy,
        "bundle site { file \"/etc/motd\" { content = \"managed by converge\\n\"; } }\npolicy { site(); }\n",
    )
    .unwrap();
    run(Command::new(&policyc)
        .arg("publish")
        .arg(&policy)
        .arg("--key")
        .arg(hub.path().join("keys/hub.key"))
        .arg("--dir")
        .arg(hub.path().join("pub")));
    let server = serve_dir(hub.path().join("pub"));
    std::fs::write(r.join("etc/hostname"), "sandbox-01\n").unwrap();
    let out = run(Command::new(&policyvm)
        .args([
            "bootstrap",
            "--hub",
            &server.url(),
            "--trust-fingerprint",
            &fingerprint,
        ])
        .arg("--root")
        .arg(r));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("name = \"sandbox-01\""), "{said}");
    assert_eq!(
        std::fs::read_link(r.join("etc/systemd/system/timers.target.wants/converge-agent.timer"))
            .unwrap(),
        Path::new("/usr/lib/systemd/system/converge-agent.timer")
    );
    let agent = run(Command::new(&policyvm)
        .args(["agent", "--no-splay", "--config"])
        .arg(r.join("etc/converge/agent.toml")));
    assert!(agent.status.success());
    assert_eq!(
        std::fs::read_to_string(r.join("etc/motd")).unwrap(),
        "managed by converge\n"
    );
}
