//! `policyc publish`: the bundle and its signed stamp in a publish
//! directory, serials that only go up, names that can be file names.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

use converge::{binary, repo_root};
use converge_vm::bundle::keys::load_trust_dir;
use converge_vm::bundle::open;
use converge_vm::stamp::Stamp;

fn policyc(args: &[&Path]) -> Output {
    Command::new(binary("policyc")).args(args).output().unwrap()
}

fn ok(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn publish_writes_a_bundle_and_the_stamp_that_describes_it() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    ok(&policyc(&[
        Path::new("keygen"),
        Path::new("--out"),
        &keys.join("hub"),
    ]));
    let trust = dir.path().join("trust");
    std::fs::create_dir(&trust).unwrap();
    std::fs::copy(keys.join("hub.pub"), trust.join("hub.pub")).unwrap();
    let trusted = load_trust_dir(&trust).unwrap();
    let pubdir = dir.path().join("srv/policy");
    let site = repo_root().join("examples/sandbox.policy");
    let key = keys.join("hub.key");
    let publish_as = |name: &str, extra: &[&str]| {
        let mut args: Vec<&Path> = vec![
            Path::new("publish"),
            &site,
            Path::new("--key"),
            &key,
            Path::new("--dir"),
            &pubdir,
            Path::new("--name"),
            Path::new(name),
        ];
        args.extend(extra.iter().map(Path::new));
        policyc(&args)
    };
    let publish = |extra: &[&str]| publish_as("site", extra);

    let said = ok(&publish(&["--serial", "10", "--expires", "1d"]));
    assert!(said.contains("serial 10"), "{said}");
    let stamp_bytes = std::fs::read(pubdir.join("site.stamp")).unwrap();
    let bundle_bytes = std::fs::read(pubdir.join("site.bundle")).unwrap();
    let stamp = Stamp::open(&stamp_bytes, &trusted).unwrap();
    let bundle = open(&bundle_bytes, &trusted).unwrap();
    stamp.describes(&bundle).unwrap();
    assert_eq!((stamp.name.as_str(), stamp.serial), ("site", 10));
    assert_eq!(stamp.expires - stamp.published, 86_400);
    assert!(
        said.contains(&format!("{} bytes", bundle_bytes.len())),
        "{said}"
    );
    // Only the two files and the signing key's public half (for `policyvm
    // bootstrap --trust-fingerprint`): the temporary ones were renamed away.
    let names = |dir: &std::path::Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&pubdir), ["keys", "site.bundle", "site.stamp"]);
    let key_file = format!("{}.pub", converge_format::bundle::error::hex(&stamp.key_id));
    assert_eq!(names(&pubdir.join("keys")), std::slice::from_ref(&key_file));
    let published_key = std::fs::read_to_string(pubdir.join("keys").join(&key_file)).unwrap();
    assert_eq!(
        converge_format::bundle::keys::parse_public_key(&published_key).unwrap(),
        trusted[0]
    );

    // Rollback: the same or a smaller serial is refused, nothing changes.
    for serial in ["10", "9"] {
        let out = publish(&["--serial", serial]);
        assert_eq!(out.status.code(), Some(64));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("not greater than the published serial 10"),
            "{stderr}"
        );
    }
    assert_eq!(
        std::fs::read(pubdir.join("site.stamp")).unwrap(),
        stamp_bytes
    );

    // Without --serial: the clock, which is later than 10.
    ok(&publish(&[]));
    let newer = Stamp::open(&std::fs::read(pubdir.join("site.stamp")).unwrap(), &trusted).unwrap();
    assert!(newer.serial > 1_700_000_000, "{newer:?}");
    let bundle = open(
        &std::fs::read(pubdir.join("site.bundle")).unwrap(),
        &trusted,
    )
    .unwrap();
    newer.describes(&bundle).unwrap();
    // A stamp describes one bundle only.
    assert!(stamp.describes(&bundle).is_err());

    // A name that could not be a file name or a URL part.
    let out = publish_as("../evil", &[]);
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot name a bundle"), "{stderr}");
    assert!(!dir.path().join("srv/evil.stamp").exists());
}
