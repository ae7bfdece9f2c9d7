//! The host's side of a staged rollout (docs/rollout.md): which of the
//! releases a stamp names this host runs, where that bundle is published,
//! and what the run report says about it.
//!
//! The decision needs nothing but the signed stamp and the host's name
//! ([`converge_format::stamp::rollout`]), so it is the same on every run
//! and a hub stays a directory of static files.

use std::path::Path;

use serde_json::{json, Value};

use crate::bundle::error::hex;
use crate::stamp::rollout::{bucket, Release, Who};
use crate::stamp::Stamp;
use crate::state::StateDir;

/// The report extension (`extensions.rollout` of `converge-report/1`,
/// `agent.pull.rollout` of the local report) a host writes while a rollout
/// is published.
pub const EXTENSION: &str = "rollout";

/// The name this host is known by in a rollout: the name it enrolled
/// under (`identity/name`, the inventory's name, which `policyc publish
/// --rollout groups=...` expands to), else its hostname fact.
pub fn host_name(state: &StateDir, root: &Path) -> String {
    match crate::identity::load(state) {
        Ok(Some(identity)) => identity.name,
        _ => crate::facts::hostname(root),
    }
}

/// Where `release` of `stamp` is published: a rollout names two bundles,
/// fetched by serial from `NAME.bundles/SERIAL.bundle` (files that never
/// change once written); a plain stamp's bundle is `NAME.bundle`.
pub fn bundle_file(stamp: &Stamp, release: &Release) -> String {
    match stamp.rollout {
        Some(_) => format!("{}.bundles/{}.bundle", stamp.name, release.serial),
        None => format!("{}.bundle", stamp.name),
    }
}

/// What the report says of `host` under `stamp`: `None` without a
/// rollout; else the serial assigned, both serials of the rollout, who is
/// in it, whether this host is, and (for a percentage) its bucket.
pub fn report(stamp: &Stamp, host: &str) -> Option<Value> {
    let rollout = stamp.rollout.as_ref()?;
    let (release, selected) = stamp.release_for(host);
    let bucket = match rollout.who {
        Who::Percent(_) => Some(bucket(&stamp.name, stamp.serial, host)),
        Who::Hosts(_) => None,
    };
    Some(json!({
        "host": host,
        "serial": release.serial,
        "sha256": hex(&release.sha256),
        "selected": selected == Some(true),
        "new_serial": stamp.serial,
        "previous_serial": rollout.previous.serial,
        "who": rollout.who.to_string(),
        "bucket": bucket,
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::stamp::rollout::Rollout;

    fn stamp(who: Option<Who>) -> Stamp {
        Stamp {
            name: "site".into(),
            serial: 20,
            length: 100,
            sha256: [2; 32],
            published: 1,
            expires: 2,
            key_id: [0; 8],
            rollout: who.map(|who| Rollout {
                previous: Release {
                    serial: 10,
                    length: 90,
                    sha256: [1; 32],
                },
                who,
            }),
        }
    }

    #[test]
    fn a_rollout_fetches_by_serial_and_a_plain_stamp_by_name() {
        let plain = stamp(None);
        assert_eq!(bundle_file(&plain, &plain.release()), "site.bundle");
        let staged = stamp(Some(Who::Percent(5)));
        assert_eq!(
            bundle_file(&staged, &staged.release()),
            "site.bundles/20.bundle"
        );
        let previous = staged.rollout.as_ref().unwrap().previous;
        assert_eq!(bundle_file(&staged, &previous), "site.bundles/10.bundle");
    }

    #[test]
    fn the_report_says_which_serial_and_whether_the_host_is_in() {
        assert_eq!(report(&stamp(None), "a"), None);
        let listed = stamp(Some(Who::Hosts(vec!["a".into()])));
        let a = report(&listed, "a").unwrap();
        assert_eq!(a["serial"], 20);
        assert_eq!(a["selected"], true);
        assert_eq!(a["bucket"], Value::Null);
        let b = report(&listed, "b").unwrap();
        assert_eq!(
            (b["serial"].as_u64(), b["selected"].as_bool()),
            (Some(10), Some(false))
        );
        assert_eq!(b["who"], "hosts=a");
        let canary = report(&stamp(Some(Who::Percent(50))), "web-07").unwrap();
        let expected = bucket("site", 20, "web-07");
        assert_eq!(canary["bucket"], u64::from(expected));
        assert_eq!(canary["selected"], expected < 50);
        assert_eq!(canary["previous_serial"], 10);
    }
}
