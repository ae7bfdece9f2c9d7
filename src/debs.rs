//! Tiny `.deb` packages for the package tests (`tests/packages.rs`,
//! `tests/apt_update.rs`, `tests/unmanaged.rs`, the apt row of
//! `tests/toolsets.rs`), built with the real `dpkg-deb`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `NAME_VERSION.deb` (an epoch's `:` written `%3a`) in `out` and
/// returns its path: one file, `/usr/share/NAME/README` holding `NAME
/// VERSION`, an optional `Depends`, and an optional `postinst` script
/// (its body after `#!/bin/sh`).
pub fn build_deb(
    out: &Path,
    name: &str,
    version: &str,
    depends: Option<&str>,
    postinst: Option<&str>,
) -> PathBuf {
    let tree = tempfile::tempdir().unwrap();
    let t = tree.path();
    std::fs::create_dir_all(t.join("DEBIAN")).unwrap();
    std::fs::create_dir_all(t.join(format!("usr/share/{name}"))).unwrap();
    std::fs::write(
        t.join(format!("usr/share/{name}/README")),
        format!("{name} {version}\n"),
    )
    .unwrap();
    let mut control = format!(
        "Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: Converge tests <t@example.invalid>\nDescription: test package {name}\n"
    );
    if let Some(d) = depends {
        control.push_str(&format!("Depends: {d}\n"));
    }
    std::fs::write(t.join("DEBIAN/control"), control).unwrap();
    if let Some(script) = postinst {
        let post = t.join("DEBIAN/postinst");
        std::fs::write(&post, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&post, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let deb = out.join(format!("{name}_{}.deb", version.replace(':', "%3a")));
    let st = Command::new("dpkg-deb")
        .args(["--root-owner-group", "--build"])
        .arg(t)
        .arg(&deb)
        .output()
        .unwrap();
    assert!(st.status.success(), "{st:?}");
    deb
}

/// `dpkg --root=ROOT --log=ROOT/var/log/dpkg.log`: dpkg on a sandbox root,
/// its log the root's own (with `--root` alone dpkg appends to the host's
/// `/var/log/dpkg.log`, the `log` line of the host's `/etc/dpkg/dpkg.cfg`).
pub fn dpkg_in_root(root: &Path) -> Command {
    let mut cmd = Command::new("dpkg");
    cmd.arg(format!("--root={}", root.display()))
        .arg(format!("--log={}/var/log/dpkg.log", root.display()));
    cmd
}
