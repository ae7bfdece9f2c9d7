//! The VM's file layer under attack: links planted in place of a file or of
//! a parent directory, pointing outside the root, must stop every write,
//! read and mode change; nothing outside the root is ever touched.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::{symlink, PermissionsExt as _};
use std::path::{Path, PathBuf};

use converge_vm::rootfs::{FsError, Kind, RootFs};

struct Sandbox {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn sandbox() -> Sandbox {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("shadow"), "secret\n").unwrap();
    Sandbox {
        root,
        outside,
        _dir: dir,
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn untouched(s: &Sandbox) {
    assert_eq!(
        std::fs::read_to_string(s.outside.join("shadow")).unwrap(),
        "secret\n"
    );
    let names: Vec<_> = std::fs::read_dir(&s.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names.len(),
        1,
        "something was created outside the root: {names:?}"
    );
}

#[test]
fn writes_create_parents_and_set_modes_atomically() {
    let s = sandbox();
    let fs = RootFs::open(&s.root).unwrap();
    fs.write_file("/etc/app/app.conf", b"port 80\n", 0o640, None)
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(s.root.join("etc/app/app.conf")).unwrap(),
        "port 80\n"
    );
    assert_eq!(mode(&s.root.join("etc/app/app.conf")), 0o640);
    assert_eq!(mode(&s.root.join("etc/app")), 0o755);
    fs.write_file("/etc/app/app.conf", b"port 81\n", 0o600, None)
        .unwrap();
    assert_eq!(
        fs.read_file("/etc/app/app.conf").unwrap().unwrap(),
        b"port 81\n"
    );
    let meta = fs.lstat("/etc/app/app.conf").unwrap().unwrap();
    assert_eq!((meta.kind, meta.mode, meta.len), (Kind::File, 0o600, 8));
    // No temporary file is left behind.
    let names = fs.list_dir("/etc/app").unwrap();
    assert_eq!(names, vec![b"app.conf".to_vec()]);
    assert_eq!(fs.lstat("/etc/missing").unwrap(), None);
    assert_eq!(fs.read_file("/nope/deeper/file").unwrap(), None);
}

#[test]
fn a_link_in_place_of_the_file_is_refused() {
    let s = sandbox();
    std::fs::create_dir_all(s.root.join("etc")).unwrap();
    symlink(s.outside.join("shadow"), s.root.join("etc/x")).unwrap();
    let fs = RootFs::open(&s.root).unwrap();
    assert_eq!(
        fs.write_file("/etc/x", b"pwned\n", 0o644, None),
        Err(FsError::Symlink("/etc/x".into()))
    );
    assert_eq!(
        fs.read_file("/etc/x"),
        Err(FsError::Symlink("/etc/x".into()))
    );
    assert_eq!(
        fs.set_mode("/etc/x", 0o777),
        Err(FsError::Symlink("/etc/x".into()))
    );
    assert_eq!(fs.lstat("/etc/x").unwrap().unwrap().kind, Kind::Symlink);
    untouched(&s);
    assert_eq!(mode(&s.outside.join("shadow")), 0o644);
}

#[test]
fn a_link_in_place_of_a_parent_directory_is_refused() {
    let s = sandbox();
    symlink(&s.outside, s.root.join("etc")).unwrap();
    let fs = RootFs::open(&s.root).unwrap();
    for result in [
        fs.write_file("/etc/shadow", b"pwned\n", 0o644, None)
            .map(|_| ()),
        fs.write_file("/etc/new/file", b"x", 0o644, None)
            .map(|_| ()),
        fs.create_dir("/etc/sub", 0o755),
        fs.set_mode("/etc/shadow", 0o777),
        fs.set_owner("/etc/shadow", 0, 0),
        fs.symlink("/etc/link", "/tmp"),
        fs.read_file("/etc/shadow").map(|_| ()),
        fs.list_dir("/etc/").map(|_| ()),
    ] {
        assert_eq!(result, Err(FsError::Symlink("/etc".into())));
    }
    untouched(&s);
}

/// A write walks its directory in one `openat2` when the path has two
/// components or more; a link or a file deeper on the path is refused
/// exactly as the walk by components refuses it, naming the component.
#[test]
fn a_link_or_a_file_deeper_on_the_path_is_refused_by_name() {
    let s = sandbox();
    std::fs::create_dir_all(s.root.join("data/real")).unwrap();
    symlink(&s.outside, s.root.join("data/d1")).unwrap();
    std::fs::write(s.root.join("data/file"), b"").unwrap();
    let fs = RootFs::open(&s.root).unwrap();
    for result in [
        fs.write_file("/data/d1/shadow", b"pwned\n", 0o644, None),
        fs.write_file("/data/d1/new/file", b"x", 0o644, None),
        fs.create_dir("/data/d1/sub", 0o755),
        fs.check_change("/data/d1/shadow"),
    ] {
        assert_eq!(result, Err(FsError::Symlink("/data/d1".into())));
    }
    assert_eq!(
        fs.write_file("/data/file/x/y", b"x", 0o644, None),
        Err(FsError::NotADirectory("/data/file".into()))
    );
    fs.set_staging(true);
    assert_eq!(
        fs.write_file("/data/d1/shadow", b"pwned\n", 0o644, None),
        Err(FsError::Symlink("/data/d1".into()))
    );
    fs.write_file("/data/real/ok", b"ok\n", 0o644, None)
        .unwrap();
    assert!(fs.flush().is_empty());
    assert_eq!(std::fs::read(s.root.join("data/real/ok")).unwrap(), b"ok\n");
    untouched(&s);
}

#[test]
fn removal_never_follows_links() {
    let s = sandbox();
    std::fs::create_dir_all(s.root.join("srv/app/sub")).unwrap();
    std::fs::write(s.root.join("srv/app/sub/file"), "x").unwrap();
    symlink(&s.outside, s.root.join("srv/app/escape")).unwrap();
    let fs = RootFs::open(&s.root).unwrap();
    fs.remove("/srv/app").unwrap();
    assert!(!s.root.join("srv/app").exists());
    untouched(&s);
    // Removing what is not there is not an error.
    fs.remove("/srv/app").unwrap();
}

#[test]
fn links_are_made_and_replaced_atomically() {
    let s = sandbox();
    let fs = RootFs::open(&s.root).unwrap();
    fs.symlink("/etc/alternatives/editor", "/usr/bin/vim")
        .unwrap();
    assert_eq!(
        fs.read_link("/etc/alternatives/editor").unwrap().as_deref(),
        Some("/usr/bin/vim")
    );
    fs.symlink("/etc/alternatives/editor", "../../usr/bin/nano")
        .unwrap();
    assert_eq!(
        fs.read_link("/etc/alternatives/editor").unwrap().as_deref(),
        Some("../../usr/bin/nano")
    );
    assert_eq!(fs.read_link("/etc/alternatives").unwrap(), None);
    // The target is written verbatim, never resolved against the host.
    assert!(!Path::new("/usr/bin/nano").starts_with(&s.root));
    fs.create_dir("/var/lib/app", 0o750).unwrap();
    assert_eq!(mode(&s.root.join("var/lib/app")), 0o750);
    assert!(
        fs.symlink("/var/lib/app", "/x").is_err(),
        "a directory is not replaced by a link"
    );
}

#[test]
fn bad_paths_are_refused() {
    let s = sandbox();
    let fs = RootFs::open(&s.root).unwrap();
    let long = format!("/{}", "a/".repeat(3000));
    for path in [
        "relative/path",
        "/etc/../../outside/shadow",
        "/..",
        "",
        "/etc//x",
        "/etc/./x",
        "/etc/\0x",
        long.as_str(),
    ] {
        assert!(
            matches!(
                fs.write_file(path, b"x", 0o644, None),
                Err(FsError::BadPath(_))
            ),
            "{path}"
        );
    }
    untouched(&s);
}

/// Runs `attack` with a fresh handle on the root, over and over, while
/// another thread calls `swap` in a loop, until there were at least 10,000
/// swaps and 200 attacks (on a loaded machine either side can be the slow
/// one); then checks that nothing outside the root was written, created or
/// changed in mode.
fn race(s: &Sandbox, swap: impl Fn() + Send + 'static, attack: impl Fn(&RootFs, u64)) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    let swapped_enough = Arc::new(AtomicBool::new(false));
    let attacked_enough = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (swapped_enough, attacked_enough, swaps) = (
            Arc::clone(&swapped_enough),
            Arc::clone(&attacked_enough),
            Arc::clone(&swaps),
        );
        std::thread::spawn(move || {
            while !(swapped_enough.load(Ordering::SeqCst) && attacked_enough.load(Ordering::SeqCst))
            {
                swap();
                if swaps.fetch_add(1, Ordering::SeqCst) + 1 >= 10_000 {
                    swapped_enough.store(true, Ordering::SeqCst);
                }
            }
        })
    };
    let mut attempts = 0u64;
    while !(swapped_enough.load(Ordering::SeqCst) && attempts >= 200) {
        // A fresh handle each time, so every operation walks the path anew.
        let fs = RootFs::open(&s.root).unwrap();
        attack(&fs, attempts);
        attempts += 1;
    }
    attacked_enough.store(true, Ordering::SeqCst);
    swapper.join().unwrap();
    eprintln!(
        "{attempts} attempts during {} swaps",
        swaps.load(Ordering::SeqCst)
    );
    untouched(s);
    assert_eq!(mode(&s.outside.join("shadow")), 0o644);
}

