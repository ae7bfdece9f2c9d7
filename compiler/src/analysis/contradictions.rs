//! Contradictions (LANGUAGE.md section 5 item 4): two promises on the same
//! object that want different values for one attribute, on a host where
//! both are active. Such a policy would make the VM flip the attribute back
//! and forth forever (Burgess's convergent operators must not contradict),
//! so it is refused before anything ships.
//!
//! Promises are first bucketed by object (promise type and promiser after
//! expansion), so only promises on one object are ever compared. Within an
//! object, each attribute's promises are grouped by value, and conflicts
//! between groups are found by divide and conquer: one satisfiability
//! question — "can any guard of this set hold together with any guard of
//! that set?" — settles a whole pair of sets, and only a "yes" splits them.
//! A thousand promises on one object with mutually exclusive guards cost a
//! few thousand small solver calls, not half a million.
//!
//! The special cases of the specification are checked here too: `ensure =
//! absent` with any promise on or below that path, `line present X` with
//! `line absent X`, and a `line` on a file whose whole content is fixed.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use converge_format::schema;
use converge_grammar::Span;

use super::guards::{GuardSpace, PromiseFormulas};
use super::objects::Objects;
use super::sat::{self, Constraints, Formula};
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{Guard, Program, Promise, Value};

/// At most this many contradictions are reported per object: past that,
/// the object's promises need rethinking as a whole, not one by one.
const MAX_PER_OBJECT: usize = 10;

/// The three content sources of a file are one property: its content.
const CONTENT: &[&str] = &["content", "source", "template"];

/// Types whose promiser is a path (for the "absent" rule below a path).
const PATH_TYPES: &[&str] = &["file", "directory", "link", "line", "setting", "block"];

/// Text-editing types that edit part of a file (their own contradictions:
/// [`Finder::parts`]); a file whose whole content is fixed cannot also have
/// a part edited ([`Finder::fixed_content_parts`]).
const PART_TYPES: &[(&str, &[&str])] = schema::PART_IDENTITY;

/// Finds every contradiction of an expanded program.
pub fn contradictions(program: &Program) -> Vec<Diagnostic> {
    contradictions_with(program, &Objects::new(program))
}

/// [`contradictions`] with the program's objects already grouped (shared
/// with the ordering graph).
pub fn contradictions_with(program: &Program, objects: &Objects<'_>) -> Vec<Diagnostic> {
    let mut space = GuardSpace::new(program);
    let formulas = space.promise_formulas(program);
    let constraints = space.constraints();
    let mut finder = Finder {
        program,
        space: &space,
        formulas: &formulas,
        constraints: &constraints,
        diagnostics: Vec::new(),
        reported: HashSet::default(),
    };

    // Objects in order of their first promise, so output is deterministic.
    for (key, members) in objects.iter() {
        if key.0 == "line" {
            finder.lines(members);
        } else if let Some((_, identity)) = PART_TYPES.iter().find(|(k, _)| *k == key.0) {
            finder.parts(identity, members);
        } else if key.0 == "watch" && members.len() > 1 {
            finder.watches(members);
        } else if key.0 == "unmanaged" && members.len() > 1 {
            finder.unmanaged(members);
        } else if members.len() > 1 {
            finder.attributes(members);
        }
    }
    finder.absent();
    finder.fixed_content_lines(objects);
    finder.system();
    finder.fixed_content_parts(objects);
    finder.absent_lines_in_blocks(objects);
    finder
        .diagnostics
        .extend(super::lines::never_settling(program));
    finder.diagnostics
}

/// A promise type that allows one active promise per object: how two are
/// reported.
struct OnePerObject {
    code: Code,
    /// The promise type, in labels (`first watch`).
    what: &'static str,
    /// After the object (`watch "/etc" is watched by two promises`).
    message: &'static str,
    help: &'static str,
}

struct Finder<'p> {
    program: &'p Program,
    space: &'p GuardSpace<'p>,
    formulas: &'p PromiseFormulas,
    constraints: &'p Constraints,
    diagnostics: Vec<Diagnostic>,
    /// (first statement, second statement, what) already reported: a bundle
    /// called twice must not report the same pair twice.
    reported: HashSet<(Span, Span, String)>,
}

/// One setting of one property by one promise.
struct Setting<'p> {
    promise: usize,
    /// The attribute as written (`template`).
    attr: &'p str,
    value: &'p Value,
    span: Span,
}

