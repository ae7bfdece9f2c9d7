//! `mount`, `kernel_module`, `sysctl` and `process` promises end to end, on
//! sandbox roots only (docs/promise-types.md, "Kernel-facing types"):
//! under `--root` the VM manages `etc/fstab`, `etc/modules-load.d`,
//! `etc/modprobe.d` and `etc/sysctl.d` of the root, and reads processes
//! from `ROOT/proc` — here a fixture of `PID/cmdline` files. No test here
//! mounts, loads a module, sets a sysctl or runs the VM on `/`; the one
//! process signalled is a `sleep` this test started itself.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::time::Duration;

use converge_vm::run::operators::Outcome;
use converge_vm::run::RunReport;

use ::converge::support;
use support::{compile, converge, failed, repaired, verified};

/// Every file below `root`, by relative path, with its content.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    out
}

fn outcome<'r>(r: &'r RunReport, kind: &str, promiser: &str) -> &'r Outcome {
    r.promises
        .iter()
        .find(|p| p.kind() == kind && p.promiser == promiser)
        .unwrap_or_else(|| panic!("no promise {kind} {promiser}: {r:#?}"))
        .outcome()
}

const FILES: &str = r#"
bundle kernel {
  mount "/srv/data" {
    device = "UUID=0a1b-2c3d"; fstype = "ext4"; options = ["noatime", "nodev"];
  }
  mount "/srv/media" { state = present; device = "/dev/sdc1"; fstype = "vfat"; }
  mount "/mnt/old" { state = absent; }
  mount "/mnt/usb" { state = unmounted; }
  sysctl "net.ipv4.ip_forward" { value = "1"; }
  sysctl "net/ipv4/ip_local_port_range" { value = "32768   60999"; }
  sysctl "vm.swappiness" { value = "10"; persistent = false; }
  kernel_module "br_netfilter" { }
  kernel_module "cramfs" { state = absent; }
}
policy { kernel(); }
"#;

const FSTAB: &str = "# <file system> <mount point> <type> <options> <dump> <pass>\n\
UUID=root / ext4 errors=remount-ro 0 1\n\
/dev/sdb1 /srv/data xfs defaults 0 2\n\
/dev/sdd1 /mnt/old ext4 defaults 0 0\n\
/dev/sde1 /mnt/usb vfat noauto 0 0\n";

#[test]
fn fstab_modules_and_sysctl_files_converge_inside_a_root_and_nothing_live_is_touched() {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc");
    std::fs::create_dir_all(etc.join("modules-load.d")).unwrap();
    std::fs::write(etc.join("fstab"), FSTAB).unwrap();
    // A stale load file for a module that must now be absent.
    std::fs::write(etc.join("modules-load.d/converge-cramfs.conf"), "cramfs\n").unwrap();
    let host_fstab = std::fs::read("/etc/fstab").ok();
    let host_forward = std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap();
    let bundle = verified(&compile(FILES));

    let before = snapshot(root.path());
    let dry = converge(&bundle, root.path(), true);
    assert!(failed(&dry).is_empty(), "{:?}", failed(&dry));
    assert_eq!(snapshot(root.path()), before, "a dry run changes nothing");
    assert!(repaired(&dry) >= 5, "{dry:#?}");

    let first = converge(&bundle, root.path(), false);
    assert!(failed(&first).is_empty(), "{:?}", failed(&first));
    let fstab = std::fs::read_to_string(etc.join("fstab")).unwrap();
    assert_eq!(
        fstab,
        "# <file system> <mount point> <type> <options> <dump> <pass>\n\
         UUID=root / ext4 errors=remount-ro 0 1\n\
         UUID=0a1b-2c3d\t/srv/data\text4\tnoatime,nodev\t0\t2\n\
         /dev/sde1 /mnt/usb vfat noauto 0 0\n\
         /dev/sdc1\t/srv/media\tvfat\tdefaults\t0\t0\n"
    );
    let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
    assert!(read("etc/sysctl.d/60-converge-net.ipv4.ip_forward.conf")
        .ends_with("\nnet.ipv4.ip_forward = 1\n"));
    assert!(
        read("etc/sysctl.d/60-converge-net.ipv4.ip_local_port_range.conf")
            .ends_with("\nnet/ipv4/ip_local_port_range = 32768 60999\n")
    );
    assert!(!root
        .path()
        .join("etc/sysctl.d/60-converge-vm.swappiness.conf")
        .exists());
    assert!(read("etc/modules-load.d/converge-br_netfilter.conf").ends_with("\nbr_netfilter\n"));
    assert!(read("etc/modprobe.d/converge-blacklist-cramfs.conf")
        .ends_with("\nblacklist cramfs\ninstall cramfs /bin/false\n"));
    assert!(!etc.join("modules-load.d/converge-cramfs.conf").exists());
    // Live state is not managed under --root: said, not pretended.
    assert!(
        matches!(outcome(&first, "mount", "/mnt/usb"), Outcome::Skipped(why) if why.contains("only /etc/fstab"))
    );
    assert_eq!(*outcome(&first, "sysctl", "vm.swappiness"), Outcome::Kept);

    let second = converge(&bundle, root.path(), false);
    assert!(failed(&second).is_empty(), "{:?}", failed(&second));
    assert_eq!(repaired(&second), 0, "{second:#?}");
    assert_eq!(std::fs::read("/etc/fstab").ok(), host_fstab);
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap(),
        host_forward
    );
}