/// A racing attacker: while the VM writes under `/data/dir`, another thread
/// swaps that directory with a link to a directory outside the root, over
/// and over. However the race falls, nothing outside the root is written,
/// created or changed in mode.
#[test]
fn swapping_a_parent_for_a_link_while_writing_never_escapes() {
    let s = sandbox();
    let data = s.root.join("data");
    std::fs::create_dir_all(data.join("dir")).unwrap();
    let outside = s.outside.clone();
    let swap = move || {
        let _ = std::fs::rename(data.join("dir"), data.join("real"));
        let _ = symlink(&outside, data.join("dir"));
        let _ = std::fs::remove_file(data.join("dir"));
        let _ = std::fs::rename(data.join("real"), data.join("dir"));
    };
    race(&s, swap, |fs, attempt| {
        let _ = fs.set_mode("/data/dir/shadow", 0o777);
        let _ = fs.read_file("/data/dir/shadow");
        let _ = fs.create_dir("/data/dir/sub", 0o755);
        if attempt.is_multiple_of(16) {
            let _ = fs.write_file("/data/dir/shadow", b"pwned\n", 0o666, None);
            let _ = fs.symlink("/data/dir/link", "/tmp");
        }
    });
}

/// The same race on the target itself (THREATS.md T16): the managed file
/// `/data/shadow` is swapped with a link to the secret outside the root
/// while the VM changes its mode, reads, rewrites and removes it.
#[test]
fn swapping_the_target_for_a_link_while_writing_never_escapes() {
    let s = sandbox();
    let data = s.root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("shadow"), "managed\n").unwrap();
    let target = s.outside.join("shadow");
    let swap = move || {
        let _ = std::fs::rename(data.join("shadow"), data.join("real"));
        let _ = symlink(&target, data.join("shadow"));
        let _ = std::fs::remove_file(data.join("shadow"));
        let _ = std::fs::rename(data.join("real"), data.join("shadow"));
    };
    race(&s, swap, |fs, attempt| {
        let _ = fs.set_mode("/data/shadow", 0o777);
        if let Ok(Some(bytes)) = fs.read_file("/data/shadow") {
            assert_ne!(bytes, b"secret\n", "read through the link");
        }
        if attempt.is_multiple_of(16) {
            let _ = fs.write_file("/data/shadow", b"pwned\n", 0o666, None);
        }
        if attempt % 64 == 1 {
            let _ = fs.remove("/data/shadow");
        }
    });
}

