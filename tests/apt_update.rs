//! Issue 17 item 9: `update_cache_age` on `package` promises refreshes
//! apt's index (`apt-get update`, with the same `--root` options as every
//! apt command) when its newest file in `ROOT/var/lib/apt/lists` is older
//! than that, or missing: at most once per run, before the batch; a dry
//! run says it would; a failure fails the batch's promises with apt's
//! reason. Against the real apt-get, in a sandbox root whose only
//! repository is a local `file:` one made by the test (`dpkg-deb`,
//! `dpkg-scanpackages`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use converge_vm::run::operators::Outcome;
use converge_vm::run::RunReport;

use ::converge::support;
use support::{compile, converge, failed, repaired, verified};

/// A root with an empty dpkg database and apt's directories, its sources
/// naming `repo` (or any `source` line).
fn apt_root(source: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let p = root.path();
    for d in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/lib/dpkg/triggers",
        "etc/apt/sources.list.d",
        "etc/apt/apt.conf.d",
        "etc/apt/preferences.d",
        "var/lib/apt/lists/partial",
        "var/cache/apt/archives/partial",
        "var/log/apt",
    ] {
        std::fs::create_dir_all(p.join(d)).unwrap();
    }
    std::fs::write(p.join("var/lib/dpkg/status"), "").unwrap();
    std::fs::write(p.join("var/lib/dpkg/available"), "").unwrap();
    std::fs::write(p.join("etc/os-release"), "ID=debian\nVERSION_ID=12\n").unwrap();
    std::fs::write(p.join("etc/apt/sources.list"), source).unwrap();
    root
}

/// A flat `file:` repository holding `cvg-fresh 1.0`, indexed with
/// `dpkg-scanpackages`; apt reads it as its sandbox user, hence 0755.
fn repository() -> tempfile::TempDir {
    support::require_tool("dpkg-scanpackages", "dpkg-dev");
    let repo = tempfile::tempdir().unwrap();
    std::fs::set_permissions(repo.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    ::converge::debs::build_deb(repo.path(), "cvg-fresh", "1.0", None, None);
    let scan = Command::new("dpkg-scanpackages")
        .args(["--multiversion", "."])
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert!(scan.status.success(), "{scan:?}");
    std::fs::write(repo.path().join("Packages"), &scan.stdout).unwrap();
    repo
}

fn source(repo: &Path) -> String {
    format!("deb [trusted=yes] file:{} ./\n", repo.display())
}

/// The index files apt wrote, by name.
fn lists(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("var/lib/apt/lists"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file() && e.file_name() != "lock")
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Makes every index file `age` old.
fn age_lists(root: &Path, age: Duration) {
    let then = SystemTime::now() - age;
    for name in lists(root) {
        let f = std::fs::File::options()
            .write(true)
            .open(root.join("var/lib/apt/lists").join(name))
            .unwrap();
        f.set_modified(then).unwrap();
    }
}

fn promise<'r>(r: &'r RunReport, promiser: &str) -> &'r converge_vm::run::PromiseResult {
    r.promises
        .iter()
        .find(|p| p.promiser == promiser)
        .unwrap_or_else(|| panic!("no promise {promiser}: {r:?}"))
}

/// How many `apt-get ... update` ran, from the logs of the run.
fn updates(r: &RunReport) -> usize {
    r.promises
        .iter()
        .filter_map(|p| p.output())
        .map(|o| o.matches(" -q update\n").count())
        .sum()
}

const POLICY: &str = r#"bundle b {
  package "cvg-fresh" { update_cache_age = 1h; }
  file "/etc/between" { content = "x\n"; }
  package "dpkg-later" { state = removed; update_cache_age = 1h; after = [file "/etc/between"]; }
}
policy { b(); }"#;

#[test]
#[ignore = "needs root"]
fn a_missing_or_old_index_is_refreshed_once_per_run_before_the_batch() {
    support::require_root("dpkg --root");
    let repo = repository();
    let root = apt_root(&source(repo.path()));
    let r = root.path();
    let bundle = verified(&compile(POLICY));

    // Dry run: no index yet; it says it would refresh it, and writes none.
    let dry = converge(&bundle, r, true);
    let fresh = promise(&dry, "cvg-fresh");
    assert_eq!(fresh.changes()[0].what, "index", "{dry:?}");
    assert_eq!(fresh.changes()[0].before, "missing");
    assert!(
        fresh.changes()[0]
            .after
            .contains(&format!("would run `apt-get -o Dir={}/ ", r.display())),
        "{:?}",
        fresh.changes()
    );
    assert!(lists(r).is_empty(), "a dry run wrote the index");

    // Without the refresh there would be no candidate: one run installs.
    let first = converge(&bundle, r, false);
    assert!(failed(&first).is_empty(), "{:?}", failed(&first));
    assert_eq!(*promise(&first, "cvg-fresh").outcome(), Outcome::Repaired);
    assert!(!lists(r).is_empty());
    assert!(r.join("usr/share/cvg-fresh/README").exists());
    // Two batches asked (the second after a file), one update ran.
    assert_eq!(updates(&first), 1, "{first:?}");
    assert!(promise(&first, "dpkg-later").changes().is_empty());

    // Fresh: nothing to do.
    let second = converge(&bundle, r, false);
    assert_eq!(repaired(&second), 0, "{second:?}");
    assert_eq!(updates(&second), 0);

    // Two hours old: refreshed again (the package itself is kept).
    age_lists(r, Duration::from_secs(7200));
    let third = converge(&bundle, r, false);
    assert!(failed(&third).is_empty(), "{:?}", failed(&third));
    assert_eq!(updates(&third), 1, "{third:?}");
    let changes = &promise(&third, "cvg-fresh").changes();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(
        (changes[0].before.as_str(), changes[0].after.as_str()),
        ("2h 0m old", "refreshed")
    );
    let fourth = converge(&bundle, r, false);
    assert_eq!(repaired(&fourth), 0, "{fourth:?}");
}

#[test]
#[ignore = "needs root"]
fn a_failed_refresh_fails_the_batch_with_the_reason_and_is_not_retried() {
    support::require_root("dpkg --root");
    let gone = tempfile::tempdir().unwrap();
    let missing = gone.path().join("no-such-repository");
    let root = apt_root(&source(&missing));
    let r = root.path();
    let report = converge(&verified(&compile(POLICY)), r, false);
    let failures = failed(&report);
    assert_eq!(failures.len(), 2, "{failures:?}");
    for f in &failures {
        assert!(
            f.contains("refreshing the apt index failed: `apt-get -o Dir=")
                && f.contains(" -q update` exited with status 100"),
            "{f}"
        );
    }
    // The second batch took the run's answer: apt ran once.
    assert_eq!(
        failures[0].split_once(": ").unwrap().1,
        failures[1].split_once(": ").unwrap().1
    );
    assert_eq!(
        *promise(&report, "/etc/between").outcome(),
        Outcome::Repaired
    );
}