#[test]
fn bad_values_computed_on_the_host_are_refused_before_any_file_changes() {
    // The compiler checks constants; a value from a fact is checked by the VM.
    let policy = r#"
bundle kernel {
  mount "/srv/x" { device = "/dev/sdb1"; fstype = "${sys.os}fs"; }
}
policy { kernel(); }
"#;
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(root.path().join("etc/fstab"), FSTAB).unwrap();
    let report = converge(&verified(&compile(policy)), root.path(), false);
    let errors = failed(&report);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("is not a known filesystem type"),
        "{errors:?}"
    );
    assert_eq!(
        std::fs::read_to_string(root.path().join("etc/fstab")).unwrap(),
        FSTAB
    );
}

/// A fixture process table `ROOT/proc/PID/cmdline`.
fn fake_proc(root: &Path, pid: u32, argv: &[&str]) {
    let dir = root.join("proc").join(pid.to_string());
    std::fs::create_dir_all(&dir).unwrap();
    let mut bytes = Vec::new();
    for a in argv {
        bytes.extend_from_slice(a.as_bytes());
        bytes.push(0);
    }
    std::fs::write(dir.join("cmdline"), bytes).unwrap();
}

/// A pid above any pid_max: no process of this kernel has it.
const NO_SUCH_PID: u32 = 4_194_400;

#[test]
fn processes_are_read_from_root_proc_and_a_dry_run_says_what_it_would_do() {
    let root = tempfile::tempdir().unwrap();
    fake_proc(
        root.path(),
        NO_SUCH_PID,
        &["/usr/sbin/fakedaemon", "--serve"],
    );
    fake_proc(root.path(), NO_SUCH_PID + 1, &["/usr/bin/stray", "-x"]);
    let policy = r#"
bundle procs {
  process "daemon" { match = "^/usr/sbin/fakedaemon --serve$"; start = ["/usr/sbin/fakedaemon", "--serve"]; }
  process "two workers" { match = "^/usr/bin/worker"; start = ["/usr/bin/worker"]; count = 2; }
  process "no stray" { match = "^/usr/bin/stray"; state = absent; }
  process "no ghost" { match = "^/usr/bin/ghost"; state = absent; }
}
policy { procs(); }
"#;
    let bundle = verified(&compile(policy));
    let before = snapshot(root.path());
    let dry = converge(&bundle, root.path(), true);
    assert!(failed(&dry).is_empty(), "{:?}", failed(&dry));
    assert_eq!(snapshot(root.path()), before);
    assert_eq!(*outcome(&dry, "process", "daemon"), Outcome::Kept);
    assert_eq!(*outcome(&dry, "process", "no ghost"), Outcome::Kept);
    let shown = |label: &str| {
        let p = dry.promises.iter().find(|p| p.promiser == label).unwrap();
        p.changes()
            .iter()
            .map(|c| c.after.clone())
            .collect::<Vec<_>>()
    };
    let chroot = format!(
        "(would run `setsid --fork -- chroot -- {} /usr/bin/worker`)",
        root.path().display()
    );
    assert_eq!(
        shown("two workers"),
        [
            format!("copy 1 of 2 {chroot}"),
            format!("copy 2 of 2 {chroot}")
        ]
    );
    assert_eq!(shown("no stray"), ["would send SIGTERM"]);

    // For real: a fixture pid that no process of this kernel has is not
    // running (kept); one that is a different process on this kernel (a
    // `sleep` of this test) is refused, and nothing is signalled.
    let no_stray = verified(&compile(
        "bundle b { process \"no stray\" { match = \"^/usr/bin/stray\"; state = absent; } }\npolicy { b(); }\n",
    ));
    let report = converge(&no_stray, root.path(), false);
    assert_eq!(
        *outcome(&report, "process", "no stray"),
        Outcome::Kept,
        "{report:#?}"
    );
    let mut other = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    fake_proc(root.path(), other.id(), &["/usr/bin/stray", "-y"]);
    let report = converge(&no_stray, root.path(), false);
    let errors = failed(&report);
    assert!(
        errors.len() == 1 && errors[0].contains("nothing was signalled"),
        "{errors:?}"
    );
    assert!(other.try_wait().unwrap().is_none(), "not signalled");
    other.kill().unwrap();
    other.wait().unwrap();
}