/// A hard link inside the root to a file elsewhere shares its inode: changing
/// its mode or owner would change the other file. Refused.
#[test]
fn hard_links_are_not_changed_in_place() {
    let s = sandbox();
    std::fs::create_dir_all(s.root.join("etc")).unwrap();
    std::fs::hard_link(s.outside.join("shadow"), s.root.join("etc/linked")).unwrap();
    let fs = RootFs::open(&s.root).unwrap();
    assert!(fs.set_mode("/etc/linked", 0o777).is_err());
    assert!(fs.set_owner("/etc/linked", 1, 1).is_err());
    assert_eq!(mode(&s.outside.join("shadow")), 0o644);
    // Replacing the content writes a new file: the other link keeps its own.
    fs.write_file("/etc/linked", b"new\n", 0o644, None).unwrap();
    untouched(&s);
}

/// THREATS.md case 35: in a world-writable directory (`/tmp`, sticky or
/// not) another user can plant, swap or delete names between any two steps,
/// so nothing directly in one is changed; reading is fine, and so is the
/// directory itself and anything in a private directory below it.
#[test]
fn nothing_directly_in_a_world_writable_directory_is_changed() {
    let s = sandbox();
    let fs = RootFs::open(&s.root).unwrap();
    for (dir, mode) in [("tmp", 0o1777), ("drop", 0o777)] {
        let path = s.root.join(dir);
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        std::fs::write(path.join("theirs"), "theirs\n").unwrap();
        std::fs::create_dir(path.join("private")).unwrap();
        let file = format!("/{dir}/theirs");
        let refused = |r: Result<(), FsError>| match r {
            Err(FsError::SharedDirectory { path, dir: shared }) => {
                assert_eq!(path, file);
                assert_eq!(shared, format!("/{dir}"));
            }
            other => panic!("{file}: {other:?}"),
        };
        refused(fs.write_file(&file, b"ours\n", 0o644, None));
        refused(fs.set_mode(&file, 0o600));
        refused(fs.set_owner(&file, 0, 0));
        refused(fs.symlink(&file, "/etc/shadow"));
        refused(fs.remove(&file));
        assert!(matches!(
            fs.create_dir(&format!("/{dir}/new"), 0o700),
            Err(FsError::SharedDirectory { .. })
        ));
        let err = fs
            .write_file(&file, b"ours\n", 0o644, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("world-writable directory"), "{err}");
        assert_eq!(fs.read_file(&file).unwrap().unwrap(), b"theirs\n");
        assert_eq!(fs.lstat(&file).unwrap().unwrap().kind, Kind::File);
        assert_eq!(
            std::fs::read_dir(&path).unwrap().count(),
            2,
            "nothing new in /{dir}"
        );
        fs.set_mode(&format!("/{dir}"), mode).unwrap();
        fs.write_file(&format!("/{dir}/private/ours"), b"ours\n", 0o644, None)
            .unwrap();
    }
    untouched(&s);
}

