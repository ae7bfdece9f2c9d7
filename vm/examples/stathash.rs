//! The baseline of `bench/vm.sh`: a plain program that only stats and hashes
//! every file under a directory, which is the least a converged run of a
//! file policy has to do. Usage: `stathash DIR`.
//!
//! It opens files as the VM's reads to compare do (`rootfs::read_at`):
//! with `O_NOATIME`, falling back to a plain open on `EPERM` (neither the
//! owner nor `CAP_FOWNER`). On a `relatime` mount the first read of a file
//! after it was written would otherwise write its inode, and whichever of
//! the VM and this floor read the tree first after a change would pay for
//! it (docs/performance.md, "Durable first runs").

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// Opens `path` for reading without touching its access time, as the VM does.
fn open(path: &Path) -> std::io::Result<std::fs::File> {
    let noatime = rustix::fs::OFlags::NOATIME.bits() as i32;
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(noatime)
        .open(path)
    {
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::PERM.raw_os_error()) => {
            std::fs::File::open(path)
        }
        other => other,
    }
}

use sha2::{Digest, Sha256};

fn walk(dir: &Path, count: &mut usize, acc: &mut [u8; 32]) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.is_dir() {
            walk(&path, count, acc)?;
        } else if meta.is_file() {
            let mut bytes = Vec::with_capacity(meta.len() as usize);
            open(&path)?.read_to_end(&mut bytes)?;
            let digest = Sha256::digest(&bytes);
            for (a, b) in acc.iter_mut().zip(digest.iter()) {
                *a ^= b;
            }
            *count += 1;
        }
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: stathash DIR");
        return std::process::ExitCode::from(64);
    };
    let mut count = 0;
    let mut acc = [0u8; 32];
    if let Err(e) = walk(Path::new(&dir), &mut count, &mut acc) {
        eprintln!("stathash: {e}");
        return std::process::ExitCode::FAILURE;
    }
    println!(
        "{count} files, xor of digests {:02x}{:02x}..",
        acc[0], acc[1]
    );
    std::process::ExitCode::SUCCESS
}
