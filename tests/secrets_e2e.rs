//! Secrets on two sandbox hosts, end to end (issue 20, the VM side; LANGUAGE.md
//! section 14, THREATS.md T24/T33): both hosts enroll (`policyvm enroll
//! --root`), one bundle carries a secret sealed to host A only, for file
//! promises guarded to A. A writes the files with the promised modes; B
//! skips them (guard false) and, forced with `--define`, cannot decrypt
//! them: the promise fails saying so and every other promise is applied.
//! Then a whole cycle — dry run, run, drift with `backup = true`, a second
//! run, `inspect`, run reports in both formats, an agent cycle whose report
//! is signed and spooled for upload — and every output of it (stdout,
//! stderr, report files, the state directories with their backups and
//! spooled uploads, every file of both roots but the two secret files
//! themselves) is searched for the plaintext: it is in none.
//!
//! The bundle is built by `policyc` from policy text with a placeholder,
//! then its constants holding the placeholder are replaced by secret
//! constants sealed as `docs/bytecode.md` ("Secrets") says — a set key
//! sealed to A's `identity/age.key`, the secret sealed to that key — and
//! the body is signed again: the compiler's `secret()` (issue 20, the other
//! half) may not exist in this tree yet.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::str::FromStr as _;

use converge::binary;
use converge::http::{respond, Scripted};
use converge::support::{body, keys, write_trust};
use converge_compiler::bundle::seal;
use converge_format::bundle::format::{Body, Bytes, Constant, Sealed, SealedSet};
use converge_format::inventory::{parse_report_key, Inventory};
use converge_format::report::SignedReport;
use converge_format::stamp::Stamp;
use ed25519_dalek::Signer as _;

/// The secret. No output may contain it.
const PLAINTEXT: &str = "Zq9-plaintext-d0-n0t-print-7781";
/// Where the policy text holds it before sealing.
const PLACEHOLDER: &str = "@SECRET@";

const POLICY: &str = r#"
bundle site {
  file "/etc/motd" { content = "hello\n"; }
  when host_db_a {
    file "/etc/app/db.password" { content = "@SECRET@"; mode = 0o600; }
    file "/etc/app/db.conf" {
      content = "host=${sys.hostname}\npassword=@SECRET@\n";
      mode = 0o640;
      backup = true;
    }
  }
}
policy { site(); }
"#;

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An age file (binary) of `plaintext` for `recipients`.
fn encrypt_to(recipients: &[age::x25519::Recipient], plaintext: &[u8]) -> Vec<u8> {
    let encryptor =
        age::Encryptor::with_recipients(recipients.iter().map(|r| r as &dyn age::Recipient))
            .unwrap();
    let mut out = Vec::new();
    let mut writer = encryptor.wrap_output(&mut out).unwrap();
    writer.write_all(plaintext).unwrap();
    writer.finish().unwrap();
    out
}

/// Seals, as `policyc` does (`docs/bytecode.md`, "Secrets"): every string
/// constant that `secret_of` names (name, value) becomes a secret, and all
/// of them one sealed set for `recipients` (`age1...`), appended to the
/// pool. Returns how many constants were sealed.
fn seal_set_of(
    body: &mut Body,
    recipients: &[&str],
    secret_of: impl Fn(&str) -> Option<(String, String)>,
) -> usize {
    let recipients: Vec<_> = recipients
        .iter()
        .map(|h| age::x25519::Recipient::from_str(h).unwrap())
        .collect();
    let set = u32::try_from(body.constants.len()).unwrap();
    let mut entries: Vec<(String, String)> = Vec::new();
    for c in &mut body.constants.0 {
        let Constant::Str(s) = c else { continue };
        let Some((name, value)) = secret_of(s) else {
            continue;
        };
        *c = Constant::Secret(Box::new(Sealed {
            name: name.clone(),
            set,
            index: u32::try_from(entries.len()).unwrap(),
        }));
        entries.push((name, value));
    }
    let borrowed: Vec<(&str, &str)> = entries
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let plaintext = SealedSet::encode_plaintext(&borrowed).unwrap();
    body.constants
        .0
        .push(Constant::SealedSet(Box::new(SealedSet {
            ciphertext: Bytes(encrypt_to(&recipients, &plaintext)),
        })));
    entries.len()
}

