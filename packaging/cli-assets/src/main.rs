//! `converge-cli-assets OUTDIR`: writes the man pages and shell completions
//! of `policyc`, `policyvm` and `converge-collector`, generated from their
//! clap definitions (the one description of each command line), for the
//! Debian packages to install (docs/operations.md, "Packages"):
//!
//! ```text
//! OUTDIR/man/policyc.1, policyc-check.1, ...   one page per (sub)command
//! OUTDIR/bash/policyc                          /usr/share/bash-completion/completions/
//! OUTDIR/zsh/_policyc                          /usr/share/zsh/vendor-completions/
//! OUTDIR/fish/policyc.fish                     /usr/share/fish/vendor_completions.d/
//! ```
//!
//! Generated at package time into `target/` (never committed), so they
//! cannot go stale. A separate program rather than a hidden subcommand:
//! the binaries stay free of generator code, and `policyc` of the HTTP
//! stack the collector's definitions bring (tests/architecture.rs).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::CommandFactory as _;
use clap_complete::Shell;

/// The command lines that get pages and completions.
pub fn commands() -> Vec<clap::Command> {
    vec![
        converge_compiler::cli::Cli::command(),
        converge_vm::cli::Cli::command(),
        converge_collector::cli::Cli::command(),
    ]
}

/// The files for one shell: its directory and the file name of `bin`'s
/// completions in it (the names the Debian directories expect).
fn completion_file(shell: Shell, bin: &str) -> (&'static str, String) {
    match shell {
        Shell::Zsh => ("zsh", format!("_{bin}")),
        Shell::Fish => ("fish", format!("{bin}.fish")),
        _ => ("bash", bin.to_owned()),
    }
}

/// Writes every page and completion file under `out`; returns the files.
pub fn generate(out: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let man = out.join("man");
    std::fs::create_dir_all(&man)?;
    for cmd in commands() {
        let bin = cmd.get_name().to_owned();
        written.extend(man_pages(cmd.clone(), &bin, &man)?);
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let (dir, file) = completion_file(shell, &bin);
            let dir = out.join(dir);
            std::fs::create_dir_all(&dir)?;
            let mut text = Vec::new();
            clap_complete::generate(shell, &mut cmd.clone(), &bin, &mut text);
            let path = dir.join(file);
            std::fs::write(&path, text)?;
            written.push(path);
        }
    }
    Ok(written)
}

/// `NAME.1` for the command and `NAME-SUB.1` for each visible subcommand
/// (as git's pages are named), each listing its options.
fn man_pages(cmd: clap::Command, name: &str, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut cmd = cmd.name(name.to_owned());
    cmd.build();
    let mut written = Vec::new();
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut page)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, page)?;
    written.push(path);
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let sub_name = format!("{name}-{}", sub.get_name());
        written.extend(man_pages(sub.clone(), &sub_name, dir)?);
    }
    Ok(written)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out] = args.as_slice() else {
        eprintln!("usage: converge-cli-assets OUTDIR");
        return ExitCode::from(64);
    };
    match generate(Path::new(out)) {
        Ok(files) => {
            println!("wrote {} files under {out}", files.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot write under `{out}`: {e}");
            ExitCode::from(73)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    /// Every visible subcommand of every binary has its page, and each
    /// shell's completions offer it; an option added to a subcommand shows
    /// up in its page and completions with nothing to update by hand.
    #[test]
    fn every_subcommand_has_a_page_and_completions() {
        let dir = tempfile::tempdir().unwrap();
        generate(dir.path()).unwrap();
        let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).unwrap();
        let mut subcommands = 0;
        for mut cmd in commands() {
            cmd.build();
            let bin = cmd.get_name().to_owned();
            assert!(read(&format!("man/{bin}.1")).contains(".TH"), "{bin}");
            let completions = [
                read(&format!("bash/{bin}")),
                read(&format!("zsh/_{bin}")),
                read(&format!("fish/{bin}.fish")),
            ];
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                subcommands += 1;
                let page = read(&format!("man/{bin}-{}.1", sub.get_name()));
                for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
                    if let Some(long) = arg.get_long() {
                        assert!(
                            page.contains(&format!("\\-\\-{}", long.replace('-', "\\-"))),
                            "{bin}-{}.1 lacks --{long}",
                            sub.get_name()
                        );
                    }
                }
                for text in &completions {
                    assert!(text.contains(sub.get_name()), "{bin}: {}", sub.get_name());
                }
            }
        }
        assert!(subcommands >= 15, "only {subcommands} subcommands seen");
        // The options of the newest subcommand, as an example.
        assert!(read("man/policyvm-bootstrap.1").contains("fingerprint"));
        assert!(read("fish/policyvm.fish").contains("trust-fingerprint"));
    }
}
