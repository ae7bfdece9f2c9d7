//! The agent's side of the fleet (issue 18 items 1, 4 and 9), end to end
//! over loopback: `policyvm enroll`, then `policyvm agent` cycles against
//! a hub (a publish directory served by a small server written here) and a
//! stand-in collector (a `TcpListener` thread that records each POST and
//! answers what the test says: 200, 403, 503, or nothing at all). The real
//! `converge-collector` is tested in its own crate; this checks what the
//! agent sends, spools, drops and counts, and that a collector never
//! changes the agent's exit code or holds its cycle past the upload
//! budget. Every root and state directory is a temporary directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead as _, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use converge::binary;
use converge::http::{respond, Scripted};
use converge_format::inventory::{parse_report_key, Inventory};
use converge_format::report::{Report, SignedReport, Status};
use ed25519_dalek::VerifyingKey;

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn policy(motd: &str) -> String {
    format!(
        "bundle site {{\n  directory \"/etc\" {{ mode = 0o755; }}\n  \
         file \"/etc/motd\" {{ content = \"{motd}\\n\"; }}\n}}\npolicy {{ site(); }}\n"
    )
}

/// A hub: a signing key, a publish directory and a server for it.
struct Hub {
    work: tempfile::TempDir,
    pubdir: PathBuf,
    trust: PathBuf,
    server: Scripted,
}

