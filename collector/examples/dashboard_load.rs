//! The dashboard's scale benchmark (bench/dashboard.sh, figures in
//! docs/performance.md, "Dashboard"): starts the given
//! `converge-collector` on loopback with an inventory of N hosts and a
//! fresh SQLite file, uploads one signed report per host (20 promises, 2 %
//! of the hosts failing one), then times `GET /` (the overview page) and
//! `GET /api/v1/status` several times and prints the medians and maxima.
//!
//! The times are taken on the client over loopback, so they bound the
//! server time from above (they include sending the page).
//!
//! Usage: `dashboard_load COLLECTOR_BINARY [HOSTS] [ROUNDS]`.

use std::collections::BTreeMap;
use std::error::Error;
use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use converge_format::inventory::format_report_key;
use converge_format::report::{
    BundleRef, Facts, PromiseResult, Report, SignedReport, Status, Summary, Timings, REPORT_FORMAT,
};
use ed25519_dalek::SigningKey;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

fn host_key(i: usize) -> SigningKey {
    let mut seed = [7u8; 32];
    seed[..8].copy_from_slice(&(i as u64).to_le_bytes());
    SigningKey::from_bytes(&seed)
}

fn host_name(i: usize) -> String {
    format!("host-{i:05}")
}

fn report(i: usize) -> Report {
    let failing = i.is_multiple_of(50);
    let mut promises: Vec<PromiseResult> = (0..20)
        .filter(|p: &usize| p.is_multiple_of(10))
        .map(|p| PromiseResult {
            kind: "file".into(),
            promiser: format!("/etc/app/{p}.conf"),
            outcome: "repaired".into(),
            source: format!("site.policy:{}:3", p + 1),
            error: None,
            changes: vec![],
        })
        .collect();
    if failing {
        promises.push(PromiseResult {
            kind: "package".into(),
            promiser: "nginx".into(),
            outcome: "failed".into(),
            source: "site.policy:40:1".into(),
            error: Some("apt-get install nginx: exit status 100".into()),
            changes: vec![],
        });
    }
    let repaired = promises.iter().filter(|p| p.outcome == "repaired").count() as u64;
    Report {
        format: REPORT_FORMAT.into(),
        host: host_name(i),
        run_id: format!("{:032x}", i + 1),
        sequence: 1,
        started_at: "2026-11-24T01:00:00Z".into(),
        finished_at: "2026-11-24T01:00:01Z".into(),
        status: if failing {
            Status::Failed
        } else {
            Status::Repaired
        },
        bundle: Some(BundleRef {
            name: "site".into(),
            serial: 7,
            digest: "ab".repeat(32),
        }),
        summary: Summary {
            kept: 20 - repaired - u64::from(failing),
            repaired,
            failed: u64::from(failing),
            passes: 1,
            converged: !failing,
            ..Summary::default()
        },
        promises,
        owed_notifications: vec![],
        facts: Facts {
            sys: [("hostname".to_owned(), serde_json::Value::from(host_name(i)))]
                .into_iter()
                .collect(),
            ..Facts::default()
        },
        timings: Timings::default(),
        error: None,
        truncated: false,
        extensions: BTreeMap::new(),
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// Times `GET url` `rounds` times; (median, max) in milliseconds and the
/// body size.
fn time_get(url: &str, rounds: usize) -> Result<(f64, f64, usize)> {
    let agent = agent();
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..rounds {
        let start = Instant::now();
        let mut response = agent.get(url).call()?;
        let body = response
            .body_mut()
            .with_config()
            .limit(256 * 1024 * 1024)
            .read_to_string()?;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        if response.status() != 200 {
            return Err(format!("GET {url}: {}", response.status()).into());
        }
        size = body.len();
    }
    times.sort_by(f64::total_cmp);
    let median = times.get(times.len() / 2).copied().unwrap_or_default();
    let max = times.last().copied().unwrap_or_default();
    Ok((median, max, size))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let binary = args
        .get(1)
        .ok_or("usage: dashboard_load COLLECTOR_BINARY [HOSTS] [ROUNDS]")?;
    let hosts: usize = args.get(2).map_or(Ok(10_000), |s| s.parse())?;
    let rounds: usize = args.get(3).map_or(Ok(9), |s| s.parse())?;

    let dir = tempfile::tempdir()?;
    let keys: Vec<SigningKey> = (0..hosts).map(host_key).collect();
    let inventory: String = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            format!(
                "[[host]]\nname = \"{}\"\nreport_key = \"{}\"\ngroups = [\"web\"]\n",
                host_name(i),
                format_report_key(&k.verifying_key())
            )
        })
        .collect();
    let inventory_path = dir.path().join("inventory.toml");
    std::fs::write(&inventory_path, inventory)?;
    let database = format!("sqlite://{}", dir.path().join("collector.db").display());
    let mut child = Command::new(binary)
        .arg("serve")
        .arg("--inventory")
        .arg(&inventory_path)
        .args([
            "--database",
            &database,
            "--listen",
            "127.0.0.1:0",
            "--retention-days",
            "0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let result = run(&mut child, &keys, rounds);
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn run(child: &mut std::process::Child, keys: &[SigningKey], rounds: usize) -> Result<()> {
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let url = line
        .trim()
        .strip_prefix("converge-collector: listening on ")
        .ok_or_else(|| format!("the collector did not start: {line:?}"))?
        .to_owned();

    // Upload from 4 threads.
    let start = Instant::now();
    let chunks: Vec<Vec<usize>> = (0..4)
        .map(|t| (0..keys.len()).filter(|i| i % 4 == t).collect())
        .collect();
    std::thread::scope(|scope| -> Result<()> {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                let url = &url;
                scope.spawn(move || -> std::result::Result<(), String> {
                    let agent = agent();
                    for &i in chunk {
                        let body = serde_json::to_vec(&SignedReport::sign(&report(i), &keys[i]))
                            .map_err(|e| e.to_string())?;
                        let response = agent
                            .post(format!("{url}/api/v1/reports"))
                            .header("content-type", "application/json")
                            .send(&body[..])
                            .map_err(|e| e.to_string())?;
                        if response.status() != 201 {
                            return Err(format!("upload {i}: {}", response.status()));
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "an upload thread panicked")??;
        }
        Ok(())
    })?;
    println!(
        "uploaded {} reports in {:.1} s",
        keys.len(),
        start.elapsed().as_secs_f64()
    );
    // The overview, then the views it is built from, then a host page.
    for path in [
        "/",
        "/api/v1/status",
        "/api/v1/failures",
        "/hosts/host-00000",
    ] {
        let what = format!("GET {path}");
        let (median, max, size) = time_get(&format!("{url}{path}"), rounds)?;
        println!(
            "{what}: median {median:.0} ms, max {max:.0} ms over {rounds} requests ({} hosts, {size} bytes)",
            keys.len()
        );
    }
    Ok(())
}
