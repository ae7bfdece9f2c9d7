//! The name table of one program: what every name written in it refers to.
//!
//! The checker fills it while it resolves names (`check/`), with the one
//! set of scoping rules of the language: classes, lets, bodies and bundles
//! are global per kind; inside a bundle a name is first a `for` variable,
//! then a parameter, then a `let`; a guard names a class before a `bool`
//! variable; an enum attribute takes a bare word unless a variable of that
//! name is in scope. Expansion reads the table instead of looking names up
//! again, and the language server answers hover, definition, references and
//! rename from it, so the checker, the compiled program and the editor
//! cannot disagree about a name.
//!
//! Every occurrence is keyed by the span of the name as written (names in
//! `${...}` included) and points at a [`Definition`]: one of the program's
//! (with the span of its name) or one the schema and the VM define (hard
//! classes, facts, promise types, attributes: no span).

use converge_format::schema::{AttrSpec, PromiseType};
use converge_grammar::{FileId, Span};
use rustc_hash::FxHashMap;
use smol_str::SmolStr;

/// Identifies one definition of a [`Names`] table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DefId(u32);

impl DefId {
    /// Stands for "no definition" where one is required but never read
    /// (template variables, found by name).
    pub const PLACEHOLDER: DefId = DefId(u32::MAX);

    /// The definition made `n` definitions after this one.
    pub(crate) fn offset(self, n: usize) -> DefId {
        DefId(self.0.saturating_add(n as u32))
    }
}

/// What kind of thing a name names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DefKind {
    Class,
    /// A class the VM defines from facts (`debian`, `monday`, `any`).
    HardClass,
    /// A class the inventory defines: `host_NAME` for each host,
    /// `group_NAME` for each group (`sema::inventory`). Defined in
    /// `inventory.toml`, so not renamed from the policy.
    InventoryClass,
    Let,
    Body,
    Bundle,
    Param,
    LoopVar,
    /// A host fact, by its full dotted name (`sys.hostname`).
    Fact,
    /// The type word of a promise or reference (`file`, `package`).
    PromiseType,
    /// An attribute name (`mode`), of a promise type or, in a body, of any.
    Attribute,
    /// A record type (`type Site = { ... };`).
    Type,
    /// A field of a record type; its parent is the type.
    Field,
    /// A built-in function (`join`), described by `sema::functions`.
    Function,
    /// A probe fact (`fact NAME: T from ...;`), read as `facts.NAME`: its
    /// uses are the `NAME` after `facts.`.
    ProbeFact,
}

impl DefKind {
    /// Names that hold a value: `let`s, parameters and loop variables.
    pub fn is_variable(self) -> bool {
        matches!(self, DefKind::Let | DefKind::Param | DefKind::LoopVar)
    }

    /// Names the policy defines, and so may rename.
    pub fn is_renamable(self) -> bool {
        matches!(
            self,
            DefKind::Class
                | DefKind::Let
                | DefKind::Body
                | DefKind::Bundle
                | DefKind::Param
                | DefKind::LoopVar
                | DefKind::Type
                | DefKind::ProbeFact
        )
    }

    /// Names that mean the same in every program that reads their file.
    pub fn is_global(self) -> bool {
        !matches!(self, DefKind::Param | DefKind::LoopVar)
    }
}

/// What a name refers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    pub kind: DefKind,
    /// The name: as defined, a fact's full dotted name, an attribute's bare
    /// name.
    pub name: SmolStr,
    /// Where the name is written in its definition; `None` for what the
    /// schema and the VM define.
    pub span: Option<Span>,
    /// The whole definition: the item, the parameter, the `for` loop.
    pub item: Option<Span>,
    /// A parameter's bundle; an attribute's promise type (`None` for an
    /// attribute set in a body).
    pub parent: Option<DefId>,
}

/// One place a name is written, and what it refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Occurrence {
    pub span: Span,
    pub def: DefId,
}

