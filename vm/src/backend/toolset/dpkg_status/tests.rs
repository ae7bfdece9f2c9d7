use super::*;

const OK: &str = "Package: cvg-a\nStatus: install ok installed\nVersion: 1.0-1\nArchitecture: all\nMaintainer: m\nDescription: d\n";

fn state(status: &str, names: &[&str]) -> Option<Vec<(String, String, String)>> {
    let known = answer(status.as_bytes(), names)?;
    let mut out: Vec<(String, String, String)> = known
        .into_iter()
        .map(|(n, k)| (n, k.status, k.version))
        .collect();
    out.sort();
    Some(out)
}

fn one(name: &str, status: &str, version: &str) -> Option<Vec<(String, String, String)>> {
    Some(vec![(
        name.to_owned(),
        status.to_owned(),
        version.to_owned(),
    )])
}

#[test]
fn installed_absent_and_not_installed_packages() {
    assert_eq!(state(OK, &["cvg-a"]), one("cvg-a", "installed", "1.0-1"));
    // A name with no entry is absent, as `dpkg-query` finds no package.
    assert_eq!(state(OK, &["cvg-b"]), Some(vec![]));
    assert_eq!(state("", &["cvg-a"]), Some(vec![]));
    // Several stanzas, blank lines and `^Z` between them, fields in any
    // case, continuation lines in other fields.
    let two = format!(
        "\n\n{OK}X-Long: long\n more\n .\n end\n\n\x1a\npackage: cvg-b\nstatus: deinstall ok config-files\nversion: 2:3.0\n"
    );
    assert_eq!(
        state(&two, &["cvg-b"]),
        one("cvg-b", "config-files", "2:3.0")
    );
    // A package not installed and wanted by no one: dpkg forgets its
    // version.
    let gone = "Package: cvg-c\nStatus: purge ok not-installed\nVersion: 1\n";
    assert_eq!(state(gone, &["cvg-c"]), one("cvg-c", "not-installed", ""));
    let reinst = "Package: cvg-c\nStatus: install reinstreq half-installed\nVersion: 1\n";
    assert_eq!(
        state(reinst, &["cvg-c"]),
        one("cvg-c", "half-installed", "1")
    );
    // Trailing spaces are not part of a value.
    let spaced = "Package: cvg-d  \nStatus:   install ok installed\t\nVersion: 1.0\n";
    assert_eq!(state(spaced, &["cvg-d"]), one("cvg-d", "installed", "1.0"));
    // Triggers pending with their field.
    let trig = "Package: cvg-e\nStatus: install ok triggers-pending\nVersion: 1\nTriggers-Pending: ldconfig\n";
    assert_eq!(
        state(trig, &["cvg-e"]),
        one("cvg-e", "triggers-pending", "1")
    );
}