/// Makes a chain of `depth` directories `a/a/a/...` under `dir`, with a
/// file at the bottom (openat-relative: the path is far longer than
/// PATH_MAX).
fn deep_chain(dir: &Path, depth: usize) {
    use rustix::fs::{mkdirat, openat, Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut fd = rustix::fs::open(dir, flags, Mode::empty()).unwrap();
    for _ in 0..depth {
        mkdirat(&fd, "a", Mode::from_bits_truncate(0o755)).unwrap();
        fd = openat(&fd, "a", flags, Mode::empty()).unwrap();
    }
    openat(
        &fd,
        "bottom",
        OFlags::WRONLY | OFlags::CREATE,
        Mode::from_bits_truncate(0o644),
    )
    .unwrap();
}

/// Issue 14 item 5: a 12,000-level chain planted under a removed directory
/// overflowed the stack of the recursive removal (SIGABRT on every run).
/// It is removed, iteratively, and nothing outside the root is touched.
#[test]
fn item05_a_twelve_thousand_level_chain_is_removed() {
    let s = sandbox();
    std::fs::create_dir_all(s.root.join("srv/old")).unwrap();
    deep_chain(&s.root.join("srv/old"), 12_000);
    let fs = RootFs::open(&s.root).unwrap();
    fs.remove("/srv/old").unwrap();
    assert!(!s.root.join("srv/old").exists());
    assert!(s.root.join("srv").is_dir());
    untouched(&s);
}

/// Issue 14 item 8: a managed directory moved out of the root in the middle
/// of a run (by a thread here, any local user with write access to its
/// parent on a host) received every later write, outside the root, because
/// its handle was cached for the whole run. Thousands of writes race one
/// rename; not one file may land outside.
#[test]
fn item08_a_directory_moved_out_of_the_root_mid_run_gets_no_write() {
    let s = sandbox();
    std::fs::create_dir_all(s.root.join("data/d1")).unwrap();
    let fs = RootFs::open(&s.root).unwrap();
    fs.write_file("/data/d1/f0", b"0", 0o644, None).unwrap();
    let from = s.root.join("data/d1");
    let to = s.outside.join("d1");
    let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mover = {
        let written = std::sync::Arc::clone(&written);
        std::thread::spawn(move || {
            while written.load(std::sync::atomic::Ordering::SeqCst) < 500 {
                std::thread::yield_now();
            }
            std::fs::rename(&from, &to).unwrap();
            // What the directory held when it left the root.
            let moved: std::collections::BTreeSet<_> = std::fs::read_dir(&to)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            moved
        })
    };
    let mut refused = 0;
    for i in 1..3_000 {
        match fs.write_file(&format!("/data/d1/f{i}"), b"x", 0o644, None) {
            Ok(()) => {}
            Err(FsError::Moved(_)) => refused += 1,
            Err(e) => panic!("{e}"),
        }
        written.store(i, std::sync::atomic::Ordering::SeqCst);
    }
    let moved = mover.join().unwrap();
    let outside: Vec<_> = std::fs::read_dir(s.outside.join("d1"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| !moved.contains(n))
        .collect();
    assert!(
        outside.is_empty(),
        "{} files were written outside the root after the move: {:?}",
        outside.len(),
        outside.iter().take(5).collect::<Vec<_>>()
    );
    assert!(refused <= 1, "{refused}");
    // The writes after the move went to the path inside the root.
    assert!(s.root.join("data/d1/f2999").is_file());
}

/// Issue 14 item 15: a temporary name built from the target's
/// (`.NAME.converge-tmp`) is over NAME_MAX for names of 242 to 255 bytes,
/// so such files could never be managed.
#[test]
fn item15_names_up_to_name_max_are_written() {
    let s = sandbox();
    let fs = RootFs::open(&s.root).unwrap();
    for len in [241, 242, 250, 255] {
        let name = "n".repeat(len);
        fs.write_file(&format!("/etc/{name}"), b"long\n", 0o644, None)
            .unwrap_or_else(|e| panic!("{len} bytes: {e}"));
        fs.symlink(&format!("/etc/l{}", &name[1..]), "target")
            .unwrap_or_else(|e| panic!("link of {len} bytes: {e}"));
        assert_eq!(
            std::fs::read(s.root.join("etc").join(&name)).unwrap(),
            b"long\n"
        );
    }
    let names: Vec<_> = std::fs::read_dir(s.root.join("etc"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains("converge-tmp")),
        "{names:?}"
    );
}

/// Issue 14 item 14: `fchown` after `fchmod` cleared the setuid and setgid
/// bits of every file written with an owner.
#[test]
fn item14_setuid_and_setgid_survive_a_write_with_an_owner() {
    let s = sandbox();
    let fs = RootFs::open(&s.root).unwrap();
    let (uid, gid) = (
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    fs.write_file("/usr/bin/tool", b"#!/bin/sh\n", 0o6755, Some((uid, gid)))
        .unwrap();
    assert_eq!(mode(&s.root.join("usr/bin/tool")), 0o6755);
}

/// Issue 14 item 16: a temporary left by a run killed with SIGKILL is
/// stale; the run removes it even when the target ends unchanged.
#[test]
fn item16_stale_temporaries_are_cleaned_once_per_directory() {
    let s = sandbox();
    std::fs::create_dir_all(s.root.join("etc")).unwrap();
    std::fs::write(s.root.join("etc/.converge-tmp.4d2abc.7"), "half").unwrap();
    std::fs::write(s.root.join("etc/.motd.converge-tmp"), "old style").unwrap();
    std::fs::write(s.root.join("etc/keep"), "mine").unwrap();
    let fs = RootFs::open(&s.root).unwrap();
    let removed = fs.clean_stale_temporaries("/etc/motd").unwrap();
    assert_eq!(
        removed,
        vec!["/etc/.converge-tmp.4d2abc.7", "/etc/.motd.converge-tmp"]
    );
    assert!(s.root.join("etc/keep").exists());
    std::fs::write(s.root.join("etc/.converge-tmp.later.1"), "x").unwrap();
    assert!(fs.clean_stale_temporaries("/etc/other").unwrap().is_empty());
}

/// Files of `vm/src` that may open files or start processes without going
/// through `rootfs`, and why. Everything else reads the root only through
/// [`RootFs`] (no links, regular files only, bounded).
const MAY_TOUCH_FILES: &[(&str, &str)] = &[
    // Opening the root itself (`canonicalize`): the operator chose it.
    ("run/mod.rs", "canonicalizes the operator's --root"),
    // Creates the state directory's parents; its files go through rootfs.
    ("state.rs", "creates the state directory"),
    // The operator's own files, named on the command line.
    ("cli/run.rs", "reads the bundle, writes --report"),
    ("cli/verify.rs", "reads the bundle to verify"),
    ("pull/fetch.rs", "reads the --ca-file"),
    // Stored files (format 2.6): the blobs beside a local bundle and the
    // host's cache in the state directory, never the managed root; a blob
    // is opened without following a link, at its signed size, and hashed
    // before a byte of it is used.
    (
        "blobs/mod.rs",
        "reads and collects the blob cache of the state directory and the blobs beside a bundle",
    ),
    (
        "blobs/fetch.rs",
        "streams fetched blobs into the state directory's cache",
    ),
    ("agent/config.rs", "reads the agent's configuration file"),
    ("agent/mod.rs", "rotates reports in the state directory"),
    // The operator's `metrics_dir` (0755, for node_exporter) and the
    // search permission of the state directory above it.
    (
        "agent/metrics.rs",
        "creates metrics_dir, lets node_exporter reach it",
    ),
    // The one place that starts a process (argv, no shell, timeouts).
    ("backend/process.rs", "starts every command"),
    // dnf has no option for the rpm database path: each dnf call gets a
    // private HOME (a host temporary directory, not the root) whose
    // `.rpmmacros` names the root's `/var/lib/rpm` (docs/promise-types.md).
    (
        "backend/toolset/rpm.rs",
        "writes .rpmmacros into dnf's private temporary HOME",
    ),
    // `policyvm bootstrap`: the operator's own configuration, named on its
    // command line or by the packaging (agent.toml, the trust directory,
    // the --trust key file) and the timer's link, which `systemctl enable`
    // would make on the host. Not yet through rootfs under --root: see the
    // session 6 note.
    ("cli/bootstrap/mod.rs", "reads the existing agent.toml"),
    (
        "cli/bootstrap/files.rs",
        "writes agent.toml and the trust directory",
    ),
    ("cli/bootstrap/hub_key.rs", "reads the --trust key file"),
    (
        "cli/bootstrap/timer.rs",
        "links the agent's timer into timers.target.wants",
    ),
];

/// Issue 14 item 2: `facts.rs` read `ROOT/etc/hostname` with `std::fs`,
/// following a link out of the root. No file of `vm/src` outside `rootfs`
/// and the short allow-list above may use `std::fs` or `Command::new`.
#[test]
fn item02_only_rootfs_and_the_allow_list_open_files_or_start_processes() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![src.clone()];
    let mut offenders = Vec::new();
    let mut allowed_and_used = Vec::new();
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if !rel.ends_with(".rs") || rel.starts_with("rootfs/") || rel.ends_with("tests.rs") {
                continue;
            }
            seen += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            // Unit tests may build fixtures with std::fs.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let uses = [
                "std::fs",
                "Command::new",
                "File::open",
                ".is_dir()",
                ".exists()",
            ]
            .iter()
            .any(|needle| code.contains(needle));
            if !uses {
                continue;
            }
            if MAY_TOUCH_FILES.iter().any(|(file, _)| *file == rel) {
                allowed_and_used.push(rel);
            } else {
                offenders.push(rel);
            }
        }
    }
    assert!(seen > 20, "only {seen} source files found under {src:?}");
    assert!(
        offenders.is_empty(),
        "these files touch the filesystem or start processes outside rootfs: {offenders:?}"
    );
    // The allow-list stays as short as it can be: no entry that is not needed.
    for (file, why) in MAY_TOUCH_FILES {
        assert!(
            allowed_and_used.iter().any(|f| f == file),
            "{file} ({why}) no longer needs to be allowed"
        );
    }
}
