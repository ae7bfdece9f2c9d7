//! `package` promises, converged in batches: the state of every package of
//! a batch comes from ONE `dpkg-query`, and the packages to install go to
//! ONE `apt-get install` (or ONE `dpkg --install` for `.deb` files named by
//! `deb`), the ones to remove to ONE `dpkg --remove`. Peers that run
//! one package manager call per package spend most of a converged run
//! starting `dpkg`.
//!
//! A batch is formed in a pass when its first package promise comes up in
//! the bundle's order ([`Batcher`]): it takes every package promise of the
//! pass that does not have to wait for a promise still to come (through
//! `after`), so a package that comes after a file (an apt source, say), or
//! after another package, is still applied after it, in a later batch.
//!
//! When a batch command fails and it held more than one package, each
//! package is tried again on its own: one bad package fails alone, with
//! its own command and output, and the rest of the run goes on.
//!
//! A promise with `update_cache_age` refreshes apt's index first
//! (`apt-get update`) when it is older than that ([`IndexRefresh`]): at
//! most once per run, before the batch's own commands; its failure fails
//! every promise of the batch, with apt's reason.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::apt::{self, Known};
use super::process::{self, Cmd};
use super::{change, check_path, host_path, sandbox};
use crate::instance::Instance;
use crate::outcome::{Applied, Change, Outcome};
use crate::rootfs::{Kind, RootFs};
use crate::schema::name_problem;

/// One instance of a pass, as the batcher sees it.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    /// The promise's index in the bundle.
    pub index: usize,
    pub inst: Option<&'a Instance>,
    /// The promises it comes after.
    pub after: &'a [u32],
    /// It will not be applied in this pass (a contradiction, a failed
    /// dependency).
    pub blocked: bool,
}

/// The package promises of a run: results of the batches already run in
/// this pass, by position in the pass, and the index refresh of the run.
#[derive(Debug, Default)]
pub struct Batcher {
    results: HashMap<usize, Applied>,
    index: IndexRefresh,
}

/// apt's index refresh (`update_cache_age`), at most once per run: after
/// it ran (or failed, or a dry run said it would), later batches of the run
/// take that answer instead of running it again.
#[derive(Clone, Debug, Default)]
pub struct IndexRefresh {
    done: Option<Result<(), String>>,
}

impl IndexRefresh {
    /// Brings the index to at most `max_age` seconds old. `Ok(None)`: it
    /// was fresh, or was already refreshed this run; `Ok(Some)`: the
    /// change made (or, in a dry run, that would be made) and apt's log;
    /// `Err`: why the refresh failed (this run, now or earlier).
    fn ensure(
        &mut self,
        fs: &RootFs,
        dry_run: bool,
        max_age: u64,
    ) -> Result<Option<(Change, String)>, String> {
        if let Some(done) = &self.done {
            return done.clone().map(|()| None);
        }
        // Names that are not UTF-8 are no index apt wrote.
        let entries: Vec<String> = fs
            .list_dir(apt::LISTS)
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter_map(|name| String::from_utf8(name).ok())
            .collect();
        let mut files = Vec::with_capacity(entries.len());
        for name in entries {
            let path = format!("{}/{name}", apt::LISTS);
            if let Some(meta) = fs.lstat(&path).map_err(|e| e.to_string())? {
                files.push((name, meta.kind == Kind::File, meta.mtime));
            }
        }
        let newest = apt::newest_index(files);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        if !apt::stale(newest, now, max_age) {
            return Ok(None);
        }
        let cmd = apt::apt_update(sandbox(fs.path()));
        let before = apt::describe_age(newest, now);
        if dry_run {
            self.done = Some(Ok(()));
            let after = format!("refreshed (would run `{}`)", cmd.shown());
            return Ok(Some((change("index", before, after), String::new())));
        }
        let ran = process::run(&cmd).and_then(|r| if r.ok() { Ok(r) } else { Err(r.failure()) });
        match ran {
            Ok(r) => {
                self.done = Some(Ok(()));
                let log = format!("$ {}\n{}", r.shown, r.output());
                Ok(Some((change("index", before, "refreshed"), log)))
            }
            Err(why) => {
                let why = format!("refreshing the apt index failed: {why}");
                self.done = Some(Err(why.clone()));
                Err(why)
            }
        }
    }
}

