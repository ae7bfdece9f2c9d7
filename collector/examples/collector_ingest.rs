//! Load generator for `converge-collector` (bench/collector_ingest.sh runs
//! it; figures in docs/performance.md, "Collector (issue 18)").
//!
//! Simulates `--hosts` enrolled hosts (an inventory with one key each)
//! posting signed reports of 20 promises, 2 % of them failing, over
//! `--concurrency` keep-alive connections. Every report is signed before
//! the clock starts. Prints reports/s, latency percentiles, the
//! collector's resident memory over the run, then the time of the
//! `fleet status` queries (`/api/v1/status`, `/api/v1/hosts`).
//!
//! ```text
//! collector_ingest --collector target/release/converge-collector \
//!     --database sqlite:///tmp/c.db [--hosts 10000] [--reports 50000] \
//!     [--fill 0] [--concurrency 16]
//! ```
//! `--fill N` first loads N more reports untimed (to query a big store).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use converge_format::inventory::host_entry;
use converge_format::report::{
    BundleRef, Facts, PromiseResult, Report, SignedReport, Status, Summary, Timings, REPORT_FORMAT,
};
use ed25519_dalek::SigningKey;
use serde_json::Value;

struct Args {
    collector: String,
    database: String,
    hosts: usize,
    reports: usize,
    fill: usize,
    concurrency: usize,
}

fn args() -> Args {
    let mut a = Args {
        collector: "target/release/converge-collector".into(),
        database: String::new(),
        hosts: 10_000,
        reports: 50_000,
        fill: 0,
        concurrency: 16,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--collector" => a.collector = value,
            "--database" => a.database = value,
            "--hosts" => a.hosts = value.parse().unwrap(),
            "--reports" => a.reports = value.parse().unwrap(),
            "--fill" => a.fill = value.parse().unwrap(),
            "--concurrency" => a.concurrency = value.parse().unwrap(),
            other => panic!("unknown option {other}"),
        }
    }
    assert!(!a.database.is_empty(), "--database is required");
    a
}

fn host_key(i: usize) -> SigningKey {
    let mut seed = [7u8; 32];
    seed[..8].copy_from_slice(&(i as u64).to_le_bytes());
    SigningKey::from_bytes(&seed)
}

fn host_name(i: usize) -> String {
    format!("host-{i:06}")
}

/// Report number `n`: host `n % hosts`, its run `n / hosts + 1`.
fn report(n: usize, hosts: usize, base_sequence: u64) -> Report {
    let host = host_name(n % hosts);
    let sequence = base_sequence + (n / hosts) as u64 + 1;
    let mut promises = Vec::new();
    for j in 0..20usize {
        // 2 % of promises fail (a fixed pseudo-random pattern).
        if (n.wrapping_mul(31).wrapping_add(j.wrapping_mul(17))) % 50 == 0 {
            promises.push(PromiseResult {
                kind: "package".into(),
                promiser: format!("pkg-{j}"),
                outcome: "failed".into(),
                source: format!("site.policy:{}:3", 10 + j),
                error: Some("apt-get install: exit status 100".into()),
                changes: vec![],
            });
        }
    }
    let failed = promises.len() as u64;
    let mut sys = BTreeMap::new();
    for (k, v) in [
        ("hostname", host.as_str()),
        ("os_family", "debian"),
        ("os_release", "13"),
        ("arch", "x86_64"),
        ("kernel", "6.12.0"),
    ] {
        sys.insert(k.to_owned(), Value::from(v));
    }
    Report {
        format: REPORT_FORMAT.into(),
        host,
        run_id: format!("{:032x}", (n as u128) << 64 | u128::from(base_sequence)),
        sequence,
        started_at: "2026-11-24T01:00:00Z".into(),
        finished_at: "2026-11-24T01:00:02Z".into(),
        status: if failed > 0 {
            Status::Failed
        } else {
            Status::Kept
        },
        bundle: Some(BundleRef {
            name: "site".into(),
            serial: 42,
            digest: "ab".repeat(32),
        }),
        summary: Summary {
            kept: 20 - failed,
            failed,
            passes: 1,
            converged: failed == 0,
            ..Summary::default()
        },
        promises,
        owed_notifications: vec![],
        facts: Facts {
            sys,
            probes: BTreeMap::new(),
            classes: vec!["debian".into(), "group_web".into()],
        },
        timings: Timings {
            pull_ms: 3,
            run_ms: 180,
            total_ms: 190,
        },
        error: None,
        truncated: false,
        extensions: BTreeMap::new(),
    }
}

