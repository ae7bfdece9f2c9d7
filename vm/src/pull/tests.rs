//! The protocol against an in-memory hub: every refusal, every crash
//! point of an install. The same cases run against a real HTTP server in
//! `tests/pull.rs`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::cell::RefCell;
use std::collections::HashMap;

use ed25519_dalek::{Signer as _, SigningKey};

use super::*;
use crate::bundle::envelope::{signed_prefix, signing_digest};
use crate::bundle::format::{Body, Header, List};
use crate::bundle::keys::key_id;
use crate::state::{LAST_GOOD, SERIAL, STAMP};

const NOW: u64 = 1_795_308_900;

/// A hub in memory that counts what it served.
#[derive(Default)]
struct Hub {
    files: RefCell<HashMap<String, Vec<u8>>>,
    served: RefCell<Vec<String>>,
}

impl Source for Hub {
    fn locate(&self, file: &str) -> String {
        format!("mem:/{file}")
    }
    fn get(&self, file: &str, limit: u64) -> Result<Vec<u8>, FetchError> {
        self.served.borrow_mut().push(file.to_owned());
        let bytes = self
            .files
            .borrow()
            .get(file)
            .cloned()
            .ok_or(FetchError::Status {
                url: self.locate(file),
                status: 404,
            })?;
        if bytes.len() as u64 > limit {
            return Err(FetchError::TooLong {
                url: self.locate(file),
                limit,
            });
        }
        Ok(bytes)
    }
}

struct Publisher {
    signing: SigningKey,
    public: PublicKey,
}

impl Publisher {
    fn new(seed: u8) -> Publisher {
        let signing = SigningKey::from_bytes(&[seed; 32]);
        let key = signing.verifying_key().to_bytes();
        Publisher {
            public: PublicKey {
                id: key_id(&key),
                key,
            },
            signing,
        }
    }

    fn bundle(&self, name: &str, serial: u64) -> Vec<u8> {
        let body = Body {
            header: Header {
                name: name.into(),
                key_id: self.public.id,
                serial,
                pass_limit: 3,
                compiler_version: "test".into(),
                source_digest: [0; 32],
            },
            constants: List(Vec::new()),
            programs: List(Vec::new()),
            classes: List(Vec::new()),
            exclusive: List(Vec::new()),
            promises: List(Vec::new()),
            order: List(Vec::new()),
            sources: List(Vec::new()),
        };
        self.seal(&body)
    }

    fn seal(&self, body: &Body) -> Vec<u8> {
        let encoded = postcard::to_allocvec(body).unwrap();
        let mut bytes = signed_prefix(self.public.id, &encoded).unwrap();
        let signature = self.signing.sign(&signing_digest(&bytes));
        bytes.extend_from_slice(&signature.to_bytes());
        bytes
    }

    fn stamp(&self, bundle: &[u8], expires: u64) -> Vec<u8> {
        let v = open(bundle, std::slice::from_ref(&self.public)).unwrap();
        let stamp = Stamp::for_bundle(&v, NOW - 60, expires);
        let signature = self.signing.sign(&stamp.signing_digest()).to_bytes();
        stamp.encode(&signature).into_bytes()
    }

    /// Publishes `serial` of `name` on `hub` as `policyc publish` would.
    fn publish(&self, hub: &Hub, name: &str, serial: u64) -> (Vec<u8>, Vec<u8>) {
        let bundle = self.bundle(name, serial);
        let stamp = self.stamp(&bundle, NOW + 86_400);
        hub.put(&format!("{name}.bundle"), &bundle);
        hub.put(&format!("{name}.stamp"), &stamp);
        (bundle, stamp)
    }
}

