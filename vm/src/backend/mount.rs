//! `mount` promises: a mount point's `/etc/fstab` entry and its live mount,
//! with the states of Puppet and Ansible:
//!
//! | state | fstab entry | live mount |
//! |---|---|---|
//! | `mounted` (default) | present, as promised | mounted, as promised |
//! | `present` | present, as promised | not touched |
//! | `unmounted` | not touched | not mounted |
//! | `absent` | removed | not mounted |
//!
//! - **fstab** is `ROOT/etc/fstab`, edited through [`crate::rootfs`]
//!   (atomic): the first entry for the mount point is rewritten when its
//!   device, type or options differ (its dump and pass fields kept), later
//!   entries for the same mount point are removed, every other line is
//!   kept byte for byte; a missing entry is appended with `0 0`.
//! - **Live** (only on the real system, `--root /`): `findmnt` reads what is
//!   mounted there (and, when the device is written differently, whether
//!   `findmnt --source DEVICE` resolves to the same mount: `UUID=`,
//!   `LABEL=`, `/dev/disk/by-*` links); `mount -t TYPE -o OPTIONS --
//!   DEVICE MOUNT_POINT` mounts (creating a missing mount point directory),
//!   `umount -- MOUNT_POINT` unmounts, `mount -o remount,OPTIONS --
//!   MOUNT_POINT` applies changed options. A different device or type
//!   mounted there is unmounted first. The state is read again afterwards.
//! - **Under `--root DIR`** only fstab is managed: the live mounts are this
//!   machine's, not the root's (`unmounted` is then skipped).

use std::time::Duration;

use converge_format::system::{fstab_field_problem, fstype_problem};

use super::fstab::{self, Entry, Line};
use super::process::{self, Cmd};
use super::{applied, change, perform, sandbox, Step};
use crate::instance::Instance;
use crate::outcome::{Applied, Change, Outcome};
use crate::rootfs::RootFs;

const TIMEOUT: Duration = Duration::from_secs(60);
pub const FSTAB: &str = "/etc/fstab";

/// What a promise wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub mount_point: String,
    pub state: String,
    pub device: Option<String>,
    pub fstype: Option<String>,
    /// Joined with `,`; `defaults` when none was given.
    pub options: String,
}

impl Wanted {
    /// Reads and checks a promise's attributes: nothing reaches fstab or a
    /// tool before every value passed.
    pub fn from(inst: &Instance) -> Result<Wanted, String> {
        let state = inst.str("state").unwrap_or("mounted").to_owned();
        let device = inst.str("device").map(str::to_owned);
        let fstype = inst.str("fstype").map(str::to_owned);
        if matches!(state.as_str(), "mounted" | "present") && (device.is_none() || fstype.is_none())
        {
            return Err(format!(
                "a mount that is `{state}` needs `device` and `fstype`"
            ));
        }
        if let Some(d) = &device {
            if let Some(why) = fstab_field_problem("device", d) {
                return Err(why);
            }
        }
        if let Some(t) = &fstype {
            if let Some(why) = fstype_problem(t) {
                return Err(why);
            }
        }
        let options = inst.list("options").unwrap_or_default();
        for o in options {
            if let Some(why) = fstab_field_problem("option", o) {
                return Err(why);
            }
        }
        Ok(Wanted {
            mount_point: inst.promiser.clone(),
            state,
            device,
            fstype,
            options: if options.is_empty() {
                "defaults".to_owned()
            } else {
                options.join(",")
            },
        })
    }
}

