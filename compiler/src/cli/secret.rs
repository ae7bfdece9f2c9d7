//! `policyc secret add | edit | rekey`: writing the age-encrypted files
//! that `secret("secrets/NAME.age")` reads (docs/secrets.md), like sops or
//! ansible-vault, without leaving the plaintext anywhere it would outlive
//! the command.
//!
//! Secrets are encrypted to the **builders** (whoever runs `policyc build
//! --identity`), not to hosts: the build seals each one to its hosts. age
//! does not record recipients in a file, so they are kept beside it:
//! `secrets/NAME.age.recipients` when `add` was given recipients, else the
//! directory's `secrets/.recipients`; `edit` and `rekey` encrypt to the
//! same list again. The plaintext comes from standard input (never argv,
//! which other users can read in `ps`), or from an editor working on a
//! file in a fresh 0700 directory that is overwritten and removed after.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr as _;

use clap::{Args, Subcommand};
use zeroize::Zeroizing;

use super::atomic::{write_atomically, Existing};
use super::{exit, fail_with, out};
use crate::bundle::secrets::{encrypt_to, Identities};
use crate::sema::check::is_secret_name;

/// The directory of secrets, in the policy tree.
pub const SECRETS_DIR: &str = "secrets";
/// The recipients every secret of the directory is encrypted to, unless it
/// has its own list.
pub const RECIPIENTS_FILE: &str = ".recipients";

#[derive(Debug, Args)]
pub struct SecretArgs {
    #[command(subcommand)]
    command: SecretCommand,
}

#[derive(Debug, Subcommand)]
enum SecretCommand {
    /// Encrypt standard input into `secrets/NAME.age` (one trailing line
    /// break removed).
    Add(AddArgs),
    /// Decrypt `secrets/NAME.age` into a private temporary file, run
    /// `$VISUAL` or `$EDITOR` on it, and encrypt the result again to the
    /// same recipients.
    Edit(EditArgs),
    /// Encrypt secrets again to their recipients as they are now (after a
    /// builder was added to or removed from `secrets/.recipients`).
    Rekey(RekeyArgs),
    /// Generate a builder's age identity (mode 0600) and print its
    /// recipient, to add to `secrets/.recipients`.
    Keygen(KeygenArgs),
}

#[derive(Debug, Args)]
struct KeygenArgs {
    /// Where to write the identity (refused if it exists).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// Where the secrets directory is.
#[derive(Debug, Args)]
struct DirArgs {
    /// The policy tree whose `secrets/` directory holds the secrets.
    #[arg(long, value_name = "DIR", default_value = ".")]
    policy_root: PathBuf,
}

#[derive(Debug, Args)]
struct AddArgs {
    /// The secret's name: `secrets/NAME.age`, shown as `<secret NAME>`.
    name: String,
    /// An age recipient (`age1...`) to encrypt to; may be repeated.
    #[arg(long = "recipient", value_name = "age1...")]
    recipients: Vec<String>,
    /// A file of recipients, one per line (`#` comments).
    #[arg(long, value_name = "FILE")]
    recipients_file: Option<PathBuf>,
    /// Replace an existing secret of this name.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    dir: DirArgs,
}

#[derive(Debug, Args)]
struct EditArgs {
    name: String,
    /// An age identity file that decrypts the secret; may be repeated.
    #[arg(long = "identity", value_name = "FILE", required = true)]
    identities: Vec<PathBuf>,
    #[command(flatten)]
    dir: DirArgs,
}

#[derive(Debug, Args)]
struct RekeyArgs {
    /// The secrets to re-encrypt; all of `secrets/` without names.
    names: Vec<String>,
    #[arg(long = "identity", value_name = "FILE", required = true)]
    identities: Vec<PathBuf>,
    #[command(flatten)]
    dir: DirArgs,
}

pub fn run(args: SecretArgs) -> ExitCode {
    let result = match args.command {
        SecretCommand::Add(a) => add(&a),
        SecretCommand::Edit(a) => edit(&a),
        SecretCommand::Rekey(a) => rekey(&a),
        SecretCommand::Keygen(a) => keygen(&a),
    };
    match result {
        Ok(message) => {
            out(message);
            ExitCode::SUCCESS
        }
        Err((code, message)) => fail_with(code, message),
    }
}

type Failure = (u8, String);

fn usage(message: String) -> Failure {
    (exit::USAGE, message)
}

fn secret_path(dir: &DirArgs, name: &str) -> Result<PathBuf, Failure> {
    if !is_secret_name(name) || name.starts_with('.') {
        return Err(usage(format!(
            "`{name}` cannot name a secret: use 1 to 128 letters, digits, `_`, `-` or `.`, not starting with `.`"
        )));
    }
    Ok(dir
        .policy_root
        .join(SECRETS_DIR)
        .join(format!("{name}.age")))
}

/// The recipients file of one secret file.
fn own_recipients(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".recipients");
    PathBuf::from(name)
}

