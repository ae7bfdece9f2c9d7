//! `policyc plan OLD NEW`: what a policy change would do on every host of
//! the inventory, before it ships (docs/plan.md).
//!
//! Both policies are built once, in memory ([`build`]). Then, for every
//! host, each is resolved with the host's known facts ([`facts`]) by the
//! evaluator the VM runs ([`resolve`], `converge_eval`), the two results
//! are compared promise by promise, by hash first ([`changes`]), and hosts
//! with equal change sets are grouped ([`group`]) so a change to 10,000
//! hosts prints once ([`render`], [`json`]). Hosts are resolved in
//! parallel, each on its own. What is shared between hosts is only what
//! cannot differ between them: a promise whose promiser and values are all
//! constants resolves to one instance (its guard is still evaluated per
//! host; `converge_eval::preview`), converted and hashed once
//! ([`resolve::HostResolver`]); so what a host is shown is what that host
//! would compute.

pub mod build;
pub mod changes;
pub mod facts;
pub mod group;
pub mod json;
pub mod render;
pub mod resolve;
pub mod resolved;

use changes::compare;
use facts::KnownHost;
use group::{ChangeSets, Group};

/// The plan of a change over a fleet.
#[derive(Debug)]
pub struct Plan {
    /// How many hosts were planned.
    pub hosts: usize,
    /// Hosts that change, grouped by change set, largest group first.
    pub groups: Vec<Group>,
    /// Hosts on which nothing changes, in inventory order.
    pub unchanged: Vec<String>,
    /// Things worth knowing that change nothing (a facts file for a host
    /// the inventory does not list).
    pub notes: Vec<String>,
}

impl Plan {
    /// Whether any host changes (or may, for want of a fact).
    pub fn changes_anything(&self) -> bool {
        !self.groups.is_empty()
    }
}

/// Plans `old` to `new` over `hosts`, on `jobs` threads.
pub fn plan(old: &build::Built, new: &build::Built, hosts: &[KnownHost], jobs: usize) -> Plan {
    let old = resolve::Policy::new(old);
    let new = resolve::Policy::new(new);
    let per_host = for_each_host(
        hosts,
        jobs,
        || (old.resolver(), new.resolver()),
        |(old_resolver, new_resolver), host| {
            compare(
                &old.resolve(old_resolver, host),
                &new.resolve(new_resolver, host),
            )
        },
    );
    let (per_host, sets) = per_host;
    let (groups, unchanged) = group::group(per_host, sets);
    Plan {
        hosts: hosts.len(),
        groups,
        unchanged,
        notes: Vec::new(),
    }
}

/// `work` over every host, on up to `jobs` threads, each with its own
/// state from `init` (its resolvers); each host's change set is interned
/// as soon as it is made. Hosts come back in inventory order, each with
/// the number of its change set.
fn for_each_host<S, I, F>(
    hosts: &[KnownHost],
    jobs: usize,
    init: I,
    work: F,
) -> (Vec<(String, usize)>, ChangeSets)
where
    I: Fn() -> S + Sync,
    F: Fn(&mut S, &KnownHost) -> changes::ChangeSet + Sync,
{
    let jobs = jobs.clamp(1, hosts.len().max(1));
    let run = |part: &[KnownHost]| {
        let mut state = init();
        let mut sets = ChangeSets::default();
        let numbered: Vec<(String, usize)> = part
            .iter()
            .map(|host| (host.name.clone(), sets.intern(work(&mut state, host))))
            .collect();
        (numbered, sets)
    };
    if jobs == 1 {
        return run(hosts);
    }
    let chunk = hosts.len().div_ceil(jobs);
    let run = &run;
    std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .chunks(chunk)
            .map(|part| scope.spawn(move || run(part)))
            .collect();
        let mut all = Vec::with_capacity(hosts.len());
        let mut sets = ChangeSets::default();
        for handle in handles {
            match handle.join() {
                Ok((numbered, theirs)) => {
                    let map = sets.merge(theirs);
                    all.extend(
                        numbered
                            .into_iter()
                            .map(|(host, i)| (host, map.get(i).copied().unwrap_or(i))),
                    );
                }
                // A panic is a compiler bug: it ends the command as one on
                // the main thread would (exit 101, `cli::main`).
                Err(e) => std::panic::resume_unwind(e),
            }
        }
        (all, sets)
    })
}