/// A fstab text edited to what `want` says, and what changed; `None` when
/// it already is.
pub fn edit_fstab(text: &str, want: &Wanted) -> Option<(String, Vec<Change>)> {
    let lines = fstab::parse(text);
    let mut out: Vec<Line> = Vec::with_capacity(lines.len().saturating_add(1));
    let mut changes = Vec::new();
    let keep_entry = matches!(want.state.as_str(), "mounted" | "present");
    let manage = keep_entry || want.state == "absent";
    let mut seen = false;
    for line in lines {
        let Line::Entry { entry, raw } = &line else {
            out.push(line);
            continue;
        };
        if !manage || entry.mount_point != want.mount_point {
            out.push(line);
            continue;
        }
        if !keep_entry || seen {
            changes.push(change(FSTAB, raw.clone(), "removed"));
            continue;
        }
        seen = true;
        let desired = Entry {
            device: want.device.clone().unwrap_or_default(),
            mount_point: want.mount_point.clone(),
            fstype: want.fstype.clone().unwrap_or_default(),
            options: want.options.clone(),
            dump: entry.dump.clone(),
            pass: entry.pass.clone(),
        };
        if desired == *entry {
            out.push(line);
        } else {
            let new = desired.line();
            changes.push(change(FSTAB, raw.clone(), new.clone()));
            out.push(Line::Entry {
                entry: desired,
                raw: new,
            });
        }
    }
    if keep_entry && !seen {
        let entry = Entry {
            device: want.device.clone().unwrap_or_default(),
            mount_point: want.mount_point.clone(),
            fstype: want.fstype.clone().unwrap_or_default(),
            options: want.options.clone(),
            dump: "0".to_owned(),
            pass: "0".to_owned(),
        };
        let raw = entry.line();
        changes.push(change(FSTAB, "no entry", raw.clone()));
        out.push(Line::Entry { entry, raw });
    }
    (!changes.is_empty()).then(|| (fstab::render(&out), changes))
}

/// What is mounted at a mount point, from `findmnt -P`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mounted {
    pub source: String,
    pub fstype: String,
    pub options: Vec<String>,
}

pub fn findmnt_command(mount_point: &str) -> Cmd {
    Cmd::new(
        &[
            "findmnt",
            "-n",
            "-P",
            "-o",
            "TARGET,SOURCE,FSTYPE,OPTIONS",
            "--mountpoint",
            mount_point,
        ],
        TIMEOUT,
    )
}

/// Whether `device` (a tag, a link, a name) is what is mounted there.
pub fn same_source_command(device: &str, mount_point: &str) -> Cmd {
    Cmd::new(
        &[
            "findmnt",
            "-n",
            "-o",
            "TARGET",
            "--source",
            device,
            "--mountpoint",
            mount_point,
        ],
        TIMEOUT,
    )
}

pub fn mount_command(want: &Wanted) -> Cmd {
    Cmd::new(
        &[
            "mount",
            "-t",
            want.fstype.as_deref().unwrap_or("auto"),
            "-o",
            &want.options,
            "--",
            want.device.as_deref().unwrap_or_default(),
            &want.mount_point,
        ],
        TIMEOUT,
    )
}

pub fn remount_command(want: &Wanted) -> Cmd {
    Cmd::new(
        &[
            "mount",
            "-o",
            &format!("remount,{}", want.options),
            "--",
            &want.mount_point,
        ],
        TIMEOUT,
    )
}

pub fn umount_command(mount_point: &str) -> Cmd {
    Cmd::new(&["umount", "--", mount_point], TIMEOUT)
}