#[test]
fn a_regex_that_matches_the_vm_itself_signals_nothing() {
    let root = tempfile::tempdir().unwrap();
    // The VM's own pid (this test process) as the fixture shows it, and a
    // second, real-looking target: neither may be signalled.
    fake_proc(
        root.path(),
        std::process::id(),
        &["/usr/bin/policyvm", "run", "site.bundle"],
    );
    fake_proc(root.path(), NO_SUCH_PID, &["/usr/bin/policyvm-helper"]);
    let policy = "bundle b { process \"no policyvm\" { match = \"policyvm\"; state = absent; } }\npolicy { b(); }\n";
    let report = converge(&verified(&compile(policy)), root.path(), false);
    let errors = failed(&report);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("matches the VM itself or one of its ancestors"),
        "{errors:?}"
    );
    // As `running`, the VM's own process is never counted as the process.
    let policy = "bundle b { process \"vm\" { match = \"site.bundle\"; } }\npolicy { b(); }\n";
    let report = converge(&verified(&compile(policy)), root.path(), true);
    assert!(
        matches!(outcome(&report, "process", "vm"), Outcome::Failed(why) if why.contains("no `start`")),
        "{report:#?}"
    );
}

/// The signal path for real, on a root whose process table names a
/// `sleep` this test started (and nothing else): the VM checks it against
/// the kernel, sends TERM through a pidfd and waits for the exit.
#[test]
fn an_absent_process_is_signalled_after_checking_it_is_the_kernels() {
    let marker = format!("3599.{}", std::process::id());
    let mut child = std::process::Command::new("sleep")
        .arg(&marker)
        .spawn()
        .unwrap();
    let pid = child.id();
    // Until its exec is done, a child shows its parent's command line.
    let argv = format!("sleep\0{marker}\0");
    while std::fs::read(format!("/proc/{pid}/cmdline")).unwrap() != argv.as_bytes() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let root = tempfile::tempdir().unwrap();
    fake_proc(root.path(), pid, &["sleep", &marker]);
    let policy = format!(
        "bundle b {{ process \"no sleep\" {{ match = \"^sleep {}$\"; state = absent; }} }}\npolicy {{ b(); }}\n",
        marker.replace('.', r"\\.")
    );
    let bundle = verified(&compile(&policy));
    let dry = converge(&bundle, root.path(), true);
    assert_eq!(repaired(&dry), 1);
    assert!(
        child.try_wait().unwrap().is_none(),
        "a dry run signals nothing"
    );
    let report = converge(&bundle, root.path(), false);
    assert!(failed(&report).is_empty(), "{:?}", failed(&report));
    assert_eq!(repaired(&report), 1);
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(15), "{status:?}");
    // The table now says it is gone: kept.
    std::fs::remove_dir_all(root.path().join("proc").join(pid.to_string())).unwrap();
    let again = converge(&bundle, root.path(), false);
    assert_eq!(*outcome(&again, "process", "no sleep"), Outcome::Kept);
}