impl Batcher {
    /// Forgets the batches of the previous pass (positions are per pass);
    /// the index refresh of the run is kept.
    pub fn next_pass(&mut self) {
        self.results.clear();
    }

    /// The outcome of the package instance at `position`: from the batch
    /// that already handled it, or from a new batch that starts with it.
    pub fn apply<'a>(
        &mut self,
        fs: &RootFs,
        dry_run: bool,
        position: usize,
        entries: impl FnOnce() -> Vec<Entry<'a>>,
    ) -> Applied {
        if let Some(done) = self.results.remove(&position) {
            return done;
        }
        let entries = entries();
        let members = select(position, &entries);
        let insts: Vec<&Instance> = members
            .iter()
            .filter_map(|p| entries.get(*p).and_then(|e| e.inst))
            .collect();
        let outcomes = converge(fs, dry_run, &insts, &mut self.index);
        for (p, a) in members.into_iter().zip(outcomes) {
            self.results.insert(p, a);
        }
        self.results
            .remove(&position)
            .unwrap_or_else(|| Applied::failed("the package batch lost this promise"))
    }
}

/// The positions of the batch that starts at `first`: every package
/// instance from there on that comes `after` nothing still to be applied
/// in this pass. A package that comes after another package waits for the
/// next batch too: whether its dependency failed (and it must be skipped)
/// is only known once that batch has run.
pub fn select(first: usize, entries: &[Entry<'_>]) -> Vec<usize> {
    let is_package = |e: &Entry<'_>| e.inst.is_some_and(|i| i.kind == "package") && !e.blocked;
    // Promises with an instance at `first` or later.
    let pending: HashSet<usize> = entries.iter().skip(first).map(|e| e.index).collect();
    entries
        .iter()
        .enumerate()
        .skip(first)
        .filter(|(p, e)| {
            *p == first
                || (is_package(e) && !e.after.iter().any(|d| pending.contains(&(*d as usize))))
        })
        .map(|(p, _)| p)
        .collect()
}

/// What one valid package promise needs.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Need {
    Nothing,
    /// From the repositories: `name` or `name=version`.
    Apt(String),
    /// From a `.deb` inside the root (`deb`) (its path on this host).
    Deb(String),
    Remove,
}

/// A package promise of the batch, checked.
struct Member<'i> {
    name: &'i str,
    state: &'i str,
    version: Option<&'i str>,
    deb: Option<&'i str>,
    /// `update_cache_age`, in seconds.
    update_cache_age: Option<u64>,
}

fn check<'i>(fs: &RootFs, inst: &'i Instance) -> Result<Member<'i>, Applied> {
    let name = inst.promiser.as_str();
    if let Some(why) = name_problem(name) {
        return Err(Applied::failed(format!(
            "`{}` is not a valid package name: {why}; it is passed to no tool",
            name.escape_debug()
        )));
    }
    let manager = inst.str("manager").unwrap_or("apt");
    if manager != "apt" {
        return Err(Applied::failed(format!(
            "no package backend for manager `{}` (this policyvm has `apt`)",
            manager.escape_debug()
        )));
    }
    if let Some(why) = apt::name_problem(name) {
        return Err(Applied::failed(format!(
            "`{}` is not a Debian package name: {why}; it is passed to no tool",
            name.escape_debug()
        )));
    }
    let state = inst.str("state").unwrap_or("installed");
    let version = inst.str("version");
    if let Some(why) = version.and_then(apt::version_problem) {
        return Err(Applied::failed(format!(
            "`version = {}` is not a package version: {why}",
            version.unwrap_or_default().escape_debug()
        )));
    }
    if state == "latest" && version.is_some() {
        return Err(Applied::failed(
            "`state = latest` and `version` contradict each other: drop one",
        ));
    }
    let deb = inst.str("deb");
    if let Some(src) = deb {
        check_path("deb", src)?;
        if state == "latest" {
            return Err(Applied::failed(
                "`state = latest` with a `deb` file: the file is the version; use `installed`",
            ));
        }
        if state == "installed" {
            match fs.lstat(src) {
                Ok(Some(m)) if m.kind == Kind::File => {}
                Ok(Some(_)) => {
                    return Err(Applied::failed(format!(
                        "`deb = {src}` is not a regular file in the root (links are not followed)"
                    )))
                }
                Ok(None) => {
                    return Err(Applied::failed(format!(
                        "`deb = {src}` does not exist in the root"
                    )))
                }
                Err(e) => return Err(Applied::failed(e.to_string())),
            }
        }
    }
    let update_cache_age = match inst.int("update_cache_age") {
        None => None,
        Some(secs) => Some(u64::try_from(secs).map_err(|_| {
            Applied::failed(format!("`update_cache_age = {secs}s` is not a duration"))
        })?),
    };
    Ok(Member {
        name,
        state,
        version,
        deb,
        update_cache_age,
    })
}