impl Publisher {
    /// Publishes a staged rollout from `previous` to `new` on `hub` as
    /// `policyc publish --rollout` lays it out: both bundles by serial,
    /// the new one also as `site.bundle`, then the stamp.
    fn publish_rollout(&self, hub: &Hub, previous: &[u8], new: &[u8], who: &str) -> Vec<u8> {
        let trusted = std::slice::from_ref(&self.public);
        let (old, fresh) = (
            open(previous, trusted).unwrap(),
            open(new, trusted).unwrap(),
        );
        let mut stamp = Stamp::for_bundle(&fresh, NOW - 60, NOW + 86_400);
        stamp.rollout = Some(crate::stamp::rollout::Rollout {
            previous: crate::stamp::rollout::Release {
                serial: old.body.header.serial,
                length: old.len as u64,
                sha256: old.digest,
            },
            who: crate::stamp::rollout::Who::parse(who).unwrap(),
        });
        let bytes = stamp
            .encode(&self.signing.sign(&stamp.signing_digest()).to_bytes())
            .into_bytes();
        for (bundle, serial) in [(previous, old.body.header.serial), (new, stamp.serial)] {
            hub.put(&format!("site.bundles/{serial}.bundle"), bundle);
        }
        hub.put("site.bundle", new);
        hub.put("site.stamp", &bytes);
        bytes
    }
}

impl Hub {
    fn put(&self, file: &str, bytes: &[u8]) {
        self.files.borrow_mut().insert(file.into(), bytes.to_vec());
    }
    fn take_served(&self) -> Vec<String> {
        std::mem::take(&mut self.served.borrow_mut())
    }
}

struct Host {
    _dir: tempfile::TempDir,
    state: StateDir,
    trusted: Vec<PublicKey>,
    /// The name a rollout's stamp selects hosts by.
    host: String,
}

impl Host {
    fn new(trusted: &[&Publisher]) -> Host {
        let dir = tempfile::tempdir().unwrap();
        Host {
            state: StateDir::open(&dir.path().join("state")).unwrap(),
            _dir: dir,
            trusted: trusted.iter().map(|p| p.public.clone()).collect(),
            host: "web-01".to_owned(),
        }
    }

    fn pull(&self, hub: &Hub) -> Result<Pulled, PullError> {
        self.pull_at(hub, NOW)
    }

    fn pull_at(&self, hub: &Hub, now: u64) -> Result<Pulled, PullError> {
        let current = self.state.load(CURRENT, &self.trusted).ok().flatten();
        pull(
            hub,
            "site",
            &self.host,
            &self.trusted,
            &self.state,
            current.as_ref(),
            now,
        )
    }

    fn current_serial(&self) -> Option<u64> {
        let local = self.state.load(CURRENT, &self.trusted).unwrap()?;
        Some(local.bundle.body.header.serial)
    }

    fn file(&self, name: &str) -> Option<Vec<u8>> {
        std::fs::read(self.state.path(name)).ok()
    }
}

fn installed(result: Result<Pulled, PullError>) -> u64 {
    match result {
        Ok(Pulled::Installed { serial, .. }) => serial,
        other => panic!("expected an install, got {other:?}"),
    }
}

