//! Staged rollout for `policyc publish` (docs/rollout.md): who takes a new
//! release (`--rollout 5%`, `hosts=a,b`, `groups=canary`), the publish
//! directory's releases by serial, and the stamps of `--promote` and
//! `--halt`.
//!
//! The publish directory (`PUBDIR`) of bundle `NAME`:
//!
//! ```text
//! NAME.stamp                    the stamp in force (plain or a rollout's)
//! NAME.bundle                   the bundle of the stamp's `serial` line
//! NAME.bundles/SERIAL.bundle    the releases a rollout names, by serial
//! NAME.bundles/rollout.stamp    the last rollout's stamp, for `--halt`
//!                               after `--promote 100%`
//! keys/KEYID.pub                the signing key's public half
//! ```
//!
//! `NAME.stamp` and `NAME.bundle` keep their meaning, so readers of the
//! layout before rollouts (older agents, mirrors) still work with a plain
//! stamp; a rollout's stamp (`converge-stamp 2`) sends its hosts to the
//! by-serial files, which never change once written.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::suggest::did_you_mean;
use converge_format::inventory::{is_host_name, Inventory};
use converge_format::stamp::rollout::{Release, Rollout, Who};
use converge_format::stamp::Stamp;

/// Who `--rollout` or `--promote` names, as typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// 0 to 100: 100 is everyone (a plain stamp).
    Percent(u8),
    Hosts(Vec<String>),
    Groups(Vec<String>),
}

/// Reads `5%`, `hosts=a,b` or `groups=canary,eu` (the clap value parser
/// of `--rollout` and `--promote`).
pub fn parse_target(text: &str) -> Result<Target, String> {
    if let Some(number) = text.strip_suffix('%') {
        return match number.parse::<u8>() {
            Ok(p) if p <= 100 => Ok(Target::Percent(p)),
            _ => Err(format!(
                "`{text}`: a percentage goes from 0% to 100% (a whole number)"
            )),
        };
    }
    let list = |rest: &str, what: &str| -> Result<Vec<String>, String> {
        let names: BTreeSet<String> = rest.split(',').map(str::to_owned).collect();
        if let Some(bad) = names.iter().find(|n| !is_host_name(n)) {
            return Err(format!(
                "`{text}`: {bad:?} is not a {what} name (letters, digits, `-`, `.`, `_`)"
            ));
        }
        Ok(names.into_iter().collect())
    };
    if let Some(rest) = text.strip_prefix("hosts=") {
        return list(rest, "host").map(Target::Hosts);
    }
    if let Some(rest) = text.strip_prefix("groups=") {
        return list(rest, "group").map(Target::Groups);
    }
    Err(format!(
        "`{text}`: say who takes the new serial: a percentage (`5%`), hosts (`hosts=web-01,web-02`) \
         or inventory groups (`groups=canary`)"
    ))
}

/// The stamp's `rollout` value for `target`: `None` is everyone (100%).
/// Groups become their hosts' names, from `inventory`, so agents need no
/// inventory; a name the inventory does not know is refused with the
/// closest one it does.
pub fn resolve(target: &Target, inventory: Option<&Inventory>) -> Result<Option<Who>, String> {
    let names = |inv: &Inventory| -> Vec<String> {
        inv.hosts.iter().map(|h| h.name.get_ref().clone()).collect()
    };
    match target {
        Target::Percent(100) => Ok(None),
        Target::Percent(p) => Ok(Some(Who::Percent(*p))),
        Target::Hosts(hosts) => {
            if let Some(inventory) = inventory {
                let known = names(inventory);
                for host in hosts {
                    if !known.contains(host) {
                        return Err(unknown("host", host, known.iter().map(String::as_str)));
                    }
                }
            }
            Ok(Some(Who::Hosts(hosts.clone())))
        }
        Target::Groups(groups) => {
            let inventory = inventory.ok_or_else(|| {
                "`groups=` needs the inventory to find the groups' hosts: pass `--inventory FILE` \
                 (or keep `inventory.toml` beside the policy)"
                    .to_owned()
            })?;
            let known: BTreeSet<&str> = inventory
                .hosts
                .iter()
                .flat_map(|h| h.groups.iter().map(|g| g.get_ref().as_str()))
                .collect();
            for group in groups {
                if !known.contains(group.as_str()) {
                    return Err(unknown("group", group, known.iter().copied()));
                }
            }
            let hosts: BTreeSet<String> = inventory
                .hosts
                .iter()
                .filter(|h| !h.revoked)
                .filter(|h| h.groups.iter().any(|g| groups.contains(g.get_ref())))
                .map(|h| h.name.get_ref().clone())
                .collect();
            if hosts.is_empty() {
                return Err(format!(
                    "the groups {} have no host that is not revoked",
                    groups.join(", ")
                ));
            }
            Ok(Some(Who::Hosts(hosts.into_iter().collect())))
        }
    }
}