impl<'p> Finder<'p> {
    fn promise(&self, i: usize) -> Option<&'p Promise> {
        self.program.promises.get(i)
    }

    /// A witness for "promise `a` and promise `b` are both active", or
    /// None. A question the solver cannot answer within its budget is an
    /// error (E0602), never a silent "not both".
    fn both_active(&mut self, a: usize, b: usize) -> Option<Vec<String>> {
        let fa = self.formulas.get(a)?.clone();
        let fb = self.formulas.get(b)?.clone();
        match self.space.witness(&Formula::and(fa, fb), self.constraints) {
            Ok(found) => found,
            Err(err) => {
                let (Some(pa), Some(pb)) = (self.promise(a), self.promise(b)) else {
                    return None;
                };
                let (first, second) = (pa.span.min(pb.span), pa.span.max(pb.span));
                if self
                    .reported
                    .insert((first, second, "too complex".to_owned()))
                {
                    let d = super::guards::too_complex(
                        second,
                        &format!(
                            "whether these promises on {} can both be active",
                            describe_object(pb)
                        ),
                        err,
                    )
                    .with_secondary(first, "the other promise");
                    self.diagnostics.push(d);
                }
                None
            }
        }
    }

    /// Generic rule: per property, promises that want different values.
    fn attributes(&mut self, members: &[usize]) {
        let mut properties: BTreeMap<&'p str, Vec<Setting<'p>>> = BTreeMap::new();
        for &i in members {
            let Some(p) = self.promise(i) else { continue };
            for attr in &p.attrs {
                let name = attr.name;
                // Relations and annotations (the schema's attribute roles)
                // never contradict; `ensure` has its own rule.
                if !schema::describes_state_in(p.kind, name) || name == "ensure" {
                    continue;
                }
                // Mount states are not all exclusive: see `system`.
                if p.kind == "mount" && name == "state" {
                    continue;
                }
                let property = if p.kind == "file" && CONTENT.contains(&name) {
                    "content"
                } else {
                    name
                };
                properties.entry(property).or_default().push(Setting {
                    promise: i,
                    attr: name,
                    value: &attr.value,
                    span: attr.span,
                });
            }
        }
        let mut budget = MAX_PER_OBJECT;
        for (property, settings) in properties {
            if settings.len() < 2 || budget == 0 {
                continue;
            }
            // Classes of equal settings: every pair across two classes
            // differs, no pair inside one does.
            // Found by hash: 10,000 instances of a split lookup are 10,000
            // classes, and a linear search for each was quadratic.
            let mut classes: Vec<Vec<&Setting>> = Vec::new();
            let mut class_of: HashMap<(&str, &Value), usize> = HashMap::default();
            for setting in &settings {
                match class_of.get(&(setting.attr, setting.value)) {
                    Some(&c) => {
                        if let Some(class) = classes.get_mut(c) {
                            class.push(setting);
                        }
                    }
                    None => {
                        class_of.insert((setting.attr, setting.value), classes.len());
                        classes.push(vec![setting]);
                    }
                }
            }
            if classes.len() > 1 {
                self.within(property, &classes, &mut budget);
            }
        }
    }

    /// Two `watch` promises on one path that can be active together: both
    /// would keep the one database of that path (docs/change-detection.md),
    /// each undoing the other's baseline, whatever their attributes.
    fn watches(&mut self, members: &[usize]) {
        self.one_per_object(
            members,
            &OnePerObject {
                code: Code::Contradiction,
                what: "watch",
                message: "is watched by two promises",
                help: "a path has one change database: merge the two into one `watch` (its `attributes` and `exclude` together), or make their guards exclusive",
            },
        );
    }

    /// Two `unmanaged` promises of one type that can be active together
    /// (LANGUAGE.md section 17): each would call extra what the other
    /// ignores, with its own `action` and limits, whatever their attributes.
    fn unmanaged(&mut self, members: &[usize]) {
        self.one_per_object(
            members,
            &OnePerObject {
                code: Code::UnmanagedTwice,
                what: "unmanaged",
                message: "is verified by two promises",
                help: "one `unmanaged` promise per type: merge the two (their `ignore` lists together), or make their guards exclusive",
            },
        );
    }

    /// Every pair of `members` (promises on one object of a type that
    /// allows one promise per object) that can be active together, reported
    /// at both promises.
    fn one_per_object(&mut self, members: &[usize], rule: &OnePerObject) {
        let mut budget = MAX_PER_OBJECT;
        for (n, &a) in members.iter().enumerate() {
            for &b in members.iter().skip(n.saturating_add(1)) {
                if budget == 0 {
                    return;
                }
                let (Some(pa), Some(pb)) = (self.promise(a), self.promise(b)) else {
                    continue;
                };
                let Some(witness) = self.both_active(a, b) else {
                    continue;
                };
                if !self
                    .reported
                    .insert((pa.span, pb.span, rule.what.to_owned()))
                {
                    continue;
                }
                budget -= 1;
                let mut d = Diagnostic::new(
                    rule.code,
                    format!("{} {}", describe_object(pa), rule.message),
                    pb.span,
                    format!("second {}", rule.what),
                )
                .with_secondary(pa.span, format!("first {}", rule.what))
                .with_note(witness_note(&witness, &self.atoms_of(a, b)));
                d = add_chain(d, pa, "first");
                d = add_chain(d, pb, "second");
                self.diagnostics.push(d.with_help(rule.help));
            }
        }
    }

    /// Finds conflicts between any two of `classes` (divide and conquer:
    /// each half on its own, then across the halves).
    fn within(&mut self, property: &str, classes: &[Vec<&Setting>], budget: &mut usize) {
        if classes.len() < 2 || *budget == 0 {
            return;
        }
        let (left, right) = classes.split_at(classes.len() / 2);
        self.within(property, left, budget);
        self.within(property, right, budget);
        let left: Vec<&Setting> = left.iter().flatten().copied().collect();
        let right: Vec<&Setting> = right.iter().flatten().copied().collect();
        self.across(property, &left, &right, budget);
    }

    /// Finds conflicts between a promise of `left` and one of `right`,
    /// where every such pair wants different values. One solver question
    /// settles "none" for the whole pair of sets; only a "some" splits them.
    /// Exclusive guards make almost every question "none", so a thousand
    /// promises on one object cost a few thousand small questions.
    fn across(
        &mut self,
        property: &str,
        left: &[&Setting],
        right: &[&Setting],
        budget: &mut usize,
    ) {
        if left.is_empty() || right.is_empty() || *budget == 0 {
            return;
        }
        // Instances of a lookup split per key (`sema::expand::split`) on
        // one fact with no key in common can never be active together: no
        // solver question needed (one per pair of sets would cost the
        // number of keys each, for a 10,000-host lookup).
        if self.keys_disjoint(left, right) {
            return;
        }
        let side = |set: &[&Setting]| {
            Formula::any(
                set.iter()
                    .filter_map(|s| self.formulas.get(s.promise).cloned()),
            )
        };
        let question = self
            .space
            .with_definitions(Formula::and(side(left), side(right)));
        // Unanswerable for the whole sets: split them, and let the pairs
        // answer (or report that they cannot) one by one.
        if sat::satisfiable(&question, self.constraints) == Ok(false) {
            return;
        }
        match (left, right) {
            ([a], [b]) => {
                let (a, b) = if a.promise <= b.promise {
                    (*a, *b)
                } else {
                    (*b, *a)
                };
                if let Some(witness) = self.both_active(a.promise, b.promise) {
                    if self.report_values(property, a, b, &witness) {
                        *budget -= 1;
                    }
                }
            }
            _ if left.len() >= right.len() => {
                let (l1, l2) = left.split_at(left.len() / 2);
                self.across(property, l1, right, budget);
                self.across(property, l2, right, budget);
            }
            _ => {
                let (r1, r2) = right.split_at(right.len() / 2);
                self.across(property, left, r1, budget);
                self.across(property, left, r2, budget);
            }
        }
    }

    fn keys_disjoint(&self, left: &[&Setting], right: &[&Setting]) -> bool {
        // Per side: the fact, the keys its instances pin, and the key lists
        // its "other hosts" instances exclude.
        let side = |set: &[&Setting]| -> Option<SideKeys<'_>> {
            let mut fact: Option<&str> = None;
            let (mut keys, mut except) = (Vec::new(), Vec::new());
            for s in set {
                let (f, pinned) = guard_keys(&self.promise(s.promise)?.guard)?;
                if fact.is_some_and(|known| known != f) {
                    return None;
                }
                fact = Some(f);
                match pinned {
                    Pinned::Keys(k) => keys.extend(k),
                    Pinned::Except(list) => except.push(list),
                }
            }
            Some((fact?, keys, except))
        };
        let (Some((lf, lk, le)), Some((rf, rk, re))) = (side(left), side(right)) else {
            return false;
        };
        // Two "other hosts" sets always share a host.
        if lf != rf || (!le.is_empty() && !re.is_empty()) {
            return false;
        }
        let excluded = |key: &str, lists: &[&[Value]]| {
            lists.iter().all(|list| {
                list.binary_search_by(|v| v.as_str().unwrap_or("").cmp(key))
                    .is_ok()
                    || list.iter().any(|v| v.as_str() == Some(key))
            })
        };
        if !rk.iter().all(|k| excluded(k, &le)) || !lk.iter().all(|k| excluded(k, &re)) {
            return false;
        }
        let left: HashSet<&str> = lk.into_iter().collect();
        !rk.iter().any(|k| left.contains(k))
    }

    fn report_values(
        &mut self,
        property: &str,
        a: &Setting,
        b: &Setting,
        witness: &[String],
    ) -> bool {
        let (Some(pa), Some(pb)) = (self.promise(a.promise), self.promise(b.promise)) else {
            return false;
        };
        let runtime =
            (!a.value.is_constant() || !b.value.is_constant()) && !always_differ(a.value, b.value);
        if !self
            .reported
            .insert((pa.span, pb.span, property.to_owned()))
        {
            return false;
        }
        let object = describe_object(pa);
        let shown = |s: &Setting| match (s.attr, s.value) {
            ("mode", Value::Int(m)) if *m >= 0 => format!("mode = 0o{m:o}"),
            // A password hash is never shown, not even in a diagnostic.
            (attr, _) if schema::hides_value(attr) => {
                format!("{attr} = {}", schema::HIDDEN_VALUE)
            }
            _ => format!("{} = {}", s.attr, s.value.display()),
        };
        let (code, message) = if runtime {
            (
                Code::PossibleContradiction,
                format!("{object} may get two different `{property}` values at run time"),
            )
        } else {
            (
                Code::Contradiction,
                format!("{object} is promised two different `{property}` values"),
            )
        };
        let mut d = Diagnostic::new(code, message, b.span, shown(b))
            .with_secondary(a.span, shown(a))
            .with_note(witness_note(witness, &self.atoms_of(a.promise, b.promise)));
        d = add_chain(d, pa, "first");
        d = add_chain(d, pb, "second");
        d = if runtime {
            d.with_help("the values depend on facts; if they can differ on one host, the VM refuses both promises there. Make the guards exclusive, or compute one value")
        } else {
            d.with_help("make the guards exclusive (`exclusive { ... }`, or different values of one fact), or promise one value")
        };
        self.diagnostics.push(d);
        true
    }

    /// The atoms two promises' guards mention (for "none of ... holds").
    fn atoms_of(&self, a: usize, b: usize) -> Vec<String> {
        let mut atoms: Vec<String> = [a, b]
            .iter()
            .filter_map(|i| self.formulas.get(*i))
            .flat_map(|f| f.atoms())
            .map(|x| self.space.describe(x))
            .collect();
        atoms.sort();
        atoms.dedup();
        atoms
    }

    /// `setting`s of one key in one section (`block`s of one marker) on one
    /// file are one object: they must agree on its value (lines), by the
    /// generic rule. Settings of different keys never contradict. An
    /// identity computed at run time cannot be grouped here.
    fn parts(&mut self, identity: &[&str], members: &[usize]) {
        let mut groups: Vec<(Vec<Option<&'p Value>>, Vec<usize>)> = Vec::new();
        for &i in members {
            let Some(p) = self.promise(i) else { continue };
            let id: Vec<Option<&'p Value>> = identity.iter().map(|n| p.attr(n)).collect();
            if id.iter().flatten().any(|v| !v.is_constant()) {
                continue;
            }
            match groups.iter_mut().find(|(g, _)| *g == id) {
                Some((_, group)) => group.push(i),
                None => groups.push((id, vec![i])),
            }
        }
        for (_, group) in groups {
            if group.len() > 1 {
                self.attributes(&group);
            }
        }
    }

    /// A `setting` or `block` on a file whose whole content (`content`,
    /// `source` or `template`) is promised: the two would undo each other
    /// (the file promise rewrites the whole text, the edit changes part of
    /// it), so the part belongs in that content.
    fn fixed_content_parts(&mut self, objects: &Objects<'_>) {
        for ((kind, path), parts) in objects.iter() {
            if !PART_TYPES.iter().any(|(k, _)| *k == kind) {
                continue;
            }
            let files = objects.promises_of("file", path);
            if files.is_empty() {
                continue;
            }
            for &f in files {
                let Some(file) = self.promise(f) else {
                    continue;
                };
                let Some(content_attr) = file.attrs.iter().find(|a| CONTENT.contains(&a.name))
                else {
                    continue;
                };
                for &e in parts {
                    let Some(edit) = self.promise(e) else {
                        continue;
                    };
                    let Some(witness) = self.both_active(f, e) else {
                        continue;
                    };
                    if !self
                        .reported
                        .insert((file.span, edit.span, "content".to_owned()))
                    {
                        continue;
                    }
                    let mut d = Diagnostic::new(
                        Code::LineContradiction,
                        format!(
                            "{} {} edits part of a file whose whole content is promised",
                            edit.kind,
                            path.display()
                        ),
                        edit.span,
                        format!("this {} edits part of it", edit.kind),
                    )
                    .with_secondary(
                        content_attr.span,
                        format!("the whole content is fixed here (`{}`)", content_attr.name),
                    )
                    .with_note(witness_note(&witness, &self.atoms_of(f, e)));
                    d = add_chain(d, file, "file");
                    d = add_chain(d, edit, kind);
                    self.diagnostics.push(d.with_help(format!(
                        "put these lines in the file's `{}` itself, or drop it and manage the file by parts",
                        content_attr.name
                    )));
                }
            }
        }
    }

    /// `line absent X` on a file whose `block` holds the line X: the block
    /// puts it back on every pass after the line promise removes it.
    fn absent_lines_in_blocks(&mut self, objects: &Objects<'_>) {
        for ((kind, path), line_promises) in objects.iter() {
            if kind != "line" {
                continue;
            }
            let blocks = objects.promises_of("block", path);
            if blocks.is_empty() {
                continue;
            }
            for &l in line_promises {
                let Some(line) = self.promise(l) else {
                    continue;
                };
                let Some(absent) = line.attrs.iter().find(|a| a.name == "absent") else {
                    continue;
                };
                let Some(text) = absent.value.as_str() else {
                    continue;
                };
                for &b in blocks {
                    let Some(block) = self.promise(b) else {
                        continue;
                    };
                    let Some(lines_attr) = block.attrs.iter().find(|a| a.name == "lines") else {
                        continue;
                    };
                    let Value::List(items) = &lines_attr.value else {
                        continue;
                    };
                    if !items.iter().any(|v| v.as_str() == Some(text)) {
                        continue;
                    }
                    let Some(witness) = self.both_active(b, l) else {
                        continue;
                    };
                    if !self
                        .reported
                        .insert((block.span, line.span, "block line".to_owned()))
                    {
                        continue;
                    }
                    let mut d = Diagnostic::new(
                        Code::LineContradiction,
                        format!(
                            "line {text:?} must be absent from {}, but a block there holds it",
                            path.display()
                        ),
                        absent.span,
                        "absent here",
                    )
                    .with_secondary(lines_attr.span, "the block holds it")
                    .with_note(witness_note(&witness, &self.atoms_of(b, l)));
                    d = add_chain(d, block, "block");
                    d = add_chain(d, line, "line");
                    self.diagnostics.push(d.with_help(
                        "remove the line from the block, or drop the `line absent` promise",
                    ));
                }
            }
        }
    }

    /// `line present X` and `line absent X` on one file.
    fn lines(&mut self, members: &[usize]) {
        // Only an `absent` line can contradict: most files have none.
        let any_absent = members.iter().any(|&i| {
            self.promise(i)
                .is_some_and(|p| p.attrs.iter().any(|a| a.name == "absent"))
        });
        if !any_absent {
            return;
        }
        let mut present: HashMap<&str, Vec<(usize, Span)>> = HashMap::default();
        for &i in members {
            let Some(p) = self.promise(i) else { continue };
            if let Some(attr) = p.attrs.iter().find(|a| a.name == "present") {
                if let Some(text) = attr.value.as_str() {
                    present.entry(text).or_default().push((i, attr.span));
                }
            }
        }
        for &i in members {
            let Some(p) = self.promise(i) else { continue };
            let Some(attr) = p.attrs.iter().find(|a| a.name == "absent") else {
                continue;
            };
            let Some(text) = attr.value.as_str() else {
                continue;
            };
            let Some(rivals) = present.get(text) else {
                continue;
            };
            for &(j, span) in rivals {
                let Some(witness) = self.both_active(j, i) else {
                    continue;
                };
                let Some(pj) = self.promise(j) else { continue };
                if !self.reported.insert((pj.span, p.span, "line".to_owned())) {
                    continue;
                }
                let mut d = Diagnostic::new(
                    Code::LineContradiction,
                    format!(
                        "line {text:?} must be both present in and absent from {}",
                        p.promiser.display()
                    ),
                    attr.span,
                    "absent here",
                )
                .with_secondary(span, "present here")
                .with_note(witness_note(&witness, &self.atoms_of(j, i)));
                d = add_chain(d, pj, "first");
                d = add_chain(d, p, "second");
                self.diagnostics
                    .push(d.with_help("remove one of the two, or make their guards exclusive"));
                break;
            }
        }
    }

    /// A `line` promise on a file whose whole `content` is fixed must agree
    /// with that content.
    fn fixed_content_lines(&mut self, objects: &Objects<'_>) {
        for ((kind, path), line_promises) in objects.iter() {
            if kind != "line" {
                continue;
            }
            let files = objects.promises_of("file", path);
            if files.is_empty() {
                continue;
            }
            for &f in files {
                let Some(file) = self.promise(f) else {
                    continue;
                };
                let Some(content_attr) = file.attrs.iter().find(|a| a.name == "content") else {
                    continue;
                };
                let Some(content) = content_attr.value.as_str() else {
                    continue;
                };
                let content_lines: HashSet<&str> = content.lines().collect();
                for &l in line_promises {
                    let Some(line) = self.promise(l) else {
                        continue;
                    };
                    let Some((attr, message)) =
                        fixed_content_conflict(line, content, &content_lines, path)
                    else {
                        continue;
                    };
                    let Some(witness) = self.both_active(f, l) else {
                        continue;
                    };
                    if !self
                        .reported
                        .insert((file.span, line.span, "content".to_owned()))
                    {
                        continue;
                    }
                    let mut d = Diagnostic::new(
                        Code::LineContradiction,
                        message,
                        attr.span,
                        attr.display(),
                    )
                    .with_secondary(content_attr.span, "the whole content is fixed here")
                    .with_note(witness_note(&witness, &self.atoms_of(f, l)));
                    d = add_chain(d, file, "file");
                    d = add_chain(d, line, "line");
                    self.diagnostics.push(d.with_help(
                        "edit the content itself, or drop `content` and manage the file line by line",
                    ));
                }
            }
        }
    }

    /// `ensure = absent` with any other promise on that object or below
    /// that path.
    fn absent(&mut self) {
        let promises = &self.program.promises;
        let is_absent = |p: &Promise| {
            p.attrs
                .iter()
                .find(|a| a.name == "ensure")
                .is_some_and(|e| e.value.as_str() == Some("absent"))
        };
        // Without an `ensure = absent` there is nothing to compare: skip
        // indexing every promise by its path.
        if !promises.iter().any(is_absent) {
            return;
        }
        let mut by_path: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        let mut by_object: HashMap<(&str, &str), Vec<usize>> = HashMap::default();
        for (i, p) in promises.iter().enumerate() {
            let Some(promiser) = p.promiser.as_str() else {
                continue;
            };
            if PATH_TYPES.contains(&p.kind) {
                by_path.entry(promiser).or_default().push(i);
            } else {
                by_object.entry((p.kind, promiser)).or_default().push(i);
            }
        }
        for (i, p) in promises.iter().enumerate() {
            let Some(ensure) = p.attrs.iter().find(|a| a.name == "ensure") else {
                continue;
            };
            if ensure.value.as_str() != Some("absent") {
                continue;
            }
            let Some(path) = p.promiser.as_str() else {
                continue;
            };
            let mut others: Vec<usize> = Vec::new();
            if PATH_TYPES.contains(&p.kind) {
                let below = format!("{}/", path.trim_end_matches('/'));
                others.extend(by_path.get(path).into_iter().flatten().copied());
                others.extend(
                    by_path
                        .range::<str, _>((
                            std::ops::Bound::Included(below.as_str()),
                            std::ops::Bound::Unbounded,
                        ))
                        .take_while(|(k, _)| k.starts_with(&below))
                        .flat_map(|(_, v)| v.iter().copied()),
                );
            } else {
                others.extend(
                    by_object
                        .get(&(p.kind, path))
                        .into_iter()
                        .flatten()
                        .copied(),
                );
            }
            let mut reported_here = 0;
            for j in others {
                if j == i || reported_here >= MAX_PER_OBJECT {
                    continue;
                }
                let Some(other) = promises.get(j) else {
                    continue;
                };
                // Two promises that both say absent agree.
                let also_absent = other.kind == p.kind
                    && other.promiser == p.promiser
                    && other
                        .attrs
                        .iter()
                        .any(|a| a.name == "ensure" && a.value.as_str() == Some("absent"));
                if also_absent {
                    continue;
                }
                let Some(witness) = self.both_active(i, j) else {
                    continue;
                };
                let (first, second) = if i < j { (p, other) } else { (other, p) };
                if !self
                    .reported
                    .insert((first.span, second.span, "ensure".to_owned()))
                {
                    continue;
                }
                reported_here += 1;
                let inside = other.promiser != p.promiser;
                let message = if inside {
                    format!(
                        "{} must be absent, but {} lies inside it",
                        describe_object(p),
                        describe_object(other)
                    )
                } else {
                    format!(
                        "{} must be absent, but another promise manages it",
                        describe_object(p)
                    )
                };
                let mut d =
                    Diagnostic::new(Code::AbsentConflict, message, other.span, "promised here")
                        .with_secondary(ensure.span, "ensure = absent")
                        .with_note(witness_note(&witness, &self.atoms_of(i, j)));
                d = add_chain(d, p, "absent");
                d = add_chain(d, other, "other");
                self.diagnostics
                    .push(d.with_help("remove one of them, or make their guards exclusive"));
            }
        }
    }
}