#[test]
fn a_first_pull_installs_and_an_unchanged_stamp_downloads_nothing_more() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    let (bundle, stamp) = hubkey.publish(&hub, "site", 10);
    let host = Host::new(&[&hubkey]);
    assert_eq!(installed(host.pull(&hub)), 10);
    assert_eq!(hub.take_served(), ["site.stamp", "site.bundle"]);
    assert_eq!(host.file(CURRENT).unwrap(), bundle);
    assert_eq!(host.file(STAMP).unwrap(), stamp);
    assert_eq!(host.file(SERIAL).unwrap(), b"10\n");

    assert!(matches!(host.pull(&hub), Ok(Pulled::Unchanged { .. })));
    assert_eq!(hub.take_served(), ["site.stamp"]);

    hubkey.publish(&hub, "site", 11);
    match host.pull(&hub) {
        Ok(Pulled::Installed {
            stamp, previous, ..
        }) => {
            assert_eq!((stamp.serial, previous), (11, Some(10)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(host.file(LAST_GOOD).unwrap(), bundle);
}

#[test]
fn t3_an_older_serial_is_refused_as_a_rollback_and_changes_nothing() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    let (old_bundle, old_stamp) = hubkey.publish(&hub, "site", 10);
    let host = Host::new(&[&hubkey]);
    host.pull(&hub).unwrap();
    let (new_bundle, _) = hubkey.publish(&hub, "site", 11);
    host.pull(&hub).unwrap();
    // A mirror replays the old, validly signed publish.
    hub.put("site.bundle", &old_bundle);
    hub.put("site.stamp", &old_stamp);
    let err = host.pull(&hub).unwrap_err();
    assert!(
        matches!(
            err,
            PullError::Rollback {
                offered: 10,
                accepted: 11,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("rollback"), "{err}");
    assert_eq!(host.file(CURRENT).unwrap(), new_bundle);
    assert_eq!(host.current_serial(), Some(11));
}

#[test]
fn t3_the_rollback_mark_survives_a_lost_current_bundle() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    let (old_bundle, old_stamp) = hubkey.publish(&hub, "site", 10);
    let host = Host::new(&[&hubkey]);
    host.pull(&hub).unwrap();
    hubkey.publish(&hub, "site", 11);
    host.pull(&hub).unwrap();
    std::fs::remove_file(host.state.path(CURRENT)).unwrap();
    hub.put("site.bundle", &old_bundle);
    hub.put("site.stamp", &old_stamp);
    assert!(matches!(
        host.pull(&hub),
        Err(PullError::Rollback { accepted: 11, .. })
    ));
}

#[test]
fn t3_the_same_serial_for_other_content_is_refused() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    let (bundle, _) = hubkey.publish(&hub, "site", 10);
    let host = Host::new(&[&hubkey]);
    host.pull(&hub).unwrap();
    let mut body = open(&bundle, &host.trusted).unwrap().body;
    body.header.pass_limit = 7;
    let different = hubkey.seal(&body);
    hub.put("site.bundle", &different);
    hub.put("site.stamp", &hubkey.stamp(&different, NOW + 3600));
    let err = host.pull(&hub).unwrap_err();
    assert!(
        matches!(err, PullError::SameSerial { serial: 10, .. }),
        "{err:?}"
    );
    assert_eq!(host.file(CURRENT).unwrap(), bundle);
}

#[test]
fn t11_a_stamp_for_another_bundle_name_is_refused() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    let (db_bundle, db_stamp) = hubkey.publish(&hub, "db", 50);
    hub.put("site.bundle", &db_bundle);
    hub.put("site.stamp", &db_stamp);
    let host = Host::new(&[&hubkey]);
    let err = host.pull(&hub).unwrap_err();
    assert!(matches!(err, PullError::WrongName { .. }), "{err:?}");
    assert!(host.file(CURRENT).is_none());
}

#[test]
fn t1_unknown_keys_forged_and_unsigned_stamps_are_refused_before_any_download() {
    let (hub, hubkey, stranger) = (Hub::default(), Publisher::new(1), Publisher::new(2));
    let host = Host::new(&[&hubkey]);
    stranger.publish(&hub, "site", 10);
    let err = host.pull(&hub).unwrap_err();
    assert!(
        matches!(
            err,
            PullError::Stamp {
                error: StampError::UnknownKey { .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(hub.take_served(), ["site.stamp"]);

    let (_, stamp) = hubkey.publish(&hub, "site", 10);
    let text = String::from_utf8(stamp).unwrap();
    let forged = text.replace("serial 10\n", "serial 99\n");
    hub.put("site.stamp", forged.as_bytes());
    assert!(matches!(
        host.pull(&hub),
        Err(PullError::Stamp {
            error: StampError::BadSignature,
            ..
        })
    ));
    let unsigned: String = text.lines().take(8).map(|l| format!("{l}\n")).collect();
    hub.put("site.stamp", unsigned.as_bytes());
    assert!(matches!(
        host.pull(&hub),
        Err(PullError::Stamp {
            error: StampError::Malformed { .. },
            ..
        })
    ));
    hub.take_served();
    hub.put("site.stamp", &vec![b'x'; MAX_STAMP_LEN + 1]);
    assert!(matches!(
        host.pull(&hub),
        Err(PullError::Fetch(FetchError::TooLong { .. }))
    ));
    assert_eq!(hub.take_served(), ["site.stamp"]);
    assert!(host.file(CURRENT).is_none());
}

#[test]
fn t5_bundles_that_do_not_match_their_stamp_are_refused_with_distinct_reasons() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    let (first, _) = hubkey.publish(&hub, "site", 10);
    let host = Host::new(&[&hubkey]);
    host.pull(&hub).unwrap();
    let (bundle, _) = hubkey.publish(&hub, "site", 11);

    let mut altered = bundle.clone();
    let middle = altered.len() / 2;
    altered[middle] ^= 1;
    hub.put("site.bundle", &altered);
    assert!(matches!(
        host.pull(&hub),
        Err(PullError::Altered { error: Some(_), .. })
    ));

    hub.put("site.bundle", &bundle[..bundle.len() - 1]);
    assert!(matches!(host.pull(&hub), Err(PullError::Truncated { .. })));

    let mut longer = bundle.clone();
    longer.extend_from_slice(&[0; 1000]);
    hub.put("site.bundle", &longer);
    assert!(matches!(host.pull(&hub), Err(PullError::TooLong { .. })));

    // A valid bundle of serial 12 behind the stamp of serial 11, padded to
    // the stamp's length would be "altered"; same length: mix-and-match.
    let twelve = hubkey.bundle("site", 12);
    assert_eq!(twelve.len(), bundle.len());
    hub.put("site.bundle", &twelve);
    assert!(matches!(
        host.pull(&hub),
        Err(PullError::MixAndMatch { serial: 12, .. })
    ));

    assert_eq!(host.file(CURRENT).unwrap(), first);
    assert_eq!(host.file(SERIAL).unwrap(), b"10\n");
}

/// Issue 14, item 9: a frozen mirror keeps serving the (expired) stamp of
/// the bundle in force. That is never "current": the pull is refused as
/// expired, so the agent goes on to the next mirror; the bundle in force
/// stays.
#[test]
fn t4_an_expired_stamp_installs_nothing_and_an_expired_current_one_is_not_current() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    hubkey.publish(&hub, "site", 10);
    let host = Host::new(&[&hubkey]);
    host.pull(&hub).unwrap();
    hub.take_served();
    let later = NOW + 2 * 86_400;
    let err = host.pull_at(&hub, later).unwrap_err();
    assert!(
        matches!(err, PullError::Expired { serial: 10, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("expired"), "{err}");
    assert_eq!(hub.take_served(), ["site.stamp"]);
    assert_eq!(host.current_serial(), Some(10));
    let bundle = hubkey.bundle("site", 11);
    hub.put("site.bundle", &bundle);
    hub.put("site.stamp", &hubkey.stamp(&bundle, NOW + 10));
    let err = host.pull_at(&hub, NOW + 10).unwrap_err();
    assert!(
        matches!(err, PullError::Expired { serial: 11, .. }),
        "{err:?}"
    );
    assert_eq!(host.current_serial(), Some(10));
}

#[test]
fn t3_t19_every_crash_point_of_an_install_recovers_without_lowering_the_mark() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    let (first, _) = hubkey.publish(&hub, "site", 10);
    let host = Host::new(&[&hubkey]);
    host.pull(&hub).unwrap();
    let (bundle, stamp) = hubkey.publish(&hub, "site", 11);

    // Crash after the stamp, before `serial` and the bundle: the next pull
    // fetches the bundle of the recorded stamp.
    host.state.write(STAMP, &stamp).unwrap();
    assert_eq!(host.current_serial(), Some(10));
    assert_eq!(installed(host.pull(&hub)), 11);
    assert_eq!(host.file(CURRENT).unwrap(), bundle);
    assert_eq!(host.file(SERIAL).unwrap(), b"11\n");

    // Crash after `serial`, before the bundle: the mark is already up, and
    // the same repair applies.
    let (bundle, stamp) = hubkey.publish(&hub, "site", 12);
    host.state.write(STAMP, &stamp).unwrap();
    host.state.write(SERIAL, b"12\n").unwrap();
    assert_eq!(installed(host.pull(&hub)), 12);
    assert_eq!(host.file(CURRENT).unwrap(), bundle);

    // Meanwhile, in either state, the bundle that never got in cannot be
    // undercut by a replay of an older one, even with current.bundle lost.
    hubkey.publish(&hub, "site", 13);
    host.state
        .write(STAMP, &hub.files.borrow()["site.stamp"])
        .unwrap();
    host.state.write(SERIAL, b"13\n").unwrap();
    std::fs::remove_file(host.state.path(CURRENT)).unwrap();
    hub.put("site.bundle", &first);
    hub.put("site.stamp", &hubkey.stamp(&first, NOW + 3600));
    assert!(matches!(
        host.pull(&hub),
        Err(PullError::Rollback { accepted: 13, .. })
    ));
}

#[test]
fn t23_a_locally_damaged_current_bundle_is_fetched_again_from_the_stamp_it_was_accepted_with() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    let (bundle, _) = hubkey.publish(&hub, "site", 10);
    let host = Host::new(&[&hubkey]);
    host.pull(&hub).unwrap();
    let mut damaged = bundle.clone();
    damaged[40] ^= 0x80;
    host.state.write(CURRENT, &damaged).unwrap();
    assert!(host.state.load(CURRENT, &host.trusted).is_err());
    assert_eq!(installed(host.pull(&hub)), 10);
    assert_eq!(host.file(CURRENT).unwrap(), bundle);
}

#[test]
fn t8_a_serial_at_the_top_of_its_range_is_handled_without_overflow() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    hubkey.publish(&hub, "site", u64::MAX);
    let host = Host::new(&[&hubkey]);
    assert_eq!(installed(host.pull(&hub)), u64::MAX);
    hubkey.publish(&hub, "site", 5);
    assert!(matches!(
        host.pull(&hub),
        Err(PullError::Rollback {
            accepted: u64::MAX,
            ..
        })
    ));
}

/// T25: clocks ten years off either way. Far ahead, every stamp has
/// expired: nothing new is installed, the bundle in force stays (the safe
/// side). Far behind, stamps are simply fresh; nothing overflows.
#[test]
fn t25_a_clock_ten_years_off_either_way_never_installs_stale_policy_nor_breaks() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    hubkey.publish(&hub, "site", 10);
    let host = Host::new(&[&hubkey]);
    let ten_years = 10 * 365 * 86_400;
    assert_eq!(installed(host.pull_at(&hub, NOW - ten_years)), 10);
    hubkey.publish(&hub, "site", 11);
    assert!(matches!(
        host.pull_at(&hub, NOW + ten_years),
        Err(PullError::Expired { serial: 11, .. })
    ));
    assert_eq!(host.current_serial(), Some(10));
    assert!(host.pull_at(&hub, u64::MAX).is_err());
    assert_eq!(installed(host.pull_at(&hub, 0)), 11);
}

/// What the property test below does to a hub and a host.
#[derive(Clone, Debug)]
enum Step {
    /// Publish a new serial, `gap` above the last.
    Publish {
        gap: u64,
    },
    /// The hub serves an earlier publish again (a stale mirror, a replay).
    Replay {
        which: usize,
    },
    Pull,
    /// The host crashed installing the hub's pair: after `stamp` and
    /// `serial`, before `current.bundle`.
    CrashMidInstall,
    /// `current.bundle` is lost or damaged on the host.
    LoseCurrent,
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        (1u64..3).prop_map(|gap| Step::Publish { gap }),
        (0usize..8).prop_map(|which| Step::Replay { which }),
        Just(Step::Pull),
        Just(Step::Pull),
        Just(Step::CrashMidInstall),
        Just(Step::LoseCurrent),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// THREATS.md section 5 (b): over any sequence of publishes, replays,
    /// pulls, crashes and local losses, the rollback mark never goes down,
    /// the bundle in force never goes back to an older serial, and a pull
    /// installs only a serial above the mark (or the very one it accepted,
    /// to repair a lost file).
    #[test]
    fn t3_the_rollback_mark_never_goes_down(steps in proptest::collection::vec(step(), 1..24)) {
        let (hub, hubkey) = (Hub::default(), Publisher::new(1));
        let host = Host::new(&[&hubkey]);
        let mut published: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut last_serial = 100;
        let mut mark = 0;
        let mut in_force = 0;
        for step in steps {
            match step {
                Step::Publish { gap } => {
                    last_serial += gap;
                    published.push(hubkey.publish(&hub, "site", last_serial));
                }
                Step::Replay { which } => {
                    if let Some((bundle, stamp)) = published.get(which % published.len().max(1)) {
                        hub.put("site.bundle", bundle);
                        hub.put("site.stamp", stamp);
                    }
                }
                Step::Pull => {
                    let before = host.state.high_water(
                        host.state.load(CURRENT, &host.trusted).ok().flatten().as_ref().map(|l| &l.bundle),
                    );
                    if let Ok(Pulled::Installed { stamp, .. }) = host.pull(&hub) {
                        let repair = stamp.serial == before;
                        proptest::prop_assert!(stamp.serial > before || repair,
                            "installed {} with the mark at {}", stamp.serial, before);
                    }
                }
                Step::CrashMidInstall => {
                    // What an install of the hub's pair leaves when killed
                    // after the stamp and the serial, before the bundle.
                    let files = hub.files.borrow();
                    if let (Some(bundle), Some(stamp)) = (files.get("site.bundle"), files.get("site.stamp")) {
                        let serial = open(bundle, &host.trusted).unwrap().body.header.serial;
                        if serial > mark {
                            host.state.write(STAMP, stamp).unwrap();
                            host.state.write(SERIAL, format!("{serial}\n").as_bytes()).unwrap();
                        }
                    }
                }
                Step::LoseCurrent => {
                    let _ = std::fs::remove_file(host.state.path(CURRENT));
                }
            }
            let current = host.state.load(CURRENT, &host.trusted).ok().flatten();
            let now_mark = host.state.high_water(current.as_ref().map(|l| &l.bundle));
            proptest::prop_assert!(now_mark >= mark, "the mark went from {} to {}", mark, now_mark);
            mark = now_mark;
            if let Some(local) = current {
                let serial = local.bundle.body.header.serial;
                proptest::prop_assert!(serial >= in_force, "in force went from {} to {}", in_force, serial);
                in_force = serial;
            }
        }
    }
}

#[test]
fn a_rollout_gives_listed_hosts_the_new_serial_and_keeps_the_others_on_the_previous() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    let (old, _) = hubkey.publish(&hub, "site", 10);
    let (canary, other) = (Host::new(&[&hubkey]), Host::new(&[&hubkey]));
    let other = Host {
        host: "web-02".into(),
        ..other
    };
    let fresh = Host {
        host: "web-03".into(),
        ..Host::new(&[&hubkey])
    };
    assert_eq!(installed(canary.pull(&hub)), 10);
    assert_eq!(installed(other.pull(&hub)), 10);
    hub.take_served();

    let new = hubkey.bundle("site", 11);
    let stamp = hubkey.publish_rollout(&hub, &old, &new, "hosts=web-01");
    // The selected host fetches the new release by serial.
    match canary.pull(&hub) {
        Ok(Pulled::Installed {
            serial, previous, ..
        }) => assert_eq!((serial, previous), (11, Some(10))),
        other => panic!("{other:?}"),
    }
    assert_eq!(hub.take_served(), ["site.stamp", "site.bundles/11.bundle"]);
    assert_eq!(canary.file(CURRENT).unwrap(), new);
    // The others keep what they run: only the stamp is fetched, and it is
    // recorded without raising the mark past the serial they run.
    match other.pull(&hub) {
        Ok(Pulled::Unchanged { serial, .. }) => assert_eq!(serial, 10),
        other => panic!("{other:?}"),
    }
    assert_eq!(hub.take_served(), ["site.stamp"]);
    assert_eq!(other.file(STAMP).unwrap(), stamp);
    assert_eq!(other.file(SERIAL).unwrap(), b"10\n");
    // A host that has nothing yet gets the previous release, by serial.
    assert_eq!(installed(fresh.pull(&hub)), 10);
    assert_eq!(hub.take_served(), ["site.stamp", "site.bundles/10.bundle"]);
    assert_eq!(fresh.file(CURRENT).unwrap(), old);
    // Again: nothing changes for anyone.
    for host in [&canary, &other, &fresh] {
        assert!(matches!(host.pull(&hub), Ok(Pulled::Unchanged { .. })));
    }
}