/// Parses a recipients file: one `age1...` per line, blank lines and `#`
/// comments ignored.
fn parse_recipients(text: &str, from: &str) -> Result<Vec<String>, Failure> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        check_recipient(line).map_err(|e| usage(format!("{from}:{}: {e}", n + 1)))?;
        out.push(line.to_owned());
    }
    Ok(out)
}

fn check_recipient(text: &str) -> Result<age::x25519::Recipient, String> {
    age::x25519::Recipient::from_str(text)
        .map_err(|e| format!("`{text}` is not an age X25519 recipient (age1...): {e}"))
}

fn read_recipients_file(path: &Path) -> Result<Vec<String>, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        (
            exit::NO_INPUT,
            format!("cannot read `{}`: {e}", path.display()),
        )
    })?;
    parse_recipients(&text, &path.display().to_string())
}

/// The recipients `path` is (to be) encrypted to: its own list, else the
/// directory's.
fn recipients_of(path: &Path) -> Result<Vec<String>, Failure> {
    let own = own_recipients(path);
    let list = if own.exists() {
        read_recipients_file(&own)?
    } else {
        let shared = path.with_file_name(RECIPIENTS_FILE);
        if !shared.exists() {
            return Err(usage(format!(
                "no recipients for `{}`: write the builders' age recipients (age1..., one a line) into `{}`, or pass `--recipient`",
                path.display(),
                shared.display()
            )));
        }
        read_recipients_file(&shared)?
    };
    if list.is_empty() {
        return Err(usage(format!("no recipients for `{}`", path.display())));
    }
    Ok(list)
}

/// Encrypts `plain` to `recipients` and writes it to `path` atomically.
fn write_secret(
    path: &Path,
    recipients: &[String],
    plain: &[u8],
    existing: Existing,
) -> Result<(), Failure> {
    let parsed: Vec<age::x25519::Recipient> = recipients
        .iter()
        .map(|r| check_recipient(r).map_err(usage))
        .collect::<Result<_, _>>()?;
    let ciphertext = encrypt_to(parsed.iter().map(|r| r as &dyn age::Recipient), plain)
        .map_err(|e| (exit::IO_ERROR, format!("cannot encrypt: {e}")))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| {
            (
                exit::CANT_CREATE,
                format!("cannot create `{}`: {e}", dir.display()),
            )
        })?;
    }
    write_atomically(path, &ciphertext, 0o644, existing).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            usage(format!(
                "`{}` exists: use `policyc secret edit` to change it, or `--force` to replace it",
                path.display()
            ))
        } else {
            (
                exit::CANT_CREATE,
                format!("cannot write `{}`: {e}", path.display()),
            )
        }
    })
}