/// Runs `test` of this binary again inside new namespaces (`unshare
/// FLAGS`), where it does the real work; `true` in that inner run. The
/// outer run needs root and `unshare`; it fails, never passes empty-handed,
/// when run (`--include-ignored`) without them.
fn inside_namespaces(test: &str, flags: &[&str]) -> bool {
    if std::env::var_os("CONVERGE_TEST_IN_NAMESPACE").is_some() {
        return true;
    }
    support::require_root("a private namespace");
    let unshare = support::require_tool("unshare", "util-linux");
    let out = std::process::Command::new(unshare)
        .args(flags)
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .args([
            test,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CONVERGE_TEST_IN_NAMESPACE", "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
    false
}

/// The live mount steps for real, in a private mount namespace this test
/// creates (`unshare -m`): a tmpfs is mounted, kept, remounted for a
/// missing option, and unmounted; the machine's mounts never see it.
#[test]
#[ignore = "needs root and unshare (a private mount namespace)"]
fn live_mounts_converge_in_a_private_mount_namespace() {
    use converge_vm::backend::mount::{converge_live, Wanted};
    if !inside_namespaces(
        "live_mounts_converge_in_a_private_mount_namespace",
        &["--mount", "--propagation", "private"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fs = converge_vm::rootfs::RootFs::open(Path::new("/")).unwrap();
    let mp = dir.path().join("mnt");
    let want = |state: &str, options: &str| Wanted {
        mount_point: mp.display().to_string(),
        state: state.into(),
        device: Some("tmpfs".into()),
        fstype: Some("tmpfs".into()),
        options: options.into(),
    };
    let findmnt = || {
        let out = std::process::Command::new("findmnt")
            .args(["-n", "-o", "FSTYPE,OPTIONS", "--mountpoint"])
            .arg(&mp)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let (changes, log) =
        converge_live(&fs, false, &want("mounted", "size=1m,noexec"), false).unwrap();
    assert_eq!(
        changes.len(),
        2,
        "mount point created, then mounted: {changes:?}"
    );
    assert!(
        log.contains("$ mount -t tmpfs -o size=1m,noexec -- tmpfs"),
        "{log}"
    );
    let live = findmnt();
    assert!(
        live.starts_with("tmpfs") && live.contains("noexec"),
        "{live}"
    );
    let (again, _) = converge_live(&fs, false, &want("mounted", "size=1m,noexec"), false).unwrap();
    assert!(again.is_empty(), "kept: {again:?}");
    let (remount, _) =
        converge_live(&fs, false, &want("mounted", "size=1m,noexec,nodev"), false).unwrap();
    assert_eq!(remount.len(), 1, "{remount:?}");
    assert!(findmnt().contains("nodev"), "{}", findmnt());
    let (gone, _) = converge_live(&fs, false, &want("unmounted", "defaults"), false).unwrap();
    assert_eq!(gone.len(), 1, "{gone:?}");
    assert_eq!(findmnt(), "");
}

/// `sysctl -w` and the `/proc/sys` read for real, in a private network
/// namespace this test creates (`unshare -n`), whose `net.*` parameters
/// are its own.
#[test]
#[ignore = "needs root and unshare (a private network namespace)"]
fn a_live_sysctl_is_set_in_a_private_network_namespace() {
    use converge_vm::backend::sysctl::{live_value, set_command};
    use converge_vm::backend::{perform, Step};
    if !inside_namespaces(
        "a_live_sysctl_is_set_in_a_private_network_namespace",
        &["--net"],
    ) {
        return;
    }
    let fs = converge_vm::rootfs::RootFs::open(Path::new("/")).unwrap();
    let key = "net.ipv4.ip_local_port_range";
    let before = live_value(&fs, key).unwrap();
    let want = if before == "20000 30000" {
        "20001 30001"
    } else {
        "20000 30000"
    };
    let step = Step::new("live value", before, want, set_command(key, want));
    perform(false, &[step]).unwrap();
    assert_eq!(live_value(&fs, key).unwrap(), want);
}

/// Copies `program` and the shared libraries `ldd` names into `root`, at
/// the same paths: enough of a root for `chroot ROOT program` to run.
fn install_with_libraries(root: &Path, program: &str) {
    let out = std::process::Command::new("ldd")
        .arg(program)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut files = vec![program.to_owned()];
    for line in text.lines() {
        let path = match line.split_once("=>") {
            Some((_, right)) => right.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            files.push(p.to_owned());
        }
    }
    for file in files {
        let to = root.join(file.trim_start_matches('/'));
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&file, &to).unwrap();
    }
}

/// This process's descriptors above 2 that are not close-on-exec
/// (`flags` in /proc/self/fdinfo without `O_CLOEXEC`, 0o2000000).
fn inherited_descriptors() -> Vec<String> {
    std::fs::read_dir("/proc/self/fdinfo")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().to_string_lossy().into_owned();
            let info = std::fs::read_to_string(e.path()).ok()?;
            let flags = info
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))?
                .trim()
                .to_owned();
            let flags = u32::from_str_radix(&flags, 8).ok()?;
            (name.parse::<u32>().ok()? > 2 && flags & 0o2000000 == 0).then_some(name)
        })
        .collect()
}

