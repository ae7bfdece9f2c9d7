//! Helpers shared by the end-to-end tests: compile policy text with a fixed
//! test key, open the bundle as a host would, converge a sandbox root.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support: a broken fixture ends the test"
)]

use std::path::Path;

use converge_compiler::bundle::keys::SecretKey;
use converge_compiler::bundle::lower::{lower, BuildInfo};
use converge_compiler::bundle::seal;
use converge_compiler::check::{check, CheckOutcome};
use converge_compiler::workspace::{FileSystem, Workspace};
use converge_vm::bundle::format::Body;
use converge_vm::bundle::keys::{encode_key_file, key_id, PublicKey, PUBLIC_TAG};
use converge_vm::bundle::{open, Verified};
use converge_vm::run::operators::Outcome;
use converge_vm::run::{run, RunOptions, RunReport};
use ed25519_dalek::SigningKey;

pub fn keys() -> (SecretKey, PublicKey) {
    let signing = SigningKey::from_bytes(&[9; 32]);
    let public = signing.verifying_key().to_bytes();
    let id = key_id(&public);
    (SecretKey { signing, id }, PublicKey { id, key: public })
}

/// A workspace holding one in-memory file, `policy.policy`.
fn workspace(text: &str) -> Workspace {
    workspace_of(&[("policy.policy", text)])
}

/// A workspace of in-memory files (paths relative to the policy tree: data
/// files and templates beside the policy); the first is the root.
fn workspace_of(files: &[(&str, &str)]) -> Workspace {
    let mut fs = FileSystem::new();
    for (path, text) in files {
        fs.insert(*path, (*text).to_owned());
    }
    let mut ws = Workspace::new(fs);
    let root = files.first().map_or("policy.policy", |(path, _)| path);
    ws.add_root(Path::new(root)).unwrap();
    ws
}

/// Checks policy text, returning every diagnostic.
pub fn check_text(text: &str) -> CheckOutcome {
    check(&workspace(text))
}

/// Compiles policy text into a bundle body (unsigned), failing the test on
/// any compile error.
pub fn body(text: &str) -> Body {
    body_of(&[("policy.policy", text)])
}

/// Compiles in-memory policy files (the root first, then the data files
/// and templates it names) into a bundle body, failing the test on any
/// compile error.
pub fn body_of(files: &[(&str, &str)]) -> Body {
    let ws = workspace_of(files);
    let text = files.first().map_or("", |(_, text)| text);
    let mut outcome = check(&ws);
    let errors: Vec<_> = outcome
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .collect();
    assert!(errors.is_empty(), "{errors:?}\n{text}");
    let checked = outcome.programs.pop().unwrap();
    let (secret, _) = keys();
    let info = BuildInfo {
        name: "test".into(),
        key_id: secret.id,
        serial: 1,
    };
    lower(&ws.db, &checked.files, &checked.program, &info).unwrap()
}

/// Compiles policy text into signed bundle bytes.
pub fn compile(text: &str) -> Vec<u8> {
    seal(&body(text), &keys().0).unwrap()
}

/// Compiles in-memory policy files (see [`body_of`]) into signed bundle
/// bytes.
pub fn compile_files(files: &[(&str, &str)]) -> Vec<u8> {
    seal(&body_of(files), &keys().0).unwrap()
}

pub fn verified(bytes: &[u8]) -> Verified {
    let (_, public) = keys();
    open(bytes, &[public]).unwrap()
}

pub fn converge(bundle: &Verified, root: &Path, dry_run: bool) -> RunReport {
    run(
        bundle,
        &RunOptions {
            root: root.to_path_buf(),
            dry_run,
            defines: Vec::new(),
            state: None,
            blobs: Vec::new(),
        },
    )
    .unwrap()
}

pub fn repaired(r: &RunReport) -> usize {
    r.count(|o| *o == Outcome::Repaired)
}

pub fn failed(r: &RunReport) -> Vec<String> {
    r.promises
        .iter()
        .filter_map(|p| match &p.outcome() {
            Outcome::Failed(e) => Some(format!("{} {}: {e}", p.kind(), p.promiser)),
            _ => None,
        })
        .collect()
}

/// Writes the test key's public half into `dir`, as `policyvm --trust` reads it.
pub fn write_trust(dir: &Path) {
    let (_, public) = keys();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("test.pub"),
        encode_key_file("public", PUBLIC_TAG, public.id, &public.key),
    )
    .unwrap();
}

