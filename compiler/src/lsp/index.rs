//! The checker's name tables ([`crate::sema::names`]) as the language
//! server asks them: the name under the cursor, what it refers to, and every
//! place that is written. Nothing is resolved here: hover, definition,
//! references and rename read what the checker recorded, so the editor and
//! the compiler cannot disagree about a name.

use converge_grammar::{FileId, Span};

use crate::sema::names::{DefId, Definition, Names, Occurrence};

/// The name tables of the programs an analysis checked (one for a document
/// checked as the root of its program).
#[derive(Debug, Default)]
pub struct Index {
    tables: Vec<Names>,
}

/// A definition of one of the tables.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub names: &'a Names,
    pub id: DefId,
    pub def: &'a Definition,
}

impl<'a> Target<'a> {
    /// Every place the name is written, its definition included.
    pub fn uses(self) -> impl Iterator<Item = &'a Occurrence> + 'a {
        self.names.uses(self.id)
    }
}

impl Index {
    pub fn new(tables: Vec<Names>) -> Self {
        Index { tables }
    }

    /// The name written under a byte offset of a file (the end of a name
    /// counts), with what it refers to.
    pub fn at(&self, file: FileId, offset: u32) -> Option<(Span, Target<'_>)> {
        self.tables
            .iter()
            .filter_map(|names| {
                let o = names.at(file, offset)?;
                Some((o.span, target(names, o.def)?))
            })
            .min_by_key(|(span, _)| span.len())
    }

    /// Every definition of every table.
    pub fn targets(&self) -> impl Iterator<Item = Target<'_>> {
        self.tables.iter().flat_map(|names| {
            names
                .definitions()
                .map(move |(id, def)| Target { names, id, def })
        })
    }
}

fn target(names: &Names, id: DefId) -> Option<Target<'_>> {
    Some(Target {
        names,
        id,
        def: names.definition(id)?,
    })
}