/// Seals, as `policyc` does: every string constant holding the placeholder
/// becomes a secret (the placeholder replaced by [`PLAINTEXT`]) of one
/// sealed set for `hosts` (their `age1...` recipients).
fn seal_secrets(body: &mut Body, hosts: &[String], serial: u64) {
    let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let sealed = seal_set_of(body, &hosts, |s| {
        s.contains(PLACEHOLDER).then(|| {
            let name = if s == PLACEHOLDER {
                "db_password"
            } else {
                "db_conf"
            };
            (name.to_owned(), s.replace(PLACEHOLDER, PLAINTEXT))
        })
    });
    assert_eq!(sealed, 2, "both placeholders are constants of their own");
    body.header.serial = serial;
}

/// A sandbox host: its root (with `/etc/hostname`) and state directory.
struct Host {
    root: PathBuf,
    state: PathBuf,
}

impl Host {
    fn new(work: &Path, name: &str) -> Host {
        let root = work.join(name);
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("etc/hostname"), format!("{name}\n")).unwrap();
        Host {
            state: root.join("var/lib/converge"),
            root,
        }
    }
}

/// Every output of the cycle, for the final search.
#[derive(Default)]
struct Transcript(Vec<String>);

impl Transcript {
    fn policyvm(&mut self, args: &[&str], paths: &[&Path]) -> Output {
        let mut cmd = Command::new(binary("policyvm"));
        cmd.args(args);
        for p in paths {
            cmd.arg(p);
        }
        let out = cmd.output().unwrap();
        self.0
            .push(format!("policyvm {args:?} {paths:?}\n{}", text(&out)));
        out
    }

    fn run(&mut self, host: &Host, bundle: &Path, trust: &Path, extra: &[&str]) -> Output {
        let out = Command::new(binary("policyvm"))
            .arg("run")
            .arg(bundle)
            .args(extra)
            .arg("--trust")
            .arg(trust)
            .arg("--root")
            .arg(&host.root)
            .output()
            .unwrap();
        self.0
            .push(format!("policyvm run {extra:?}\n{}", text(&out)));
        out
    }
}