/// A hub's signing key made by the real `policyc keygen` at
/// `WORK/keys/hub.key` (and `.pub`), and the trust directory its hosts
/// hold, `WORK/trust/` with that public key. Returns the trust directory.
pub fn hub_keys(work: &Path) -> std::path::PathBuf {
    let keys = work.join("keys");
    let out = std::process::Command::new(crate::binary("policyc"))
        .args(["keygen", "--out"])
        .arg(keys.join("hub"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "policyc keygen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trust = work.join("trust");
    std::fs::create_dir(&trust).unwrap();
    std::fs::copy(keys.join("hub.pub"), trust.join("hub.pub")).unwrap();
    trust
}

/// Runs a `policyvm run` command, again while it exits 75 (another run
/// holds the root's lock: the tests that run on `/` (read-only) may meet
/// one another when test binaries run in parallel). Gives up after 10 s.
pub fn output_when_unlocked(cmd: &mut std::process::Command) -> std::process::Output {
    for _ in 0..100 {
        let out = cmd.output().unwrap();
        if out.status.code() != Some(75) {
            return out;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the root stayed locked for 10 s: {cmd:?}");
}

/// Fails the test unless this process is root. The tests that run
/// `dpkg --root`, `useradd -R` (a chroot), `mknod` or `mount` need it, as
/// those tools do. Such a test is `#[ignore = "needs root"]`: plain `cargo
/// test` lists it as ignored, and `--include-ignored` (what `.ci/run` runs,
/// as root) runs it; run that way without root, it fails here with the
/// reason instead of passing while doing nothing.
pub fn require_root(why: &str) {
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    assert!(
        root,
        "this test needs root ({why}); it is #[ignore]d by default: run it with \
         `--include-ignored` only as root"
    );
}

/// The path of `program` found on `PATH` or in the system directories
/// (`/usr/sbin` is not on every user's `PATH`), if it is installed.
pub fn find_tool(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(std::path::PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Fails the test unless `program` is installed, naming the Debian
/// `package` that has it. Tests that need a tool the machine may lack are
/// `#[ignore = "needs PROGRAM"]` and call this first: with
/// `--include-ignored` (`.ci/run`, which installs the tools) a missing tool
/// is a failure, never a silent pass.
pub fn require_tool(program: &str, package: &str) -> std::path::PathBuf {
    find_tool(program).unwrap_or_else(|| {
        panic!(
            "this test needs `{program}` (apt-get install {package}); it is #[ignore]d by \
             default: run it with `--include-ignored` only where `{program}` is installed"
        )
    })
}

/// Makes `root` able to run `/bin/sh` chrooted (`command` promises and
/// probes under `--root` run chrooted into it): the host's shell and the
/// libraries `ldd` lists for it, copied in.
pub fn root_with_a_shell(root: &Path) {
    let inside = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    let mut files = vec![sh.clone()];
    let ldd = std::process::Command::new("ldd").arg(&sh).output().unwrap();
    for word in String::from_utf8_lossy(&ldd.stdout).split_whitespace() {
        if word.starts_with('/') {
            files.push(std::path::PathBuf::from(word));
        }
    }
    for file in files {
        let to = inside(&file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&file, &to).unwrap();
    }
    let to = inside(Path::new("/bin/sh"));
    if !to.exists() {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&sh, &to).unwrap();
    }
}

/// A bundle built by the real `policyc build` with a fresh key.
#[derive(Debug)]
pub struct PolicycBuild {
    /// Holds the key, the bundle and the trust directory.
    pub work: tempfile::TempDir,
    pub bundle: std::path::PathBuf,
    /// A trust directory holding the key's public half.
    pub trust: std::path::PathBuf,
}

/// Generates a key with `policyc keygen` and builds `policy` with
/// `policyc build EXTRA --output --key --serial 1`; panics with the
/// command's output when either fails.
pub fn policyc_build(policy: &Path, extra: &[&str]) -> PolicycBuild {
    let work = tempfile::tempdir().unwrap();
    let key = work.path().join("site");
    let run = |cmd: &mut std::process::Command, what: &str| {
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{what} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let policyc = || std::process::Command::new(crate::binary("policyc"));
    run(
        policyc().arg("keygen").arg("--out").arg(&key),
        "policyc keygen",
    );
    let trust = work.path().join("trust");
    std::fs::create_dir_all(&trust).unwrap();
    std::fs::copy(key.with_extension("pub"), trust.join("site.pub")).unwrap();
    let bundle = work.path().join("site.bundle");
    run(
        policyc()
            .arg("build")
            .args(extra)
            .arg("--output")
            .arg(&bundle)
            .arg("--key")
            .arg(key.with_extension("key"))
            .arg("--serial")
            .arg("1")
            .arg(policy),
        "policyc build",
    );
    PolicycBuild {
        work,
        bundle,
        trust,
    }
}

/// A policy tree with secrets, for the end-to-end tests of secrets
/// (LANGUAGE.md section 14): a builder identity made by `policyc secret
/// keygen` (its recipient in `site/secrets/.recipients`), each secret
/// written by `policyc secret add` from standard input, `site/site.policy`
/// and `site/inventory.toml` with the given hosts.
#[derive(Debug)]
pub struct SecretSite {
    pub work: tempfile::TempDir,
    /// `site/`, the policy tree.
    pub tree: std::path::PathBuf,
    /// `site/site.policy`.
    pub policy: std::path::PathBuf,
    /// The builder's identity, for `policyc build --identity`.
    pub builder: std::path::PathBuf,
}

/// One inventory host of a [`SecretSite`]: its name, its age recipient
/// (`age1...`, as `policyvm enroll` prints it; `None` for a host not
/// enrolled for secrets) and extra inventory lines (`groups = ["db"]`).
#[derive(Clone, Debug)]
pub struct SiteHost {
    pub name: String,
    pub age_recipient: Option<String>,
    pub extra: String,
}

/// Runs a `policyc` command; panics with its output unless it succeeds.
/// Returns standard output.
pub fn policyc_ok(args: &[&std::ffi::OsStr], stdin: Option<&[u8]>) -> String {
    use std::io::Write as _;
    let mut cmd = std::process::Command::new(crate::binary("policyc"));
    cmd.args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.unwrap_or_default()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "policyc {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh age identity made by `policyc secret keygen` at `path`; returns
/// its recipient (`age1...`).
pub fn age_keygen(path: &Path) -> String {
    let out = policyc_ok(
        &[
            "secret".as_ref(),
            "keygen".as_ref(),
            "--out".as_ref(),
            path.as_os_str(),
        ],
        None,
    );
    out.split_whitespace()
        .find(|w| w.starts_with("age1"))
        .unwrap()
        .to_owned()
}

/// Writes a [`SecretSite`]: `policy` as `site/site.policy`, `hosts` as its
/// inventory, and each `(NAME, plaintext)` of `secrets` as
/// `site/secrets/NAME.age`.
pub fn secret_site(policy: &str, hosts: &[SiteHost], secrets: &[(&str, &str)]) -> SecretSite {
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("site");
    std::fs::create_dir_all(tree.join("secrets")).unwrap();
    let builder = work.path().join("builder.key");
    let recipient = age_keygen(&builder);
    std::fs::write(tree.join("secrets/.recipients"), format!("{recipient}\n")).unwrap();
    for (name, plaintext) in secrets {
        policyc_ok(
            &[
                "secret".as_ref(),
                "add".as_ref(),
                name.as_ref(),
                "--policy-root".as_ref(),
                tree.as_os_str(),
            ],
            Some(plaintext.as_bytes()),
        );
    }
    write_inventory(&tree, hosts);
    let policy_path = tree.join("site.policy");
    std::fs::write(&policy_path, policy).unwrap();
    SecretSite {
        work,
        tree,
        policy: policy_path,
        builder,
    }
}

/// (Re)writes `tree/inventory.toml` with `hosts`.
pub fn write_inventory(tree: &Path, hosts: &[SiteHost]) {
    let report = SigningKey::from_bytes(&[7; 32]).verifying_key();
    let text: String = hosts
        .iter()
        .map(|h| {
            converge_format::inventory::host_entry(
                &h.name,
                &report,
                h.age_recipient.as_deref(),
                None,
                &h.extra,
            ) + "\n"
        })
        .collect();
    std::fs::write(tree.join("inventory.toml"), text).unwrap();
}

impl SecretSite {
    /// `policyc build --identity BUILDER EXTRA` of the site: see
    /// [`policyc_build`].
    pub fn build(&self, extra: &[&str]) -> PolicycBuild {
        let builder = self.builder.to_string_lossy().into_owned();
        let mut args = vec!["--identity", builder.as_str()];
        args.extend_from_slice(extra);
        policyc_build(&self.policy, &args)
    }
}