/// One promise's say on a shared object of the kernel-facing types.
struct Say {
    promise: usize,
    /// The object as shown: `mount "/srv"`, `process match "^nginx"`.
    object: String,
    /// The property and the value as shown (`state = absent`).
    property: &'static str,
    value: String,
    span: Span,
}

impl Finder<'_> {
    /// The contradictions of `mount`, `process` and `sysctl` that the
    /// per-attribute rule does not see: mount states that exclude each
    /// other (`converge_format::system::mount_states_agree`: `present`
    /// agrees with `mounted`), `process` promises under different labels
    /// that want one regex `running` and `absent` (an unset state is
    /// `running`), and one sysctl key written two ways
    /// (`net.ipv4.ip_forward`, `net/ipv4/ip_forward`) with two values.
    fn system(&mut self) {
        let mut groups: BTreeMap<(String, &'static str), Vec<Say>> = BTreeMap::new();
        for (i, p) in self.program.promises.iter().enumerate() {
            let Some(promiser) = p.promiser.as_str() else {
                continue;
            };
            let said = |name: &str| p.attrs.iter().find(|a| a.name == name);
            let (key, object, property, attr, default) = match p.kind {
                "mount" => (
                    promiser.to_owned(),
                    format!("mount {promiser:?}"),
                    "state",
                    said("state"),
                    "mounted",
                ),
                "process" => {
                    let Some(pattern) = said("match").and_then(|a| a.value.as_str()) else {
                        continue;
                    };
                    (
                        pattern.to_owned(),
                        format!("the processes matching {pattern:?}"),
                        "state",
                        said("state"),
                        "running",
                    )
                }
                "sysctl" => (
                    converge_format::system::sysctl_path(promiser),
                    format!("sysctl {promiser:?}"),
                    "value",
                    said("value"),
                    "",
                ),
                // A key of a sysctl.d file is the boot value of that
                // sysctl: a `sysctl` promise of another value contradicts
                // it (whichever file sorts last would win at boot, and the
                // live value would flip back on every run).
                "setting"
                    if promiser.starts_with("/etc/sysctl.d/") || promiser == "/etc/sysctl.conf" =>
                {
                    let Some(key) = said("key")
                        .filter(|a| a.value.is_constant())
                        .and_then(|a| a.value.as_str())
                    else {
                        continue;
                    };
                    (
                        converge_format::system::sysctl_path(key),
                        format!("sysctl {key:?}"),
                        "value",
                        said("value"),
                        "",
                    )
                }
                _ => continue,
            };
            // A sysctl.d setting is compared with the sysctl promises.
            let kind = if p.kind == "setting" {
                "sysctl"
            } else {
                p.kind
            };
            let value = match attr {
                Some(a) if a.value.is_constant() => match a.value.as_str() {
                    Some(v) => v.to_owned(),
                    None => continue,
                },
                Some(_) => continue,
                None if default.is_empty() => continue,
                None => default.to_owned(),
            };
            let value = if kind == "sysctl" {
                converge_format::system::sysctl_normalised(&value)
            } else {
                value
            };
            groups.entry((key, kind)).or_default().push(Say {
                promise: i,
                object,
                property,
                value,
                span: attr.map_or(p.span, |a| a.span),
            });
        }
        for ((_, kind), says) in &groups {
            let mut budget = MAX_PER_OBJECT;
            for (n, a) in says.iter().enumerate() {
                for b in says.iter().skip(n.saturating_add(1)) {
                    if budget == 0 {
                        break;
                    }
                    let agree = match *kind {
                        "mount" => converge_format::system::mount_states_agree(&a.value, &b.value),
                        // Promises on one label, or one key spelt alike,
                        // were compared by the per-attribute rule.
                        _ => {
                            a.value == b.value
                                || self.promise(a.promise).map(|p| &p.promiser)
                                    == self.promise(b.promise).map(|p| &p.promiser)
                        }
                    };
                    if agree {
                        continue;
                    }
                    if let Some(witness) = self.both_active(a.promise, b.promise) {
                        if self.report_say(a, b, &witness) {
                            budget -= 1;
                        }
                    }
                }
            }
        }
    }

    fn report_say(&mut self, a: &Say, b: &Say, witness: &[String]) -> bool {
        let (Some(pa), Some(pb)) = (self.promise(a.promise), self.promise(b.promise)) else {
            return false;
        };
        if !self
            .reported
            .insert((pa.span, pb.span, a.property.to_owned()))
        {
            return false;
        }
        let shown = |s: &Say| format!("{} = {}", s.property, s.value);
        let mut d = Diagnostic::new(
            Code::Contradiction,
            format!(
                "{} is promised two different `{}` values",
                a.object, a.property
            ),
            b.span,
            shown(b),
        )
        .with_secondary(a.span, shown(a))
        .with_note(witness_note(witness, &self.atoms_of(a.promise, b.promise)));
        d = add_chain(d, pa, "first");
        d = add_chain(d, pb, "second");
        self.diagnostics.push(d.with_help(
            "make the guards exclusive (`exclusive { ... }`, or different values of one fact), or promise one state",
        ));
        true
    }
}