/// Every regular file under `dir`, but `except`.
fn files_under(dir: &Path, except: &[PathBuf], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            files_under(&path, except, out);
        } else if meta.is_file() && !except.contains(&path) {
            out.push(path);
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// A hub serving `site.bundle` and its signed stamp from `pubdir`.
fn publish(pubdir: &Path, bundle: &[u8]) -> Scripted {
    std::fs::create_dir_all(pubdir).unwrap();
    let verified = converge::support::verified(bundle);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let stamp = Stamp::for_bundle(&verified, now, now + 3600);
    let signature = keys().0.signing.sign(&stamp.signing_digest());
    std::fs::write(pubdir.join("site.bundle"), bundle).unwrap();
    std::fs::write(
        pubdir.join("site.stamp"),
        stamp.encode(&signature.to_bytes()),
    )
    .unwrap();
    let served = pubdir.to_path_buf();
    Scripted::start(move |path, stream| {
        match std::fs::read(served.join(path.trim_start_matches('/'))) {
            Ok(bytes) => respond(stream, "", &bytes),
            Err(_) => {
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        }
    })
}

/// A loopback port nothing listens on: the agent's upload fails and the
/// signed report stays in the spool, exactly as it would be sent.
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

#[test]
fn only_the_entitled_host_writes_the_secret_and_no_output_contains_it() {
    let work = tempfile::tempdir().unwrap();
    let a = Host::new(work.path(), "db-a");
    let b = Host::new(work.path(), "web-b");
    let mut t = Transcript::default();

    // Both hosts enroll; the inventory holds both.
    let mut inventory = String::new();
    for (host, name) in [(&a, "db-a"), (&b, "web-b")] {
        let out = t.policyvm(&["enroll", "--name", name, "--root"], &[&host.root]);
        assert!(out.status.success(), "{}", text(&out));
        inventory.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    std::fs::write(work.path().join("inventory.toml"), &inventory).unwrap();
    let inventory = Inventory::parse(&inventory).unwrap();
    let recipient = |name: &str| {
        inventory
            .host(name)
            .and_then(|h| h.age_recipient.as_ref())
            .map(|r| r.get_ref().clone())
            .unwrap()
    };
    // The promises using the secret are guarded to A: only A is entitled.
    let mut b1 = body(POLICY);
    seal_secrets(&mut b1, &[recipient("db-a")], 1);
    let bundle_bytes = seal(&b1, &keys().0).unwrap();
    let bundle = work.path().join("site.bundle");
    std::fs::write(&bundle, &bundle_bytes).unwrap();
    assert!(!contains(&bundle_bytes, PLAINTEXT));
    let trust = work.path().join("trust");
    write_trust(&trust);

    // A, dry run: the secret files would change, without a diff.
    let out = t.run(&a, &bundle, &trust, &["--dry-run", "--format", "json"]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("/etc/app/db.password: would change (content is secret)"),
        "{shown}"
    );
    assert!(shown.contains("<secret db_password>"), "{shown}");
    assert!(!a.root.join("etc/app/db.password").exists());

    // A, run: the files with their promised modes and the plaintext.
    let report_a = work.path().join("report-a.json");
    let out = t.run(
        &a,
        &bundle,
        &trust,
        &["--report", report_a.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let password = a.root.join("etc/app/db.password");
    let conf = a.root.join("etc/app/db.conf");
    assert_eq!(std::fs::read_to_string(&password).unwrap(), PLAINTEXT);
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        format!("host=db-a\npassword={PLAINTEXT}\n")
    );
    assert_eq!((mode(&password), mode(&conf)), (0o600, 0o640));
    assert!(text(&out).contains("<secret db_conf>"), "{}", text(&out));

    // Drift: the file is rewritten, and `backup = true` keeps no copy of
    // it in the state directory (the report says so).
    std::fs::write(&conf, "host=db-a\npassword=old-value\n").unwrap();
    let out = t.run(&a, &bundle, &trust, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("not kept in the state directory: the new content is <secret db_conf>"),
        "{}",
        text(&out)
    );
    assert!(std::fs::read_to_string(&conf).unwrap().contains(PLAINTEXT));
    let out = t.run(&a, &bundle, &trust, &[]);
    assert_eq!(out.status.code(), Some(0), "converged: {}", text(&out));

    // B: the guard is false, the secret is never needed, the run is clean.
    let report_b = work.path().join("report-b.json");
    let out = t.run(
        &b,
        &bundle,
        &trust,
        &["--report", report_b.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!b.root.join("etc/app").exists());
    assert_eq!(
        std::fs::read_to_string(b.root.join("etc/motd")).unwrap(),
        "hello\n"
    );
    // Forced, B cannot decrypt: those promises fail saying why; the
    // others are applied as ever.
    std::fs::remove_file(b.root.join("etc/motd")).unwrap();
    for extra in [&["--dry-run"][..], &[][..]] {
        let mut args = vec!["--define", "host_db_a"];
        args.extend_from_slice(extra);
        let out = t.run(&b, &bundle, &trust, &args);
        let shown = text(&out);
        assert_eq!(out.status.code(), Some(1), "{shown}");
        assert!(
            shown.contains("this host is not a recipient of secret db_password"),
            "{shown}"
        );
        assert!(
            shown.contains("this host is not a recipient of secret db_conf"),
            "{shown}"
        );
    }
    assert!(!b.root.join("etc/app/db.password").exists());
    assert!(
        b.root.join("etc/motd").exists(),
        "other promises unaffected"
    );

    // inspect shows the name only.
    let out = t.policyvm(&["inspect", "--trust"], &[&trust, &bundle]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("<secret db_password>"),
        "{}",
        text(&out)
    );

    // An agent cycle on A: pulls serial 2 from a hub, runs (after a drift,
    // so the report has changes), signs its report and spools it for a
    // collector that is down.
    let mut b2 = body(POLICY);
    seal_secrets(&mut b2, &[recipient("db-a")], 2);
    b2.header.name = "site".into();
    let hub = publish(&work.path().join("hub"), &seal(&b2, &keys().0).unwrap());
    std::fs::write(&password, "drifted").unwrap();
    let config = work.path().join("agent.toml");
    std::fs::write(
        &config,
        format!(
            "hubs = [{:?}]\nname = \"site\"\ntrust = {:?}\nroot = {:?}\ntimeout = \"3s\"\n\
             collectors = [{:?}]\nupload_timeout = \"2s\"\n",
            hub.url(),
            trust,
            a.root,
            closed_port()
        ),
    )
    .unwrap();
    let out = t.policyvm(&["agent", "--no-splay", "--config"], &[&config]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&password).unwrap(), PLAINTEXT);
    let mut spooled = Vec::new();
    files_under(&a.state.join("spool"), &[], &mut spooled);
    assert_eq!(spooled.len(), 1, "{spooled:?}");
    // The spooled upload is signed base64: opened as the collector would,
    // and searched as text.
    let key = parse_report_key(inventory.host("db-a").unwrap().report_key.get_ref()).unwrap();
    let upload = SignedReport::parse(&std::fs::read(spooled.first().unwrap()).unwrap())
        .and_then(|s| s.open(&key))
        .unwrap();
    let upload = String::from_utf8(upload.to_bytes()).unwrap();
    assert!(upload.contains("<secret db_password>"), "{upload}");
    t.0.push(upload);

    // The search: every output, every file of both hosts but the two
    // secret files, the reports.
    for (i, output) in t.0.iter().enumerate() {
        assert!(
            !output.contains(PLAINTEXT),
            "output {i} holds the secret:\n{output}"
        );
        assert!(
            !output.contains("AGE-SECRET-KEY"),
            "output {i} holds a key:\n{output}"
        );
    }
    let mut files = vec![report_a, report_b];
    files_under(&a.root, &[password, conf], &mut files);
    files_under(&b.root, &[], &mut files);
    assert!(files.len() > 10, "{files:?}");
    let mut backups = Vec::new();
    if a.state.join("backups").exists() {
        files_under(&a.state.join("backups"), &[], &mut backups);
    }
    assert_eq!(backups, Vec::<PathBuf>::new(), "no backup of a secret file");
    for file in &files {
        let bytes = std::fs::read(file).unwrap();
        assert!(
            !contains(&bytes, PLAINTEXT),
            "{} holds the secret",
            file.display()
        );
    }
}

/// How many files `bench/secrets_run.sh` converges.
const BENCH_FILES: usize = 100;

/// Writes the inputs of `bench/secrets_run.sh` into `$SECRETS_BENCH_DIR`:
/// one policy of [`BENCH_FILES`] 0600 files compiled once, as
/// `plain.bundle` (each content a string) and `secret.bundle` (each content
/// a secret sealed to the host), the trusted key, and a root enrolled as
/// the host those secrets are sealed to. Run only by the script.
#[test]
#[ignore = "input generator for bench/secrets_run.sh (SECRETS_BENCH_DIR)"]
fn bench_inputs() {
    // Run by the suite too (`--include-ignored`): then into a temporary
    // directory, so the generator itself stays tested.
    let scratch = tempfile::tempdir().unwrap();
    let out = std::env::var_os("SECRETS_BENCH_DIR")
        .map_or_else(|| scratch.path().to_path_buf(), PathBuf::from);
    let root = out.join("root");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    let state = converge_vm::state::StateDir::open(&root.join("var/lib/converge")).unwrap();
    let host = converge_vm::identity::enroll(&state, Some("bench"), "bench", false).unwrap();
    let mut policy = String::from("bundle files {\n");
    for i in 0..BENCH_FILES {
        policy.push_str(&format!(
            "  file \"/data/f{i}\" {{ content = \"bench-secret-{i}-{}\"; mode = 0o600; }}\n",
            "x".repeat(24)
        ));
    }
    policy.push_str("}\npolicy { files(); }\n");
    let plain = body(&policy);
    std::fs::write(out.join("plain.bundle"), seal(&plain, &keys().0).unwrap()).unwrap();

    let mut secret = plain;
    let sealed = seal_set_of(&mut secret, &[&host.age_recipient], |s| {
        s.starts_with("bench-secret-").then(|| {
            let name = s.split('-').take(3).collect::<Vec<_>>().join("-");
            (name, s.to_owned())
        })
    });
    assert_eq!(sealed, BENCH_FILES);
    std::fs::write(out.join("secret.bundle"), seal(&secret, &keys().0).unwrap()).unwrap();
    write_trust(&out.join("trust"));
}

/// The same two hosts with the real compiler (which landed with
/// `secret()`): `policyc secret add` and `build --identity` over an
/// inventory of both enrolled hosts seal the secret to A only; A writes it,
/// B never needs it, and B forced with `--define` is not a recipient.
#[test]
fn the_real_compiler_seals_to_the_entitled_host_and_the_vm_opens_it() {
    use converge::support::{secret_site, SiteHost};
    const REAL: &str = "Real-Compiler-plaintext-4242";
    let work = tempfile::tempdir().unwrap();
    let a = Host::new(work.path(), "db-a");
    let b = Host::new(work.path(), "web-b");
    let mut t = Transcript::default();
    let mut hosts = Vec::new();
    for (host, name) in [(&a, "db-a"), (&b, "web-b")] {
        let out = t.policyvm(&["enroll", "--name", name, "--root"], &[&host.root]);
        assert!(out.status.success(), "{}", text(&out));
        let entry = Inventory::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
        let recipient = entry.hosts.first().unwrap().age_recipient.clone().unwrap();
        hosts.push(SiteHost {
            name: name.to_owned(),
            age_recipient: Some(recipient.get_ref().clone()),
            extra: String::new(),
        });
    }
    let policy = r#"let db_password: secret = secret("secrets/db_password.age");
policy {
  file "/etc/motd" { content = "hello\n"; }
  when host_db_a {
    file "/etc/app/db.conf" { content = "password=${db_password}\n"; mode = 0o600; }
  }
}
"#;
    let site = secret_site(policy, &hosts, &[("db_password", REAL)]);
    let built = site.build(&[]);
    let conf = a.root.join("etc/app/db.conf");
    let out = t.run(&a, &built.bundle, &built.trust, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        format!("password={REAL}\n")
    );
    assert_eq!(mode(&conf), 0o600);
    let out = t.run(&b, &built.bundle, &built.trust, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!b.root.join("etc/app").exists());
    let out = t.run(&b, &built.bundle, &built.trust, &["--define", "host_db_a"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("this host is not a recipient of secret db_password"),
        "{}",
        text(&out)
    );
    let out = t.policyvm(&["inspect"], &[&built.bundle]);
    assert!(
        text(&out).contains("<secret db_password>"),
        "{}",
        text(&out)
    );
    for output in &t.0 {
        assert!(!output.contains(REAL), "{output}");
    }
    let mut files = Vec::new();
    files_under(&a.root, &[conf], &mut files);
    files_under(&b.root, &[], &mut files);
    for file in &files {
        assert!(
            !contains(&std::fs::read(file).unwrap(), REAL),
            "{}",
            file.display()
        );
    }
}
