//! Staged rollout (docs/rollout.md): a stamp that names two releases, the
//! new one and the one before it, and who takes the new one. A host
//! decides by itself, from its own name and the stamp alone, so the hub
//! stays a directory of static files and agents need no inventory:
//!
//! ```text
//! previous 1795308000
//! previous-length 633001
//! previous-sha256 (64 hex digits)
//! rollout 5%                 or   rollout hosts=db-01,web-01
//! ```
//!
//! A percentage picks the hosts whose [`bucket`] is below it. The bucket
//! depends on the bundle name, the new serial (the rollout's id) and the
//! host name only, so the same 5% go first on every run, and widening to
//! 50% keeps them in: a bucket below 5 is below 50. Inventory groups are
//! expanded to host names by `policyc publish`, into `hosts=`.

use sha2::{Digest, Sha256};

/// One published bundle, as much as a host needs to fetch and verify it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    /// The bundle's serial, as in its signed header.
    pub serial: u64,
    /// The bundle file's length in bytes: a download stops there.
    pub length: u64,
    /// SHA-256 of the bundle file.
    pub sha256: [u8; 32],
}

/// Who takes the new release of a rollout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Who {
    /// The hosts whose [`bucket`] is below this (0 to 99: 100% is written
    /// as a plain stamp, everyone takes the new serial).
    Percent(u8),
    /// These hosts by name: sorted, without duplicates, never empty.
    Hosts(Vec<String>),
}

impl std::fmt::Display for Who {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Who::Percent(p) => write!(f, "{p}%"),
            Who::Hosts(hosts) => write!(f, "hosts={}", hosts.join(",")),
        }
    }
}

impl Who {
    /// Reads the value of a `rollout` line, as [`Who`]'s `Display` writes
    /// it; `Err` says what is wrong.
    pub fn parse(text: &str) -> Result<Who, String> {
        if let Some(number) = text.strip_suffix('%') {
            let percent = number
                .parse::<u8>()
                .ok()
                .filter(|p| *p < 100 && (number == "0" || !number.starts_with('0')))
                .ok_or_else(|| {
                    format!("`{text}` is not a percentage from 0% to 99% (100% is a plain stamp)")
                })?;
            return Ok(Who::Percent(percent));
        }
        let list = text
            .strip_prefix("hosts=")
            .ok_or_else(|| format!("`{text}` is neither `N%` nor `hosts=a,b`"))?;
        let hosts: Vec<String> = list.split(',').map(str::to_owned).collect();
        if let Some(bad) = hosts.iter().find(|h| !is_host_name(h)) {
            return Err(format!("{bad:?} is not a host name"));
        }
        if hosts.windows(2).any(|w| w.first() >= w.get(1)) {
            return Err("the hosts must be sorted and listed once each".to_owned());
        }
        Ok(Who::Hosts(hosts))
    }

    /// Whether `host` takes the new release of the rollout of bundle
    /// `name` to `serial`.
    pub fn selects(&self, name: &str, serial: u64, host: &str) -> bool {
        match self {
            Who::Percent(p) => bucket(name, serial, host) < *p,
            Who::Hosts(hosts) => hosts.binary_search_by(|h| h.as_str().cmp(host)).is_ok(),
        }
    }
}

/// The rollout part of a stamp: the release hosts not selected keep (or
/// return to), and who is selected for the stamp's own release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rollout {
    pub previous: Release,
    pub who: Who,
}

/// A host's place in `[0, 100)` for the rollout of bundle `name` to
/// `serial`: the first eight bytes of
/// SHA-256(`converge-rollout\n{name}\n{serial}\n{host}\n`), big endian,
/// modulo 100. Fixed for a rollout (same host, same stamp serial), and
/// different from one rollout to the next, so the canaries of one release
/// are not always the same machines.
pub fn bucket(name: &str, serial: u64, host: &str) -> u8 {
    let digest = Sha256::digest(format!("converge-rollout\n{name}\n{serial}\n{host}\n").as_bytes());
    let first = digest.first_chunk::<8>().copied().unwrap_or_default();
    // Below 100, so it fits.
    u8::try_from(u64::from_be_bytes(first).checked_rem(100).unwrap_or(0)).unwrap_or(0)
}

