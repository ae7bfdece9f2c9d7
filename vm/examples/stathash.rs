//! The baseline of `bench/vm.sh`: a plain program that only stats and hashes
//! every file under a directory, which is the least a converged run of a
//! file policy has to do. Usage: `stathash DIR`.

use std::io::Read as _;
use std::path::Path;

use sha2::{Digest, Sha256};

fn walk(dir: &Path, count: &mut usize, acc: &mut [u8; 32]) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.is_dir() {
            walk(&path, count, acc)?;
        } else if meta.is_file() {
            let mut bytes = Vec::with_capacity(meta.len() as usize);
            std::fs::File::open(&path)?.read_to_end(&mut bytes)?;
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
