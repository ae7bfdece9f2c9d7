//! `policyc explain --facts NAME=VALUE` (issue 16 item 7): only the promise
//! instances a host with those facts can get, each that came from a lookup
//! keyed by a fact saying which key it took or that it took the `??`
//! default. Exact output, as insta snapshots.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

const POLICY: &str = r#"type Site = { server_name: string, port: int = 80 };

let sites: map<string, Site> = data("data/sites.yaml");

class web = sys.hostname =~ r"^web";

bundle site {
  file "/etc/port" {
    content = "${sites[sys.hostname].port ?? 8080}\n";
  }
  when web {
    file "/etc/web" { content = "web\n"; }
  }
  when sys.os_family == "debian" {
    file "/etc/debian" { content = "debian\n"; }
  }
}

policy { site(); }
"#;

const SITES: &str = "web01:
  server_name: shop.example.org
  port: 8443
web02:
  server_name: blog.example.org
web03:
  server_name: wiki.example.org
";

fn site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("site.policy"), POLICY).unwrap();
    std::fs::write(dir.path().join("data/sites.yaml"), SITES).unwrap();
    dir
}

/// `policyc explain site.policy ARGS...`: exit status, stdout, stderr.
fn explain(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_policyc"))
        .current_dir(dir)
        .arg("explain")
        .arg("site.policy")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_host_named_in_the_data_file_gets_its_key() {
    let dir = site();
    let (code, out, err) = explain(dir.path(), &["--facts", "hostname=web01"]);
    assert_eq!(code, Some(0), "{err}");
    insta::assert_snapshot!(out);
}

#[test]
fn a_host_not_in_the_data_file_gets_the_default() {
    let dir = site();
    let (code, out, err) = explain(
        dir.path(),
        &["--facts", "hostname=db01", "--facts", "os_family=redhat"],
    );
    assert_eq!(code, Some(0), "{err}");
    insta::assert_snapshot!(out);
}

#[test]
fn without_facts_every_instance_is_shown_with_its_key() {
    let dir = site();
    let (code, out, err) = explain(dir.path(), &[]);
    assert_eq!(code, Some(0), "{err}");
    insta::assert_snapshot!(out);
}

#[test]
fn a_bad_fact_is_a_usage_error() {
    let dir = site();
    let (code, out, err) = explain(dir.path(), &["--facts", "hostnam=web01"]);
    assert_eq!(code, Some(64));
    assert!(out.is_empty());
    assert_eq!(
        err.trim_end(),
        "error: `--facts hostnam=web01`: there is no fact `sys.hostnam`; did you mean `hostname`?"
    );
}
