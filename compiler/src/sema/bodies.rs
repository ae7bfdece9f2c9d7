//! Where the statements of a program's bundles are while it is checked and
//! expanded, and when expansion may free them.
//!
//! A bundle's statements are read in its syntax tree, except when a caller
//! that owns the workspace moved them out first
//! ([`Workspace::take_bundle_bodies`](crate::workspace::Workspace::take_bundle_bodies),
//! `policyc check` and `build`). Then expansion frees a bundle's statements
//! as soon as its last call is expanded, so that the syntax trees shrink
//! while the expanded program grows instead of both being whole at once:
//! at 1,000,000 promises the trees are about 0.8 GB and the program about
//! 0.5 GB (issue 22, item 4).
//!
//! "Last call" is decided before expansion, from the source: a bundle is
//! expanded at most once when it has one call site, outside any `for`, in
//! the `policy` block or in a bundle that is itself expanded at most once.
//! Other bundles keep their statements to the end.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::borrow::Cow;

use converge_grammar::ast::{BundleDef, Stmt};
use converge_grammar::Span;

use super::symbols::Symbols;

/// The statements of the bundles that were moved out of the syntax trees,
/// by the span of their bundle (unique to one definition).
#[derive(Debug, Default)]
pub struct Bodies {
    moved: HashMap<Span, Vec<Stmt>>,
    /// Bundles (by span) whose statements are freed after their one
    /// expansion.
    once: HashSet<Span>,
    /// Bundles whose statements were freed.
    freed: HashSet<Span>,
}

impl Bodies {
    /// Statements moved out of the trees, each with its bundle's span.
    pub fn moved(bodies: impl IntoIterator<Item = (Span, Vec<Stmt>)>) -> Self {
        Bodies {
            moved: bodies.into_iter().collect(),
            ..Bodies::default()
        }
    }

    /// The statements of `bundle`.
    pub fn get<'x>(&'x self, bundle: &'x BundleDef) -> &'x [Stmt] {
        match self.moved.get(&bundle.span) {
            Some(body) => body,
            None => &bundle.body,
        }
    }

    /// Takes the statements of `bundle` for one expansion: borrowed from
    /// the tree, or owned when they were moved out. Hand them back with
    /// [`Bodies::expanded`]. `None` if they were freed: a second expansion
    /// of a bundle planned to be expanded once, which would be a bug here
    /// (the caller reports it; it never silently expands nothing).
    pub fn take<'x>(&mut self, bundle: &'x BundleDef) -> Option<Cow<'x, [Stmt]>> {
        if self.freed.contains(&bundle.span) {
            return None;
        }
        Some(match self.moved.remove(&bundle.span) {
            Some(body) => Cow::Owned(body),
            None => Cow::Borrowed(&bundle.body),
        })
    }

    /// Hands back what [`Bodies::take`] gave once `bundle` is expanded:
    /// kept for its next call, or freed when it has none.
    pub fn expanded(&mut self, bundle: &BundleDef, body: Cow<'_, [Stmt]>) {
        if let Cow::Owned(body) = body {
            if self.once.contains(&bundle.span) {
                self.freed.insert(bundle.span);
            } else {
                self.moved.insert(bundle.span, body);
            }
        }
    }

    /// Decides which moved bundles are expanded at most once (see the
    /// module's documentation).
    pub fn plan_release(&mut self, symbols: &Symbols<'_>) {
        if self.moved.is_empty() {
            return;
        }
        let mut sites: HashMap<&str, Vec<Site<'_>>> = HashMap::default();
        if let Some(policy) = symbols.policy {
            call_sites(&policy.body, None, false, &mut sites);
        }
        for (name, bundle) in &symbols.bundles.defs {
            call_sites(self.get(bundle), Some(name), false, &mut sites);
        }
        let mut memo: HashMap<&str, bool> = HashMap::default();
        let mut once = HashSet::default();
        for (name, bundle) in &symbols.bundles.defs {
            if expanded_once(name, &sites, &mut memo, &mut Vec::new()) {
                once.insert(bundle.span);
            }
        }
        self.once = once;
    }
}

/// A call of a bundle: from which bundle (`None`: the `policy` block), and
/// whether inside a `for`.
#[derive(Clone, Copy, Debug)]
struct Site<'n> {
    caller: Option<&'n str>,
    in_loop: bool,
}

fn call_sites<'n>(
    stmts: &'n [Stmt],
    caller: Option<&'n str>,
    in_loop: bool,
    out: &mut HashMap<&'n str, Vec<Site<'n>>>,
) {
    for stmt in stmts {
        match stmt {
            Stmt::Call(call) => out
                .entry(call.bundle.name.as_str())
                .or_default()
                .push(Site { caller, in_loop }),
            Stmt::When(w) => call_sites(&w.body, caller, in_loop, out),
            Stmt::For(f) => call_sites(&f.body, caller, true, out),
            Stmt::Promise(_) | Stmt::Defaults(_) | Stmt::Error(_) => {}
        }
    }
}

