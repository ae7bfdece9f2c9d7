//! `package` promises, converged in batches through the root's toolset
//! ([`super::toolset`]: apt on the Debian family, dnf/rpm on the Red Hat
//! family): the state of every package of a batch comes from ONE query
//! (`dpkg-query`, `rpm -qa`), and the packages to install go to ONE
//! transaction (`apt-get install`, `dnf install`; or ONE `dpkg --install`
//! / `dnf install` of the local files named by `deb` / `rpm`), the ones to
//! remove to ONE removal (`dpkg --remove`, `rpm -e`). Peers that run one
//! package manager call per package spend most of a converged run
//! starting it. Nothing here knows which toolset it drives.
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
//! A promise with `update_cache_age` refreshes the index first (apt:
//! `apt-get update` when it is older than that, [`IndexRefresh`]; dnf:
//! `metadata_expire`): at most once per run, before the batch's own
//! commands; its failure fails every promise of the batch, with the
//! tool's reason.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write as _;
use std::path::Path;

use super::process::{self, Cmd};
pub use super::toolset::IndexRefresh;
use super::toolset::{self, Known, Need, OsRelease, Toolset};
use super::{change, check_path, host_path, sandbox};
use crate::instance::{Instance, Value};
use crate::outcome::{Applied, Change, Outcome};
use crate::rootfs::{Kind, RootFs};
use crate::schema::{name_problem, package_file_problem};

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

/// The attributes naming a local package file, one per toolset: a promise
/// may only use the one of the toolset its root gets.
const FILE_ATTRS: &[&str] = &["deb", "rpm"];

/// A local package file: a path inside the root (`deb`), or a file of the
/// policy tree embedded in the bundle (`rpm`).
#[derive(Clone, Copy, Debug)]
enum PkgFile<'i> {
    InRoot(&'i str),
    Embedded(&'i [u8]),
}

/// A package promise of the batch, checked.
struct Member<'i> {
    name: &'i str,
    state: &'i str,
    version: Option<&'i str>,
    file: Option<PkgFile<'i>>,
    /// `update_cache_age`, in seconds.
    update_cache_age: Option<u64>,
}

impl Member<'_> {
    /// The local file as the policy names it (for messages).
    fn file_shown(&self, tool: &dyn Toolset) -> Option<String> {
        self.file.map(|f| match f {
            PkgFile::InRoot(p) => p.to_owned(),
            PkgFile::Embedded(b) => format!(
                "the embedded `{}` file ({} bytes)",
                tool.file_attr(),
                b.len()
            ),
        })
    }
}

