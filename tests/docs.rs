//! The documentation stays in step with the code.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use converge_compiler::diagnostic::Code;

fn doc(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every diagnostic code has a section `## CODE: title` in diagnostics.md.
#[test]
fn every_code_is_documented() {
    let page = doc("diagnostics.md");
    for code in Code::ALL {
        let heading = format!("## {}: {}", code.as_str(), code.title());
        assert!(
            page.contains(&heading),
            "docs/diagnostics.md lacks `{heading}`"
        );
    }
}

/// Every chapter named in SUMMARY.md exists, and every chapter is named.
#[test]
fn book_summary_matches_the_files() {
    let summary = doc("SUMMARY.md");
    let linked: Vec<&str> = summary
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .collect();
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    for link in &linked {
        assert!(
            docs.join(link).is_file(),
            "SUMMARY.md links to missing {link}"
        );
    }
    for entry in std::fs::read_dir(&docs).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && name != "SUMMARY.md" {
            assert!(
                linked.contains(&name.as_str()),
                "docs/{name} is not in SUMMARY.md"
            );
        }
    }
}

/// All `.rs` files under `dir`, recursively, skipping build output.
fn rust_sources(dir: &Path, out: &mut String) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() && name != "target" && !name.starts_with('.') {
            rust_sources(&path, out);
        } else if name.ends_with(".rs") {
            out.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// Every test docs/security.md points at as evidence exists: a claim whose
/// test was renamed or deleted must not keep citing it.
#[test]
fn every_test_security_md_cites_exists() {
    let page = doc("security.md");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = String::new();
    for dir in [
        "tests",
        "format",
        "vm",
        "compiler",
        "grammar",
        "eval",
        "fuzz",
        "collector",
    ] {
        rust_sources(&root.join(dir), &mut sources);
    }
    let cited: Vec<&str> = page
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            s.matches('_').count() >= 3
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .collect();
    assert!(cited.len() > 20, "found only {cited:?}");
    for name in cited {
        assert!(
            sources.contains(&format!("fn {name}(")),
            "docs/security.md cites `{name}`, which is no test or function"
        );
    }
}

/// The book stands alone: it never sends a reader to the project's
/// specification files, which are not in the repository.
#[test]
fn the_book_cites_no_document_outside_it() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&docs).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            for outside in [
                "LANGUAGE.md",
                "ARCHITECTURE.md",
                "THREATS.md",
                "STYLE-ANCHORS.md",
            ] {
                if line.contains(outside) {
                    found.push(format!("{}:{}: {line}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The nginx section's openssl commands (docs/operations.md) make a
/// certificate the agent's TLS stack (rustls, webpki) accepts for the hub,
/// and the self-signed certificate the section warns about is refused with
/// `CaUsedAsEndEntity`.
#[test]
#[ignore = "needs openssl"]
fn the_documented_hub_certificate_is_accepted_and_a_self_signed_one_refused() {
    use std::sync::Arc;

    use rustls::client::danger::ServerCertVerifier as _;
    use rustls::client::WebPkiServerVerifier;
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

    converge::support::require_tool("openssl", "openssl");
    let page = doc("operations.md");
    let section = page
        .split("### The hub's certificate must be signed by a CA")
        .nth(1)
        .expect("the section on the hub's certificate");
    let script = section
        .split("```sh\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("the openssl commands");
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("sh")
        .args(["-e", "-c", script])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the documented commands failed");

    let verify = |ca: &str, server: &str| {
        let ca = CertificateDer::from_pem_file(dir.path().join(ca)).unwrap();
        let server = CertificateDer::from_pem_file(dir.path().join(server)).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).unwrap();
        let verifier = WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        verifier
            .verify_server_cert(
                &server,
                &[],
                &ServerName::try_from("policy.example.com").unwrap(),
                &[],
                UnixTime::now(),
            )
            .map(|_| ())
            .map_err(|e| format!("{e:?}"))
    };
    assert_eq!(verify("hub-ca.pem", "policy.example.com.pem"), Ok(()));

    // What the section warns against: one self-signed certificate as both
    // the trust anchor and the server's.
    let status = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ])
        .args(["-keyout", "self.key", "-out", "self.pem", "-days", "30"])
        .args([
            "-subj",
            "/CN=policy.example.com",
            "-addext",
            "subjectAltName=DNS:policy.example.com",
        ])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let refused = verify("self.pem", "self.pem").unwrap_err();
    assert!(refused.contains("CaUsedAsEndEntity"), "{refused}");
}
