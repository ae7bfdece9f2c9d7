//! The durable floor of `bench/first_run.sh` (issue 22): the least a
//! program has to do to write N files so that each is, at every instant,
//! its old or its new complete content, and its data is durable before it
//! takes its name (Ts'o's variant (c) in the 2010 dpkg thread): write
//! every temporary (mode set, no fsync), make them durable together, rename
//! each over its target, then fsync each directory once.
//!
//! Usage: `durable_floor DIR N [syncfs|fsync|plain] [STRIDE]`. The files
//! are `DIR/d{i/100}/f{i}` holding `content of file {i}\n` with mode 0644
//! (what the benchmark's policy promises), for every STRIDE-th `i` below N
//! (default 1: all of them). A 1% drift's floor is STRIDE 100 over an
//! existing tree: one file replaced in each of the 100 directories, as the
//! benchmark drifts them, each rename replacing an existing file. `syncfs` (the default) makes
//! the temporaries durable with one `syncfs` of DIR's filesystem; `fsync`
//! syncs each temporary in turn, after all are written, so that the kernel
//! can overlap their writeback; `plain` syncs nothing (the plain floor of
//! a first run: writes without fsync).

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

fn run(dir: &Path, n: usize, sync: Sync, stride: usize) -> std::io::Result<()> {
    let mut staged: Vec<(PathBuf, PathBuf, Option<std::fs::File>)> = Vec::with_capacity(n);
    let mut dirs: Vec<PathBuf> = Vec::new();
    for i in (0..n).step_by(stride) {
        let d = dir.join(format!("d{}", i / 100));
        if dirs.last() != Some(&d) {
            std::fs::create_dir_all(&d)?;
            dirs.push(d.clone());
        }
        let target = d.join(format!("f{i}"));
        let temp = d.join(format!(".floor-tmp.{i}"));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        file.write_all(format!("content of file {i}\n").as_bytes())?;
        // Kept open only to be synced one by one.
        staged.push((temp, target, (sync == Sync::Each).then_some(file)));
    }
    if sync == Sync::Each {
        for file in staged.iter().filter_map(|(_, _, f)| f.as_ref()) {
            file.sync_all()?;
        }
    } else if sync == Sync::Fs {
        rustix::fs::syncfs(std::fs::File::open(dir)?)?;
    }
    for (temp, target, _) in &staged {
        std::fs::rename(temp, target)?;
    }
    for d in dirs.iter().filter(|_| sync != Sync::Nothing) {
        std::fs::File::open(d)?.sync_all()?;
    }
    Ok(())
}

/// How the temporaries and directories are made durable.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sync {
    Fs,
    Each,
    Nothing,
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse().ok())) else {
        eprintln!("usage: durable_floor DIR N [syncfs|fsync|plain] [STRIDE]");
        return std::process::ExitCode::from(64);
    };
    let sync = match args.get(3).map(String::as_str) {
        None | Some("syncfs") => Sync::Fs,
        Some("fsync") => Sync::Each,
        Some("plain") => Sync::Nothing,
        Some(other) => {
            eprintln!("durable_floor: unknown mode `{other}` (syncfs, fsync or plain)");
            return std::process::ExitCode::from(64);
        }
    };
    let stride = match args.get(4).map(|s| s.parse::<usize>()) {
        None => 1,
        Some(Ok(stride)) if stride > 0 => stride,
        Some(_) => {
            eprintln!("durable_floor: STRIDE must be a whole number above 0");
            return std::process::ExitCode::from(64);
        }
    };
    if let Err(e) = run(Path::new(dir), n, sync, stride) {
        eprintln!("durable_floor: {e}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}
