//! `directory recurse` and `directory source` (LANGUAGE.md sections 13 and
//! 18) on sandbox roots: exact end states, depth, links never followed,
//! idempotence, dry runs, byte-exact copies, purge, and the compiler's
//! bounds on a source tree.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use ::converge::support;
use support::{compile, converge, failed, repaired, verified};

/// Kind, mode (and content or link target) of everything below `root`.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            let what = if meta.file_type().is_symlink() {
                format!("link -> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                stack.push(path.clone());
                format!("dir {mode:o} {}:{}", meta.uid(), meta.gid())
            } else {
                format!(
                    "file {mode:o} {}:{} {:?}",
                    meta.uid(),
                    meta.gid(),
                    std::fs::read(&path).unwrap()
                )
            };
            out.insert(rel, what);
        }
    }
    out
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `ROOT/srv/www` with two levels of directories and files, all with
/// modes the policies below do not want.
fn web_tree() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let www = root.path().join("srv/www");
    std::fs::create_dir_all(www.join("a/b")).unwrap();
    std::fs::create_dir_all(www.join("c")).unwrap();
    for (file, mode) in [
        ("index.html", 0o666),
        ("a/one.css", 0o600),
        ("a/b/two.js", 0o755),
        ("c/three.txt", 0o644),
    ] {
        std::fs::write(www.join(file), file).unwrap();
        set_mode(&www.join(file), mode);
    }
    for (dir, mode) in [("", 0o770), ("a", 0o700), ("a/b", 0o755), ("c", 0o711)] {
        set_mode(&www.join(dir), mode);
    }
    root
}