fn add(args: &AddArgs) -> Result<String, Failure> {
    let path = secret_path(&args.dir, &args.name)?;
    let mut recipients = Vec::new();
    for r in &args.recipients {
        check_recipient(r).map_err(usage)?;
        recipients.push(r.clone());
    }
    if let Some(file) = &args.recipients_file {
        recipients.extend(read_recipients_file(file)?);
    }
    let own = !recipients.is_empty();
    if !own {
        recipients = recipients_of(&path)?;
    }
    let mut plain = Zeroizing::new(Vec::new());
    std::io::stdin().read_to_end(&mut plain).map_err(|e| {
        (
            exit::NO_INPUT,
            format!("cannot read the secret from standard input: {e}"),
        )
    })?;
    if plain.ends_with(b"\n") {
        plain.pop();
        if plain.ends_with(b"\r") {
            plain.pop();
        }
    }
    if std::str::from_utf8(&plain).is_err() {
        return Err(usage(
            "the secret is not UTF-8 text; base64-encode binary secrets".to_owned(),
        ));
    }
    let existing = if args.force {
        Existing::Replace
    } else {
        Existing::Keep
    };
    write_secret(&path, &recipients, &plain, existing)?;
    if own {
        let list = format!(
            "# the recipients of {}.age (policyc secret edit/rekey encrypt to these)\n{}\n",
            args.name,
            recipients.join("\n")
        );
        write_atomically(
            &own_recipients(&path),
            list.as_bytes(),
            0o644,
            Existing::Replace,
        )
        .map_err(|e| {
            (
                exit::CANT_CREATE,
                format!("cannot write the recipients: {e}"),
            )
        })?;
    }
    Ok(format!(
        "wrote {} ({} bytes of secret, encrypted to {} recipient{}); use it with secret(\"{SECRETS_DIR}/{}.age\")\n",
        path.display(),
        plain.len(),
        recipients.len(),
        if recipients.len() == 1 { "" } else { "s" },
        args.name
    ))
}

fn decrypt_file(path: &Path, identities: &Identities) -> Result<Zeroizing<Vec<u8>>, Failure> {
    let ciphertext = std::fs::read(path).map_err(|e| {
        (
            exit::NO_INPUT,
            format!("cannot read `{}`: {e}", path.display()),
        )
    })?;
    identities.decrypt(&ciphertext).map_err(|e| {
        (
            exit::ERRORS,
            format!("cannot decrypt `{}`: {e}", path.display()),
        )
    })
}

fn read_identities(paths: &[PathBuf]) -> Result<Identities, Failure> {
    Identities::read(paths).map_err(|e| (exit::NO_INPUT, e))
}

fn edit(args: &EditArgs) -> Result<String, Failure> {
    let path = secret_path(&args.dir, &args.name)?;
    let identities = read_identities(&args.identities)?;
    let recipients = recipients_of(&path)?;
    let plain = decrypt_file(&path, &identities)?;
    let editor = std::env::var("VISUAL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .or_else(|| {
            std::env::var("EDITOR")
                .ok()
                .filter(|v| !v.trim().is_empty())
        })
        .ok_or_else(|| usage("set $VISUAL or $EDITOR to the editor to run".to_owned()))?;
    // A fresh private directory (0700): no other user can open the file.
    let dir = tempfile::Builder::new()
        .prefix("policyc-secret-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(|e| {
            (
                exit::CANT_CREATE,
                format!("cannot create a private directory: {e}"),
            )
        })?;
    let file = dir.path().join(&args.name);
    let write_plain = |bytes: &[u8]| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&file)?;
        f.write_all(bytes)?;
        f.sync_all()
    };
    write_plain(&plain).map_err(|e| {
        (
            exit::CANT_CREATE,
            format!("cannot write the plaintext: {e}"),
        )
    })?;
    let mut words = editor.split_whitespace();
    let program = words.next().unwrap_or("vi");
    let status = std::process::Command::new(program)
        .args(words)
        .arg(&file)
        .status();
    let edited = std::fs::read(&file).map(Zeroizing::new);
    // Overwrite the plaintext before the directory goes.
    let len = edited
        .as_ref()
        .map_or(plain.len(), |e| e.len())
        .max(plain.len());
    let _ = write_plain(&vec![0u8; len]);
    drop(dir);
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            return Err((
                exit::ERRORS,
                format!(
                    "the editor `{editor}` exited with {s}; `{}` is unchanged",
                    path.display()
                ),
            ))
        }
        Err(e) => {
            return Err((
                exit::UNAVAILABLE,
                format!("cannot run the editor `{editor}`: {e}"),
            ))
        }
    }
    let edited = edited.map_err(|e| {
        (
            exit::NO_INPUT,
            format!("cannot read the edited secret: {e}"),
        )
    })?;
    if std::str::from_utf8(&edited).is_err() {
        return Err(usage(format!(
            "the edited secret is not UTF-8 text; `{}` is unchanged",
            path.display()
        )));
    }
    if *edited == *plain {
        return Ok(format!("{} unchanged\n", path.display()));
    }
    write_secret(&path, &recipients, &edited, Existing::Replace)?;
    Ok(format!(
        "wrote {} (encrypted to {} recipient{})\n",
        path.display(),
        recipients.len(),
        if recipients.len() == 1 { "" } else { "s" }
    ))
}