/// A process started for real by the VM on a root whose `proc` is this
/// kernel's (bound in a private mount namespace): chrooted into the root,
/// detached (own session, stdio on /dev/null, no other descriptor), found
/// again on the second run, then stopped by an `absent` promise.
#[test]
#[ignore = "needs root and unshare (chroot, and a private mount namespace for ROOT/proc)"]
fn a_started_process_runs_detached_inside_the_root_and_is_found_again() {
    if !inside_namespaces(
        "a_started_process_runs_detached_inside_the_root_and_is_found_again",
        &["--mount", "--propagation", "private"],
    ) {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let sleep = std::fs::canonicalize("/bin/sleep").unwrap();
    let sleep = sleep.to_str().unwrap();
    install_with_libraries(root.path(), sleep);
    std::fs::create_dir_all(root.path().join("proc")).unwrap();
    let bound = std::process::Command::new("mount")
        .args(["--bind", "/proc"])
        .arg(root.path().join("proc"))
        .status()
        .unwrap();
    assert!(bound.success());
    let marker = format!("3598.{}", std::process::id());
    let running = format!(
        "bundle b {{ process \"sleeper\" {{ match = \"^{sleep} {}$\"; start = [\"{sleep}\", \"{marker}\"]; }} }}\npolicy {{ b(); }}\n",
        marker.replace('.', r"\\.")
    );
    let bundle = verified(&compile(&running));
    let first = converge(&bundle, root.path(), false);
    assert!(failed(&first).is_empty(), "{:?}", failed(&first));
    assert_eq!(repaired(&first), 1);
    let argv = format!("{sleep}\0{marker}\0");
    let pid = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .ok()
                .as_deref()
                == Some(argv.as_bytes())
        })
        .expect("the started process");
    let proc_dir = Path::new("/proc").join(pid.to_string());
    assert_eq!(
        std::fs::read_link(proc_dir.join("root")).unwrap(),
        root.path()
    );
    let mut fds: Vec<(String, String)> = std::fs::read_dir(proc_dir.join("fd"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_link(e.path()).unwrap().display().to_string(),
            )
        })
        .collect();
    fds.sort();
    let stat = std::fs::read_to_string(proc_dir.join("stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // Its own session: the session id (field 6) is its own pid.
    let session = fields[3].to_owned();
    let second = converge(&bundle, root.path(), false);
    let absent = format!(
        "bundle b {{ process \"sleeper\" {{ match = \"^{sleep} {}$\"; state = absent; }} }}\npolicy {{ b(); }}\n",
        marker.replace('.', r"\\.")
    );
    let stopped = converge(&verified(&compile(&absent)), root.path(), false);
    // Standard streams on /dev/null; nothing else but what this process
    // itself inherited without close-on-exec (from cargo, a shell): every
    // descriptor the VM opens is close-on-exec, and one it was handed open
    // by its own parent is passed on (see docs/promise-types.md).
    let inherited = inherited_descriptors();
    for (fd, target) in &fds {
        match fd.as_str() {
            "0" | "1" | "2" => assert_eq!(target, "/dev/null", "{fds:?}"),
            other => assert!(
                inherited.contains(&other.to_owned()),
                "{fd} -> {target} leaked: {fds:?}, inherited {inherited:?}"
            ),
        }
    }
    assert_eq!(session, pid.to_string(), "{stat}");
    assert_eq!(repaired(&second), 0, "{second:#?}");
    assert!(failed(&stopped).is_empty(), "{:?}", failed(&stopped));
    assert_eq!(repaired(&stopped), 1);
    assert!(!proc_dir.exists() || std::fs::read(proc_dir.join("cmdline")).unwrap().is_empty());
}