fn describe(k: Option<&Known>) -> String {
    match k {
        Some(k) if k.installed() => k.version.clone(),
        Some(k) if k.present() => format!("{} ({})", k.version, k.status),
        _ => "absent".to_owned(),
    }
}

/// What a member needs, given dpkg's state and apt's candidates (`None`
/// when no candidate lookup was made). `Err` is why it cannot be done.
fn need(
    m: &Member<'_>,
    known: Option<&Known>,
    candidates: &HashMap<String, Option<String>>,
    root: &Path,
) -> Result<Need, String> {
    let installed = known.filter(|k| k.installed());
    match m.state {
        "removed" => Ok(if known.is_some_and(Known::present) {
            Need::Remove
        } else {
            Need::Nothing
        }),
        "latest" => {
            let candidate = candidates.get(m.name).cloned().flatten();
            match (installed, candidate) {
                (Some(k), Some(c)) if k.version != c => Ok(Need::Apt(m.name.to_owned())),
                (Some(_), _) => Ok(Need::Nothing),
                (None, Some(_)) => Ok(Need::Apt(m.name.to_owned())),
                (None, None) => Err(no_candidate(m.name)),
            }
        }
        _ => {
            let right = installed.is_some_and(|k| m.version.is_none_or(|v| k.version == v));
            if right {
                Ok(Need::Nothing)
            } else if let Some(src) = m.deb {
                Ok(Need::Deb(host_path(root, src).display().to_string()))
            } else if !candidates.get(m.name).is_some_and(Option::is_some) {
                // Unknown to apt under this exact name: never handed to
                // `apt-get install`, which would read `a.b` as a regular
                // expression over other packages' names.
                Err(no_candidate(m.name))
            } else {
                Ok(Need::Apt(match m.version {
                    Some(v) => format!("{}={v}", m.name),
                    None => m.name.to_owned(),
                }))
            }
        }
    }
}

fn no_candidate(name: &str) -> String {
    format!(
        "no installation candidate for package `{name}`: it is in none of the configured apt repositories (`apt-cache policy` lists none); give a `deb` file or add the repository"
    )
}

/// Runs a read-only query; exit status 0 or 1 (some name unknown) is an
/// answer, anything else a failure naming the command.
fn ask(cmd: &Cmd) -> Result<String, String> {
    let ran = process::run(cmd)?;
    match ran.code {
        Some(0 | 1) => Ok(ran.stdout),
        _ => Err(ran.failure()),
    }
}

fn query(names: &[&str], root: Option<&Path>) -> Result<HashMap<String, Known>, String> {
    if names.is_empty() {
        return Ok(HashMap::new());
    }
    ask(&apt::query(names, root)).map(|out| apt::parse_query(&out))
}