fn check<'i>(fs: &RootFs, inst: &'i Instance, tool: &dyn Toolset) -> Result<Member<'i>, Applied> {
    let name = inst.promiser.as_str();
    if let Some(why) = name_problem(name) {
        return Err(Applied::failed(format!(
            "`{}` is not a valid package name: {why}; it is passed to no tool",
            name.escape_debug()
        )));
    }
    if let Some(why) = tool.name_problem(name) {
        return Err(Applied::failed(format!(
            "`{}` is not a package name for {}: {why}; it is passed to no tool",
            name.escape_debug(),
            tool.name()
        )));
    }
    let state = inst.str("state").unwrap_or("installed");
    let version = inst.str("version");
    if let Some(why) = version.and_then(|v| tool.version_problem(v)) {
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
    let attr = tool.file_attr();
    if let Some(other) = FILE_ATTRS
        .iter()
        .find(|a| **a != attr && inst.get(a).is_some())
    {
        return Err(Applied::failed(format!(
            "`{other}` names a package file for another toolset: this root's packages are managed by {} (use `{attr}`, or set `manager`)",
            tool.name()
        )));
    }
    let file = match inst.get(attr) {
        None => None,
        Some(Value::Bytes(b)) => {
            // The compiler refused such a file; a bundle is checked again.
            if let Some(why) = package_file_problem(attr, b) {
                return Err(Applied::failed(format!(
                    "the embedded `{attr}` file is not usable: {why}; it is passed to no tool"
                )));
            }
            Some(PkgFile::Embedded(b))
        }
        Some(Value::Str(src)) => {
            check_path(attr, src)?;
            Some(PkgFile::InRoot(src))
        }
        Some(other) => {
            return Err(Applied::failed(format!(
                "`{attr} = {}` names no package file",
                other.display()
            )))
        }
    };
    if let Some(f) = file {
        if state == "latest" {
            return Err(Applied::failed(format!(
                "`state = latest` with a `{attr}` file: the file is the version; use `installed`"
            )));
        }
        if let (PkgFile::InRoot(src), "installed") = (f, state) {
            match fs.lstat(src) {
                Ok(Some(m)) if m.kind == Kind::File => {}
                Ok(Some(_)) => {
                    return Err(Applied::failed(format!(
                    "`{attr} = {src}` is not a regular file in the root (links are not followed)"
                )))
                }
                Ok(None) => {
                    return Err(Applied::failed(format!(
                        "`{attr} = {src}` does not exist in the root"
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
        file,
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

/// Whether the installed state is what the member asks for (`installed`,
/// at its version when it names one).
fn is_right(tool: &dyn Toolset, m: &Member<'_>, known: Option<&Known>) -> bool {
    known.is_some_and(|k| {
        k.installed()
            && m.version
                .is_none_or(|v| tool.version_matches(&k.version, v))
    })
}

/// Local package files embedded in the bundle, written to temporary files
/// on this host for the tool to read (removed when the batch is done).
#[derive(Default)]
struct Staged {
    files: Vec<tempfile::NamedTempFile>,
}

impl Staged {
    /// The host path of `bytes`, written to a private temporary file named
    /// `*.SUFFIX` (dnf reads a local package only by its `.rpm` name).
    fn stage(&mut self, bytes: &[u8], suffix: &str) -> Result<String, String> {
        let mut file = tempfile::Builder::new()
            .prefix("converge-package-")
            .suffix(&format!(".{suffix}"))
            .tempfile()
            .map_err(|e| format!("cannot stage the package file: {e}"))?;
        file.write_all(bytes)
            .and_then(|()| file.flush())
            .map_err(|e| format!("cannot stage the package file: {e}"))?;
        let path = file.path().display().to_string();
        self.files.push(file);
        Ok(path)
    }
}

/// What a member needs, given the database's state and the repositories'
/// candidates (`None` when no candidate lookup was made). `Err` is why it
/// cannot be done. An embedded file is staged (`stage`) only when needed.
fn need(
    tool: &dyn Toolset,
    m: &Member<'_>,
    known: Option<&Known>,
    candidates: &HashMap<String, Option<String>>,
    root: &Path,
    stage: &mut dyn FnMut(&[u8]) -> Result<String, String>,
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
                (Some(k), Some(c)) if tool.upgrades(&c, &k.version) => {
                    Ok(Need::Repo(tool.latest_spec(m.name, &c)))
                }
                (Some(_), _) => Ok(Need::Nothing),
                (None, Some(_)) => Ok(Need::Repo(tool.spec(m.name, None))),
                (None, None) => Err(tool.no_candidate(m.name)),
            }
        }
        _ => {
            if is_right(tool, m, known) {
                Ok(Need::Nothing)
            } else if let Some(file) = m.file {
                Ok(Need::File(match file {
                    PkgFile::InRoot(src) => host_path(root, src).display().to_string(),
                    PkgFile::Embedded(bytes) => stage(bytes)?,
                }))
            } else if !candidates.get(m.name).is_some_and(Option::is_some) {
                // Unknown to the repositories under this exact name: never
                // handed to the installer, which would read `a.b` as a
                // pattern over other packages' names (apt: a regular
                // expression; dnf: name.arch).
                Err(tool.no_candidate(m.name))
            } else {
                Ok(Need::Repo(tool.spec(m.name, m.version)))
            }
        }
    }
}

/// Converges a batch of package promises; one outcome per instance, in
/// order. Each promise gets the toolset its `manager` names, else the
/// root's ([`toolset::select`]); each toolset converges its members.
pub fn converge(
    fs: &RootFs,
    dry_run: bool,
    insts: &[&Instance],
    index: &mut IndexRefresh,
) -> Vec<Applied> {
    let mut out: Vec<Option<Applied>> = vec![None; insts.len()];
    // Positions by toolset, in order: the promise's `manager`, else the
    // root's family.
    let release = OsRelease::read(fs);
    let family = release.family_manager();
    let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, inst) in insts.iter().enumerate() {
        match inst.str("manager").map_or(family.as_deref(), Ok) {
            Ok(name) => groups.entry(name).or_default().push(i),
            Err(why) => set(&mut out, i, Applied::failed(why.clone())),
        }
    }
    for (manager, positions) in groups {
        let mut tool = match toolset::select(fs, &release, manager) {
            Ok(t) => t,
            Err(why) => {
                for i in positions {
                    set(&mut out, i, Applied::failed(why.clone()));
                }
                continue;
            }
        };
        let group: Vec<&Instance> = positions
            .iter()
            .filter_map(|i| insts.get(*i).copied())
            .collect();
        let results = converge_with(tool.as_mut(), fs, dry_run, &group, index);
        for (i, a) in positions.into_iter().zip(results) {
            set(&mut out, i, a);
        }
    }
    out.into_iter()
        .map(|o| o.unwrap_or_else(|| Applied::failed("no outcome for this package")))
        .collect()
}

/// Converges the package promises of one toolset.
fn converge_with(
    tool: &mut dyn Toolset,
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
        match check(fs, inst, &*tool) {
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
        Some(age) => match tool.refresh(fs, dry_run, age, index) {
            Ok(r) => r,
            Err(why) => return fail_all(out, &members, &why),
        },
    };
    // A dry run cannot see the index a refresh would bring: what it does
    // not know yet is taken to come from it.
    let assume_candidates = dry_run && refreshed.is_some();
    let out = converge_members(&*tool, fs, dry_run, root, out, &members, assume_candidates);
    // The refresh is a change of every promise that asked for it; the
    // tool's log goes with the first.
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
    tool: &dyn Toolset,
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
    let known = match tool.query(&names, root) {
        Ok(k) => k,
        Err(e) => return fail_all(out, members, &e.0),
    };
    // Candidates, only for what may come from the repositories.
    let mut wanted: Vec<&str> = members
        .iter()
        .filter(|(_, m)| {
            // Every package that may go to the install transaction: the
            // repositories must know it by this exact name first (see
            // `need`).
            m.file.is_none()
                && (m.state == "latest"
                    || (m.state == "installed" && !is_right(tool, m, known.get(m.name))))
        })
        .map(|(_, m)| m.name)
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut candidates = if wanted.is_empty() {
        HashMap::new()
    } else {
        match tool.candidates(&wanted, root) {
            Ok(c) => c,
            Err(e) => return fail_all(out, members, &e.0),
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
    let mut staged = Staged::default();
    let suffix = tool.file_attr();
    let mut stage = |bytes: &[u8]| staged.stage(bytes, suffix);
    let mut plan: Vec<(usize, &Member<'_>, Need)> = Vec::new();
    for (i, m) in members {
        let k = known.get(m.name);
        match need(tool, m, k, &candidates, root_path, &mut stage) {
            Ok(Need::Nothing) => set(&mut out, *i, Applied::kept()),
            Ok(n) => plan.push((*i, m, n)),
            Err(e) => set(&mut out, *i, Applied::failed(e)),
        }
    }
    // No tool is handed a root where a planted link leads out of it.
    if sandbox(root_path).is_some() {
        plan.retain(|(i, m, n)| {
            match tool.contained(fs, m.name, n, m.file_shown(tool).as_deref()) {
                Ok(()) => true,
                Err(why) => {
                    set(&mut out, *i, Applied::failed(why));
                    false
                }
            }
        });
    }
    // Removals first (a package may be replaced by another), then local
    // files, then the repositories.
    type Group<'p, 'm> = Vec<&'p (usize, &'m Member<'m>, Need)>;
    let removals: Group<'_, '_> = plan.iter().filter(|(_, _, n)| *n == Need::Remove).collect();
    let files: Group<'_, '_> = plan
        .iter()
        .filter(|(_, _, n)| matches!(n, Need::File(_)))
        .collect();
    let repo: Group<'_, '_> = plan
        .iter()
        .filter(|(_, _, n)| matches!(n, Need::Repo(_)))
        .collect();
    let command = |group: &[&(usize, &Member<'_>, Need)]| -> Result<Cmd, String> {
        let words: Vec<String> = group
            .iter()
            .map(|(_, m, n)| match n {
                Need::Repo(s) | Need::File(s) => s.clone(),
                _ => m.name.to_owned(),
            })
            .collect();
        match group.first().map(|(_, _, n)| n) {
            Some(Need::File(_)) => tool.install_files(&words, root),
            Some(Need::Remove) => Ok(tool.remove(&words, root)),
            _ => tool.install(&words, root),
        }
    };
    // Per member: the log of the command that changed it, or its failure.
    let mut ran: HashMap<usize, Result<String, Applied>> = HashMap::new();
    for group in [removals, files, repo] {
        if group.is_empty() {
            continue;
        }
        let cmd = match command(&group) {
            Ok(cmd) => cmd,
            Err(why) => {
                for (i, _, _) in &group {
                    set(&mut out, *i, Applied::failed(why.clone()));
                }
                continue;
            }
        };
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
                // not copy the tool's output 200 times into the report).
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
                    let r = match command(&[*one]).map(|single| process::run(&single)) {
                        Ok(Ok(r)) if r.ok() => Ok(format!("$ {}\n{}", r.shown, r.output())),
                        Ok(Ok(r)) => Err(failure(&r)),
                        Ok(Err(e)) | Err(e) => Err(Applied::failed(e)),
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
        let after = if changed.is_empty() {
            Ok(HashMap::new())
        } else {
            tool.query(&changed, root).map_err(|e| e.0)
        };
        for (i, m, n) in &plan {
            let result = match ran.remove(i) {
                Some(Ok(log)) => confirm(tool, m, n, known.get(m.name), &after, &candidates, log),
                Some(Err(failed)) => failed,
                None => continue,
            };
            set(&mut out, *i, result);
        }
    }
    drop(staged);
    out.into_iter()
        .map(|o| o.unwrap_or_else(|| Applied::failed("no outcome for this package")))
        .collect()
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
    tool: &dyn Toolset,
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
                if m.file.is_some() {
                    format!(
                        " (does the `{}` file hold another package?)",
                        tool.file_attr()
                    )
                } else {
                    String::new()
                }
            )),
            (Some(k), Some(v), _) if !tool.version_matches(&k.version, v) => Some(format!(
                "`{}` is at version {} after installing version {v}",
                m.name, k.version
            )),
            (Some(k), None, "latest") => candidates
                .get(m.name)
                .cloned()
                .flatten()
                .filter(|c| tool.upgrades(c, &k.version))
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
            file: None,
            update_cache_age: None,
        };
        let k = |status: &str, version: &str| Known {
            status: status.into(),
            version: version.into(),
        };
        let root = Path::new("/");
        fn need(
            m: &Member<'_>,
            k: Option<&Known>,
            c: &HashMap<String, Option<String>>,
            root: &Path,
        ) -> Result<Need, String> {
            super::need(&toolset::apt::Apt, m, k, c, root, &mut |_| {
                Err("no file".into())
            })
        }
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
            Ok(Need::Repo("alpha=2.0".into()))
        );
        // Unknown to apt by this exact name: never handed to apt-get.
        assert!(need(&m("installed", Some("2.0")), Some(&installed), &none, root).is_err());
        assert_eq!(
            need(&m("installed", None), None, &cand, root),
            Ok(Need::Repo("alpha".into()))
        );
        assert!(need(&m("installed", None), None, &none, root)
            .unwrap_err()
            .contains("no installation candidate"));
        assert_eq!(
            need(&m("latest", None), Some(&installed), &cand, root),
            Ok(Need::Repo("alpha".into()))
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

    /// The same decisions on the rpm toolset: versions compare by rpm's
    /// rules (`1.0` is `1.0-1`, `1:1.0` is not), `latest` upgrades only to
    /// a newer epoch:version-release.
    #[test]
    fn rpm_needs() {
        let dnf = toolset::rpm::Rpm::for_tests(true);
        let m = |state: &'static str, version: Option<&'static str>| Member {
            name: "alpha",
            state,
            version,
            file: None,
            update_cache_age: None,
        };
        let installed = Known {
            status: "installed".into(),
            version: "1.0-1".into(),
        };
        let root = Path::new("/");
        let need = |m: &Member<'_>, c: &HashMap<String, Option<String>>| {
            super::need(&dnf, m, Some(&installed), c, root, &mut |_| {
                Err("no file".into())
            })
        };
        let mut cand = HashMap::new();
        cand.insert("alpha".to_owned(), Some("1:0.9-1".to_owned()));
        assert_eq!(need(&m("installed", Some("1.0")), &cand), Ok(Need::Nothing));
        assert_eq!(
            need(&m("installed", Some("1.0-1")), &cand),
            Ok(Need::Nothing)
        );
        assert_eq!(
            need(&m("installed", Some("1:0.9")), &cand),
            Ok(Need::Repo("alpha-1:0.9".into()))
        );
        // An epoch makes 0.9 newer than 1.0.
        assert_eq!(
            need(&m("latest", None), &cand),
            Ok(Need::Repo("alpha-1:0.9-1".into()))
        );
        cand.insert("alpha".to_owned(), Some("1.0-1".to_owned()));
        assert_eq!(need(&m("latest", None), &cand), Ok(Need::Nothing));
        // An older candidate is no upgrade (apt would install it).
        cand.insert("alpha".to_owned(), Some("0.9-1".to_owned()));
        assert_eq!(need(&m("latest", None), &cand), Ok(Need::Nothing));
    }
}