#[test]
fn a_percentage_selects_the_hosts_below_it_and_widening_keeps_them() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    let (old, _) = hubkey.publish(&hub, "site", 10);
    let hosts: Vec<Host> = (0..30)
        .map(|i| Host {
            host: format!("h{i:02}"),
            ..Host::new(&[&hubkey])
        })
        .collect();
    let new = hubkey.bundle("site", 11);
    hubkey.publish_rollout(&hub, &old, &new, "20%");
    let serials = |hosts: &[Host]| -> Vec<u64> {
        hosts
            .iter()
            .map(|h| h.pull(&hub).unwrap().serial())
            .collect()
    };
    let expected = |p: u8| -> Vec<u64> {
        hosts
            .iter()
            .map(|h| {
                if crate::stamp::rollout::bucket("site", 11, &h.host) < p {
                    11
                } else {
                    10
                }
            })
            .collect()
    };
    let at_20 = serials(&hosts);
    assert_eq!(at_20, expected(20));
    assert!(at_20.contains(&11) && at_20.contains(&10), "{at_20:?}");
    assert_eq!(serials(&hosts), at_20, "the same hosts on every run");
    hubkey.publish_rollout(&hub, &old, &new, "60%");
    let at_60 = serials(&hosts);
    assert_eq!(at_60, expected(60));
    for (before, after) in at_20.iter().zip(&at_60) {
        assert!(*before == 10 || *after == 11);
    }
}

