//! Change detection: the `watch` promise type (LANGUAGE.md section 15,
//! docs/change-detection.md).
//!
//! A run opens one [`Session`]: it reads the history and the entries
//! databases of the state directory's `watch/` and checks that they hold
//! together ([`history`]: every record links to the one before; the head
//! written after the last append is the last record; the last record's
//! database digests are the databases' digests). A break is reported,
//! kept as evidence and rebuilt from a fresh baseline, with the break
//! recorded as a record of its own — never silently. Each active `watch`
//! promise then reads its path ([`scan`]), compares it with its database
//! ([`compare`]) and stages the new one; at the end of the run
//! [`Session::finish`] writes the databases and appends one record when
//! anything was recorded. Every report carries the chain
//! ([`converge_format::chain::ChainReport`]).

pub mod bounds;
pub mod compare;
pub mod entry;
pub mod hash;
pub mod history;
pub mod scan;
pub mod store;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sha2::{Digest as _, Sha256};

use converge_format::chain::{format_digest, ChainReport, GENESIS};
use converge_format::globs::Excludes;
use converge_format::schema::{WATCH_ATTRIBUTES, WATCH_DEFAULT_ATTRIBUTES};

use crate::instance::Instance;
use crate::outcome::{Applied, Change, Outcome};
use crate::rootfs::{printable, RootFs};
use crate::state::StateDir;
use bounds::{MAX_ENTRIES_PER_RUN, MAX_ENTRIES_PER_WATCH, MAX_REPORTED_CHANGES};
use compare::WatchChange;
use entry::{Content, Database, DATABASE_VERSION};
use history::{Body, Broken, Record, RecordKind};
use store::Store;

/// What a run's report says of change detection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchReport {
    /// The history after the run.
    pub chain: ChainReport,
    /// The break found at the start of the run, if any ("history broken
    /// at record N: why").
    pub broken: Option<String>,
    /// Entries reported changed in this run.
    pub changed_entries: u64,
    /// The first [`MAX_REPORTED_CHANGES`] of them.
    pub changes: Vec<WatchChange>,
    /// Whether this run appended a record.
    pub recorded: bool,
    /// Why the run's record could not be written, if it could not.
    pub error: Option<String>,
}

/// A database loaded from `watch/`, with the digest of its file.
#[derive(Debug)]
struct Loaded {
    db: Database,
    digest: String,
}

/// Change detection for one run.
#[derive(Debug)]
pub struct Session {
    /// `watch/` of the state directory; `Ok(None)` while it does not exist
    /// (created by the first watch of a run that records something, so a
    /// run without watches, or a dry run, leaves the state alone).
    store: Result<Option<Store>, String>,
    state: Option<StateDir>,
    dry_run: bool,
    records: Vec<Record>,
    /// Watched path -> its database as the run found it.
    databases: BTreeMap<String, Loaded>,
    /// What was found broken, said in full.
    broken: Option<String>,
    /// Databases to write at the end (path -> new database), and whether
    /// each is a first baseline.
    staged: BTreeMap<String, (Database, bool)>,
    changes: Vec<WatchChange>,
    /// Paths a watch of this run has read.
    watched: BTreeSet<String>,
    /// Entries recorded in this run so far.
    entries: usize,
}

impl Session {
    /// Reads and checks the history of `state`; with no state directory,
    /// every `watch` fails with the reason.
    pub fn open(state: Option<&StateDir>, dry_run: bool) -> Session {
        let store = match state {
            Some(s) if s.has(store::DIR) => Store::open(s).map(Some),
            Some(_) => Ok(None),
            // A dry run where no state directory exists yet: nothing was
            // recorded, so every watch would take its baseline.
            None if dry_run => Ok(None),
            None => Err(
                "change detection needs a state directory (`--state DIR`) to keep its history"
                    .to_owned(),
            ),
        };
        let mut session = Session {
            store,
            state: state.cloned(),
            dry_run,
            records: Vec::new(),
            databases: BTreeMap::new(),
            broken: None,
            staged: BTreeMap::new(),
            changes: Vec::new(),
            watched: BTreeSet::new(),
            entries: 0,
        };
        if let Err(e) = session.load() {
            session.store = Err(e);
        }
        session
    }