impl Hub {
    fn start() -> Hub {
        let work = tempfile::tempdir().unwrap();
        let pubdir = work.path().join("srv");
        std::fs::create_dir(&pubdir).unwrap();
        let keys = work.path().join("keys");
        std::fs::create_dir(&keys).unwrap();
        let out = Command::new(binary("policyc"))
            .args(["keygen", "--out"])
            .arg(keys.join("hub"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let trust = work.path().join("trust");
        std::fs::create_dir(&trust).unwrap();
        std::fs::copy(keys.join("hub.pub"), trust.join("hub.pub")).unwrap();
        let served = pubdir.clone();
        let server = Scripted::start(move |path, stream| {
            match std::fs::read(served.join(path.trim_start_matches('/'))) {
                Ok(bytes) => respond(stream, "", &bytes),
                Err(_) => {
                    let _ = stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
            }
        });
        Hub {
            work,
            pubdir,
            trust,
            server,
        }
    }

    fn publish(&self, motd: &str, serial: u64, extra: &[&str]) {
        self.publish_source(&policy(motd), serial, extra);
    }

    fn publish_source(&self, source: &str, serial: u64, extra: &[&str]) {
        let file = self.work.path().join("site.policy");
        std::fs::write(&file, source).unwrap();
        let out = Command::new(binary("policyc"))
            .arg("publish")
            .arg(&file)
            .arg("--key")
            .arg(self.work.path().join("keys/hub.key"))
            .arg("--dir")
            .arg(&self.pubdir)
            .args(["--name", "site", "--serial", &serial.to_string()])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }

    /// A new host under this hub's work directory.
    fn host(&self, name: &str) -> Host {
        let dir = self.work.path().join(name);
        let root = dir.join("root");
        std::fs::create_dir_all(&root).unwrap();
        Host {
            state: root.join("var/lib/converge"),
            root,
            config: dir.join("agent.toml"),
            hub: self.server.url(),
            trust: self.trust.clone(),
        }
    }
}

struct Host {
    root: PathBuf,
    state: PathBuf,
    config: PathBuf,
    hub: String,
    trust: PathBuf,
}

impl Host {
    fn enroll(&self, extra: &[&str]) -> Output {
        Command::new(binary("policyvm"))
            .arg("enroll")
            .arg("--root")
            .arg(&self.root)
            .args(extra)
            .output()
            .unwrap()
    }

    /// Enrolls as `name`; the report key the inventory gets.
    fn enrolled(&self, name: &str) -> VerifyingKey {
        let out = self.enroll(&["--name", name]);
        assert!(out.status.success(), "{}", text(&out));
        let inventory = Inventory::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
        let host = inventory.hosts.first().unwrap();
        assert_eq!(host.name.get_ref(), name);
        parse_report_key(host.report_key.get_ref()).unwrap()
    }

    /// Writes agent.toml with these collectors and extra lines.
    fn configure(&self, collectors: &[String], extra: &str) {
        let collectors: Vec<String> = collectors.iter().map(|c| format!("{c:?}")).collect();
        std::fs::write(
            &self.config,
            format!(
                "hubs = [{:?}]\nname = \"site\"\ntrust = {:?}\nroot = {:?}\ntimeout = \"3s\"\n\
                 collectors = [{}]\nupload_timeout = \"2s\"\n{extra}",
                self.hub,
                self.trust,
                self.root,
                collectors.join(", ")
            ),
        )
        .unwrap();
    }

    fn agent(&self) -> Output {
        Command::new(binary("policyvm"))
            .args(["agent", "--no-splay", "--config"])
            .arg(&self.config)
            .output()
            .unwrap()
    }

    fn spool(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.state.join("spool"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    fn metrics_dir(&self) -> PathBuf {
        self.root.join("var/lib/converge/metrics")
    }

    fn metrics(&self) -> String {
        std::fs::read_to_string(self.metrics_dir().join("converge.prom")).unwrap()
    }
}

/// What the stand-in collector answers.
#[derive(Clone, Debug)]
enum Answer {
    Status(u16, &'static str),
    /// Accept the connection, read the request, never answer.
    Silence,
}

#[derive(Clone, Debug)]
struct Received {
    path: String,
    content_type: String,
    body: Vec<u8>,
}

/// A collector stand-in on 127.0.0.1: records every request, answers
/// with [`Answer`]; stopped when dropped.
struct Collector {
    port: u16,
    answer: Arc<Mutex<Answer>>,
    received: Arc<Mutex<Vec<Received>>>,
    stop: Arc<AtomicBool>,
}

impl Collector {
    fn start(answer: Answer) -> Collector {
        Collector::start_with(answer, None)
    }

    /// The same over HTTPS, with this server configuration.
    fn start_tls(answer: Answer, tls: Arc<rustls::ServerConfig>) -> Collector {
        Collector::start_with(answer, Some(tls))
    }

    fn start_with(answer: Answer, tls: Option<Arc<rustls::ServerConfig>>) -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let answer = Arc::new(Mutex::new(answer));
        let received = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (answer, received, stop) = (answer.clone(), received.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Ok((stream, _)) = listener.accept() else {
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    };
                    let (answer, received, stop) = (answer.clone(), received.clone(), stop.clone());
                    let tls = tls.clone();
                    std::thread::spawn(move || {
                        stream.set_nonblocking(false).unwrap();
                        stream
                            .set_read_timeout(Some(Duration::from_secs(10)))
                            .unwrap();
                        match tls {
                            None => serve(stream, &answer, &received, &stop),
                            Some(config) => {
                                let session = rustls::ServerConnection::new(config).unwrap();
                                let stream = rustls::StreamOwned::new(session, stream);
                                serve(stream, &answer, &received, &stop);
                            }
                        }
                    });
                }
            });
        }
        Collector {
            port,
            answer,
            received,
            stop,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn https_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    fn set(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve<S: Read + Write>(
    stream: S,
    answer: &Mutex<Answer>,
    received: &Mutex<Vec<Received>>,
    stop: &AtomicBool,
) {
    let mut reader = BufReader::new(stream);
    let mut first = String::new();
    if reader.read_line(&mut first).unwrap_or(0) == 0 {
        return;
    }
    let (mut length, mut content_type) = (0usize, String::new());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "content-type" => content_type = value.trim().to_owned(),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    received.lock().unwrap().push(Received {
        path: first.split(' ').nth(1).unwrap_or("").to_owned(),
        content_type,
        body,
    });
    let answer = answer.lock().unwrap().clone();
    let stream = reader.get_mut();
    match answer {
        Answer::Status(status, body) => {
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.flush();
        }
        Answer::Silence => {
            let start = Instant::now();
            while !stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// A port nothing listens on (bound, then closed).
fn closed_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

fn open(received: &Received, key: &VerifyingKey) -> Report {
    assert_eq!(received.path, "/api/v1/reports");
    assert_eq!(received.content_type, "application/json");
    SignedReport::parse(&received.body)
        .and_then(|s| s.open(key))
        .unwrap_or_else(|e| panic!("the collector would refuse the report: {e}"))
}

fn metric(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        l.strip_prefix(name)?
            .strip_prefix(' ')
            .and_then(|v| v.trim().parse().ok())
    })
}

const STORED: Answer = Answer::Status(200, r#"{"stored":true}"#);

#[test]
fn enroll_makes_private_keys_refuses_a_second_time_and_rotates_keeping_the_old_key() {
    let hub = Hub::start();
    let host = hub.host("web-01");
    std::fs::create_dir_all(host.root.join("etc")).unwrap();
    std::fs::write(host.root.join("etc/hostname"), "web-01\n").unwrap();

    let out = host.enroll(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let first = String::from_utf8_lossy(&out.stdout).into_owned();
    let inventory = Inventory::parse(&first).unwrap();
    let entry = inventory.hosts.first().unwrap();
    assert_eq!(entry.name.get_ref(), "web-01", "the hostname by default");
    assert!(entry
        .age_recipient
        .as_ref()
        .unwrap()
        .get_ref()
        .starts_with("age1"));
    let identity = host.state.join("identity");
    assert_eq!(
        std::fs::metadata(&identity).unwrap().permissions().mode() & 0o777,
        0o700
    );
    for file in ["report.key", "age.key", "name"] {
        let mode = std::fs::metadata(identity.join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }

    let out = host.enroll(&["--name", "other"]);
    assert_eq!(out.status.code(), Some(73), "{}", text(&out));
    assert!(
        text(&out).contains("already enrolled as \"web-01\""),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("--rotate"), "{}", text(&out));

    let out = host.enroll(&["--rotate"]);
    assert!(out.status.success(), "{}", text(&out));
    let rotated = Inventory::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let new = rotated.hosts.first().unwrap();
    assert_eq!(new.name.get_ref(), "web-01");
    assert_ne!(new.report_key.get_ref(), entry.report_key.get_ref());
    assert_eq!(
        new.previous_report_keys
            .iter()
            .map(|k| k.get_ref().clone())
            .collect::<Vec<_>>(),
        vec![entry.report_key.get_ref().clone()]
    );
    assert!(identity.join("report.key.previous").is_file());

    // A key others can read is refused with what to do.
    std::fs::set_permissions(
        identity.join("report.key"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let out = host.enroll(&["--rotate"]);
    assert_eq!(out.status.code(), Some(73), "{}", text(&out));
    assert!(text(&out).contains("chmod go-rwx"), "{}", text(&out));

    let other = hub.host("web-02");
    let out = other.enroll(&["--name", "bad name"]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    assert!(
        text(&out).contains("cannot be a host name"),
        "{}",
        text(&out)
    );
    assert!(!other.state.join("identity/report.key").exists());
}

#[test]
fn each_cycle_uploads_a_report_the_collector_can_verify() {
    let hub = Hub::start();
    hub.publish("hello", 100, &[]);
    let host = hub.host("web-01");
    let key = host.enrolled("web-01");
    let collector = Collector::start(STORED);
    host.configure(&[collector.url()], "");

    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!text(&out).contains("warning"), "{}", text(&out));
    let got = collector.received();
    assert_eq!(got.len(), 1);
    let report = open(&got[0], &key);
    assert_eq!(report.host, "web-01");
    assert_eq!(report.sequence, 1);
    assert_eq!(report.status, Status::Repaired);
    let bundle = report.bundle.clone().unwrap();
    assert_eq!((bundle.name.as_str(), bundle.serial), ("site", 100));
    assert_eq!(bundle.digest.len(), 64);
    let motd = report
        .promises
        .iter()
        .find(|p| p.promiser == "/etc/motd")
        .unwrap();
    assert_eq!(
        (motd.kind.as_str(), motd.outcome.as_str()),
        ("file", "repaired")
    );
    assert!(motd.source.contains("site.policy:"), "{}", motd.source);
    assert!(report.summary.converged);
    assert_eq!(report.summary.repaired as usize, report.promises.len());
    assert!(report.facts.sys.contains_key("hostname"));
    assert!(!report.facts.classes.is_empty());
    assert!(report.timings.total_ms >= report.timings.run_ms);

    // The next cycle: nothing to repair, the next sequence, a new run id.
    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let got = collector.received();
    let second = open(&got[1], &key);
    assert_eq!(second.sequence, 2);
    assert_eq!(second.status, Status::Kept);
    assert!(second.promises.is_empty(), "kept promises are only counted");
    assert!(second.summary.kept >= 2);
    assert_ne!(second.run_id, report.run_id);
    assert!(host.spool().is_empty());
    let metrics = host.metrics();
    assert_eq!(metric(&metrics, "converge_report_uploads_total"), Some(2.0));
    assert_eq!(metric(&metrics, "converge_enrolled"), Some(1.0));
}

/// Probe facts reach the report: each value, or why it is unknown, and
/// the promise that needed an unknown one is reported skipped.
#[test]
fn probe_facts_and_skipped_promises_are_in_the_report() {
    let hub = Hub::start();
    hub.publish_source(
        r#"
fact dc: string from file "/etc/converge/facts.d/dc";
fact rack: int from ["/usr/local/lib/converge/probes/rack"] timeout 2s;
bundle site {
  file "/etc/dc" { content = "${facts.dc}\n"; }
  file "/etc/rack" { content = "${facts.rack}\n"; }
}
policy { site(); }
"#,
        100,
        &[],
    );
    let host = hub.host("web-01");
    std::fs::create_dir_all(host.root.join("etc/converge/facts.d")).unwrap();
    std::fs::write(host.root.join("etc/converge/facts.d/dc"), "eu-1\n").unwrap();
    let key = host.enrolled("web-01");
    let collector = Collector::start(STORED);
    host.configure(&[collector.url()], "");
    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = open(&collector.received()[0], &key);
    let dc = &report.facts.probes["dc"];
    assert_eq!(dc.value, Some(serde_json::json!("eu-1")), "{dc:?}");
    let rack = &report.facts.probes["rack"];
    assert!(rack.value.is_none());
    assert!(
        rack.error
            .as_deref()
            .unwrap_or("")
            .contains("does not exist"),
        "{rack:?}"
    );
    let skipped = report
        .promises
        .iter()
        .find(|p| p.promiser == "/etc/rack")
        .unwrap();
    assert_eq!(skipped.outcome, "skipped");
    assert!(
        skipped.error.as_deref().unwrap_or("").contains("rack"),
        "{skipped:?}"
    );
    assert_eq!(report.summary.skipped, 1);
}

#[test]
fn a_collector_down_spools_and_the_next_cycle_sends_the_spool_in_order() {
    let hub = Hub::start();
    hub.publish("hello", 100, &[]);
    let host = hub.host("web-01");
    let key = host.enrolled("web-01");
    host.configure(&[closed_port()], "");
    for _ in 0..2 {
        let started = Instant::now();
        let out = host.agent();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(
            text(&out).contains("spooled for the next run"),
            "{}",
            text(&out)
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    assert_eq!(host.spool().len(), 2);
    assert_eq!(
        metric(&host.metrics(), "converge_report_spooled"),
        Some(2.0)
    );

    // The first collector is still down, the second takes them all.
    let collector = Collector::start(STORED);
    host.configure(&[closed_port(), collector.url()], "");
    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let sequences: Vec<u64> = collector
        .received()
        .iter()
        .map(|r| open(r, &key).sequence)
        .collect();
    assert_eq!(sequences, vec![1, 2, 3], "oldest first, the new one last");
    assert!(host.spool().is_empty());
    let metrics = host.metrics();
    assert_eq!(metric(&metrics, "converge_report_spooled"), Some(0.0));
    assert_eq!(metric(&metrics, "converge_report_uploads_total"), Some(3.0));

    // A 503 is "later", like no answer.
    collector.set(Answer::Status(503, "{}"));
    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("HTTP 503"), "{}", text(&out));
    assert_eq!(host.spool().len(), 1);
}

#[test]
fn a_refusal_drops_the_report_counts_it_and_says_why() {
    let hub = Hub::start();
    hub.publish("hello", 100, &[]);
    let host = hub.host("web-01");
    host.enrolled("web-01");
    let collector = Collector::start(Answer::Status(
        403,
        r#"{"error":"host \"web-01\" is revoked","reason":"revoked"}"#,
    ));
    host.configure(&[collector.url()], "");
    for round in 1..=2u32 {
        let out = host.agent();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let said = text(&out);
        assert!(said.contains("refused"), "{said}");
        assert!(
            said.contains("revoked: host \"web-01\" is revoked"),
            "{said}"
        );
        assert!(host.spool().is_empty(), "never retried");
        assert_eq!(
            metric(&host.metrics(), "converge_report_refused_total"),
            Some(f64::from(round))
        );
    }
    assert_eq!(collector.received().len(), 2);

    // A 404 page is no collector's refusal (a mistyped URL, another
    // server): the report is kept for later, not thrown away.
    collector.set(Answer::Status(404, "<html>Not Found</html>"));
    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("is this the URL of a converge-collector?"),
        "{}",
        text(&out)
    );
    assert_eq!(host.spool().len(), 1);
    assert_eq!(
        metric(&host.metrics(), "converge_report_refused_total"),
        Some(2.0)
    );
}

#[test]
fn the_spool_keeps_the_newest_within_its_bounds() {
    let hub = Hub::start();
    hub.publish("hello", 100, &[]);
    let host = hub.host("web-01");
    let key = host.enrolled("web-01");
    host.configure(&[closed_port()], "spool_max_reports = 2\n");
    for _ in 0..4 {
        let out = host.agent();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    let spool = host.spool();
    assert_eq!(spool.len(), 2);
    assert!(spool[0].starts_with("00000000000000000003-"), "{spool:?}");
    assert!(spool[1].starts_with("00000000000000000004-"), "{spool:?}");
    let metrics = host.metrics();
    assert_eq!(
        metric(&metrics, "converge_report_spool_dropped_total"),
        Some(2.0)
    );
    let body = std::fs::read(host.state.join("spool").join(&spool[1])).unwrap();
    let report = SignedReport::parse(&body).unwrap().open(&key).unwrap();
    assert_eq!(report.sequence, 4);
    let mode = std::fs::metadata(host.state.join("spool").join(&spool[1]))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_collector_that_never_answers_costs_the_upload_budget_and_nothing_else() {
    let hub = Hub::start();
    hub.publish("hello", 100, &[]);
    let host = hub.host("web-01");
    host.enrolled("web-01");
    let collector = Collector::start(Answer::Silence);
    host.configure(&[collector.url()], "");
    let started = Instant::now();
    let out = host.agent();
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(took < Duration::from_secs(6), "the cycle took {took:?}");
    assert!(took >= Duration::from_secs(2), "the budget is 2s: {took:?}");
    assert_eq!(host.spool().len(), 1);
    assert_eq!(collector.received().len(), 1);
    assert!(host.root.join("etc/motd").exists(), "the run ran");
}

#[test]
fn without_a_bundle_the_report_says_refused_and_why() {
    let hub = Hub::start();
    let host = hub.host("web-01");
    let key = host.enrolled("web-01");
    let collector = Collector::start(STORED);
    host.configure(&[collector.url()], "");
    let out = host.agent();
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let report = open(&collector.received()[0], &key);
    assert_eq!(report.status, Status::Refused);
    assert!(report.bundle.is_none());
    let error = report.error.unwrap_or_default();
    assert!(error.contains("no bundle to run"), "{error}");
    assert!(report.facts.sys.contains_key("os"));
}

#[test]
fn a_host_not_enrolled_runs_as_before_and_says_how_to_enroll() {
    let hub = Hub::start();
    hub.publish("hello", 100, &[]);
    let host = hub.host("web-01");
    let collector = Collector::start(STORED);
    host.configure(&[collector.url()], "");
    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("not enrolled: run `policyvm enroll`"),
        "{}",
        text(&out)
    );
    assert!(collector.received().is_empty());
    assert_eq!(metric(&host.metrics(), "converge_enrolled"), Some(0.0));
}

/// A test certificate authority and a server certificate it signed for
/// 127.0.0.1: the CA's PEM, and the server's configuration.
fn test_ca() -> (String, Arc<rustls::ServerConfig>) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Converge test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (ca.pem(), Arc::new(config))
}

/// Uploads over HTTPS trust the `ca_file` of pulls (one HTTP client), and
/// nothing else: a collector whose certificate the host cannot verify gets
/// nothing, and the report waits in the spool.
#[test]
fn https_uploads_are_verified_against_the_configured_ca() {
    let hub = Hub::start();
    hub.publish("hello", 100, &[]);
    let host = hub.host("web-01");
    let key = host.enrolled("web-01");
    let (ca_pem, tls) = test_ca();
    let collector = Collector::start_tls(STORED, tls);

    host.configure(&[collector.https_url()], "");
    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).to_lowercase().contains("certificate")
            || text(&out).to_lowercase().contains("issuer"),
        "{}",
        text(&out)
    );
    assert!(collector.received().is_empty());
    assert_eq!(host.spool().len(), 1);

    let ca_file = hub.work.path().join("collector-ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    host.configure(
        &[collector.https_url()],
        &format!("ca_file = {ca_file:?}\n"),
    );
    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let sequences: Vec<u64> = collector
        .received()
        .iter()
        .map(|r| open(r, &key).sequence)
        .collect();
    assert_eq!(sequences, vec![1, 2]);
    assert!(host.spool().is_empty());
}

/// Issue 18 item 9: `converge_policy_stale` said 1 when a hub served an
/// expired stamp although the stamp in force was valid.
#[test]
fn stale_means_the_stamp_in_force_has_expired_not_the_one_a_hub_serves() {
    let hub = Hub::start();
    hub.publish("hello", 100, &[]);
    let host = hub.host("web-01");
    host.configure(&[], "");
    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(metric(&host.metrics(), "converge_policy_stale"), Some(0.0));

    // The hub now serves an expired stamp; the one in force is valid.
    hub.publish("frozen", 101, &["--expires", "1s"]);
    std::thread::sleep(Duration::from_millis(2100));
    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("a hub serves an expired stamp"),
        "{}",
        text(&out)
    );
    let metrics = host.metrics();
    assert_eq!(
        metric(&metrics, "converge_policy_stale"),
        Some(0.0),
        "{metrics}"
    );
    assert_eq!(metric(&metrics, "converge_pull_failures_total"), Some(1.0));

    // A host whose stamp in force expires is stale.
    let other = hub.host("web-02");
    other.configure(&[], "");
    hub.publish("short", 102, &["--expires", "2s"]);
    let out = other.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(metric(&other.metrics(), "converge_policy_stale"), Some(0.0));
    std::thread::sleep(Duration::from_millis(2100));
    let out = other.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("STALE policy source"), "{}", text(&out));
    assert_eq!(metric(&other.metrics(), "converge_policy_stale"), Some(1.0));
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n")
}

fn user_exists(name: &str) -> bool {
    Command::new("id")
        .arg(name)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Issue 18 item 9: the textfile is where node_exporter (user
/// `prometheus` on Debian) can read it, and a real node_exporter serves
/// the series.
#[test]
#[ignore = "needs prometheus-node-exporter"]
fn node_exporter_reads_the_textfile() {
    let exporter: PathBuf =
        converge::support::require_tool("prometheus-node-exporter", "prometheus-node-exporter");
    let hub = Hub::start();
    hub.publish("hello", 100, &[]);
    let host = hub.host("web-01");
    host.enrolled("web-01");
    host.configure(&[closed_port()], "");
    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let dir = host.metrics_dir();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&dir), 0o755);
    assert_eq!(mode(&dir.join("converge.prom")), 0o644);
    assert_eq!(
        mode(&host.state) & 0o011,
        0o011,
        "others can reach metrics/"
    );
    assert_eq!(mode(&host.state) & 0o066, 0, "but read nothing else");

    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // As root (CI), node_exporter runs as Debian runs it, as user
    // `prometheus` (or `nobody`): the bug was a textfile only root could
    // read. The temporary directories above the root are opened up for it
    // as /var/lib is on a host.
    let mut command = Command::new(&exporter);
    if is_root() {
        let user = if user_exists("prometheus") {
            "prometheus"
        } else {
            "nobody"
        };
        let mut dir = host.root.clone();
        while dir.starts_with(hub.work.path()) {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            if !dir.pop() {
                break;
            }
        }
        command = Command::new("setpriv");
        command
            .args([
                &format!("--reuid={user}"),
                &format!("--regid={user}"),
                "--clear-groups",
            ])
            .arg(&exporter);
    }
    let mut child = command
        .arg(format!("--collector.textfile.directory={}", dir.display()))
        .args(["--collector.disable-defaults", "--collector.textfile"])
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let deadline = Instant::now() + Duration::from_secs(20);
    let scraped = loop {
        if let Ok(mut r) = ureq::get(&url).call() {
            break r.body_mut().read_to_string().unwrap();
        }
        assert!(Instant::now() < deadline, "node_exporter did not start");
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = child.kill();
    let _ = child.wait();
    for series in [
        "converge_run_converged 1",
        "converge_report_spooled 1",
        "converge_enrolled 1",
        "converge_policy_stale 0",
        "converge_report_uploads_total 0",
    ] {
        assert!(scraped.contains(series), "{series} missing:\n{scraped}");
    }
    assert!(
        scraped.contains("\nnode_textfile_scrape_error 0\n"),
        "{scraped}"
    );

    if let Some(promtool) = converge::support::find_tool("promtool") {
        let text_file = std::fs::read(dir.join("converge.prom")).unwrap();
        let mut check = Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        check.stdin.take().unwrap().write_all(&text_file).unwrap();
        let out = check.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
}

/// The real `converge-collector` (SQLite in a temporary directory) takes
/// the agent's reports, and refuses them once the host is revoked in the
/// inventory: the two sides agree on the contract.
#[test]
fn the_real_collector_stores_the_reports_and_refuses_a_revoked_host() {
    use std::io::BufRead as _;
    let hub = Hub::start();
    hub.publish("hello", 100, &[]);
    let host = hub.host("web-01");
    let out = host.enroll(&["--name", "web-01"]);
    assert!(out.status.success(), "{}", text(&out));
    let inventory = hub.work.path().join("inventory.toml");
    std::fs::write(&inventory, &out.stdout).unwrap();
    let db = hub.work.path().join("collector.db");
    let mut collector = Command::new(binary("converge-collector"))
        .arg("serve")
        .arg("--inventory")
        .arg(&inventory)
        .arg("--database")
        .arg(format!("sqlite://{}", db.display()))
        .args(["--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(collector.stdout.take().unwrap()).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with("http://"))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("the collector said no address"));
    host.configure(&[url], "");
    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!text(&out).contains("warning"), "{}", text(&out));
    assert_eq!(
        metric(&host.metrics(), "converge_report_uploads_total"),
        Some(1.0)
    );

    let mut text_now = std::fs::read_to_string(&inventory).unwrap();
    text_now.push_str("revoked = true\n");
    std::fs::write(&inventory, text_now).unwrap();
    // The collector re-reads the inventory when it changes.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = host.agent();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        if text(&out).contains("revoked") {
            break;
        }
        assert!(Instant::now() < deadline, "never refused: {}", text(&out));
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = collector.kill();
    let _ = collector.wait();
    let metrics = host.metrics();
    assert!(
        metric(&metrics, "converge_report_refused_total") >= Some(1.0),
        "{metrics}"
    );
    assert!(host.spool().is_empty());
}

/// The metrics directory sits in the state directory inside the root: a
/// link planted there must not carry the textfile out of the root.
#[test]
fn a_link_in_place_of_the_metrics_directory_is_not_followed() {
    let hub = Hub::start();
    hub.publish("hello", 100, &[]);
    let host = hub.host("web-01");
    host.configure(&[], "");
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(host.state.clone()).unwrap();
    std::os::unix::fs::symlink(outside.path(), host.metrics_dir()).unwrap();
    let out = host.agent();
    assert!(
        !outside.path().join("converge.prom").exists(),
        "the textfile was written through the link\n{}",
        text(&out)
    );
    assert!(
        text(&out).contains("symbolic link is not followed"),
        "{}",
        text(&out)
    );
}

/// "Converged" has one definition (docs/vm.md): the passes reached a fixed
/// point. A run with a failed promise still converges, and the report and
/// the metric say so alike (they used to disagree: `converged: true` in
/// the report, `converge_run_converged 0`).
#[test]
fn a_failing_run_is_converged_in_the_report_and_the_metric_alike() {
    let hub = Hub::start();
    hub.publish_source(
        "bundle site {\n  file \"/etc/blocker/x\" { content = \"x\\n\"; }\n  \
         file \"/etc/ok\" { content = \"y\\n\"; }\n}\npolicy { site(); }\n",
        100,
        &[],
    );
    let host = hub.host("web-01");
    // A file where the promise needs a directory: the promise fails.
    std::fs::create_dir_all(host.root.join("etc")).unwrap();
    std::fs::write(host.root.join("etc/blocker"), "not a directory\n").unwrap();
    host.configure(&[], "");
    let out = host.agent();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(host.state.join("reports/last.json")).unwrap())
            .unwrap();
    assert_eq!(report["summary"]["failed"], 1, "{report}");
    assert_eq!(report["converged"], true, "{report}");
    assert_eq!(metric(&host.metrics(), "converge_run_converged"), Some(1.0));
    assert_eq!(
        metric(&host.metrics(), "converge_promises{outcome=\"failed\"}"),
        Some(1.0)
    );
}

/// `policyvm agent --dry-run` (issue 21 item 5): an audit. It pulls and
/// installs as usual, runs dry with the `--define`d classes, uploads a
/// report marked `dry_run: true` that lists what would change, and changes
/// nothing: not the root, not `reports/last.json`, not the metrics
/// textfile, not the watch history. A real cycle afterwards makes exactly
/// the repairs the audit listed.
#[test]
fn an_agent_dry_run_reports_what_would_change_and_changes_nothing() {
    let hub = Hub::start();
    hub.publish_source(
        "class audit_extra;\n\
         bundle site {\n  directory \"/etc\" { mode = 0o755; }\n  \
         file \"/etc/motd\" { content = \"hello\\n\"; }\n  \
         when audit_extra { file \"/etc/extra\" { content = \"x\\n\"; } }\n  \
         watch \"/etc\" { }\n}\npolicy { site(); }\n",
        100,
        &[],
    );
    let host = hub.host("web-01");
    let key = host.enrolled("web-01");
    let collector = Collector::start(STORED);
    host.configure(&[collector.url()], "");
    std::fs::create_dir_all(host.root.join("etc")).unwrap();
    std::fs::write(host.root.join("etc/motd"), "old\n").unwrap();
    let before = std::fs::read(host.root.join("etc/motd")).unwrap();

    let out = Command::new(binary("policyvm"))
        .args([
            "agent",
            "--no-splay",
            "--dry-run",
            "--define",
            "audit_extra",
        ])
        .arg("--config")
        .arg(&host.config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("would repair"), "{}", text(&out));
    // The pull installed the bundle, as any pull does.
    assert!(host.state.join("current.bundle").exists());
    // Nothing else changed.
    assert_eq!(std::fs::read(host.root.join("etc/motd")).unwrap(), before);
    assert!(!host.root.join("etc/extra").exists());
    assert!(!host.state.join("reports/last.json").exists());
    assert!(!host.metrics_dir().join("converge.prom").exists());
    let watch_files = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.contains("watch") || n.contains("owed"))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(
        watch_files(&host.state).is_empty(),
        "{:?}",
        watch_files(&host.state)
    );
    let local: serde_json::Value =
        serde_json::from_slice(&std::fs::read(host.state.join("reports/dry-run.json")).unwrap())
            .unwrap();
    assert_eq!(local["dry_run"], serde_json::Value::Bool(true));

    let got = collector.received();
    assert_eq!(got.len(), 1);
    let audit = open(&got[0], &key);
    assert!(audit.is_dry_run(), "{:?}", audit.extensions);
    let listed: Vec<&str> = audit
        .promises
        .iter()
        .filter(|p| p.outcome == "repaired")
        .map(|p| p.promiser.as_str())
        .collect();
    assert!(listed.contains(&"/etc/motd"), "{listed:?}");
    assert!(
        listed.contains(&"/etc/extra"),
        "--define set the class: {listed:?}"
    );

    // The real cycle (without the class) makes the motd repair.
    let out = host.agent();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(host.root.join("etc/motd")).unwrap(),
        "hello\n"
    );
    assert!(!host.root.join("etc/extra").exists());
    let real = open(&collector.received()[1], &key);
    assert!(!real.is_dry_run());
    assert_eq!(real.status, Status::Repaired);
    assert!(host.state.join("reports/last.json").exists());
    // The real run keeps the watch history the audit did not write.
    assert!(!watch_files(&host.state).is_empty());
}

/// The real collector keeps a dry run apart: stored with status
/// `dry_run`, never the host's latest run (its status stays that of the
/// last real run).
#[test]
fn the_real_collector_does_not_count_a_dry_run_as_the_hosts_run() {
    let hub = Hub::start();
    hub.publish("hello", 100, &[]);
    let host = hub.host("web-01");
    let out = host.enroll(&["--name", "web-01"]);
    assert!(out.status.success(), "{}", text(&out));
    let inventory = hub.work.path().join("inventory.toml");
    std::fs::write(&inventory, &out.stdout).unwrap();
    let collector = converge::collector::Collector::start(&inventory);
    let url = collector.url.clone();
    host.configure(std::slice::from_ref(&url), "");
    // Two real runs: repaired, then kept.
    for _ in 0..2 {
        let out = host.agent();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    // The motd drifts; an audit finds a repair to make.
    std::fs::write(host.root.join("etc/motd"), "drifted\n").unwrap();
    let out = Command::new(binary("policyvm"))
        .args(["agent", "--no-splay", "--dry-run", "--config"])
        .arg(&host.config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!text(&out).contains("warning"), "{}", text(&out));
    let body = ureq::get(&format!("{url}/api/v1/hosts/web-01"))
        .call()
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap();
    let detail: serde_json::Value = serde_json::from_str(&body).unwrap();
    drop(collector);
    // The host is as its last real run left it.
    assert_eq!(detail["host"]["status"], "kept", "{detail:#}");
    assert_eq!(detail["host"]["sequence"], 2, "{detail:#}");
    // The audit is stored, as a dry run.
    let recent = detail["recent_reports"].as_array().unwrap();
    let statuses: Vec<&str> = recent
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["dry_run", "kept", "repaired"], "{detail:#}");
    assert_eq!(recent[0]["repaired"], 1, "{detail:#}");
}
