//! Where each promise instance's result is in the run's results, so that
//! a later pass updates it instead of adding another.
//!
//! Almost every instance is the only one of its promise (no run-time
//! loop): those are found by promise index in a table of 4 bytes per
//! promise. A map keyed by (index, loop elements) for every instance cost
//! about 70 bytes per promise, a fifteenth of a converged run's memory
//! (issue 22, item 3); it is kept for the instances of run-time loops.

use std::collections::HashMap;

/// A promise instance: its index and loop combination.
pub(crate) type InstanceKey = (usize, Vec<String>);

/// No result yet.
const NONE: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(crate) struct Slots {
    /// Result position by promise index, for instances outside loops.
    plain: Vec<u32>,
    /// Result position of every other instance.
    looped: HashMap<InstanceKey, usize>,
}

impl Slots {
    /// Slots for a bundle of `promises` promises.
    pub(crate) fn new(promises: usize) -> Self {
        Slots {
            plain: vec![NONE; promises],
            looped: HashMap::new(),
        }
    }

    /// The position of the result of `key`, if it has one.
    pub(crate) fn get(&self, key: &InstanceKey) -> Option<usize> {
        if key.1.is_empty() {
            if let Some(at) = self.plain.get(key.0).filter(|at| **at != NONE) {
                return Some(*at as usize);
            }
        }
        if self.looped.is_empty() {
            return None;
        }
        self.looped.get(key).copied()
    }

    /// Records that the result of `key` is at position `at`.
    pub(crate) fn insert(&mut self, key: InstanceKey, at: usize) {
        if key.1.is_empty() {
            let fits = u32::try_from(at).ok().filter(|at| *at != NONE);
            if let (Some(slot), Some(at)) = (self.plain.get_mut(key.0), fits) {
                *slot = at;
                return;
            }
        }
        self.looped.insert(key, at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_looped_instances_have_their_own_slots() {
        let mut slots = Slots::new(3);
        assert_eq!(slots.get(&(1, Vec::new())), None);
        slots.insert((1, Vec::new()), 7);
        slots.insert((1, vec!["eth0".into()]), 8);
        slots.insert((1, vec!["eth1".into()]), 9);
        assert_eq!(slots.get(&(1, Vec::new())), Some(7));
        assert_eq!(slots.get(&(1, vec!["eth0".into()])), Some(8));
        assert_eq!(slots.get(&(1, vec!["eth1".into()])), Some(9));
        assert_eq!(slots.get(&(0, Vec::new())), None);
        assert_eq!(slots.get(&(2, vec!["eth0".into()])), None);
    }

    /// An index past the table (a body that bypassed the verifier) or a
    /// position too large for the table still gets a slot.
    #[test]
    fn what_the_table_cannot_hold_goes_to_the_map() {
        let mut slots = Slots::new(1);
        slots.insert((5, Vec::new()), 2);
        slots.insert((0, Vec::new()), u32::MAX as usize);
        assert_eq!(slots.get(&(5, Vec::new())), Some(2));
        assert_eq!(slots.get(&(0, Vec::new())), Some(u32::MAX as usize));
    }
}
