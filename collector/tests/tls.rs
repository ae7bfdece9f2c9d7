//! HTTPS: the collector serves the certificate it is given; a client that
//! trusts the CA uploads and reads, one that does not is refused by TLS.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::process::Command;

use support::cases::fleet_inventory;
use support::{key, report, signed, Collector};

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "this test needs openssl (apt-get install openssl): {e}; it is #[ignore]d by \
                 default: run it with `--include-ignored` only where openssl is installed"
            )
        });
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a certificate for 127.0.0.1 signed by it, in `dir`.
fn certificates(dir: &Path) {
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    let args = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
    let run = |a: Vec<String>| openssl(dir, &a.iter().map(String::as_str).collect::<Vec<_>>());
    let mut ca = args(&format!(
        "req -x509 {ec} -keyout ca.key -out ca.pem -days 2 -subj"
    ));
    ca.push("/CN=Converge test CA".into());
    run(ca);
    run(args(&format!(
        "req {ec} -keyout collector.key -out collector.csr -subj /CN=127.0.0.1"
    )));
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(args(
        "x509 -req -in collector.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
         -out collector.pem -days 2 -extfile san.ext",
    ));
}

#[test]
#[ignore = "needs openssl"]
fn https_uploads_and_reads_with_the_collectors_certificate() {
    let tls = tempfile::tempdir().unwrap();
    certificates(tls.path());
    let db = tempfile::tempdir().unwrap();
    let cert = tls.path().join("collector.pem");
    let key_file = tls.path().join("collector.key");
    let c = Collector::start(
        &support::sqlite_url(db.path()),
        &fleet_inventory(),
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key_file.to_str().unwrap(),
        ],
    );
    assert!(c.url.starts_with("https://127.0.0.1:"), "{}", c.url);
    let ca = std::fs::read(tls.path().join("ca.pem")).unwrap();
    let trusting: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::new_with_certs(&[
                    ureq::tls::Certificate::from_pem(&ca).unwrap(),
                ]))
                .build(),
        )
        .build()
        .into();
    let body = signed(&report("web-01", 1, false), &key(1));
    let answer = trusting
        .post(format!("{}/api/v1/reports", c.url))
        .header("content-type", "application/json")
        .send(&body[..])
        .unwrap();
    assert_eq!(answer.status(), 201);
    let mut status = trusting
        .get(format!("{}/api/v1/status", c.url))
        .call()
        .unwrap();
    let status: serde_json::Value =
        serde_json::from_str(&status.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(status["reports"], 1);

    // The built-in roots do not know this CA: refused by TLS.
    let refused = support::client()
        .get(format!("{}/api/v1/status", c.url))
        .call();
    assert!(refused.is_err(), "{refused:?}");
    // Plain HTTP on the TLS port gets no answer.
    assert!(!c
        .raw("GET /api/v1/status HTTP/1.1\r\nhost: x\r\n\r\n")
        .contains("200 OK"));
}

/// A certificate file that is not one stops the start with its name.
#[test]
fn a_bad_certificate_file_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory.toml");
    std::fs::write(&inventory, fleet_inventory()).unwrap();
    let cert = dir.path().join("cert.pem");
    std::fs::write(&cert, "not a certificate").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_converge-collector"))
        .args(["serve", "--inventory"])
        .arg(&inventory)
        .args(["--database", &support::sqlite_url(dir.path())])
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&cert)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cert.pem"), "{stderr}");
}
