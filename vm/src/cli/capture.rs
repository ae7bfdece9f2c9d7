//! `policyvm capture TYPE NAME... [--root DIR] [--out DIR] [--recurse]
//! [--with-passwords]`: prints promises for the current state of the
//! named objects ([`crate::capture`]).
//!
//! Exit codes ([`super::exit`]): 0 printed; 64 a TYPE that is not one of
//! the list, a NAME that no promise can have (a relative path, a name
//! with `/`, not UTF-8), or content that needs `--out` without one; 66 a
//! NAME that does not exist, or that cannot be read or described (a FIFO,
//! a name inside a directory that is not UTF-8); 73 `--out` cannot be
//! written. On any failure nothing is printed, and no file of `--out` is
//! left half-written (each is written atomically; the ones this capture
//! created are removed again when a later one fails).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::exit::{CANT_CREATE, NO_INPUT, USAGE};
use super::out;
use crate::capture::{self, print, CaptureError, Kind, Options, SourceFile, INLINE_MAX};
use crate::rootfs::RootFs;

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// What to capture: `file` takes whatever is at each path (a file, a
    /// directory or a link); `directory` and `link` insist on that kind.
    #[arg(value_enum, value_name = "TYPE")]
    kind: CaptureType,
    /// The objects: absolute paths for file, directory and link; names for
    /// package, service, user and group.
    #[arg(required = true, value_name = "NAME")]
    names: Vec<OsString>,
    /// The system image to read (a sandbox, an image, a container root).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// An existing directory where file contents that are not inline go
    /// (`files/...`, named by `source` relative to the printed policy):
    /// save the printed policy in this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Directories: also capture everything below them.
    #[arg(long)]
    recurse: bool,
    /// Users: print the password hash from the root's /etc/shadow (left
    /// out by default, with a comment).
    #[arg(long)]
    with_passwords: bool,
}

/// The resource kinds, as the command line names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CaptureType {
    File,
    Directory,
    Link,
    Package,
    Service,
    User,
    Group,
}

impl CaptureType {
    fn kind(self) -> Kind {
        match self {
            CaptureType::File => Kind::File,
            CaptureType::Directory => Kind::Directory,
            CaptureType::Link => Kind::Link,
            CaptureType::Package => Kind::Package,
            CaptureType::Service => Kind::Service,
            CaptureType::User => Kind::User,
            CaptureType::Group => Kind::Group,
        }
    }
}

fn fail(code: u8, message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}

pub fn capture(args: CaptureArgs) -> ExitCode {
    let mut names = Vec::with_capacity(args.names.len());
    for name in &args.names {
        match name.to_str() {
            Some(n) => names.push(n.to_owned()),
            None => {
                return fail(
                    USAGE,
                    format!(
                        "`{}` is not UTF-8: policy names and paths are UTF-8 text, so it cannot be captured",
                        crate::rootfs::escape_name(name.as_encoded_bytes())
                    ),
                )
            }
        }
    }
    // The tools (`dpkg-query --root`, `systemctl --root`, `sv`) are given
    // the root as an absolute path, whatever the working directory.
    let root = match std::path::absolute(&args.root) {
        Ok(r) => r,
        Err(e) => {
            return fail(
                NO_INPUT,
                format!("cannot use the root `{}`: {e}", args.root.display()),
            )
        }
    };
    let opts = Options {
        root: root.clone(),
        recurse: args.recurse,
        with_passwords: args.with_passwords,
    };
    let captured = match capture::capture(args.kind.kind(), &names, &opts) {
        Ok(c) => c,
        Err(e @ CaptureError::BadName(_)) => return fail(USAGE, e),
        Err(e @ (CaptureError::NotFound(_) | CaptureError::Unreadable(_))) => {
            return fail(NO_INPUT, e)
        }
    };
    let text = match print::policy(&capture::header(&root), &captured.promises) {
        Ok(t) => t,
        Err(why) => return fail(NO_INPUT, format!("cannot print the capture: {why}")),
    };
    if let Some(first) = captured.sources.first() {
        let Some(dir) = &args.out else {
            return fail(
                USAGE,
                format!(
                    "the content of `{}` is binary or larger than {INLINE_MAX} bytes: it goes to a \
                     `source` file; give --out DIR (the directory the printed policy is saved in)",
                    first.of.escape_debug()
                ),
            );
        };
        if let Err(why) = write_sources(dir, &captured.sources) {
            return fail(CANT_CREATE, why);
        }
    }
    out(text);
    ExitCode::SUCCESS
}

/// Writes every source file under `dir`, each atomically (through
/// [`RootFs`], as the VM writes every file). When one fails, the ones this
/// call created are removed again, so a failed capture leaves `dir` as
/// it found it, but for files it replaced with the same name.
fn write_sources(dir: &std::path::Path, sources: &[SourceFile]) -> Result<(), String> {
    let fs = RootFs::open(dir).map_err(|e| {
        format!(
            "--out `{}` cannot be used: {e} (it must be an existing directory)",
            dir.display()
        )
    })?;
    let mut created: Vec<String> = Vec::new();
    for source in sources {
        let path = format!("/{}", source.name);
        let result = fs.lstat(&path).and_then(|before| {
            let mode = if source.world_readable { 0o644 } else { 0o600 };
            fs.write_file(&path, &source.content, mode, None)?;
            if before.is_none() {
                created.push(path.clone());
            }
            Ok(())
        });
        if let Err(e) = result {
            for path in created.iter().rev() {
                let _ = fs.remove(path);
            }
            return Err(format!(
                "cannot write the content of `{}` to `{}` under --out `{}`: {e}",
                source.of.escape_debug(),
                source.name,
                dir.display()
            ));
        }
    }
    Ok(())
}