/// How a `line` promise disagrees with a file's fixed content: a `present`
/// line missing from it, an `absent` line in it, or a `replace` that would
/// rewrite one of its lines (the two would undo each other on every pass).
fn fixed_content_conflict<'p>(
    line: &'p Promise,
    content: &str,
    content_lines: &HashSet<&str>,
    path: &Value,
) -> Option<(&'p crate::ir::Attr, String)> {
    let path = path.display();
    for a in &line.attrs {
        match (a.name, a.value.as_str()) {
            ("present", Some(t)) if !content_lines.contains(t) => {
                return Some((
                    a,
                    format!("line {t:?} is not in the content promised for {path}"),
                ))
            }
            ("absent", Some(t)) if content_lines.contains(t) => {
                return Some((
                    a,
                    format!("line {t:?} is in the content promised for {path}"),
                ))
            }
            ("replace", Some(pattern)) => {
                let with = line.attr("with").and_then(Value::as_str)?;
                let re = regex::Regex::new(pattern).ok()?;
                if let Some(changed) = content.lines().find(|l| re.replace_all(l, with) != *l) {
                    return Some((
                        a,
                        format!("the replacement rewrites line {changed:?} of the content promised for {path}; the two would undo each other on every pass"),
                    ));
                }
            }
            _ => {}
        }
    }
    None
}