/// The table: definitions, and every occurrence (definitions included),
/// sorted by position once the checker is done.
#[derive(Debug, Default)]
pub struct Names {
    defs: Vec<Definition>,
    occurrences: Vec<Occurrence>,
    /// Definitions found by kind and name: the global ones and what the
    /// schema defines (indexed by [`DefKind`]; a lookup by `&str` allocates
    /// nothing, and the checker asks once per name it meets).
    by_name: Vec<FxHashMap<SmolStr, DefId>>,
    /// The attributes of promise types, by the addresses of their schema
    /// entries (the promise type's and the attribute's).
    attributes: FxHashMap<(usize, usize), DefId>,
    /// The fields of record types, by the type's definition and name.
    fields: FxHashMap<(DefId, SmolStr), DefId>,
    /// The type the checker found for each variable (`let`, parameter,
    /// loop variable): the language server completes fields after `.` and
    /// keys after `[` from it.
    types: FxHashMap<DefId, super::types::Type>,
    /// Set by [`finish`](Self::finish): the occurrences are sorted and
    /// complete. Expansion re-reads promise attributes through the checker;
    /// what that would record is already here.
    finished: bool,
}

impl Names {
    /// Adds a definition and records its name as an occurrence. With
    /// `findable`, [`find`](Self::find) finds it by kind and name (the first
    /// definition of a name wins, as in the symbol tables).
    pub(crate) fn define(&mut self, def: Definition, findable: bool) -> DefId {
        let id = DefId(self.defs.len() as u32);
        if findable {
            let kind = def.kind as usize;
            if self.by_name.len() <= kind {
                self.by_name.resize_with(kind + 1, FxHashMap::default);
            }
            if let Some(map) = self.by_name.get_mut(kind) {
                map.entry(def.name.clone()).or_insert(id);
            }
        }
        if let Some(span) = def.span {
            self.record(span, id);
        }
        self.defs.push(def);
        id
    }

    /// A global definition (class, let, body, bundle) or one the schema
    /// defines (hard class, fact, promise type, an attribute set in a body),
    /// by kind and name.
    pub fn find(&self, kind: DefKind, name: &str) -> Option<DefId> {
        self.by_name.get(kind as usize)?.get(name).copied()
    }

    /// The definition of something the schema or the VM defines (hard
    /// class, fact, promise type, an attribute set in a body), made on
    /// first use.
    pub(crate) fn builtin(&mut self, kind: DefKind, name: &str) -> DefId {
        if let Some(id) = self.find(kind, name) {
            return id;
        }
        self.define(
            Definition {
                kind,
                name: SmolStr::new(name),
                span: None,
                item: None,
                parent: None,
            },
            true,
        )
    }

    /// The definition of an attribute of a promise type, made on first use.
    pub(crate) fn attribute(&mut self, pt: &'static PromiseType, spec: &'static AttrSpec) -> DefId {
        let key = (
            std::ptr::from_ref(pt) as usize,
            std::ptr::from_ref(spec) as usize,
        );
        if let Some(id) = self.attributes.get(&key) {
            return *id;
        }
        let parent = self.builtin(DefKind::PromiseType, pt.name);
        let id = self.define(
            Definition {
                kind: DefKind::Attribute,
                name: SmolStr::new(spec.name),
                span: None,
                item: None,
                parent: Some(parent),
            },
            false,
        );
        self.attributes.insert(key, id);
        id
    }

    /// The definition of field `field` of the record type `ty` (made by
    /// the checker's global names; `None` for a field the type lacks).
    pub fn field(&self, ty: DefId, field: &str) -> Option<DefId> {
        self.fields.get(&(ty, SmolStr::new(field))).copied()
    }

    pub(crate) fn define_field(&mut self, ty: DefId, def: Definition) -> DefId {
        let name = def.name.clone();
        let id = self.define(def, false);
        self.fields.insert((ty, name), id);
        id
    }

    /// Records the type of a variable's definition.
    pub(crate) fn set_type(&mut self, def: DefId, ty: super::types::Type) {
        if !self.finished {
            self.types.insert(def, ty);
        }
    }

    /// The type of a variable, as the checker found it (`None` for what is
    /// not a variable, and for a variable in a program that was not
    /// checked).
    pub fn type_of(&self, def: DefId) -> Option<&super::types::Type> {
        self.types.get(&def)
    }

    /// Records that the name written at `span` refers to `def`.
    pub(crate) fn record(&mut self, span: Span, def: DefId) {
        if !self.finished {
            self.occurrences.push(Occurrence { span, def });
        }
    }