    /// Loads and checks; a break is recorded in `self.broken` and, unless
    /// this is a dry run, the state is reset to the good records.
    fn load(&mut self) -> Result<(), String> {
        let Ok(Some(store)) = &self.store else {
            return Ok(());
        };
        let text = store.read_history()?;
        let (records, mut broken) = match &text {
            Some(t) => history::parse(t),
            None => (Vec::new(), None),
        };
        let mut dbs: BTreeMap<String, Loaded> = BTreeMap::new();
        let mut db_names: Vec<String> = Vec::new();
        for name in store.db_names()? {
            db_names.push(name.clone());
            let Some(bytes) = store.read_db(&name)? else {
                continue;
            };
            let digest = format_digest(&Sha256::digest(&bytes).into());
            match Database::decode(&bytes) {
                Ok(db) if Store::db_name(&db.path) == name => {
                    dbs.insert(db.path.clone(), Loaded { db, digest });
                }
                Ok(_) => {
                    broken.get_or_insert(Broken {
                        at: records.len() as u64,
                        why: format!("`watch/{name}` holds the database of another path"),
                    });
                }
                Err(e) => {
                    broken.get_or_insert(Broken {
                        at: records.len() as u64,
                        why: format!("`watch/{name}`: {e}"),
                    });
                }
            }
        }
        if broken.is_none() {
            broken = check_head(store, &records, text.is_some())?;
        }
        if broken.is_none() {
            broken = check_databases(&records, &dbs);
        }
        let good_len = records.len();
        self.records = records;
        let Some(b) = broken else {
            self.databases = dbs;
            return Ok(());
        };
        let at = b.at.max(1);
        self.broken = Some(format!("history broken at record {at}: {}", b.why));
        if self.dry_run {
            return Ok(());
        }
        // Keep the evidence, keep the good records, start every database
        // afresh. The break record is appended at the end of the run.
        if let Some(t) = &text {
            store.keep_broken(t)?;
        }
        let mut good = Vec::new();
        let mut prev = GENESIS;
        for r in self.records.iter().take(good_len) {
            let (line, _) = history::line(&prev, &r.body)?;
            prev = r.digest;
            good.extend(line);
        }
        store.write_history(&good)?;
        for name in db_names {
            store.remove(&name)?;
        }
        let chain = history::chain_report(&self.records);
        store.write_head(chain.length, &chain.head)?;
        Ok(())
    }

    /// Applies one `watch` promise instance.
    pub fn apply(&mut self, fs: &RootFs, inst: &Instance) -> Applied {
        let path = inst.promiser.trim_end_matches('/');
        let path = if path.is_empty() { "/" } else { path }.to_owned();
        if let (Ok(None), Some(state), false) = (&self.store, &self.state, self.dry_run) {
            self.store = Store::open(state).map(Some);
        }
        if let Err(e) = &self.store {
            return Applied::failed(e.clone());
        }
        if !self.watched.insert(path.clone()) {
            return Applied::failed(format!(
                "another `watch` promise on `{}` ran in this run; a path has one change database (merge the two promises)",
                printable(&path)
            ));
        }
        let selection = match selection(inst) {
            Ok(s) => s,
            Err(e) => return Applied::failed(e),
        };
        let (attributes, exclude, excludes, recurse) = selection;
        let left = MAX_ENTRIES_PER_RUN.saturating_sub(self.entries);
        let sel = scan::Selection {
            path: &path,
            recurse,
            content: attributes.iter().any(|a| a == "content"),
            excludes: &excludes,
            max_entries: MAX_ENTRIES_PER_WATCH.min(left),
        };
        let entries = match scan::scan(fs, &sel) {
            Ok(found) => found.unwrap_or_default(),
            Err(e) => return Applied::failed(e),
        };
        self.entries = self.entries.saturating_add(entries.len());
        let notes = problems(&entries);
        let new = Database {
            version: DATABASE_VERSION,
            path: path.clone(),
            attributes: attributes.clone(),
            exclude,
            recurse,
            entries,
        };
        let count = new.entries.len();
        let old = self.databases.get(&path).map(|l| &l.db);
        let mut applied = if let Some(broken) = &self.broken {
            self.staged.insert(path.clone(), (new, true));
            Applied::failed(format!(
                "{}; rebuilt from a fresh baseline of {count} entries, the break recorded in the history (docs/change-detection.md, \"A broken history\")",
                broken
            ))
        } else {
            match old {
                None => {
                    self.staged.insert(path.clone(), (new, true));
                    Applied {
                        outcome: Outcome::Kept,
                        changes: Vec::new(),
                        output: Some(if self.dry_run {
                            format!("no baseline yet ({count} entries; a dry run records nothing)")
                        } else {
                            format!("baseline recorded: {count} entries")
                        }),
                    }
                }
                Some(old) if !old.same_selection(&new) => {
                    self.staged.insert(path.clone(), (new, false));
                    Applied {
                        outcome: Outcome::Kept,
                        changes: Vec::new(),
                        output: Some(format!(
                            "what is watched changed (attributes, exclude or recurse): new baseline of {count} entries"
                        )),
                    }
                }
                Some(old) => {
                    let found = compare::changes(&old.entries, &new.entries, &attributes);
                    if found.is_empty() {
                        Applied::kept()
                    } else {
                        let changes = report_changes(&found);
                        self.changes.extend(found);
                        self.staged.insert(path.clone(), (new, false));
                        Applied {
                            outcome: Outcome::Changed,
                            changes,
                            output: None,
                        }
                    }
                }
            }
        };
        if !notes.is_empty() {
            let text = notes.join("\n");
            applied.output = Some(match applied.output.take() {
                Some(o) => format!("{o}\n{text}"),
                None => text,
            });
        }
        applied
    }