/// `file "/etc/motd"`
/// One side of a pair of setting sets: the fact its instances are keyed
/// by, the keys they pin, and the key lists its "other hosts" instances
/// exclude.
type SideKeys<'p> = (&'p str, Vec<&'p str>, Vec<&'p [Value]>);

/// What the guard of an instance of a split lookup says about its key.
enum Pinned<'p> {
    /// `fact == "key"` or `fact in ["k1", ...]`.
    Keys(Vec<&'p str>),
    /// `!(fact in [...])`: any key but these (sorted, as the split writes
    /// them).
    Except(&'p [Value]),
}

/// The fact and the keys a guard pins, when one of the conjuncts of its
/// top level does.
fn guard_keys(guard: &Guard) -> Option<(&str, Pinned<'_>)> {
    match guard {
        Guard::And(items) => items.iter().find_map(pinned_keys),
        g => pinned_keys(g),
    }
}

fn pinned_keys(g: &Guard) -> Option<(&str, Pinned<'_>)> {
    if let Guard::Not(inner) = g {
        if let Guard::Compare {
            op: crate::ir::CompareOp::In,
            lhs,
            rhs: Value::List(items),
        } = &**inner
        {
            if let (Some(fact), true) =
                (lhs.host_fact(), items.iter().all(|v| v.as_str().is_some()))
            {
                return Some((fact, Pinned::Except(items)));
            }
        }
        return None;
    }
    let Guard::Compare { op, lhs, rhs } = g else {
        return None;
    };
    let fact = lhs.host_fact()?;
    match (op, rhs) {
        (crate::ir::CompareOp::Eq, Value::Str(k)) => Some((fact, Pinned::Keys(vec![k.as_str()]))),
        (crate::ir::CompareOp::In, Value::List(items)) => Some((
            fact,
            Pinned::Keys(
                items
                    .iter()
                    .map(Value::as_str)
                    .collect::<Option<Vec<_>>>()?,
            ),
        )),
        _ => None,
    }
}

pub fn describe_object(p: &Promise) -> String {
    format!("{} {}", p.kind, p.promiser.display())
}

/// "both active when: web, db" — the witness of a contradiction.
fn witness_note(witness: &[String], atoms: &[String]) -> String {
    if !witness.is_empty() {
        format!("both active when: {}", witness.join(", "))
    } else if atoms.is_empty() {
        "both are active on every host".to_owned()
    } else {
        format!("both active when none of these holds: {}", atoms.join(", "))
    }
}

/// Labels the call that produced a promise, if it came from a bundle (once
/// per call site), and the promise itself when a value the diagnostic
/// points at comes from its bundle's defaults.
fn add_chain(d: Diagnostic, p: &Promise, which: &str) -> Diagnostic {
    let d = super::defaults::at_promise(d, p);
    match p.chain.last() {
        Some(call) if d.labels.iter().all(|l| l.span != call.span) => d.with_secondary(
            call.span,
            format!("{which} from this call of `{}`", call.bundle),
        ),
        _ => d,
    }
}

/// Whether two values, one at least computed on the host, differ on every
/// host whatever the host computes: their literal beginnings (or endings)
/// disagree (`"motd for ${sys.hostname}"` against `"MOTD: ${sys.hostname}"`,
/// two templates on one file). Then they are a contradiction, not a
/// possible one.
fn always_differ(a: &Value, b: &Value) -> bool {
    fn literal_ends(v: &Value) -> Option<(String, String)> {
        match v {
            Value::Str(s) => Some((s.clone(), s.clone())),
            Value::Template(parts) => {
                let lit = |p: &crate::ir::TemplatePart| match p {
                    crate::ir::TemplatePart::Lit(t) => Some(t.clone()),
                    _ => None,
                };
                let head: String = parts.iter().map_while(lit).collect();
                let mut tail: Vec<String> = parts.iter().rev().map_while(lit).collect();
                tail.reverse();
                Some((head, tail.concat()))
            }
            _ => None,
        }
    }
    let (Some((head_a, tail_a)), Some((head_b, tail_b))) = (literal_ends(a), literal_ends(b))
    else {
        return false;
    };
    let heads_agree = head_a.starts_with(&head_b) || head_b.starts_with(&head_a);
    let tails_agree = tail_a.ends_with(&tail_b) || tail_b.ends_with(&tail_a);
    !heads_agree || !tails_agree
}