/// Each database that dpkg refuses or would print otherwise goes to
/// `dpkg-query` (`None`).
#[test]
fn anything_dpkg_would_refuse_or_rewrite_goes_to_dpkg_query() {
    let cases: &[(&str, &str)] = &[
        ("no final newline after a field", "Package: cvg-a\nStatus: install ok installed\nVersion: 1.0\nX:"),
        ("no final newline in a value", "Package: cvg-a\nStatus: install ok installed\nVersion: 1.0"),
        ("field without a colon", "Package cvg-a\n"),
        ("field name starting with -", "-Package: cvg-a\n"),
        ("empty field name", ": x\n"),
        ("duplicate field", "Package: cvg-a\npackage: cvg-a\nStatus: install ok installed\nVersion: 1\n"),
        ("duplicate other field", "Package: cvg-a\nStatus: install ok installed\nVersion: 1\nX: 1\nx: 2\n"),
        ("missing Package", "Status: install ok installed\nVersion: 1\n"),
        ("bad Package", "Package: Cvg-A\nStatus: install ok installed\nVersion: 1\n"),
        ("missing Status", "Package: cvg-a\nVersion: 1\n"),
        ("bad want", "Package: cvg-a\nStatus: want ok installed\nVersion: 1\n"),
        ("bad eflag", "Package: cvg-a\nStatus: install bad installed\nVersion: 1\n"),
        ("bad state", "Package: cvg-a\nStatus: install ok done\nVersion: 1\n"),
        ("junk after the state", "Package: cvg-a\nStatus: install ok installed x\nVersion: 1\n"),
        ("installed without Version", "Package: cvg-a\nStatus: install ok installed\n"),
        ("version with a space", "Package: cvg-a\nStatus: install ok installed\nVersion: 1 2\n"),
        ("empty epoch", "Package: cvg-a\nStatus: install ok installed\nVersion: :1\n"),
        ("epoch 0 printed without it", "Package: cvg-a\nStatus: install ok installed\nVersion: 0:1\n"),
        ("epoch with a leading zero", "Package: cvg-a\nStatus: install ok installed\nVersion: 01:1\n"),
        ("epoch with a sign", "Package: cvg-a\nStatus: install ok installed\nVersion: +1:1\n"),
        ("nothing after the colon", "Package: cvg-a\nStatus: install ok installed\nVersion: 1:\n"),
        ("empty revision", "Package: cvg-a\nStatus: install ok installed\nVersion: 1-\n"),
        ("empty upstream", "Package: cvg-a\nStatus: install ok installed\nVersion: -1\n"),
        ("bad Multi-Arch", "Package: cvg-a\nStatus: install ok installed\nVersion: 1\nMulti-Arch: maybe\n"),
        ("Multi-Arch same for all", "Package: cvg-a\nStatus: install ok installed\nVersion: 1\nArchitecture: all\nMulti-Arch: same\n"),
        ("bad Architecture", "Package: cvg-a\nStatus: install ok installed\nVersion: 1\nArchitecture: AMD64\n"),
        ("Config-Version while installed", "Package: cvg-a\nStatus: install ok installed\nVersion: 1\nConfig-Version: 1\n"),
        ("triggers-pending without triggers", "Package: cvg-a\nStatus: install ok triggers-pending\nVersion: 1\n"),
        ("triggers pending while installed", "Package: cvg-a\nStatus: install ok installed\nVersion: 1\nTriggers-Pending: x\n"),
        ("triggers-awaited without awaited", "Package: cvg-a\nStatus: install ok triggers-awaited\nVersion: 1\n"),
        ("awaited while installed", "Package: cvg-a\nStatus: install ok installed\nVersion: 1\nTriggers-Awaited: cvg-b\n"),
        ("two instances", "Package: cvg-a\nStatus: install ok installed\nVersion: 1\nArchitecture: amd64\nMulti-Arch: same\n\nPackage: cvg-a\nStatus: install ok installed\nVersion: 1\nArchitecture: i386\nMulti-Arch: same\n"),
        ("a multi-line Version", "Package: cvg-a\nStatus: install ok installed\nVersion: 1\n 2\n"),
    ];
    for (why, status) in cases {
        assert_eq!(state(status, &["cvg-a"]), None, "{why}");
    }
    // Non-co-installable instances of another package fail dpkg-query as a
    // whole.
    let clash = format!(
        "{OK}\nPackage: cvg-z\nStatus: install ok installed\nVersion: 1\nArchitecture: amd64\n\nPackage: cvg-z\nStatus: install ok installed\nVersion: 1\nArchitecture: i386\n"
    );
    assert_eq!(state(&clash, &["cvg-a"]), None);
    // An architecture-qualified name always goes to dpkg-query.
    let root = tempfile::tempdir().unwrap();
    let fs = RootFs::open(root.path()).unwrap();
    assert!(read(&fs, &["cvg-a:amd64"]).is_none());
}

#[test]
fn canonical_versions_are_the_ones_dpkg_prints_unchanged() {
    for ok in [
        "1.0",
        "1.0-1",
        "2:3.0",
        "1:2.36-9+deb12u4",
        "0:1:2",
        "1.0~rc1-1a-2",
    ] {
        assert!(canonical(ok), "{ok}");
    }
    for bad in [
        "",
        "0:1",
        "00:1",
        "1 2",
        "a:1",
        ":1",
        "1:",
        "1-",
        "-1",
        "99999999999:1",
    ] {
        assert!(!canonical(bad), "{bad}");
    }
}

#[test]
fn a_root_is_read_through_its_confinement_with_its_journal() {
    let root = tempfile::tempdir().unwrap();
    let db = root.path().join("var/lib/dpkg");
    std::fs::create_dir_all(db.join("updates")).unwrap();
    let fs = RootFs::open(root.path()).unwrap();
    // No status file yet: dpkg's empty database.
    assert_eq!(read(&fs, &["cvg-a"]).map(|k| k.len()), Some(0));
    std::fs::write(db.join("status"), OK).unwrap();
    let known = read(&fs, &["cvg-a"]).unwrap();
    assert!(known.get("cvg-a").is_some_and(Known::installed));
    // dpkg's own temporary file in updates/ is no journal entry.
    std::fs::write(db.join("updates/tmp.i"), "#padded\n").unwrap();
    assert!(read(&fs, &["cvg-a"]).is_some());
    // A journal entry not yet folded in: dpkg-query reads it.
    std::fs::write(db.join("updates/0000"), OK).unwrap();
    assert!(read(&fs, &["cvg-a"]).is_none());
    std::fs::remove_file(db.join("updates/0000")).unwrap();
    // A status file that is a link is not followed (dpkg-query decides).
    std::fs::remove_file(db.join("status")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", db.join("status")).unwrap();
    assert!(read(&fs, &["cvg-a"]).is_none());
}