    /// Writes the staged databases and appends this run's record (unless
    /// nothing was recorded or this is a dry run).
    pub fn finish(mut self, serial: u64) -> WatchReport {
        let changed_entries = self.changes.len() as u64;
        let mut report = WatchReport {
            chain: history::chain_report(&self.records),
            broken: self.broken.clone(),
            changed_entries,
            changes: self
                .changes
                .iter()
                .take(MAX_REPORTED_CHANGES)
                .cloned()
                .collect(),
            recorded: false,
            error: None,
        };
        let store = std::mem::replace(&mut self.store, Err(String::new()));
        let Ok(Some(store)) = store else {
            return report;
        };
        if self.dry_run || (self.staged.is_empty() && self.broken.is_none()) {
            return report;
        }
        match self.record(&store, serial) {
            Ok(()) => {
                report.chain = history::chain_report(&self.records);
                report.recorded = true;
            }
            Err(e) => report.error = Some(e),
        }
        report
    }

    fn record(&mut self, store: &Store, serial: u64) -> Result<(), String> {
        let mut digests: BTreeMap<String, String> = self
            .databases
            .iter()
            .map(|(p, l)| (p.clone(), l.digest.clone()))
            .collect();
        let mut only_baselines = true;
        for (path, (db, first)) in &self.staged {
            let bytes = db.encode()?;
            store.write_db(&Store::db_name(path), &bytes)?;
            digests.insert(path.clone(), format_digest(&Sha256::digest(&bytes).into()));
            only_baselines &= *first;
        }
        let kind = if self.broken.is_some() {
            RecordKind::Break
        } else if only_baselines {
            RecordKind::Baseline
        } else {
            RecordKind::Changes
        };
        let prev = self.records.last().map_or(GENESIS, |r| r.digest);
        let body = Body::new(
            (self.records.len() as u64).saturating_add(1),
            jiff::Timestamp::now().as_second(),
            serial,
            kind,
            digests,
            &self.changes,
            self.broken.clone(),
        );
        let (line, record) = history::line(&prev, &body)?;
        store.append_history(&line)?;
        self.records.push(record);
        let chain = history::chain_report(&self.records);
        store.write_head(chain.length, &chain.head)
    }
}

/// The promise's attributes (sorted, checked), exclude globs (as written
/// and compiled) and recurse.
fn selection(inst: &Instance) -> Result<(Vec<String>, Vec<String>, Excludes, bool), String> {
    let mut attributes: Vec<String> = match inst.list("attributes") {
        Some(list) => list.to_vec(),
        None => WATCH_DEFAULT_ATTRIBUTES
            .iter()
            .map(|a| (*a).to_owned())
            .collect(),
    };
    if let Some(bad) = attributes
        .iter()
        .find(|a| !WATCH_ATTRIBUTES.contains(&a.as_str()))
    {
        return Err(format!(
            "`{}` is not an attribute `watch` compares (one of {})",
            printable(bad),
            WATCH_ATTRIBUTES.join(", ")
        ));
    }
    attributes.sort();
    attributes.dedup();
    let exclude: Vec<String> = inst
        .list("exclude")
        .map(<[String]>::to_vec)
        .unwrap_or_default();
    let excludes = Excludes::new(&exclude).map_err(|(i, why)| {
        format!(
            "exclude glob {} is not valid: {why}",
            exclude.get(i).map(|g| format!("{g:?}")).unwrap_or_default()
        )
    })?;
    Ok((
        attributes,
        exclude,
        excludes,
        inst.bool("recurse") == Some(true),
    ))
}