fn rekey(args: &RekeyArgs) -> Result<String, Failure> {
    let identities = read_identities(&args.identities)?;
    let dir = args.dir.policy_root.join(SECRETS_DIR);
    let paths: Vec<PathBuf> = if args.names.is_empty() {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| {
                (
                    exit::NO_INPUT,
                    format!("cannot list `{}`: {e}", dir.display()),
                )
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "age"))
            .collect();
        found.sort();
        found
    } else {
        args.names
            .iter()
            .map(|n| secret_path(&args.dir, n))
            .collect::<Result<_, _>>()?
    };
    let mut done = Vec::new();
    for path in &paths {
        let recipients = recipients_of(path)?;
        let plain = decrypt_file(path, &identities)?;
        write_secret(path, &recipients, &plain, Existing::Replace)?;
        done.push(path.display().to_string());
    }
    Ok(format!(
        "re-encrypted {} secret{}: {}\n",
        done.len(),
        if done.len() == 1 { "" } else { "s" },
        done.join(", ")
    ))
}

fn keygen(args: &KeygenArgs) -> Result<String, Failure> {
    use age::secrecy::ExposeSecret as _;
    let identity = age::x25519::Identity::generate();
    let recipient = identity.to_public().to_string();
    let text = Zeroizing::new(format!(
        "# policyc secret keygen: a builder's identity; its recipient is\n# {recipient}\n{}\n",
        identity.to_string().expose_secret()
    ));
    write_atomically(&args.out, text.as_bytes(), 0o600, Existing::Keep).map_err(|e| {
        (
            exit::CANT_CREATE,
            format!("cannot write `{}`: {e}", args.out.display()),
        )
    })?;
    Ok(format!(
        "wrote {} (secret, keep it safe); its recipient:\n{recipient}\n",
        args.out.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipients_files_take_one_recipient_a_line_and_say_where_one_is_wrong() {
        let good = age::x25519::Identity::generate().to_public().to_string();
        let text = format!("# builders\n\n{good}\n  {good}  \n");
        assert_eq!(
            parse_recipients(&text, "r").unwrap(),
            vec![good.clone(), good.clone()]
        );
        let (code, message) =
            parse_recipients(&format!("{good}\nage1nope\n"), "secrets/.recipients").unwrap_err();
        assert_eq!(code, exit::USAGE);
        assert!(message.starts_with("secrets/.recipients:2: "), "{message}");
    }

    #[test]
    fn secret_names_are_plain_file_names() {
        let dir = DirArgs {
            policy_root: PathBuf::from("site"),
        };
        assert_eq!(
            secret_path(&dir, "db_password").unwrap(),
            PathBuf::from("site/secrets/db_password.age")
        );
        for bad in ["../x", "a/b", ".recipients", "", "a b"] {
            assert!(secret_path(&dir, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_secret_of_its_own_keeps_its_recipients_beside_it() {
        assert_eq!(
            own_recipients(Path::new("secrets/db.age")),
            PathBuf::from("secrets/db.age.recipients")
        );
    }
}