/// Host names as the inventory accepts them (letters, digits, `-`, `.`
/// and `_`, starting with a letter or digit, at most 253 bytes).
fn is_host_name(name: &str) -> bool {
    crate::inventory::is_host_name(name)
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_is_stable_and_follows_the_documented_formula() {
        assert_eq!(bucket("site", 7, "web-01"), bucket("site", 7, "web-01"));
        let digest = Sha256::digest(b"converge-rollout\nsite\n7\nweb-01\n");
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        assert_eq!(
            u64::from(bucket("site", 7, "web-01")),
            u64::from_be_bytes(first) % 100
        );
        // Another rollout (serial) or bundle reshuffles the fleet.
        let hosts: Vec<String> = (0..200).map(|i| format!("web-{i:03}")).collect();
        let moved = |f: &dyn Fn(&str) -> u8| {
            hosts
                .iter()
                .filter(|h| f(h) != bucket("site", 7, h))
                .count()
        };
        assert!(moved(&|h| bucket("site", 8, h)) > 150);
        assert!(moved(&|h| bucket("other", 7, h)) > 150);
    }

    #[test]
    fn buckets_spread_a_fleet_roughly_evenly() {
        let mut tens = [0u32; 10];
        for i in 0..10_000 {
            let b = bucket("site", 1_795_308_900, &format!("host-{i}"));
            assert!(b < 100);
            tens[usize::from(b / 10)] += 1;
        }
        // 1,000 expected per tenth; a uniform hash stays well within 15%.
        assert!(tens.iter().all(|n| (850..=1150).contains(n)), "{tens:?}");
        let five = (0..10_000)
            .filter(|i| Who::Percent(5).selects("site", 3, &format!("h{i}")))
            .count();
        assert!((400..=600).contains(&five), "{five}");
    }

    #[test]
    fn widening_keeps_every_host_already_in() {
        for i in 0..2_000 {
            let host = format!("db-{i}");
            for (narrow, wide) in [(5, 50), (1, 5), (50, 99), (0, 1)] {
                if Who::Percent(narrow).selects("site", 9, &host) {
                    assert!(Who::Percent(wide).selects("site", 9, &host), "{host}");
                }
            }
        }
        assert!(!(0..2_000).any(|i| Who::Percent(0).selects("site", 9, &format!("db-{i}"))));
    }

    #[test]
    fn who_reads_back_what_it_writes_and_nothing_else() {
        for good in ["0%", "5%", "99%", "hosts=a", "hosts=a,b.c,web-01"] {
            let who = Who::parse(good).unwrap();
            assert_eq!(who.to_string(), good);
        }
        for (bad, why) in [
            ("100%", "0% to 99%"),
            ("101%", "0% to 99%"),
            ("05%", "0% to 99%"),
            ("-1%", "0% to 99%"),
            ("%", "0% to 99%"),
            ("5", "neither"),
            ("groups=canary", "neither"),
            ("hosts=", "not a host name"),
            ("hosts=b,a", "sorted"),
            ("hosts=a,a", "sorted"),
            ("hosts=a,,b", "not a host name"),
            ("hosts=a b", "not a host name"),
            ("hosts=-a", "not a host name"),
        ] {
            let got = Who::parse(bad).unwrap_err();
            assert!(got.contains(why), "{bad}: {got}");
        }
        let who = Who::Hosts(vec!["a".into(), "c".into()]);
        assert!(who.selects("site", 1, "a") && who.selects("site", 1, "c"));
        assert!(!who.selects("site", 1, "b"));
    }
}