/// The changes as the run report lists them (bounded).
fn report_changes(found: &[WatchChange]) -> Vec<Change> {
    let mut out: Vec<Change> = found
        .iter()
        .take(MAX_REPORTED_CHANGES)
        .map(|c| Change {
            what: format!("{} {}", c.path, c.what),
            before: c.before.clone(),
            after: c.after.clone(),
            diff: None,
        })
        .collect();
    if found.len() > MAX_REPORTED_CHANGES {
        out.push(Change {
            what: "more".to_owned(),
            before: String::new(),
            after: format!(
                "{} more changes (the history record holds their digest)",
                found.len().saturating_sub(MAX_REPORTED_CHANGES)
            ),
            diff: None,
        });
    }
    out
}

/// Entries that could not be read or that changed while read, one line
/// each (bounded).
fn problems(entries: &[entry::Entry]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut total = 0usize;
    for e in entries {
        let line = match &e.content {
            Content::Unreadable(why) => format!("unreadable: {} ({})", e.path, why),
            Content::Unstable => format!("unstable: {} changed while it was read", e.path),
            _ => continue,
        };
        total = total.saturating_add(1);
        if out.len() < MAX_REPORTED_CHANGES {
            out.push(line);
        }
    }
    if total > out.len() {
        out.push(format!("... {} more", total.saturating_sub(out.len())));
    }
    out
}

/// The head file against the records.
fn check_head(
    store: &Store,
    records: &[Record],
    has_history: bool,
) -> Result<Option<Broken>, String> {
    let n = records.len() as u64;
    let head = store.read_head()?;
    let broken = |at: u64, why: &str| {
        Some(Broken {
            at,
            why: why.to_owned(),
        })
    };
    Ok(match head {
        None if n == 0 && !has_history => None,
        None => broken(1, "the head written after the last run is missing"),
        Some(Err(why)) => broken(n.saturating_add(1), &why),
        Some(Ok((length, digest))) => {
            let at = |len: u64| {
                len.checked_sub(1)
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| records.get(i))
                    .map_or(format_digest(&GENESIS), |r| format_digest(&r.digest))
            };
            if n < length {
                Some(Broken {
                    at: n.saturating_add(1),
                    why: format!(
                        "the history has {n} records, the head written after the last run names {length} (records were removed)"
                    ),
                })
            } else if at(length) != digest {
                broken(
                    length.max(1),
                    "the head written after the last run is not in the history (it was rewritten)",
                )
            } else if n > length.saturating_add(1) {
                Some(Broken {
                    at: length.saturating_add(2),
                    why: format!(
                        "the history has {n} records, the head written after the last run names {length}"
                    ),
                })
            } else {
                // Equal, or one record appended by a run that stopped before
                // it wrote the head: that record checked like the others.
                None
            }
        }
    })
}

/// The last record's databases against the database files.
fn check_databases(records: &[Record], dbs: &BTreeMap<String, Loaded>) -> Option<Broken> {
    let empty = BTreeMap::new();
    let (at, recorded) = match records.last() {
        Some(r) => (r.body.seq, &r.body.databases),
        None => (1, &empty),
    };
    let found: HashMap<&String, &String> = dbs.iter().map(|(p, l)| (p, &l.digest)).collect();
    for (path, digest) in recorded {
        match found.get(path) {
            None => {
                return Some(Broken {
                    at,
                    why: format!("the entries database of `{}` is missing", printable(path)),
                })
            }
            Some(d) if *d != digest => {
                return Some(Broken {
                    at,
                    why: format!(
                    "the entries database of `{}` is not the one the record names (it was edited)",
                    printable(path)
                ),
                })
            }
            Some(_) => {}
        }
    }
    if let Some(extra) = dbs.keys().find(|p| !recorded.contains_key(*p)) {
        return Some(Broken {
            at,
            why: format!(
                "an entries database of `{}` that no record names",
                printable(extra)
            ),
        });
    }
    None
}
