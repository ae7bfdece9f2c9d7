//! Whether a tool handed a path inside `--root` stays inside it.
//!
//! The VM itself never follows a link ([`crate::rootfs`]), but the tools a
//! backend runs do: `sv` follows `ROOT/etc/service/web`, `dpkg --root`
//! unpacks through `ROOT/opt`. A link planted there that leads out of the
//! root would make the tool act on the host (issue 14, item 7). Before a
//! tool runs, each path it is handed or will write under, as far as the VM
//! can know them, is resolved the way the kernel will resolve it for the
//! tool — an absolute link target from the host's `/`, a relative one from
//! the link's directory — one component at a time through [`RootFs`]; a
//! link whose target leaves the root refuses the promise, naming the link.
//! Links that stay inside the root (runit's `../sv/web`, a merged-`/usr`
//! `bin -> usr/bin`) are fine.
//!
//! On the real system (`--root /`) nothing is outside the root and nothing
//! is checked. What a link planted *after* the check does is the race
//! every path-taking tool has; the check stops links planted before the
//! run, which is what a local user or a compromised package can do.

use std::collections::VecDeque;
use std::path::Path;

use super::sandbox;
use crate::rootfs::{path_problem, Kind, RootFs};

/// How many links one path may go through (the kernel's limit).
const MAX_LINKS: usize = 40;

/// `Err` naming the link when `path` (a policy path, inside the root)
/// would lead a tool on this host out of the root; `Ok` when it stays
/// inside, or where it does not exist yet (the tool creates real
/// directories there). `tool` names what would have run, for the message.
pub fn check(fs: &RootFs, path: &str, tool: &str) -> Result<(), String> {
    let Some(root) = sandbox(fs.path()) else {
        return Ok(());
    };
    if let Some(why) = path_problem(path) {
        return Err(format!(
            "`{}` is not a plain absolute path ({why}); refusing to hand it to {tool}",
            path.escape_debug()
        ));
    }
    let mut pending: VecDeque<String> = words(path).collect();
    // The components resolved so far: each a real directory in the root.
    let mut resolved: Vec<String> = Vec::new();
    let mut links = 0usize;
    while let Some(word) = pending.pop_front() {
        if word == ".." {
            // Only from a relative link target: `..` of the root's top
            // is the root's parent on this host.
            if resolved.pop().is_none() {
                return Err(out_of_root(path, tool, root, None));
            }
            continue;
        }
        let here = format!("/{}", join(&resolved, &word));
        let meta = fs.lstat(&here).map_err(|e| e.to_string())?;
        match meta.map(|m| m.kind) {
            // Missing: nothing of it can lead anywhere yet.
            None => return Ok(()),
            Some(Kind::Symlink) => {
                links = links.saturating_add(1);
                if links > MAX_LINKS {
                    return Err(format!(
                        "`{path}` goes through more than {MAX_LINKS} symbolic links; refusing \
                         to hand it to {tool}"
                    ));
                }
                let target = fs
                    .read_link(&here)
                    .map_err(|e| e.to_string())?
                    .unwrap_or_default();
                let rest: Vec<String> = pending.drain(..).collect();
                if let Some(absolute) = target.strip_prefix('/') {
                    let inside = Path::new("/")
                        .join(absolute)
                        .strip_prefix(root)
                        .ok()
                        .map(|p| p.to_string_lossy().into_owned());
                    let Some(inside) = inside.filter(|_| !target.split('/').any(|w| w == ".."))
                    else {
                        return Err(out_of_root(path, tool, root, Some((&here, &target))));
                    };
                    resolved.clear();
                    pending.extend(words(&inside));
                } else {
                    pending.extend(words(&target));
                }
                pending.extend(rest);
            }
            Some(_) => resolved.push(word),
        }
    }
    Ok(())
}