fn unknown<'a>(what: &str, name: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    let hint =
        did_you_mean(name, known).map_or(String::new(), |s| format!("; did you mean {s:?}?"));
    format!("the inventory has no {what} {name:?}{hint}")
}

/// Reads the inventory `path`; `Err` says where it is wrong.
pub fn read_inventory(path: &Path) -> Result<Inventory, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the inventory `{}`: {e}", path.display()))?;
    Inventory::parse(&text).map_err(|errors| {
        let first = errors
            .first()
            .map_or_else(|| "invalid".to_owned(), ToString::to_string);
        format!("the inventory `{}` is refused: {first}", path.display())
    })
}

/// Whether a promotion from `from` to `to` only widens the rollout: every
/// host in it stays in (a host that leaves would be refused the previous
/// serial as a rollback and keep the new one: `--halt` is the way back).
pub fn widens(from: &Who, to: &Who) -> Result<(), String> {
    match (from, to) {
        (Who::Percent(a), Who::Percent(b)) if b >= a => Ok(()),
        (Who::Percent(a), Who::Percent(b)) => Err(format!(
            "--promote {b}% would narrow the rollout at {a}%; hosts already on the new serial \
             keep it. Promote to {a}% or more, or `--halt` to send everyone back"
        )),
        (Who::Hosts(a), Who::Hosts(b)) => match a.iter().find(|h| !b.contains(h)) {
            None => Ok(()),
            Some(h) => Err(format!(
                "the promotion leaves out {h:?}, which is in the rollout; list every host \
                 already in it, or `--halt`"
            )),
        },
        (from, _) => Err(format!(
            "the rollout is at {from}; promote it the same way (a larger percentage, more \
             hosts or groups) or to 100%"
        )),
    }
}

/// The publish directory of one bundle name ([module docs](self)).
#[derive(Debug)]
pub struct PublishDir {
    pub dir: PathBuf,
    pub name: String,
}

impl PublishDir {
    pub fn stamp(&self) -> PathBuf {
        self.dir.join(format!("{}.stamp", self.name))
    }

    pub fn bundle(&self) -> PathBuf {
        self.dir.join(format!("{}.bundle", self.name))
    }

    /// The directory of releases by serial.
    pub fn releases(&self) -> PathBuf {
        self.dir.join(format!("{}.bundles", self.name))
    }

    pub fn release(&self, serial: u64) -> PathBuf {
        self.releases().join(format!("{serial}.bundle"))
    }

    /// The last rollout's stamp, kept for `--halt` after `--promote 100%`.
    pub fn record(&self) -> PathBuf {
        self.releases().join("rollout.stamp")
    }

