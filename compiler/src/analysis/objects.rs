//! The promises of a program grouped by object (promise type and promiser),
//! built once and read by both the contradiction analysis and the ordering
//! graph, which run side by side (issue 22, item 4: each used to build its
//! own map with a `Vec` per object, hashing every promiser twice).

use rustc_hash::FxHashMap as HashMap;

use crate::ir::{Program, Value};

/// Objects in the order of their first promise; the promises of each in
/// ascending order.
#[derive(Debug)]
pub struct Objects<'p> {
    program: &'p Program,
    /// (type, promiser) -> object.
    index: HashMap<(&'p str, &'p Value), u32>,
    /// Where each object's promises start in `members`; one more entry
    /// than there are objects.
    starts: Vec<usize>,
    members: Vec<usize>,
}

impl<'p> Objects<'p> {
    pub fn new(program: &'p Program) -> Self {
        let promises = &program.promises;
        // Sized for one object per promise: growing it would rehash every
        // promiser again at each doubling.
        let mut index: HashMap<(&'p str, &'p Value), u32> =
            HashMap::with_capacity_and_hasher(promises.len(), Default::default());
        let mut object_of: Vec<u32> = Vec::with_capacity(promises.len());
        let mut counts: Vec<usize> = Vec::new();
        for p in promises {
            let next = counts.len() as u32;
            let object = *index.entry((p.kind, &p.promiser)).or_insert(next);
            if object == next {
                counts.push(0);
            }
            if let Some(count) = counts.get_mut(object as usize) {
                *count += 1;
            }
            object_of.push(object);
        }
        let mut starts: Vec<usize> = Vec::with_capacity(counts.len() + 1);
        let mut total = 0;
        starts.push(0);
        for count in &counts {
            total += count;
            starts.push(total);
        }
        // Each object's next free place, filled in promise order.
        let mut next = counts;
        for (slot, start) in next.iter_mut().zip(&starts) {
            *slot = *start;
        }
        let mut members = vec![0; promises.len()];
        for (i, object) in object_of.into_iter().enumerate() {
            if let Some(slot) = next.get_mut(object as usize) {
                if let Some(member) = members.get_mut(*slot) {
                    *member = i;
                }
                *slot += 1;
            }
        }
        Objects {
            program,
            index,
            starts,
            members,
        }
    }

    /// How many objects there are.
    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The promises of object `object`, ascending.
    pub fn members(&self, object: usize) -> &[usize] {
        match (self.starts.get(object), self.starts.get(object + 1)) {
            (Some(&start), Some(&end)) => self.members.get(start..end).unwrap_or_default(),
            _ => &[],
        }
    }

    /// The promise type and promiser of object `object`.
    pub fn key(&self, object: usize) -> Option<(&'p str, &'p Value)> {
        let first = *self.members(object).first()?;
        let p = self.program.promises.get(first)?;
        Some((p.kind, &p.promiser))
    }

    /// Which object `kind` `promiser` is, if any promise has it.
    pub fn find(&self, kind: &str, promiser: &Value) -> Option<usize> {
        self.index.get(&(kind, promiser)).map(|o| *o as usize)
    }

    /// The promises of `kind` `promiser`, ascending (none if no promise has
    /// it).
    pub fn promises_of(&self, kind: &str, promiser: &Value) -> &[usize] {
        self.find(kind, promiser)
            .map_or(&[], |object| self.members(object))
    }

    /// Every object with its promises, in the order of its first promise.
    pub fn iter(&self) -> impl Iterator<Item = ((&'p str, &'p Value), &[usize])> + '_ {
        (0..self.len()).filter_map(|o| Some((self.key(o)?, self.members(o))))
    }
}