/// The last mount of `findmnt -n -P` output (the one on top when several
/// are stacked on one mount point); `None` for no output.
pub fn parse_findmnt(text: &str) -> Option<Mounted> {
    let line = text.lines().rfind(|l| !l.trim().is_empty())?;
    let pairs = parse_pairs(line);
    let get = |k: &str| {
        pairs
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    Some(Mounted {
        source: get("SOURCE")?,
        fstype: get("FSTYPE")?,
        options: get("OPTIONS")?
            .split(',')
            .filter(|o| !o.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

/// `KEY="value" KEY2="..."` with `\xHH` escapes (findmnt's `-P` format).
fn parse_pairs(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value: Vec<u8> = Vec::new();
        let bytes = after.as_bytes();
        let mut i = 0usize;
        let mut end = bytes.len();
        while let Some(&b) = bytes.get(i) {
            if b == b'"' {
                end = i;
                break;
            }
            let hex = bytes
                .get(i.saturating_add(2)..i.saturating_add(4))
                .filter(|_| b == b'\\' && bytes.get(i.saturating_add(1)) == Some(&b'x'))
                .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
            match hex {
                Some(c) => {
                    value.push(c);
                    i = i.saturating_add(4);
                }
                None => {
                    value.push(b);
                    i = i.saturating_add(1);
                }
            }
        }
        out.push((
            key.trim().to_owned(),
            String::from_utf8_lossy(&value).into_owned(),
        ));
        rest = after.get(end.saturating_add(1)..).unwrap_or_default();
    }
    out
}

/// Options the kernel shows as they are written, with their opposites: a
/// promised one missing from the live mount means a remount is due. (Other
/// options are normalised by the kernel, `defaults` or `size=10m`, and
/// are compared through fstab only.)
const LIVE_FLAGS: &[(&str, &str)] = &[
    ("ro", "rw"),
    ("rw", "ro"),
    ("noexec", "exec"),
    ("nosuid", "suid"),
    ("nodev", "dev"),
    ("noatime", "relatime"),
];

/// Whether the live options lack a promised flag.
pub fn options_differ(promised: &str, live: &[String]) -> bool {
    promised
        .split(',')
        .any(|o| LIVE_FLAGS.iter().any(|(flag, _)| *flag == o) && !live.iter().any(|l| l == o))
        || LIVE_FLAGS.iter().any(|(flag, opposite)| {
            // `exec` promised, `noexec` live: the opposite is what shows.
            promised.split(',').any(|o| o == *opposite)
                && flag.starts_with("no")
                && live.iter().any(|l| l == flag)
        })
}

/// What is mounted at the mount point now (`None`: nothing).
fn live(want: &Wanted) -> Result<Option<Mounted>, String> {
    let ran = process::run(&findmnt_command(&want.mount_point))?;
    match ran.code {
        Some(0) => Ok(parse_findmnt(&ran.stdout)),
        Some(1) if ran.stdout.trim().is_empty() => Ok(None),
        _ => Err(ran.failure()),
    }
}

fn same_source(want: &Wanted, mounted: &Mounted) -> Result<bool, String> {
    let Some(device) = &want.device else {
        return Ok(true);
    };
    if *device == mounted.source {
        return Ok(true);
    }
    let ran = process::run(&same_source_command(device, &want.mount_point))?;
    Ok(ran.ok() && !ran.stdout.trim().is_empty())
}

/// The live steps that take `now` to what `want` says (`fstab_changed`:
/// the promise rewrote the entry, so changed options are applied).
pub fn live_steps(
    want: &Wanted,
    now: Option<&Mounted>,
    same_device: bool,
    fstab_changed: bool,
) -> Vec<Step> {
    let shown = |m: &Mounted| format!("{} ({})", m.source, m.fstype);
    match (want.state.as_str(), now) {
        ("mounted", None) => vec![Step::new(
            "mount",
            "not mounted",
            format!(
                "{} ({})",
                want.device.as_deref().unwrap_or_default(),
                want.options
            ),
            mount_command(want),
        )],
        ("mounted", Some(m)) => {
            let right = same_device
                && want
                    .fstype
                    .as_deref()
                    .is_none_or(|t| t == "auto" || t == m.fstype);
            if !right {
                vec![
                    Step::new(
                        "mount",
                        shown(m),
                        "unmounted",
                        umount_command(&want.mount_point),
                    ),
                    Step::new(
                        "mount",
                        "not mounted",
                        format!(
                            "{} ({})",
                            want.device.as_deref().unwrap_or_default(),
                            want.options
                        ),
                        mount_command(want),
                    ),
                ]
            } else if fstab_changed || options_differ(&want.options, &m.options) {
                vec![Step::new(
                    "mount options",
                    m.options.join(","),
                    want.options.clone(),
                    remount_command(want),
                )]
            } else {
                Vec::new()
            }
        }
        ("unmounted" | "absent", Some(m)) => vec![Step::new(
            "mount",
            shown(m),
            "not mounted",
            umount_command(&want.mount_point),
        )],
        _ => Vec::new(),
    }
}

pub fn converge(fs: &RootFs, dry_run: bool, inst: &Instance) -> Applied {
    let want = match Wanted::from(inst) {
        Ok(w) => w,
        Err(e) => return Applied::failed(e),
    };
    let mut changes: Vec<Change> = Vec::new();
    let text = match fs.read_file(FSTAB) {
        Ok(bytes) => bytes.unwrap_or_default(),
        Err(e) => return Applied::failed(e.to_string()),
    };
    let Ok(text) = String::from_utf8(text) else {
        return Applied::failed(format!("{FSTAB} is not UTF-8 text; it is left alone"));
    };
    let mut fstab_changed = false;
    if let Some((new, mut edits)) = edit_fstab(&text, &want) {
        if !dry_run {
            // A new fstab is 0644, an existing one keeps its mode and owner.
            let (mode, owner) = match fs.lstat(FSTAB) {
                Ok(Some(m)) => (m.mode, Some((m.uid, m.gid))),
                Ok(None) => (0o644, None),
                Err(e) => return Applied::failed(e.to_string()),
            };
            if let Err(e) = fs.write_file(FSTAB, new.as_bytes(), mode, owner) {
                return Applied::failed(e.to_string());
            }
        }
        fstab_changed = true;
        changes.append(&mut edits);
    }
    if sandbox(fs.path()).is_some() {
        if want.state == "unmounted" {
            return Applied {
                outcome: Outcome::Skipped(
                    "under --root only /etc/fstab is managed; live mounts are this machine's"
                        .to_owned(),
                ),
                changes,
                output: None,
            };
        }
        return Applied::from_changes(changes);
    }
    if want.state == "present" {
        return Applied::from_changes(changes);
    }
    match converge_live(fs, dry_run, &want, fstab_changed) {
        Ok((mut done, log)) => {
            changes.append(&mut done);
            applied(changes, log)
        }
        Err(mut failed) => {
            changes.append(&mut failed.changes);
            Applied { changes, ..failed }
        }
    }
}

/// The live half (the real system only): what `converge` does after
/// fstab on `/`. Public for the test that runs it in a private mount
/// namespace.
pub fn converge_live(
    fs: &RootFs,
    dry_run: bool,
    want: &Wanted,
    fstab_changed: bool,
) -> Result<(Vec<Change>, String), Applied> {
    let now = live(want).map_err(Applied::failed)?;
    let same = match &now {
        Some(m) => same_source(want, m).map_err(Applied::failed)?,
        None => false,
    };
    let steps = live_steps(want, now.as_ref(), same, fstab_changed);
    if steps.is_empty() {
        return Ok((Vec::new(), String::new()));
    }
    let mut changes = Vec::new();
    if want.state == "mounted" && now.is_none() {
        match fs.lstat(&want.mount_point) {
            Ok(Some(_)) => {}
            Ok(None) => {
                if !dry_run {
                    fs.create_dir(&want.mount_point, 0o755)
                        .map_err(|e| Applied::failed(e.to_string()))?;
                }
                changes.push(change("mount point", "absent", "directory mode 0o755"));
            }
            Err(e) => return Err(Applied::failed(e.to_string())),
        }
    }
    let (mut done, log) = perform(dry_run, &steps)?;
    changes.append(&mut done);
    if !dry_run {
        let after = live(want).map_err(Applied::failed)?;
        let ok = match (&after, want.state.as_str()) {
            (None, "unmounted" | "absent") => true,
            (Some(m), "mounted") => same_source(want, m).map_err(Applied::failed)?,
            _ => false,
        };
        if !ok {
            return Err(Applied {
                changes,
                output: Some(log),
                ..Applied::failed(format!(
                    "`{}` is still not {} after the commands ran",
                    want.mount_point, want.state
                ))
            });
        }
    }
    Ok((changes, log))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(state: &str) -> Wanted {
        Wanted {
            mount_point: "/srv/data".into(),
            state: state.into(),
            device: Some("UUID=1234".into()),
            fstype: Some("ext4".into()),
            options: "noatime,nodev".into(),
        }
    }

    #[test]
    fn fstab_entries_are_added_rewritten_deduplicated_and_removed() {
        let text = "# static\nUUID=r / ext4 defaults 0 1\n";
        let (new, changes) = edit_fstab(text, &want("mounted")).unwrap();
        assert_eq!(
            new,
            "# static\nUUID=r / ext4 defaults 0 1\nUUID=1234\t/srv/data\text4\tnoatime,nodev\t0\t0\n"
        );
        assert_eq!(changes.len(), 1);
        assert_eq!(edit_fstab(&new, &want("mounted")), None, "idempotent");
        assert_eq!(edit_fstab(&new, &want("present")), None);
        assert_eq!(
            edit_fstab(&new, &want("unmounted")),
            None,
            "unmounted leaves fstab"
        );
        // A changed entry keeps its dump and pass; a second one goes.
        let text = "/dev/sdb1 /srv/data xfs defaults 1 2\n/dev/sdc1 /srv/data xfs defaults\n";
        let (new, changes) = edit_fstab(text, &want("present")).unwrap();
        assert_eq!(new, "UUID=1234\t/srv/data\text4\tnoatime,nodev\t1\t2\n");
        assert_eq!(changes.len(), 2);
        let (new, _) = edit_fstab(&new, &want("absent")).unwrap();
        assert_eq!(new, "");
        assert_eq!(edit_fstab("", &want("absent")), None);
    }

    #[test]
    fn the_commands_it_would_run() {
        let w = want("mounted");
        assert_eq!(
            mount_command(&w).argv,
            [
                "mount",
                "-t",
                "ext4",
                "-o",
                "noatime,nodev",
                "--",
                "UUID=1234",
                "/srv/data"
            ]
        );
        assert_eq!(
            remount_command(&w).argv,
            ["mount", "-o", "remount,noatime,nodev", "--", "/srv/data"]
        );
        assert_eq!(
            umount_command("/srv/data").argv,
            ["umount", "--", "/srv/data"]
        );
        assert_eq!(
            findmnt_command("/srv/data").argv,
            [
                "findmnt",
                "-n",
                "-P",
                "-o",
                "TARGET,SOURCE,FSTYPE,OPTIONS",
                "--mountpoint",
                "/srv/data"
            ]
        );
        assert_eq!(
            same_source_command("UUID=1234", "/srv/data").argv,
            [
                "findmnt",
                "-n",
                "-o",
                "TARGET",
                "--source",
                "UUID=1234",
                "--mountpoint",
                "/srv/data"
            ]
        );
    }

    #[test]
    fn live_steps_by_state() {
        let m = Mounted {
            source: "/dev/sdb1".into(),
            fstype: "ext4".into(),
            options: vec!["rw".into(), "nodev".into(), "noatime".into()],
        };
        let argv = |steps: Vec<Step>| -> Vec<Vec<String>> {
            steps
                .into_iter()
                .filter_map(|s| s.cmd)
                .map(|c| c.argv)
                .collect()
        };
        assert_eq!(
            argv(live_steps(&want("mounted"), None, false, false)),
            [mount_command(&want("mounted")).argv]
        );
        assert!(live_steps(&want("mounted"), Some(&m), true, false).is_empty());
        assert_eq!(
            argv(live_steps(&want("mounted"), Some(&m), true, true)),
            [remount_command(&want("mounted")).argv]
        );
        assert_eq!(
            argv(live_steps(&want("mounted"), Some(&m), false, false)),
            [
                umount_command("/srv/data").argv,
                mount_command(&want("mounted")).argv
            ]
        );
        assert_eq!(
            argv(live_steps(&want("absent"), Some(&m), true, false)),
            [umount_command("/srv/data").argv]
        );
        assert!(live_steps(&want("unmounted"), None, false, false).is_empty());
        assert!(live_steps(&want("present"), Some(&m), true, true).is_empty());
    }

    #[test]
    fn findmnt_output_and_live_options() {
        let out = "TARGET=\"/srv/my\\x20data\" SOURCE=\"/dev/sdb1\" FSTYPE=\"ext4\" OPTIONS=\"rw,relatime\"\n";
        let m = parse_findmnt(out).unwrap();
        assert_eq!(m.source, "/dev/sdb1");
        assert_eq!(m.options, ["rw", "relatime"]);
        assert_eq!(parse_pairs(out).first().unwrap().1, "/srv/my data");
        assert_eq!(parse_findmnt(""), None);
        assert!(options_differ("noatime,nodev", &m.options));
        assert!(!options_differ("defaults", &m.options));
        let noexec = vec!["rw".to_owned(), "noexec".to_owned()];
        assert!(options_differ("exec", &noexec));
        assert!(!options_differ("noexec", &noexec));
    }

    /// Read-only, against this machine: `findmnt` finds `/` mounted, and
    /// the device findmnt names is recognised as the same source.
    #[test]
    fn findmnt_reads_the_real_root_mount() {
        let w = Wanted {
            mount_point: "/".into(),
            state: "mounted".into(),
            device: None,
            fstype: None,
            options: "defaults".into(),
        };
        let m = live(&w).unwrap().unwrap();
        assert!(!m.fstype.is_empty() && !m.options.is_empty(), "{m:?}");
        let w = Wanted {
            device: Some(m.source.clone()),
            ..w
        };
        assert!(same_source(&w, &m).unwrap());
    }
}
