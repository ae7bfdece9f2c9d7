//! Content-addressed files (format 2.6, issue 22 item 5), end to end:
//! `policyc build`/`publish` storing large files beside the bundle as
//! blobs, `policyvm run` finding them beside a local bundle, and
//! `policyvm agent` fetching the missing ones from a real HTTP hub on
//! loopback (which counts what it serves), verifying and caching them, and
//! both sides collecting garbage.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use converge::binary;
use converge::http::Scripted;
use serde_json::Value;

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `n` bytes that differ with `seed` (no two files of a test share a blob).
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// What the hub does with a request for a blob instead of serving it.
#[derive(Clone)]
enum Fault {
    /// Other bytes, of the right length.
    Forged,
    /// The right bytes, then more, without end.
    Endless,
}

/// A hub on loopback serving a publish directory, streaming each file,
/// and recording every path asked for; a fault may replace any blob.
struct Hub {
    work: tempfile::TempDir,
    pubdir: PathBuf,
    trust: PathBuf,
    asked: Arc<Mutex<Vec<String>>>,
    faults: Arc<Mutex<HashMap<String, Fault>>>,
    server: Scripted,
}

impl Hub {
    fn start() -> Hub {
        let work = tempfile::tempdir().unwrap();
        let pubdir = work.path().join("srv");
        std::fs::create_dir(&pubdir).unwrap();
        let trust = converge::support::hub_keys(work.path());
        let asked = Arc::new(Mutex::new(Vec::new()));
        let faults: Arc<Mutex<HashMap<String, Fault>>> = Arc::default();
        let server = {
            let (dir, asked, faults) = (pubdir.clone(), asked.clone(), faults.clone());
            Scripted::start(move |path, stream| {
                let name = path.trim_start_matches('/').to_owned();
                asked.lock().unwrap().push(name.clone());
                let fault = faults.lock().unwrap().get(&name).cloned();
                let inside = !name.split('/').any(|p| p == ".." || p.is_empty());
                let file = std::fs::File::open(dir.join(&name)).ok().filter(|_| inside);
                let Some(mut file) = file else {
                    let _ = stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    return;
                };
                let len = file.metadata().unwrap().len();
                match fault {
                    None => {
                        let head = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
                        );
                        let _ = stream.write_all(head.as_bytes());
                        let _ = std::io::copy(&mut file, stream);
                    }
                    Some(Fault::Forged) => {
                        converge::http::respond(stream, "", &vec![b'X'; len as usize]);
                    }
                    Some(Fault::Endless) => converge::http::stream_forever(
                        stream,
                        &[b'Y'; 65536],
                        std::time::Duration::ZERO,
                        std::time::Duration::from_secs(20),
                    ),
                }
            })
        };
        Hub {
            work,
            pubdir,
            trust,
            asked,
            faults,
            server,
        }
    }

    /// The policy tree: `site.policy` and the files it names.
    fn tree(&self) -> PathBuf {
        let tree = self.work.path().join("policy");
        std::fs::create_dir_all(&tree).unwrap();
        tree
    }

    fn publish(&self, policy: &str, serial: u64, extra: &[&str]) -> String {
        let file = self.tree().join("site.policy");
        std::fs::write(&file, policy).unwrap();
        let out = Command::new(binary("policyc"))
            .arg("publish")
            .arg(&file)
            .args(["--serial", &serial.to_string(), "--name", "site", "--key"])
            .arg(self.work.path().join("keys/hub.key"))
            .arg("--dir")
            .arg(&self.pubdir)
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn gc(&self) -> String {
        let out = Command::new(binary("policyc"))
            .args(["publish", "--gc", "--key"])
            .arg(self.work.path().join("keys/hub.key"))
            .arg("--dir")
            .arg(&self.pubdir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The blob requests served so far.
    fn blob_requests(&self) -> Vec<String> {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.starts_with("blobs/"))
            .cloned()
            .collect()
    }

    fn hub_blobs(&self) -> Vec<String> {
        names(&self.pubdir.join("blobs"))
    }

    fn fault(&self, blob: &str, fault: Fault) {
        self.faults
            .lock()
            .unwrap()
            .insert(format!("blobs/{blob}"), fault);
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A sandbox host pulling from the hub.
struct Host {
    root: PathBuf,
    config: PathBuf,
}

impl Host {
    fn new(hub: &Hub, name: &str) -> Host {
        let dir = hub.work.path().join(name);
        let root = dir.join("root");
        std::fs::create_dir_all(&root).unwrap();
        let config = dir.join("agent.toml");
        std::fs::write(
            &config,
            format!(
                "hubs = [{:?}]\nname = \"site\"\ntrust = {:?}\nroot = {:?}\ntimeout = \"20s\"\n",
                hub.server.url(),
                hub.trust,
                root,
            ),
        )
        .unwrap();
        Host { root, config }
    }

    fn agent(&self) -> Output {
        Command::new(binary("policyvm"))
            .args(["agent", "--no-splay", "--config"])
            .arg(&self.config)
            .output()
            .unwrap()
    }

    fn report(&self) -> Value {
        let path = self.root.join("var/lib/converge/reports/last.json");
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    fn cache(&self) -> Vec<String> {
        names(&self.root.join("var/lib/converge/blobs"))
    }
}

/// A policy with a large binary (stored) and a small file (inline).
fn binary_policy(serial: u64) -> String {
    format!(
        "bundle site {{\n  directory \"/opt/app\" {{ mode = 0o755; }}\n  \
         file \"/opt/app/app\" {{ source = \"app.bin\"; mode = 0o755; }}\n  \
         file \"/opt/app/VERSION\" {{ content = \"{serial}\\n\"; }}\n}}\npolicy {{ site(); }}\n"
    )
}

#[test]
fn an_unchanged_binary_republished_costs_hosts_no_blob_bytes() {
    let hub = Hub::start();
    let app = bytes(3 << 20, 1);
    std::fs::write(hub.tree().join("app.bin"), &app).unwrap();
    let said = hub.publish(&binary_policy(1), 1, &[]);
    assert!(said.contains("published"), "{said}");
    let bundle_len = std::fs::metadata(hub.pubdir.join("site.bundle"))
        .unwrap()
        .len();
    assert!(
        bundle_len < 64 << 10,
        "the bundle holds the digest, not the 3 MiB: {bundle_len} bytes"
    );
    assert_eq!(hub.hub_blobs(), [sha256_hex(&app)]);

    let host = Host::new(&hub, "web01");
    let out = host.agent();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(host.root.join("opt/app/app")).unwrap(), app);
    assert_eq!(hub.blob_requests().len(), 1);
    assert_eq!(host.report()["agent"]["pull"]["blobs"]["bytes"], app.len());

    // A new serial, the same binary: the bundle is downloaded, no blob.
    hub.publish(&binary_policy(2), 2, &[]);
    let out = host.agent();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("installed serial 2"),
        "{}",
        text(&out)
    );
    assert_eq!(
        std::fs::read_to_string(host.root.join("opt/app/VERSION")).unwrap(),
        "2\n"
    );
    assert_eq!(hub.blob_requests().len(), 1, "{:?}", hub.blob_requests());
    assert_eq!(host.report()["agent"]["pull"]["blobs"]["bytes"], 0);
    // Converged: the binary is compared by digest and kept.
    let app_result = host.report()["promises"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["promiser"] == "/opt/app/app")
        .cloned()
        .unwrap();
    assert_eq!(app_result["outcome"], "kept", "{app_result}");
}

#[test]
fn changing_one_file_of_a_thousand_file_tree_fetches_one_blob() {
    let hub = Hub::start();
    let src = hub.tree().join("tree");
    for i in 0..1000u64 {
        let dir = src.join(format!("d{}", i % 10));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}")), bytes(5000, 100 + i)).unwrap();
    }
    let policy =
        "bundle site {\n  directory \"/srv/tree\" { source = \"tree\"; }\n}\npolicy { site(); }\n";
    hub.publish(policy, 1, &[]);
    assert_eq!(hub.hub_blobs().len(), 1000);
    let host = Host::new(&hub, "web01");
    let out = host.agent();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(hub.blob_requests().len(), 1000);
    assert_eq!(
        std::fs::read(host.root.join("srv/tree/d7/f517")).unwrap(),
        bytes(5000, 617)
    );

    let changed = bytes(5000, 9999);
    std::fs::write(src.join("d7/f517"), &changed).unwrap();
    hub.publish(policy, 2, &[]);
    let out = host.agent();
    assert!(out.status.success(), "{}", text(&out));
    let requests = hub.blob_requests();
    assert_eq!(requests.len(), 1001, "exactly one more blob");
    assert_eq!(
        requests.last().unwrap(),
        &format!("blobs/{}", sha256_hex(&changed))
    );
    assert_eq!(
        std::fs::read(host.root.join("srv/tree/d7/f517")).unwrap(),
        changed
    );
}

#[test]
fn a_forged_or_endless_blob_is_refused_and_nothing_is_written() {
    for fault in [Fault::Forged, Fault::Endless] {
        let hub = Hub::start();
        let app = bytes(100_000, 2);
        std::fs::write(hub.tree().join("app.bin"), &app).unwrap();
        hub.publish(&binary_policy(1), 1, &[]);
        hub.fault(&sha256_hex(&app), fault.clone());
        let host = Host::new(&hub, "web01");
        let out = host.agent();
        let shown = text(&out);
        assert!(!out.status.success(), "{shown}");
        match fault {
            Fault::Forged => assert!(
                shown.contains("are not the blob the bundle names"),
                "{shown}"
            ),
            Fault::Endless => assert!(shown.contains("more than the 100000 bytes"), "{shown}"),
        }
        assert!(!host.root.join("opt/app/app").exists(), "{shown}");
        assert!(host.cache().is_empty(), "{:?}", host.cache());
        let failed = host.report()["promises"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["promiser"] == "/opt/app/app")
            .cloned()
            .unwrap();
        assert_eq!(failed["outcome"], "failed", "{failed}");
        let why = failed["error"].as_str().unwrap_or_default();
        assert!(why.contains("is not on this host"), "{failed}");
        // The hub repaired: the next run fetches and writes it.
        hub.faults.lock().unwrap().clear();
        let out = host.agent();
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(std::fs::read(host.root.join("opt/app/app")).unwrap(), app);
    }
}

/// `policyc build` and `policyvm run` of a local bundle, with the
/// bundle's trust directory and a sandbox root.
struct Local {
    work: tempfile::TempDir,
}

impl Local {
    fn new() -> Local {
        let work = tempfile::tempdir().unwrap();
        let out = Command::new(binary("policyc"))
            .args(["keygen", "--out"])
            .arg(work.path().join("keys/hub"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        std::fs::create_dir_all(work.path().join("trust")).unwrap();
        std::fs::copy(
            work.path().join("keys/hub.pub"),
            work.path().join("trust/hub.pub"),
        )
        .unwrap();
        std::fs::create_dir_all(work.path().join("policy")).unwrap();
        std::fs::create_dir_all(work.path().join("root")).unwrap();
        std::fs::create_dir_all(work.path().join("out")).unwrap();
        Local { work }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.work.path().join(rel)
    }

    fn build(&self, policy: &str) -> String {
        std::fs::write(self.path("policy/site.policy"), policy).unwrap();
        let out = Command::new(binary("policyc"))
            .arg("build")
            .arg(self.path("policy/site.policy"))
            .arg("--output")
            .arg(self.path("out/site.bundle"))
            .arg("--key")
            .arg(self.path("keys/hub.key"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn run(&self) -> Output {
        Command::new(binary("policyvm"))
            .arg("run")
            .arg(self.path("out/site.bundle"))
            .arg("--trust")
            .arg(self.path("trust"))
            .arg("--root")
            .arg(self.path("root"))
            .output()
            .unwrap()
    }
}

#[test]
fn a_local_bundle_finds_its_blobs_beside_it_and_a_missing_one_fails_clearly() {
    let local = Local::new();
    let app = bytes(50_000, 3);
    std::fs::write(local.path("policy/app.bin"), &app).unwrap();
    let said = local.build(&binary_policy(1));
    assert!(said.contains("1 files stored in"), "{said}");
    assert_eq!(names(&local.path("out/blobs")), [sha256_hex(&app)]);
    let out = local.run();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(local.path("root/opt/app/app")).unwrap(), app);

    // A new binary whose blob is missing: the old file stays whole.
    let newer = bytes(50_000, 4);
    std::fs::write(local.path("policy/app.bin"), &newer).unwrap();
    local.build(&binary_policy(2));
    std::fs::remove_file(local.path("out/blobs").join(sha256_hex(&newer))).unwrap();
    let out = local.run();
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("/opt/app/app"), "{shown}");
    assert!(
        shown.contains(&format!("sha256:{}", sha256_hex(&newer)))
            && shown.contains("not on this host"),
        "{shown}"
    );
    assert!(shown.contains("copy the `blobs/` directory"), "{shown}");
    assert_eq!(std::fs::read(local.path("root/opt/app/app")).unwrap(), app);

    // A damaged blob (same size, other bytes) is refused the same way.
    std::fs::write(
        local.path("out/blobs").join(sha256_hex(&newer)),
        bytes(50_000, 5),
    )
    .unwrap();
    let out = local.run();
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("damaged"), "{shown}");
    assert_eq!(std::fs::read(local.path("root/opt/app/app")).unwrap(), app);
    let leftovers: Vec<String> = names(&local.path("root/opt/app"))
        .into_iter()
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "no partial file: {leftovers:?}");
}

#[test]
fn small_files_stay_inline_and_old_inline_bundles_still_run() {
    let local = Local::new();
    std::fs::write(local.path("policy/small.conf"), "x = 1\n").unwrap();
    let said = local.build(
        "bundle site {\n  file \"/etc/small.conf\" { source = \"small.conf\"; }\n}\npolicy { site(); }\n",
    );
    assert!(!said.contains("stored"), "{said}");
    assert!(!local.path("out/blobs").exists());
    let out = local.run();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(local.path("root/etc/small.conf")).unwrap(),
        "x = 1\n"
    );
    // The file is an inline `blob` constant, as every file of a bundle
    // before format 2.6: the bundle names no stored file.
    let bundle = std::fs::read(local.path("out/site.bundle")).unwrap();
    let body = converge_format::bundle::open_unsigned(&bundle)
        .unwrap()
        .body;
    assert_eq!(body.blobs().count(), 0);
    assert!(body.constants.iter().any(
        |c| matches!(c, converge_format::bundle::format::Constant::Blob(b) if b.0 == b"x = 1\n")
    ));
}

#[test]
fn garbage_is_collected_on_the_hub_and_on_the_host() {
    let hub = Hub::start();
    let (v1, v2) = (bytes(20_000, 11), bytes(20_000, 12));
    let host = Host::new(&hub, "web01");
    std::fs::write(hub.tree().join("app.bin"), &v1).unwrap();
    hub.publish(&binary_policy(1), 1, &[]);
    assert!(host.agent().status.success());
    std::fs::write(hub.tree().join("app.bin"), &v2).unwrap();
    hub.publish(&binary_policy(2), 2, &[]);
    assert!(host.agent().status.success());
    // The host keeps the last good bundle's blob: a fallback finds it.
    let mut both = vec![sha256_hex(&v1), sha256_hex(&v2)];
    both.sort();
    assert_eq!(host.cache(), both);
    assert_eq!(hub.hub_blobs(), both);
    // Only site.bundle (serial 2) names a blob now.
    let said = hub.gc();
    assert!(said.contains("removed 1 blobs"), "{said}");
    assert_eq!(hub.hub_blobs(), [sha256_hex(&v2)]);
    // A third serial with v2: serial 1 is no longer current nor last good.
    hub.publish(&binary_policy(3), 3, &["--gc"]);
    assert!(host.agent().status.success());
    assert_eq!(host.cache(), [sha256_hex(&v2)]);
    assert_eq!(hub.hub_blobs(), [sha256_hex(&v2)]);
}

/// Peak RSS (KiB) of a `policyvm run` of the local bundle, and the run.
fn run_measured(time: &Path, local: &Local) -> (u64, Output) {
    let out = Command::new(time)
        .arg("-v")
        .arg(binary("policyvm"))
        .arg("run")
        .arg(local.path("out/site.bundle"))
        .arg("--trust")
        .arg(local.path("trust"))
        .arg("--root")
        .arg(local.path("root"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rss = stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .unwrap_or_else(|| panic!("no RSS in {stderr}"))
        .parse()
        .unwrap();
    (rss, out)
}

#[test]
#[ignore = "slow: 1 GB"]
fn a_one_gigabyte_blob_is_streamed_in_constant_memory() {
    let time = converge::support::require_tool("time", "time");
    let local = Local::new();
    // The baseline: the same policy with a small stored file.
    std::fs::write(local.path("policy/app.bin"), bytes(8192, 7)).unwrap();
    local.build(&binary_policy(1));
    let (small, out) = run_measured(&time, &local);
    assert!(out.status.success(), "{}", text(&out));
    // 1 GiB, sparse on the build machine (zeros), written whole on the host.
    let big = std::fs::File::create(local.path("policy/app.bin")).unwrap();
    big.set_len(1 << 30).unwrap();
    drop(big);
    local.build(&binary_policy(2));
    let (large, out) = run_measured(&time, &local);
    assert!(out.status.success(), "{}", text(&out));
    let written = std::fs::metadata(local.path("root/opt/app/app")).unwrap();
    assert_eq!(written.len(), 1 << 30);
    // Converged: compared by a streamed digest, still in constant memory.
    let (again, out) = run_measured(&time, &local);
    assert!(out.status.success(), "{}", text(&out));
    eprintln!("peak RSS: {small} KiB with 8 KiB, {large} KiB writing 1 GiB, {again} KiB converged");
    assert!(
        large <= small + 4096 && again <= small + 4096,
        "peak RSS {large} KiB (write) / {again} KiB (converged) against {small} KiB for a small file"
    );
}