/// Converges a batch of package promises; one outcome per instance, in
/// order.
pub fn converge(
    fs: &RootFs,
    dry_run: bool,
    insts: &[&Instance],
    index: &mut IndexRefresh,
) -> Vec<Applied> {
    let root_path = fs.path();
    let root = sandbox(root_path);
    let mut out: Vec<Option<Applied>> = vec![None; insts.len()];
    let mut members: Vec<(usize, Member<'_>)> = Vec::new();
    for (i, inst) in insts.iter().enumerate() {
        match check(fs, inst) {
            Ok(m) => members.push((i, m)),
            Err(failed) => set(&mut out, i, failed),
        }
    }
    // The index first, for the youngest age any member asks for.
    let asking: Vec<usize> = members
        .iter()
        .filter(|(_, m)| m.update_cache_age.is_some())
        .map(|(i, _)| *i)
        .collect();
    let refreshed = match members.iter().filter_map(|(_, m)| m.update_cache_age).min() {
        None => None,
        Some(age) => match index.ensure(fs, dry_run, age) {
            Ok(r) => r,
            Err(why) => return fail_all(out, &members, &why),
        },
    };
    // A dry run cannot see the index a refresh would bring: what it does
    // not know yet is taken to come from it.
    let assume_candidates = dry_run && refreshed.is_some();
    let out = converge_members(fs, dry_run, root, out, &members, assume_candidates);
    // The refresh is a change of every promise that asked for it; apt's
    // log goes with the first.
    let Some((refresh, log)) = refreshed else {
        return out;
    };
    out.into_iter()
        .enumerate()
        .map(|(i, mut a)| {
            if !asking.contains(&i) || matches!(a.outcome, Outcome::Failed(_)) {
                return a;
            }
            a.changes.insert(0, refresh.clone());
            a.outcome = Outcome::Repaired;
            if asking.first() == Some(&i) && !log.is_empty() {
                a.output = Some(format!("{log}{}", a.output.unwrap_or_default()));
            }
            a
        })
        .collect()
}

/// Converges the checked members of a batch (the index already handled).
fn converge_members(
    fs: &RootFs,
    dry_run: bool,
    root: Option<&Path>,
    mut out: Vec<Option<Applied>>,
    members: &[(usize, Member<'_>)],
    assume_candidates: bool,
) -> Vec<Applied> {
    let root_path = fs.path();
    let mut names: Vec<&str> = members.iter().map(|(_, m)| m.name).collect();
    names.sort_unstable();
    names.dedup();
    let known = match query(&names, root) {
        Ok(k) => k,
        Err(e) => return fail_all(out, members, &e),
    };
    // Candidates, only for what may come from the repositories.
    let mut wanted: Vec<&str> = members
        .iter()
        .filter(|(_, m)| {
            // Every package that may go to `apt-get install`: apt must
            // know it by this exact name first (see `need`).
            m.deb.is_none()
                && (m.state == "latest"
                    || (m.state == "installed"
                        && !known.get(m.name).is_some_and(|k| {
                            k.installed() && m.version.is_none_or(|v| k.version == v)
                        })))
        })
        .map(|(_, m)| m.name)
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut candidates = if wanted.is_empty() {
        HashMap::new()
    } else {
        match ask(&apt::policy(&wanted, root)) {
            Ok(text) => apt::parse_policy(&text),
            Err(e) => return fail_all(out, members, &e),
        }
    };
    if assume_candidates {
        for name in &wanted {
            let known = candidates.entry((*name).to_owned()).or_insert(None);
            if known.is_none() {
                *known = Some("(from the refreshed index)".to_owned());
            }
        }
    }
    let mut plan: Vec<(usize, &Member<'_>, Need)> = Vec::new();
    for (i, m) in members {
        let k = known.get(m.name);
        match need(m, k, &candidates, root_path) {
            Ok(Need::Nothing) => set(&mut out, *i, Applied::kept()),
            Ok(n) => plan.push((*i, m, n)),
            Err(e) => set(&mut out, *i, Applied::failed(e)),
        }
    }
    // No tool is handed a root where a planted link leads out of it.
    if sandbox(root_path).is_some() {
        plan.retain(|(i, m, n)| match contained(fs, m, n) {
            Ok(()) => true,
            Err(why) => {
                set(&mut out, *i, Applied::failed(why));
                false
            }
        });
    }
    // Removals first (a package may be replaced by another), then .deb
    // files, then the repositories.
    type Group<'p, 'm> = Vec<&'p (usize, &'m Member<'m>, Need)>;
    let removals: Group<'_, '_> = plan.iter().filter(|(_, _, n)| *n == Need::Remove).collect();
    let debs: Group<'_, '_> = plan
        .iter()
        .filter(|(_, _, n)| matches!(n, Need::Deb(_)))
        .collect();
    let repo: Group<'_, '_> = plan
        .iter()
        .filter(|(_, _, n)| matches!(n, Need::Apt(_)))
        .collect();
    let command = |group: &[&(usize, &Member<'_>, Need)]| -> Cmd {
        let words: Vec<String> = group
            .iter()
            .map(|(_, m, n)| match n {
                Need::Apt(s) | Need::Deb(s) => s.clone(),
                _ => m.name.to_owned(),
            })
            .collect();
        match group.first().map(|(_, _, n)| n) {
            Some(Need::Deb(_)) => apt::dpkg_install(&words, root),
            Some(Need::Remove) => apt::dpkg_remove(&words, root),
            _ => apt::apt_install(&words, root),
        }
    };
    // Per member: the log of the command that changed it, or its failure.
    let mut ran: HashMap<usize, Result<String, Applied>> = HashMap::new();
    for group in [removals, debs, repo] {
        if group.is_empty() {
            continue;
        }
        let cmd = command(&group);
        if dry_run {
            for (i, m, n) in &group {
                let k = known.get(m.name);
                set(
                    &mut out,
                    *i,
                    Applied::from_changes(vec![planned(m, k, n, &cmd)]),
                );
            }
            continue;
        }
        match process::run(&cmd) {
            Ok(r) if r.ok() => {
                // The output once, with the first package; the others name
                // the command and where its output is (a batch of 200 must
                // not copy apt's output 200 times into the report).
                let first = group.first().map_or("", |(_, m, _)| m.name);
                for (n, (i, _, _)) in group.iter().enumerate() {
                    let log = if n == 0 {
                        format!("$ {}\n{}", r.shown, r.output())
                    } else {
                        format!("$ {}\n(output in the report of package {first})\n", r.shown)
                    };
                    ran.insert(*i, Ok(log));
                }
            }
            result => {
                if group.len() == 1 {
                    let failed = match result {
                        Ok(r) => failure(&r),
                        Err(e) => Applied::failed(e),
                    };
                    for (i, _, _) in &group {
                        ran.insert(*i, Err(failed.clone()));
                    }
                    continue;
                }
                // One by one, so that one bad package fails alone.
                for one in &group {
                    let single = command(&[*one]);
                    let r = match process::run(&single) {
                        Ok(r) if r.ok() => Ok(format!("$ {}\n{}", r.shown, r.output())),
                        Ok(r) => Err(failure(&r)),
                        Err(e) => Err(Applied::failed(e)),
                    };
                    ran.insert(one.0, r);
                }
            }
        }
    }
    if !ran.is_empty() {
        // Confirm, again with one query for the whole batch.
        let changed: Vec<&str> = plan
            .iter()
            .filter(|(i, _, _)| matches!(ran.get(i), Some(Ok(_))))
            .map(|(_, m, _)| m.name)
            .collect();
        let after = query(&changed, root);
        for (i, m, n) in &plan {
            let result = match ran.remove(i) {
                Some(Ok(log)) => confirm(m, n, known.get(m.name), &after, &candidates, log),
                Some(Err(failed)) => failed,
                None => continue,
            };
            set(&mut out, *i, result);
        }
    }
    out.into_iter()
        .map(|o| o.unwrap_or_else(|| Applied::failed("no outcome for this package")))
        .collect()
}

/// The top-level directories of the root a package may write into, from
/// the Filesystem Hierarchy Standard: what `apt-get install` unpacks and
/// `dpkg --remove` deletes cannot be known before it runs, but it is
/// under these.
const PACKAGE_TOPS: &[&str] = &[
    "/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/sbin", "/srv",
    "/usr", "/var",
];

/// The directories dpkg and apt write their own state into.
const ADMIN_DIRS: &[&str] = &[
    "/var/lib/dpkg/info",
    "/var/lib/dpkg/updates",
    "/var/lib/dpkg/triggers",
    "/var/cache/apt/archives/partial",
    "/var/lib/apt/lists/partial",
    "/etc/apt",
];

/// Refuses (with the link named) a change for which `dpkg` or `apt-get`
/// would follow a link planted in the root out of it
/// ([`super::contain`]): their state directories, the top-level
/// directories packages go to and, for a `.deb`, every directory of its
/// file list (`dpkg-deb --contents`); for a removal, every directory of the
/// installed package's file list (`/var/lib/dpkg/info/NAME.list`).
fn contained(fs: &RootFs, m: &Member<'_>, n: &Need) -> Result<(), String> {
    let tool = match n {
        Need::Apt(_) => "`apt-get`",
        _ => "`dpkg`",
    };
    super::contain::check_all(fs, ADMIN_DIRS.iter().chain(PACKAGE_TOPS).copied(), tool)?;
    if *n == Need::Remove {
        // What dpkg will delete: the file lists of the installed package
        // (`NAME.list`, or `NAME:ARCH.list` for a multi-arch one).
        let info = "/var/lib/dpkg/info";
        // Names that are not UTF-8 name no package.
        let lists: Vec<String> = fs
            .list_dir(info)
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter_map(|name| String::from_utf8(name).ok())
            .collect();
        for list in lists.iter().filter(|l| {
            l.strip_suffix(".list").is_some_and(|stem| {
                stem == m.name
                    || stem
                        .strip_prefix(m.name)
                        .is_some_and(|arch| arch.starts_with(':'))
            })
        }) {
            let path = format!("{info}/{list}");
            let text = fs
                .read_file(&path)
                .map_err(|e| e.to_string())?
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            let dirs: std::collections::BTreeSet<&str> = text
                .lines()
                .filter_map(|f| f.rsplit_once('/').map(|(d, _)| d))
                .filter(|d| !d.is_empty())
                .collect();
            super::contain::check_all(fs, dirs, tool)
                .map_err(|why| format!("{why} (it holds files of `{}`)", m.name))?;
        }
    }
    if let (Need::Deb(file), Some(src)) = (n, m.deb) {
        let ran = process::run(&apt::contents(file))?;
        if !ran.ok() {
            return Err(ran.failure());
        }
        let dirs = apt::listed_dirs(&ran.stdout);
        super::contain::check_all(fs, dirs.iter().map(String::as_str), tool)
            .map_err(|why| format!("{why} (it is in the file list of `{src}`)"))?;
    }
    Ok(())
}

fn set(out: &mut [Option<Applied>], i: usize, a: Applied) {
    if let Some(slot) = out.get_mut(i) {
        *slot = Some(a);
    }
}

fn fail_all(
    mut out: Vec<Option<Applied>>,
    members: &[(usize, Member<'_>)],
    why: &str,
) -> Vec<Applied> {
    for (i, _) in members {
        set(&mut out, *i, Applied::failed(why.to_owned()));
    }
    out.into_iter()
        .map(|o| o.unwrap_or_else(|| Applied::failed(why.to_owned())))
        .collect()
}

fn failure(r: &process::Ran) -> Applied {
    Applied {
        outcome: Outcome::Failed(r.failure()),
        changes: Vec::new(),
        output: Some(format!("$ {}\n{}", r.shown, r.output())),
    }
}

fn planned(m: &Member<'_>, k: Option<&Known>, n: &Need, cmd: &Cmd) -> Change {
    let (what, after) = match n {
        Need::Remove => ("removed", "absent".to_owned()),
        _ => (
            "installed",
            m.version.map_or_else(|| m.state.to_owned(), str::to_owned),
        ),
    };
    change(
        what,
        describe(k),
        format!("{after} (would run `{}`)", cmd.shown()),
    )
}

/// The change a command made, confirmed by the second query.
fn confirm(
    m: &Member<'_>,
    n: &Need,
    before: Option<&Known>,
    after: &Result<HashMap<String, Known>, String>,
    candidates: &HashMap<String, Option<String>>,
    log: String,
) -> Applied {
    let now = match after {
        Ok(k) => k.get(m.name),
        Err(e) => {
            return Applied {
                outcome: Outcome::Failed(e.clone()),
                changes: Vec::new(),
                output: Some(log),
            }
        }
    };
    let installed = now.filter(|k| k.installed());
    let problem = match n {
        Need::Remove => now
            .filter(|k| k.present())
            .map(|k| format!("`{}` is still {} after removing it", m.name, k.status)),
        _ => match (installed, m.version, m.state) {
            (None, _, _) => Some(format!(
                "`{}` is not installed after installing it{}",
                m.name,
                if m.deb.is_some() {
                    " (does the `deb` file hold another package?)"
                } else {
                    ""
                }
            )),
            (Some(k), Some(v), _) if k.version != v => Some(format!(
                "`{}` is at version {} after installing version {v}",
                m.name, k.version
            )),
            (Some(k), None, "latest") => candidates
                .get(m.name)
                .cloned()
                .flatten()
                .filter(|c| *c != k.version)
                .map(|c| format!("`{}` is at {} after upgrading to {c}", m.name, k.version)),
            _ => None,
        },
    };
    if let Some(p) = problem {
        return Applied {
            outcome: Outcome::Failed(p),
            changes: Vec::new(),
            output: Some(log),
        };
    }
    let c = match n {
        Need::Remove => change("removed", describe(before), "absent"),
        _ => change("installed", describe(before), describe(now)),
    };
    Applied {
        outcome: Outcome::Repaired,
        changes: vec![c],
        output: Some(log),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(kind: &'static str, name: &str) -> Instance {
        Instance {
            index: 0,
            kind,
            promiser: name.to_owned(),
            attrs: Vec::new(),
        }
    }

    #[test]
    fn a_batch_takes_every_package_that_need_not_wait() {
        let (a, b, f, c, d) = (
            inst("package", "a"),
            inst("package", "b"),
            inst("file", "/f"),
            inst("package", "c"),
            inst("package", "d"),
        );
        let after_f = [2u32];
        let after_c = [3u32];
        let entries = vec![
            Entry {
                index: 0,
                inst: Some(&a),
                after: &[],
                blocked: false,
            },
            Entry {
                index: 1,
                inst: Some(&b),
                after: &[],
                blocked: false,
            },
            Entry {
                index: 2,
                inst: Some(&f),
                after: &[],
                blocked: false,
            },
            // c comes after the file: it waits; d comes after c: it waits too.
            Entry {
                index: 3,
                inst: Some(&c),
                after: &after_f,
                blocked: false,
            },
            Entry {
                index: 4,
                inst: Some(&d),
                after: &after_c,
                blocked: false,
            },
        ];
        assert_eq!(select(0, &entries), [0, 1]);
        // Once the file is applied, c goes; d waits for c's outcome.
        assert_eq!(select(3, &entries), [3]);
        assert_eq!(select(4, &entries), [4]);
        let mut blocked = entries.clone();
        if let Some(e) = blocked.get_mut(1) {
            e.blocked = true;
        }
        assert_eq!(select(0, &blocked), [0]);
    }

    #[test]
    fn needs() {
        let m = |state: &'static str, version: Option<&'static str>| Member {
            name: "alpha",
            state,
            version,
            deb: None,
            update_cache_age: None,
        };
        let k = |status: &str, version: &str| Known {
            status: status.into(),
            version: version.into(),
        };
        let root = Path::new("/");
        let mut cand = HashMap::new();
        cand.insert("alpha".to_owned(), Some("2.0".to_owned()));
        let none = HashMap::new();
        let installed = k("installed", "1.0");
        assert_eq!(
            need(&m("installed", None), Some(&installed), &none, root),
            Ok(Need::Nothing)
        );
        assert_eq!(
            need(&m("installed", Some("2.0")), Some(&installed), &cand, root),
            Ok(Need::Apt("alpha=2.0".into()))
        );
        // Unknown to apt by this exact name: never handed to apt-get.
        assert!(need(&m("installed", Some("2.0")), Some(&installed), &none, root).is_err());
        assert_eq!(
            need(&m("installed", None), None, &cand, root),
            Ok(Need::Apt("alpha".into()))
        );
        assert!(need(&m("installed", None), None, &none, root)
            .unwrap_err()
            .contains("no installation candidate"));
        assert_eq!(
            need(&m("latest", None), Some(&installed), &cand, root),
            Ok(Need::Apt("alpha".into()))
        );
        assert_eq!(
            need(
                &m("latest", None),
                Some(&k("installed", "2.0")),
                &cand,
                root
            ),
            Ok(Need::Nothing)
        );
        assert_eq!(
            need(&m("removed", None), Some(&installed), &none, root),
            Ok(Need::Remove)
        );
        assert_eq!(
            need(
                &m("removed", None),
                Some(&k("config-files", "1.0")),
                &none,
                root
            ),
            Ok(Need::Nothing)
        );
        assert_eq!(
            need(&m("removed", None), None, &none, root),
            Ok(Need::Nothing)
        );
    }
}