    /// Sorts the occurrences by position; a name checked twice (a body's
    /// attribute values are checked again in every promise that uses it)
    /// is kept once.
    pub(crate) fn finish(&mut self) {
        // By file and start (no two names start at one place), as one
        // integer: cheaper to compare than the whole span.
        self.occurrences
            .sort_unstable_by_key(|o| (u64::from(o.span.file.0) << 32) | u64::from(o.span.start));
        self.occurrences.dedup_by_key(|o| o.span);
        self.occurrences.shrink_to_fit();
        self.finished = true;
    }

    pub fn definition(&self, id: DefId) -> Option<&Definition> {
        self.defs.get(id.0 as usize)
    }

    /// What the name written exactly at `span` refers to.
    pub fn resolve(&self, span: Span) -> Option<DefId> {
        self.occurrences
            .binary_search_by(|o| o.span.cmp(&span))
            .ok()
            .and_then(|i| self.occurrences.get(i))
            .map(|o| o.def)
    }

    /// Like [`resolve`](Self::resolve), searching outwards from `hint`, the
    /// index of the previous answer, which it updates. Expansion reads the
    /// names of a bundle in source order, so the next one is near the last:
    /// a few comparisons in cache instead of a search of the whole table.
    pub fn resolve_near(&self, span: Span, hint: &mut usize) -> Option<DefId> {
        let occurrences = &self.occurrences;
        let at = (*hint).min(occurrences.len().saturating_sub(1));
        let before = |i: usize| occurrences.get(i).is_some_and(|o| o.span < span);
        // Gallop from the hint to a window [lo, hi) that holds `span`.
        let (mut lo, mut hi) = (at, at + 1);
        let mut step = 1;
        if before(at) {
            while hi < occurrences.len() && before(hi) {
                lo = hi;
                hi = hi.saturating_add(step).min(occurrences.len());
                step *= 2;
            }
            hi = (hi + 1).min(occurrences.len());
        } else {
            while lo > 0 && !before(lo - 1) {
                hi = lo;
                lo = lo.saturating_sub(step);
                step *= 2;
            }
        }
        let window = occurrences.get(lo..hi)?;
        let i = window.binary_search_by(|o| o.span.cmp(&span)).ok()?;
        *hint = lo + i;
        window.get(i).map(|o| o.def)
    }

    /// Like [`resolve`](Self::resolve), with the definition.
    pub fn resolve_def(&self, span: Span) -> Option<&Definition> {
        self.resolve(span).and_then(|id| self.definition(id))
    }

    /// Every occurrence, in position order.
    pub fn occurrences(&self) -> &[Occurrence] {
        &self.occurrences
    }

    /// Every definition with its id.
    pub fn definitions(&self) -> impl Iterator<Item = (DefId, &Definition)> {
        self.defs
            .iter()
            .enumerate()
            .map(|(i, d)| (DefId(i as u32), d))
    }

    /// The occurrence under a byte offset of a file (the end of a name
    /// counts, so a cursor just after a word finds it).
    pub fn at(&self, file: FileId, offset: u32) -> Option<&Occurrence> {
        let first = self.occurrences.partition_point(|o| o.span.file < file);
        self.occurrences
            .get(first..)
            .unwrap_or(&[])
            .iter()
            .take_while(|o| o.span.file == file && o.span.start <= offset)
            .filter(|o| offset <= o.span.end)
            .min_by_key(|o| o.span.len())
    }

    /// Every occurrence of a definition, its own name included.
    pub fn uses(&self, def: DefId) -> impl Iterator<Item = &Occurrence> + '_ {
        self.occurrences.iter().filter(move |o| o.def == def)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// From any hint, the search near it finds what the plain search
    /// finds, names that are not in the table included.
    #[test]
    fn the_search_near_a_hint_finds_what_the_whole_search_finds() {
        let mut names = Names::default();
        let def = names.builtin(DefKind::Fact, "sys.hostname");
        for file in 0..3 {
            for start in (0..200).step_by(7) {
                names.record(Span::new(FileId(file), start, start + 3), def);
            }
        }
        names.finish();
        let len = names.occurrences().len();
        for file in 0..4 {
            for start in 0..210 {
                let span = Span::new(FileId(file), start, start + 3);
                let expected = names.resolve(span);
                for hint in [0, 1, len / 2, len - 1, len + 5] {
                    let mut hint = hint;
                    assert_eq!(names.resolve_near(span, &mut hint), expected, "{span:?}");
                    if expected.is_some() {
                        assert_eq!(names.occurrences()[hint].span, span);
                    }
                }
            }
        }
    }
}