    /// The stamp at `path`, read without its signature (it is this
    /// publisher's own): `None` when there is none.
    pub fn read_stamp(path: &Path) -> Result<Option<Stamp>, String> {
        match std::fs::read(path) {
            Ok(bytes) => Stamp::parse_unverified(&bytes)
                .map(|(s, _)| Some(s))
                .map_err(|e| {
                    format!(
                        "`{}` is there but unreadable ({e}); move it away if it is not yours",
                        path.display()
                    )
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read `{}`: {e}", path.display())),
        }
    }

    /// The bytes of `release`: its by-serial file, else `NAME.bundle` when
    /// that is it (a directory published before rollouts). Checked
    /// against the release's length and SHA-256.
    pub fn release_bytes(&self, release: &Release) -> Result<Vec<u8>, String> {
        let matches = |bytes: &[u8]| {
            bytes.len() as u64 == release.length
                && <[u8; 32]>::from(Sha256::digest(bytes)) == release.sha256
        };
        for path in [self.release(release.serial), self.bundle()] {
            if let Ok(bytes) = std::fs::read(&path) {
                if matches(&bytes) {
                    return Ok(bytes);
                }
            }
        }
        Err(format!(
            "the bundle of serial {} is neither `{}` nor `{}` (or it was altered); the rollout \
             needs it: publish that policy again",
            release.serial,
            self.release(release.serial).display(),
            self.bundle().display()
        ))
    }

    /// The rollout `--halt` undoes: the stamp's own, or, after `--promote
    /// 100%`, the recorded one whose new serial the stamp still names.
    pub fn halted(&self, stamp: &Stamp) -> Result<Rollout, String> {
        if let Some(r) = &stamp.rollout {
            return Ok(r.clone());
        }
        match Self::read_stamp(&self.record())? {
            Some(record) if record.serial == stamp.serial => record
                .rollout
                .ok_or_else(|| format!("`{}` is not a rollout's stamp", self.record().display())),
            _ => Err(format!(
                "no rollout to halt: serial {} of {:?} was not published with `--rollout` (or a \
                 newer publish replaced it); to go back to older policy, publish it again",
                stamp.serial, self.name
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn inventory() -> Inventory {
        let key = "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
        Inventory::parse(&format!(
            "[[host]]\nname = \"web-01\"\nreport_key = \"{key}\"\ngroups = [\"canary\", \"web\"]\n\
             [[host]]\nname = \"web-02\"\nreport_key = \"{key}\"\ngroups = [\"web\"]\n\
             [[host]]\nname = \"db-01\"\nreport_key = \"{key}\"\ngroups = [\"canary\"]\n\
             [[host]]\nname = \"db-02\"\nreport_key = \"{key}\"\ngroups = [\"canary\"]\nrevoked = true\n"
        ))
        .unwrap()
    }

    #[test]
    fn targets_read_percentages_hosts_and_groups() {
        assert_eq!(parse_target("5%"), Ok(Target::Percent(5)));
        assert_eq!(parse_target("100%"), Ok(Target::Percent(100)));
        assert_eq!(parse_target("0%"), Ok(Target::Percent(0)));
        assert_eq!(
            parse_target("hosts=web-02,web-01,web-02"),
            Ok(Target::Hosts(vec!["web-01".into(), "web-02".into()]))
        );
        assert_eq!(
            parse_target("groups=canary"),
            Ok(Target::Groups(vec!["canary".into()]))
        );
        for (bad, why) in [
            ("101%", "0% to 100%"),
            ("-5%", "0% to 100%"),
            ("5.5%", "0% to 100%"),
            ("%", "0% to 100%"),
            ("5", "a percentage"),
            ("canary", "a percentage"),
            ("hosts=", "not a host name"),
            ("hosts=a,,b", "not a host name"),
            ("groups=a b", "not a group name"),
        ] {
            let got = parse_target(bad).unwrap_err();
            assert!(got.contains(why), "{bad}: {got}");
        }
    }

    #[test]
    fn groups_become_their_hosts_and_unknown_names_get_a_suggestion() {
        let inv = inventory();
        assert_eq!(
            resolve(&Target::Groups(vec!["canary".into()]), Some(&inv)),
            Ok(Some(Who::Hosts(vec!["db-01".into(), "web-01".into()])))
        );
        assert_eq!(resolve(&Target::Percent(100), None), Ok(None));
        assert_eq!(
            resolve(&Target::Percent(5), None),
            Ok(Some(Who::Percent(5)))
        );
        let err = resolve(&Target::Groups(vec!["canry".into()]), Some(&inv)).unwrap_err();
        assert!(
            err.contains("no group \"canry\"; did you mean \"canary\"?"),
            "{err}"
        );
        let err = resolve(&Target::Hosts(vec!["web-10".into()]), Some(&inv)).unwrap_err();
        assert!(err.contains("no host \"web-10\"; did you mean"), "{err}");
        let err = resolve(&Target::Groups(vec!["canary".into()]), None).unwrap_err();
        assert!(err.contains("--inventory"), "{err}");
        // Without an inventory, host names are taken as given.
        assert_eq!(
            resolve(&Target::Hosts(vec!["x".into()]), None),
            Ok(Some(Who::Hosts(vec!["x".into()])))
        );
    }

    #[test]
    fn promotions_only_widen() {
        let p = Who::Percent;
        let hosts = |h: &[&str]| Who::Hosts(h.iter().map(|s| (*s).to_owned()).collect());
        assert!(widens(&p(5), &p(50)).is_ok());
        assert!(widens(&p(5), &p(5)).is_ok());
        assert!(widens(&p(50), &p(5)).unwrap_err().contains("narrow"));
        assert!(widens(&hosts(&["a"]), &hosts(&["a", "b"])).is_ok());
        assert!(widens(&hosts(&["a", "b"]), &hosts(&["b"]))
            .unwrap_err()
            .contains("\"a\""));
        assert!(widens(&p(5), &hosts(&["a"])).is_err());
    }
}