fn sign_all(count: usize, hosts: usize, base: u64, keys: &[SigningKey]) -> Vec<Vec<u8>> {
    let threads = 2;
    std::thread::scope(|s| {
        let parts: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    (t..count)
                        .step_by(threads)
                        .map(|n| {
                            let r = report(n, hosts, base);
                            serde_json::to_vec(&SignedReport::sign(&r, &keys[n % hosts])).unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let parts: Vec<Vec<Vec<u8>>> = parts.into_iter().map(|p| p.join().unwrap()).collect();
        let mut all = Vec::with_capacity(count);
        for n in 0..count {
            all.push(parts[n % threads][n / threads].clone());
        }
        all
    })
}

fn start(args: &Args, inventory: &std::path::Path) -> (Child, String) {
    let mut child = Command::new(&args.collector)
        .args(["serve", "--inventory"])
        .arg(inventory)
        .args(["--database", &args.database, "--listen", "127.0.0.1:0"])
        .args(["--retention-days", "0"])
        .env("CONVERGE_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("converge-collector: listening on ")
        .unwrap_or_else(|| panic!("collector did not start: {line}"))
        .to_owned();
    (child, url)
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// Posts every body over `concurrency` connections; per-request latencies.
fn post_all(url: &str, bodies: &[Vec<u8>], concurrency: usize) -> (Duration, Vec<Duration>) {
    let next = AtomicUsize::new(0);
    let latencies = Mutex::new(Vec::with_capacity(bodies.len()));
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..concurrency {
            s.spawn(|| {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .build()
                    .into();
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(body) = bodies.get(i) else { break };
                    let t = Instant::now();
                    let mut response = agent
                        .post(format!("{url}/api/v1/reports"))
                        .header("content-type", "application/json")
                        .send(&body[..])
                        .unwrap();
                    let status = response.status().as_u16();
                    let _ = response.body_mut().read_to_string();
                    assert_eq!(status, 201, "upload {i}");
                    mine.push(t.elapsed());
                }
                latencies.lock().unwrap().extend(mine);
            });
        }
    });
    (started.elapsed(), latencies.into_inner().unwrap())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn time_query(url: &str, path: &str) -> (Duration, Duration, usize) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..10 {
        let t = Instant::now();
        let mut r = agent.get(format!("{url}{path}")).call().unwrap();
        let body = r
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_string()
            .unwrap();
        times.push(t.elapsed());
        size = body.len();
    }
    times.sort();
    (times[times.len() / 2], times[times.len() - 1], size)
}

/// Loads `--fill` reports straight through the store (no HTTP, no
/// signatures: the timed phase measures those), received over the last 30
/// days, so the queries run over a store of realistic size.
fn fill(args: &Args) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = converge_collector::store::Store::open(&args.database)
            .await
            .unwrap();
        let started = Instant::now();
        let now = jiff::Timestamp::now().as_second();
        let next = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let store = store.clone();
                let next = Arc::clone(&next);
                let (fill, hosts) = (args.fill, args.hosts);
                tokio::spawn(async move {
                    loop {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        if n >= fill {
                            break;
                        }
                        let r = report(n, hosts, 0);
                        let age = (fill - n) as i64 * 30 * 86_400 / fill as i64;
                        store.ingest(&r, &r.to_bytes(), now - age).await.unwrap();
                        if n.is_multiple_of(100_000) && n > 0 {
                            println!("fill: {n} ({:.0}s)", started.elapsed().as_secs_f64());
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        println!(
            "fill: {} reports stored directly in {:.0}s",
            args.fill,
            started.elapsed().as_secs_f64()
        );
        store.close().await;
    });
}

fn main() {
    let args = args();
    let dir = tempfile::tempdir().unwrap();
    let keys: Vec<SigningKey> = (0..args.hosts).map(host_key).collect();
    let inventory = dir.path().join("inventory.toml");
    let mut text = String::new();
    for (i, k) in keys.iter().enumerate() {
        text.push_str(&host_entry(
            &host_name(i),
            &k.verifying_key(),
            None,
            None,
            "",
        ));
    }
    std::fs::write(&inventory, text).unwrap();
    if args.fill > 0 {
        fill(&args);
    }
    let (mut child, url) = start(&args, &inventory);
    let pid = child.id();
    println!(
        "database: {}",
        args.database.split('?').next().unwrap_or("")
    );
    println!("hosts: {}, concurrency: {}", args.hosts, args.concurrency);

    let t = Instant::now();
    let bodies = sign_all(args.reports, args.hosts, 1_000_000_000, &keys);
    println!(
        "pre-signed {} reports in {:.1}s (avg {} bytes)",
        bodies.len(),
        t.elapsed().as_secs_f64(),
        bodies.iter().map(Vec::len).sum::<usize>() / bodies.len().max(1)
    );
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                samples.push(rss_kib(pid));
                std::thread::sleep(Duration::from_millis(500));
            }
            samples
        })
    };
    let before = rss_kib(pid);
    let (wall, mut latencies) = post_all(&url, &bodies, args.concurrency);
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap();
    latencies.sort();
    println!(
        "ingest: {} reports in {:.1}s = {:.0} reports/s; latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        latencies.len(),
        wall.as_secs_f64(),
        latencies.len() as f64 / wall.as_secs_f64(),
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
    let quarter = |q: usize| samples.get(samples.len() * q / 4).copied().unwrap_or(0) / 1024;
    println!(
        "collector RSS: {} MiB before, {} / {} / {} / {} MiB at 25/50/75/100 % of the run",
        before / 1024,
        quarter(1),
        quarter(2),
        quarter(3),
        samples.last().copied().unwrap_or(0) / 1024
    );
    for path in ["/api/v1/status", "/api/v1/hosts", "/api/v1/failures"] {
        let (median, max, size) = time_query(&url, path);
        println!(
            "GET {path}: median {:.1} ms, max {:.1} ms ({} KiB)",
            median.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3,
            size / 1024
        );
    }
    let status: Value = {
        let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
        let mut r = agent.get(format!("{url}/api/v1/status")).call().unwrap();
        serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap()
    };
    println!(
        "stored reports: {}, hosts: {}, by status: {}",
        status["reports"], status["hosts"], status["by_status"]
    );
    let _ = child.kill();
    let _ = child.wait();
}