#[test]
fn a_host_past_the_previous_serial_is_not_rolled_back_by_a_rollout() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    let (old, _) = hubkey.publish(&hub, "site", 10);
    let host = Host::new(&[&hubkey]);
    host.pull(&hub).unwrap();
    let new = hubkey.bundle("site", 11);
    hubkey.publish_rollout(&hub, &old, &new, "hosts=web-01");
    assert_eq!(installed(host.pull(&hub)), 11);
    // The rollout is narrowed to another host: web-01 would be given 10,
    // below its mark, and keeps 11 (a halt publishes a new serial).
    hubkey.publish_rollout(&hub, &old, &new, "hosts=web-09");
    let err = host.pull(&hub).unwrap_err();
    assert!(
        matches!(
            err,
            PullError::Rollback {
                offered: 10,
                accepted: 11,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(host.current_serial(), Some(11));
    // A halt: the previous content under a new serial, a plain stamp.
    let mut body = open(&old, std::slice::from_ref(&hubkey.public))
        .unwrap()
        .body;
    body.header.serial = 12;
    let halted = hubkey.seal(&body);
    let stamp = hubkey.stamp(&halted, NOW + 86_400);
    hub.put("site.bundle", &halted);
    hub.put("site.stamp", &stamp);
    assert_eq!(installed(host.pull(&hub)), 12);
    assert_eq!(host.file(SERIAL).unwrap(), b"12\n");
}

#[test]
fn a_rollout_release_is_checked_like_any_bundle() {
    let (hub, hubkey) = (Hub::default(), Publisher::new(1));
    let (old, _) = hubkey.publish(&hub, "site", 10);
    let new = hubkey.bundle("site", 11);
    hubkey.publish_rollout(&hub, &old, &new, "hosts=web-01");
    // The by-serial file of the new release holds the previous bundle.
    hub.put("site.bundles/11.bundle", &old);
    let host = Host::new(&[&hubkey]);
    let err = host.pull(&hub).unwrap_err();
    assert!(
        matches!(err, PullError::MixAndMatch { serial: 10, .. }),
        "{err:?}"
    );
    assert_eq!(host.current_serial(), None);
    // A truncated previous release for a host outside the rollout.
    hub.put("site.bundles/10.bundle", &old[..old.len() - 1]);
    let outside = Host {
        host: "web-02".into(),
        ..Host::new(&[&hubkey])
    };
    let err = outside.pull(&hub).unwrap_err();
    assert!(matches!(err, PullError::Truncated { .. }), "{err:?}");
}
