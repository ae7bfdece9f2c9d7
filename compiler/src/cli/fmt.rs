//! `policyc fmt [--check] FILES...`: rewrite policy files in the canonical
//! layout (see `crate::fmt`), or with `--check` list the ones that are not.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::atomic::{write_atomically, Existing};
use super::{exit, inputs, EXIT_ERRORS};
use crate::fmt::format;
use crate::render::render_human;
use crate::source::SourceDb;

/// The arguments of `policyc fmt`.
#[derive(Debug, Args)]
pub struct FmtArgs {
    /// Policy files, or directories to search for `*.policy` files.
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,

    /// Change nothing; list the files that would change and exit 1 if any.
    #[arg(long)]
    check: bool,
}

/// Formats each file on its own: a file that cannot be formatted (syntax
/// errors) is reported and left untouched, and the others are still done.
/// Exits 1 when a file was refused or, under `--check`, would change; 66
/// when a file cannot be read, 73 when one cannot be written.
pub fn run(args: FmtArgs) -> ExitCode {
    let paths = match inputs::policy_files(&args.files) {
        Ok(paths) => paths.into_iter().map(|(path, _)| path).collect::<Vec<_>>(),
        Err(err) => return super::fail(err),
    };
    let mut failed = false;
    let mut read_failed = false;
    let mut write_failed = false;
    let mut changed = 0;
    for path in &paths {
        // A link is not formatted through: the rewrite would replace the
        // link by a file (or, before, write wherever it pointed).
        let mode = match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_file() => meta.permissions().mode() & 0o7777,
            Ok(_) => {
                eprintln!(
                    "error: `{}` is not a regular file (a symbolic link?); format the file itself",
                    path.display()
                );
                read_failed = true;
                continue;
            }
            Err(err) => {
                eprintln!("error: cannot read `{}`: {err}", path.display());
                read_failed = true;
                continue;
            }
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) => {
                eprintln!("error: cannot read `{}`: {err}", path.display());
                read_failed = true;
                continue;
            }
        };
        let formatted = match format(&text) {
            Ok(formatted) => formatted,
            Err(err) => {
                eprintln!("error: `{}` {err}; left unchanged", path.display());
                let diagnostics = err.diagnostics();
                if !diagnostics.is_empty() {
                    let mut db = SourceDb::new();
                    let id = db.add(path.clone(), text);
                    let diagnostics: Vec<_> = diagnostics
                        .into_iter()
                        .map(|mut d| {
                            for label in &mut d.labels {
                                label.span.file = id;
                            }
                            d
                        })
                        .collect();
                    eprint!("{}", render_human(&db, &diagnostics, false));
                }
                failed = true;
                continue;
            }
        };
        if formatted == text {
            continue;
        }
        changed += 1;
        if args.check {
            println!("{}", path.display());
        } else if let Err(err) =
            write_atomically(path, formatted.as_bytes(), mode, Existing::Replace)
        {
            eprintln!("error: cannot write `{}`: {err}", path.display());
            write_failed = true;
        }
    }
    if args.check && changed > 0 {
        eprintln!(
            "{changed} file{} would be reformatted (run `policyc fmt` on {})",
            if changed == 1 { "" } else { "s" },
            if changed == 1 { "it" } else { "them" }
        );
    }
    if read_failed {
        ExitCode::from(exit::NO_INPUT)
    } else if write_failed {
        ExitCode::from(exit::CANT_CREATE)
    } else if failed || (args.check && changed > 0) {
        ExitCode::from(EXIT_ERRORS)
    } else {
        ExitCode::SUCCESS
    }
}