/// Whether bundle `name` is expanded at most once. Bundles on `path` are
/// being decided (a cycle of calls, an error expansion reports, is never
/// "once").
fn expanded_once<'n>(
    name: &'n str,
    sites: &HashMap<&'n str, Vec<Site<'n>>>,
    memo: &mut HashMap<&'n str, bool>,
    path: &mut Vec<&'n str>,
) -> bool {
    if let Some(known) = memo.get(name) {
        return *known;
    }
    // A cycle, or a chain deeper than expansion goes (it stops there with
    // an error): not "once", and the recursion stays shallow.
    if path.contains(&name) || path.len() > super::expand::MAX_CALL_DEPTH {
        return false;
    }
    let once = match sites.get(name).map(Vec::as_slice) {
        None | Some([]) => true,
        Some([site]) if !site.in_loop => match site.caller {
            None => true,
            Some(caller) => {
                path.push(name);
                let once = expanded_once(caller, sites, memo, path);
                path.pop();
                once
            }
        },
        Some(_) => false,
    };
    memo.insert(name, once);
    once
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use crate::check::{check, check_releasing_syntax, CheckOutcome};
    use crate::sema::symbols::Symbols;
    use crate::workspace::{FileSystem, Workspace};

    use super::Bodies;

    /// Bundles calling each other every way the plan distinguishes: once
    /// from the policy, twice, in a `for`, from two bundles, through a
    /// bundle called once and through one called twice, inside `when`,
    /// and never.
    const POLICY: &str = r#"
bundle leaf(n: string) { file "/etc/leaf-${n}" { content = "x"; } }
bundle once_direct { file "/etc/once" { content = "x"; } }
bundle twice { file "/etc/twice-${sys.hostname}" { content = "x"; } }
bundle in_loop(n: string) { file "/etc/loop-${n}" { content = "x"; } }
bundle deep { file "/etc/deep" { content = "x"; } }
bundle inner { file "/etc/inner-${sys.fqdn}" { content = "x"; } }
bundle through_once { leaf("a"); deep(); }
bundle through_twice(n: string) { leaf(n); inner(); }
bundle guarded { file "/etc/guarded" { content = "x"; } }
bundle never { file "/etc/never" { content = "x"; } }
policy {
  once_direct();
  twice();
  when debian { twice(); guarded(); }
  for n in ["1", "2", "3"] { in_loop(n); }
  through_once();
  through_twice("b");
  through_twice("c");
}
"#;

    fn workspace(dir: &Path) -> Workspace {
        let path = dir.join("site.policy");
        std::fs::write(&path, POLICY).unwrap();
        let mut ws = Workspace::new(FileSystem::new());
        ws.add_root(&path).unwrap();
        ws
    }

    #[test]
    fn a_bundle_is_freed_only_when_it_is_expanded_at_most_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut ws = workspace(dir.path());
        let files = ws.programs().pop().unwrap();
        let mut bodies = Bodies::moved(ws.take_bundle_bodies(&files));
        let symbols = Symbols::collect(&ws, &files, &mut Vec::new());
        bodies.plan_release(&symbols);
        let once: BTreeSet<&str> = symbols
            .bundles
            .defs
            .iter()
            .filter(|(_, def)| bodies.once.contains(&def.span))
            .map(|(name, _)| *name)
            .collect();
        let expected: BTreeSet<&str> = ["once_direct", "through_once", "deep", "guarded", "never"]
            .into_iter()
            .collect();
        assert_eq!(once, expected);
    }

    /// The promises of a program, as text (the program has no `PartialEq`).
    fn promises(outcome: &CheckOutcome) -> Vec<String> {
        let program = &outcome.programs.first().expect("a program").program;
        program.promises.iter().map(|p| format!("{p:?}")).collect()
    }

    #[test]
    fn expanding_from_moved_bodies_makes_the_same_program_as_from_the_trees() {
        let dir = tempfile::tempdir().unwrap();
        let in_tree = check(&workspace(dir.path()));
        let moved = check_releasing_syntax(&mut workspace(dir.path()));
        // The one warning: `never` is never called.
        assert_eq!(in_tree.diagnostics.len(), 1, "{:?}", in_tree.diagnostics);
        assert_eq!(moved.diagnostics, in_tree.diagnostics);
        // once, twice x2, guarded, loop x3, leaf x3 (through_once, b, c),
        // deep, inner x2.
        assert_eq!(promises(&in_tree).len(), 13);
        assert_eq!(promises(&moved), promises(&in_tree));
    }
}