#[test]
fn recurse_sets_the_mode_of_every_file_and_directory_exactly() {
    let root = web_tree();
    let bundle = verified(&compile(
        r#"bundle b {
  directory "/srv/www" { mode = 0o750; recurse = true; mode_files = 0o640; mode_dirs = 0o2750; }
}
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    assert_eq!(repaired(&r), 1);
    let www = root.path().join("srv/www");
    assert_eq!(mode_of(&www), 0o750, "`mode` is the top directory's");
    for dir in ["a", "a/b", "c"] {
        assert_eq!(mode_of(&www.join(dir)), 0o2750, "{dir}");
    }
    for file in ["index.html", "a/one.css", "a/b/two.js", "c/three.txt"] {
        assert_eq!(mode_of(&www.join(file)), 0o640, "{file}");
        assert_eq!(std::fs::read_to_string(www.join(file)).unwrap(), file);
    }
    // A second run repairs nothing.
    let before = snapshot(root.path());
    let again = converge(&bundle, root.path(), false);
    assert_eq!(repaired(&again), 0);
    assert!(failed(&again).is_empty());
    assert_eq!(snapshot(root.path()), before);
}

#[test]
fn mode_dirs_defaults_to_mode_and_files_are_left_alone_without_mode_files() {
    let root = web_tree();
    let bundle = verified(&compile(
        r#"bundle b { directory "/srv/www" { mode = 0o755; recurse = true; } }
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    let www = root.path().join("srv/www");
    for dir in ["", "a", "a/b", "c"] {
        assert_eq!(mode_of(&www.join(dir)), 0o755, "{dir}");
    }
    assert_eq!(mode_of(&www.join("index.html")), 0o666);
    assert_eq!(mode_of(&www.join("a/one.css")), 0o600);
}

#[test]
fn depth_one_changes_the_direct_children_only() {
    let root = web_tree();
    let bundle = verified(&compile(
        r#"bundle b { directory "/srv/www" { recurse = true; depth = 1; mode_files = 0o644; mode_dirs = 0o755; } }
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    let www = root.path().join("srv/www");
    assert_eq!(mode_of(&www), 0o770, "no `mode`: the top is not managed");
    assert_eq!(mode_of(&www.join("index.html")), 0o644);
    assert_eq!(mode_of(&www.join("a")), 0o755);
    assert_eq!(mode_of(&www.join("c")), 0o755);
    // Two levels down: untouched.
    assert_eq!(mode_of(&www.join("a/one.css")), 0o600);
    assert_eq!(mode_of(&www.join("a/b")), 0o755);
    assert_eq!(mode_of(&www.join("c/three.txt")), 0o644);
    set_mode(&www.join("a/b"), 0o700);
    converge(&bundle, root.path(), false);
    assert_eq!(mode_of(&www.join("a/b")), 0o700);
}

#[test]
fn a_dry_run_changes_nothing_and_says_what_it_would_change() {
    let root = web_tree();
    let before = snapshot(root.path());
    let bundle = verified(&compile(
        r#"bundle b { directory "/srv/www" { recurse = true; mode_files = 0o640; mode_dirs = 0o750; } }
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), true);
    assert_eq!(snapshot(root.path()), before);
    assert_eq!(repaired(&r), 1);
    let changes: Vec<String> = r
        .promises
        .iter()
        .flat_map(|p| p.changes().iter().map(|c| c.what.clone()))
        .collect();
    assert!(
        changes.contains(&"mode of /srv/www/a/b/two.js".to_owned()),
        "{changes:?}"
    );
}

#[test]
fn links_in_the_tree_are_never_followed_and_their_targets_never_changed() {
    let root = web_tree();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "s").unwrap();
    set_mode(&secret, 0o600);
    let outside_dir = outside.path().join("dir");
    std::fs::create_dir(&outside_dir).unwrap();
    std::fs::write(outside_dir.join("inner"), "i").unwrap();
    set_mode(&outside_dir, 0o700);
    set_mode(&outside_dir.join("inner"), 0o600);
    let www = root.path().join("srv/www");
    symlink(&secret, www.join("a/to-file")).unwrap();
    symlink(&outside_dir, www.join("to-dir")).unwrap();
    let bundle = verified(&compile(
        r#"bundle b { directory "/srv/www" { recurse = true; mode_files = 0o644; mode_dirs = 0o755; } }
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    assert_eq!(mode_of(&secret), 0o600);
    assert_eq!(mode_of(&outside_dir), 0o700);
    assert_eq!(mode_of(&outside_dir.join("inner")), 0o600);
    assert!(std::fs::symlink_metadata(www.join("a/to-file"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(mode_of(&www.join("a/one.css")), 0o644);
}

#[test]
fn a_hard_linked_file_is_not_changed_in_place_and_fails_the_promise() {
    let root = web_tree();
    let outside = tempfile::tempdir().unwrap();
    let shadow = outside.path().join("shadow");
    std::fs::write(&shadow, "root:x").unwrap();
    set_mode(&shadow, 0o600);
    let www = root.path().join("srv/www");
    // Same file system: the link lands in the temporary directory's.
    if std::fs::hard_link(&shadow, www.join("c/shadow")).is_err() {
        let inside = root.path().join("shadow");
        std::fs::write(&inside, "root:x").unwrap();
        set_mode(&inside, 0o600);
        std::fs::hard_link(&inside, www.join("c/shadow")).unwrap();
    }
    let bundle = verified(&compile(
        r#"bundle b { directory "/srv/www" { recurse = true; mode_files = 0o644; } }
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    let failures = failed(&r);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("/srv/www/c/shadow"), "{failures:?}");
    assert!(failures[0].contains("hard links"), "{failures:?}");
    assert_eq!(mode_of(&www.join("c/shadow")), 0o600);
    // The rest of the tree converged all the same.
    assert_eq!(mode_of(&www.join("a/one.css")), 0o644);
}

#[test]
fn a_tree_deeper_than_the_descriptor_bound_converges() {
    let root = tempfile::tempdir().unwrap();
    let mut deep = root.path().join("srv/deep");
    std::fs::create_dir_all(&deep).unwrap();
    for _ in 0..1500 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("leaf"), "x").unwrap();
    set_mode(&deep.join("leaf"), 0o600);
    let bundle = verified(&compile(
        r#"bundle b { directory "/srv/deep" { recurse = true; mode_files = 0o640; mode_dirs = 0o750; } }
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    assert_eq!(mode_of(&deep.join("leaf")), 0o640);
    assert_eq!(mode_of(&deep), 0o750);
    assert_eq!(mode_of(&root.path().join("srv/deep/d/d")), 0o750);
    assert_eq!(repaired(&converge(&bundle, root.path(), false)), 0);
}

#[test]
#[ignore = "needs root"]
fn recurse_sets_owner_and_group_of_the_whole_tree_and_keeps_setgid_bits() {
    support::require_root("chown to another user");
    let root = web_tree();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(
        root.path().join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\nwww:x:1234:1234::/srv:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(root.path().join("etc/group"), "root:x:0:\nwww:x:1235:\n").unwrap();
    let www = root.path().join("srv/www");
    set_mode(&www.join("a/b"), 0o2755);
    let bundle = verified(&compile(
        r#"bundle b { directory "/srv/www" { recurse = true; owner = "www"; group = "www"; } }
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    for entry in ["", "a", "a/b", "c", "index.html", "a/one.css", "a/b/two.js"] {
        let meta = std::fs::symlink_metadata(www.join(entry)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (1234, 1235), "{entry}");
    }
    // chown cleared the setgid bit; no mode was promised, so it is put back.
    assert_eq!(mode_of(&www.join("a/b")), 0o2755);
    assert_eq!(mode_of(&www.join("a/one.css")), 0o600);
    assert_eq!(repaired(&converge(&bundle, root.path(), false)), 0);
}

#[test]
fn a_file_promise_inside_a_recursed_tree_wins_over_mode_files() {
    let root = web_tree();
    let bundle = verified(&compile(
        r#"bundle b {
  directory "/srv/www" { recurse = true; mode_files = 0o644; mode_dirs = 0o755; }
  file "/srv/www/a/one.css" { mode = 0o600; }
  file "/srv/www/index.html" { content = "home\n"; }
  directory "/srv/www/c" { recurse = true; mode = 0o700; mode_files = 0o400; }
}
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    let www = root.path().join("srv/www");
    // The more specific promise wins: its mode, or (none promised) the
    // file's own.
    assert_eq!(mode_of(&www.join("a/one.css")), 0o600);
    assert_eq!(mode_of(&www.join("index.html")), 0o666);
    // A nested recursed directory owns its whole tree.
    assert_eq!(mode_of(&www.join("c")), 0o700);
    assert_eq!(mode_of(&www.join("c/three.txt")), 0o400);
    // The rest of the tree follows the outer promise.
    assert_eq!(mode_of(&www.join("a/b/two.js")), 0o644);
    assert_eq!(mode_of(&www.join("a/b")), 0o755);
    // Nothing flips back and forth: a second run repairs nothing.
    let again = converge(&bundle, root.path(), false);
    assert_eq!(repaired(&again), 0, "{:?}", again.promises);
}

/// Compiles the policy file `path` from disk (a `directory source` is read
/// relative to it, inside its directory), returning the signed bundle or
/// the diagnostics rendered as `line: message`.
fn compile_file(path: &Path) -> Result<Vec<u8>, Vec<String>> {
    use converge_compiler::bundle::lower::{lower, BuildInfo};
    use converge_compiler::check::check;
    use converge_compiler::workspace::{FileSystem, Workspace};
    let mut ws = Workspace::new(FileSystem::new());
    ws.add_root(path).unwrap();
    let shown = |d: &converge_compiler::diagnostic::Diagnostic| {
        let line = d
            .labels
            .first()
            .and_then(|l| ws.db.get(l.span.file).map(|f| f.line_col(l.span.start).0))
            .unwrap_or(0);
        format!("{line}: {} {}", d.code.as_str(), d.message)
    };
    let mut outcome = check(&ws);
    let errors: Vec<String> = outcome
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(shown)
        .collect();
    if !errors.is_empty() {
        return Err(errors);
    }
    let checked = outcome.programs.pop().unwrap();
    let (secret, _) = support::keys();
    let info = BuildInfo {
        name: "test".into(),
        key_id: secret.id,
        serial: 1,
    };
    match lower(&ws.db, &checked.files, &checked.program, &info) {
        Ok(body) => Ok(converge_compiler::bundle::seal(&body, &secret).unwrap()),
        Err(diagnostics) => Err(diagnostics.iter().map(shown).collect()),
    }
}

/// A policy directory holding `site.policy` (the text given) and a source
/// tree `files/www`: an index, a binary file, an executable script in a
/// subdirectory.
fn policy_dir(policy: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("files/www");
    std::fs::create_dir_all(www.join("cgi")).unwrap();
    std::fs::write(www.join("index.html"), "<h1>hi</h1>\n").unwrap();
    std::fs::write(www.join("logo.png"), BINARY).unwrap();
    std::fs::write(www.join("cgi/run.sh"), "#!/bin/sh\necho ok\n").unwrap();
    set_mode(&www.join("index.html"), 0o600);
    set_mode(&www.join("cgi/run.sh"), 0o700);
    std::fs::write(dir.path().join("site.policy"), policy).unwrap();
    dir
}

/// Every byte value, a NUL and an invalid UTF-8 sequence included.
const BINARY: &[u8] = &{
    let mut bytes = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        bytes[i] = i as u8;
        i += 1;
    }
    bytes
};

#[test]
fn a_source_tree_is_copied_byte_exact_with_executable_bits_kept() {
    let policies = policy_dir(
        r#"bundle web { directory "/srv/www" { source = "files/www"; mode = 0o750; } }
policy { web(); }"#,
    );
    let bundle = verified(&compile_file(&policies.path().join("site.policy")).unwrap());
    let root = tempfile::tempdir().unwrap();
    let r = converge(&bundle, root.path(), false);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    let www = root.path().join("srv/www");
    assert_eq!(std::fs::read(www.join("logo.png")).unwrap(), BINARY);
    assert_eq!(
        std::fs::read_to_string(www.join("cgi/run.sh")).unwrap(),
        "#!/bin/sh\necho ok\n"
    );
    assert_eq!(mode_of(&www), 0o750);
    assert_eq!(mode_of(&www.join("cgi")), 0o750, "directories: `mode`");
    assert_eq!(
        mode_of(&www.join("index.html")),
        0o644,
        "0600 at the source"
    );
    assert_eq!(mode_of(&www.join("logo.png")), 0o644);
    assert_eq!(mode_of(&www.join("cgi/run.sh")), 0o755, "executable kept");
    let before = snapshot(root.path());
    let again = converge(&bundle, root.path(), false);
    assert_eq!(repaired(&again), 0, "{:?}", again.promises);
    assert_eq!(snapshot(root.path()), before);
}

#[test]
fn a_source_tree_repairs_drift_and_purges_extras_only_with_purge() {
    let root = tempfile::tempdir().unwrap();
    let www = root.path().join("srv/www");
    std::fs::create_dir_all(www.join("cgi/old")).unwrap();
    std::fs::write(www.join("stray.txt"), "x").unwrap();
    std::fs::write(www.join("cgi/old/deep"), "x").unwrap();
    std::fs::write(www.join("index.html"), "changed by hand\n").unwrap();
    let keep = policy_dir(
        r#"bundle web { directory "/srv/www" { source = "files/www"; mode_files = 0o640; mode_dirs = 0o750; } }
policy { web(); }"#,
    );
    let bundle = verified(&compile_file(&keep.path().join("site.policy")).unwrap());
    // A dry run changes nothing.
    let before = snapshot(root.path());
    let dry = converge(&bundle, root.path(), true);
    assert_eq!(repaired(&dry), 1);
    assert_eq!(snapshot(root.path()), before);
    let r = converge(&bundle, root.path(), false);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    assert_eq!(
        std::fs::read_to_string(www.join("index.html")).unwrap(),
        "<h1>hi</h1>\n"
    );
    assert_eq!(mode_of(&www.join("cgi/run.sh")), 0o640, "mode_files wins");
    assert_eq!(mode_of(&www.join("cgi")), 0o750);
    // Without purge, extras stay and are reported unmanaged.
    assert!(www.join("stray.txt").exists());
    assert!(
        r.unmanaged.contains(&"/srv/www/stray.txt".to_owned()),
        "{:?}",
        r.unmanaged
    );
    assert!(
        r.unmanaged.contains(&"/srv/www/cgi/old".to_owned()),
        "{:?}",
        r.unmanaged
    );
    let purge = policy_dir(
        r#"bundle web { directory "/srv/www" { source = "files/www"; purge = true; } }
policy { web(); }"#,
    );
    let bundle = verified(&compile_file(&purge.path().join("site.policy")).unwrap());
    let r = converge(&bundle, root.path(), false);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    assert!(!www.join("stray.txt").exists());
    assert!(!www.join("cgi/old").exists());
    let mut left: Vec<String> = snapshot(&www)
        .keys()
        .map(|p| p.display().to_string())
        .collect();
    left.sort();
    assert_eq!(left, ["cgi", "cgi/run.sh", "index.html", "logo.png"]);
    assert_eq!(repaired(&converge(&bundle, root.path(), false)), 0);
}

#[test]
fn source_trees_with_links_or_outside_the_policy_tree_are_refused_at_file_and_line() {
    let policies = policy_dir(
        "bundle web {\n  report \"x\" { message = \"x\"; }\n  directory \"/srv/www\" { source = \"files/www\"; }\n}\npolicy { web(); }\n",
    );
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("id_ed25519"), "secret").unwrap();
    symlink(
        outside.path().join("id_ed25519"),
        policies.path().join("files/www/key"),
    )
    .unwrap();
    let errors = compile_file(&policies.path().join("site.policy")).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("3: E0501"), "{errors:?}");
    assert!(errors[0].contains("symbolic link"), "{errors:?}");

    let escaping = policy_dir(
        "bundle web {\n  directory \"/srv/www\" { source = \"../\"; }\n}\npolicy { web(); }\n",
    );
    let errors = compile_file(&escaping.path().join("site.policy")).unwrap_err();
    assert!(errors[0].starts_with("2: "), "{errors:?}");
    assert!(errors[0].contains("outside the policy tree"), "{errors:?}");
}

#[test]
fn a_source_tree_past_the_entry_bound_is_refused_at_file_and_line() {
    let policies = policy_dir(
        "bundle web {\n  directory \"/srv/www\" { source = \"files/www\"; }\n}\npolicy { web(); }\n",
    );
    let many = policies.path().join("files/www/many");
    std::fs::create_dir(&many).unwrap();
    for i in 0..converge_vm::tree::MAX_ENTRIES {
        std::fs::write(many.join(i.to_string()), "").unwrap();
    }
    let errors = compile_file(&policies.path().join("site.policy")).unwrap_err();
    assert!(errors[0].starts_with("2: E0501"), "{errors:?}");
    assert!(errors[0].contains("more than 10000 entries"), "{errors:?}");
}

#[test]
fn a_link_planted_where_the_source_has_a_file_is_not_written_through() {
    let policies = policy_dir(
        r#"bundle web { directory "/srv/www" { source = "files/www"; } }
policy { web(); }"#,
    );
    let bundle = verified(&compile_file(&policies.path().join("site.policy")).unwrap());
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("motd");
    std::fs::write(&target, "outside\n").unwrap();
    let www = root.path().join("srv/www");
    std::fs::create_dir_all(&www).unwrap();
    symlink(&target, www.join("index.html")).unwrap();
    symlink(outside.path(), www.join("cgi")).unwrap();
    let r = converge(&bundle, root.path(), false);
    let failures = failed(&r);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("symbolic link"), "{failures:?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "outside\n");
    assert!(!outside.path().join("run.sh").exists());
    // The rest was still copied.
    assert_eq!(std::fs::read(www.join("logo.png")).unwrap(), BINARY);
}

#[test]
#[ignore = "needs root"]
fn a_source_tree_gets_the_promised_owner_and_group() {
    support::require_root("chown to another user");
    let policies = policy_dir(
        r#"bundle web { directory "/srv/www" { source = "files/www"; owner = "www"; group = "www"; } }
policy { web(); }"#,
    );
    let bundle = verified(&compile_file(&policies.path().join("site.policy")).unwrap());
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(
        root.path().join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\nwww:x:1234:1234::/srv:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(root.path().join("etc/group"), "root:x:0:\nwww:x:1235:\n").unwrap();
    let r = converge(&bundle, root.path(), false);
    assert!(failed(&r).is_empty(), "{:?}", failed(&r));
    let www = root.path().join("srv/www");
    for entry in ["", "cgi", "cgi/run.sh", "index.html", "logo.png"] {
        let meta = std::fs::symlink_metadata(www.join(entry)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (1234, 1235), "{entry}");
    }
    assert_eq!(mode_of(&www.join("cgi/run.sh")), 0o755);
    assert_eq!(repaired(&converge(&bundle, root.path(), false)), 0);
}