/// The host path of a `command` promise's `cwd` (issue 14, item 12): a
/// plain absolute policy path like a promiser (no `..`: `/../../etc` would
/// be outside the root), resolved inside the root without a link leading
/// out of it.
pub fn working_dir(fs: &RootFs, dir: &str) -> Result<std::path::PathBuf, String> {
    if let Some(why) = path_problem(dir) {
        return Err(format!(
            "`cwd = {}` is not usable: {why}",
            dir.escape_debug()
        ));
    }
    check(fs, dir, "the command as its working directory")?;
    Ok(super::host_path(fs.path(), dir))
}

/// Checks each of `paths` ([`check`]); the first refusal wins.
pub fn check_all<'p>(
    fs: &RootFs,
    paths: impl IntoIterator<Item = &'p str>,
    tool: &str,
) -> Result<(), String> {
    paths.into_iter().try_for_each(|p| check(fs, p, tool))
}

fn words(path: &str) -> impl Iterator<Item = String> + '_ {
    path.split('/')
        .filter(|w| !w.is_empty() && *w != ".")
        .map(str::to_owned)
}

fn join(resolved: &[String], word: &str) -> String {
    let mut all = resolved.join("/");
    if !all.is_empty() {
        all.push('/');
    }
    all.push_str(word);
    all
}

fn out_of_root(path: &str, tool: &str, root: &Path, link: Option<(&str, &str)>) -> String {
    let via = match link {
        Some((at, target)) => format!("`{at}` is a symbolic link to `{}`", target.escape_debug()),
        None => "a symbolic link on it".to_owned(),
    };
    format!(
        "{via}, which leads out of the root `{}`: refusing to hand `{path}` to {tool} (it \
         would act outside the root); remove the link or make it point inside the root",
        root.display()
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use std::os::unix::fs::symlink;

    fn root() -> (tempfile::TempDir, RootFs) {
        let dir = tempfile::tempdir().unwrap();
        let fs = RootFs::open(dir.path()).unwrap();
        (dir, fs)
    }

    #[test]
    fn links_leading_out_of_the_root_are_named_and_refused() {
        let (dir, fs) = root();
        let outside = tempfile::tempdir().unwrap();
        let r = dir.path();
        std::fs::create_dir_all(r.join("etc/service")).unwrap();
        symlink(outside.path(), r.join("etc/service/web")).unwrap();
        let err = check(&fs, "/etc/service/web/supervise/control", "`sv`").unwrap_err();
        assert!(
            err.starts_with("`/etc/service/web` is a symbolic link to"),
            "{err}"
        );
        assert!(err.contains("leads out of the root"), "{err}");
        // Relative, climbing out.
        symlink("../../..", r.join("opt")).unwrap();
        let err = check(&fs, "/opt/app/bin", "dpkg").unwrap_err();
        assert!(err.contains("leads out of the root"), "{err}");
        // An absolute target that names the root's own path, then `..`.
        let sneaky = format!("{}/../x", r.display());
        symlink(&sneaky, r.join("srv")).unwrap();
        assert!(check(&fs, "/srv/a", "dpkg").is_err());
        // A loop.
        symlink("loop", r.join("loop")).unwrap();
        assert!(check(&fs, "/loop/a", "dpkg")
            .unwrap_err()
            .contains("more than 40"));
    }

    #[test]
    fn links_inside_the_root_and_missing_paths_are_fine() {
        let (dir, fs) = root();
        let r = dir.path();
        std::fs::create_dir_all(r.join("etc/sv/web")).unwrap();
        std::fs::create_dir_all(r.join("etc/service")).unwrap();
        std::fs::create_dir_all(r.join("usr/bin")).unwrap();
        symlink("../sv/web", r.join("etc/service/web")).unwrap();
        symlink("usr/bin", r.join("bin")).unwrap();
        symlink(r.join("usr"), r.join("usr2")).unwrap();
        for ok in [
            "/etc/service/web/supervise/control",
            "/bin/ls",
            "/usr2/bin",
            "/not/there/yet",
        ] {
            assert_eq!(check(&fs, ok, "tool"), Ok(()), "{ok}");
        }
        // On the real system nothing is checked.
        let real = RootFs::open(Path::new("/")).unwrap();
        assert_eq!(check(&real, "/proc/self/cwd/x", "tool"), Ok(()));
    }
}
