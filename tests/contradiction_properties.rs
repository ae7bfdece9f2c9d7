//! Contradiction analysis against brute force: random promises on one
//! object, with random guards over up to 10 classes and random exclusive
//! groups, written as real policy text and checked by the whole compiler.
//! The compiler must report a contradiction exactly when some assignment of
//! the classes (respecting the groups) makes two promises with different
//! values active together, and its witness must be such an assignment.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;

use converge_compiler::check::check;
use converge_compiler::workspace::{FileSystem, Workspace};

#[derive(Clone, Debug)]
enum Guard {
    Class(usize),
    Not(Box<Guard>),
    And(Box<Guard>, Box<Guard>),
    Or(Box<Guard>, Box<Guard>),
}

impl Guard {
    fn eval(&self, on: &[bool]) -> bool {
        match self {
            Guard::Class(c) => on[*c],
            Guard::Not(g) => !g.eval(on),
            Guard::And(a, b) => a.eval(on) && b.eval(on),
            Guard::Or(a, b) => a.eval(on) || b.eval(on),
        }
    }

    fn text(&self) -> String {
        match self {
            Guard::Class(c) => format!("c{c}"),
            Guard::Not(g) => format!("!({})", g.text()),
            Guard::And(a, b) => format!("({}) && ({})", a.text(), b.text()),
            Guard::Or(a, b) => format!("({}) || ({})", a.text(), b.text()),
        }
    }
}

fn guard(classes: usize) -> impl Strategy<Value = Guard> {
    let leaf = (0..classes).prop_map(Guard::Class);
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|g| Guard::Not(Box::new(g))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Guard::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner).prop_map(|(a, b)| Guard::Or(Box::new(a), Box::new(b))),
        ]
    })
}

#[derive(Clone, Debug)]
struct Case {
    classes: usize,
    groups: Vec<Vec<usize>>,
    promises: Vec<(Guard, u8)>,
}

fn case() -> impl Strategy<Value = Case> {
    (2usize..=10).prop_flat_map(|classes| {
        (
            Just(classes),
            prop::collection::vec(prop::collection::btree_set(0..classes, 2..=4), 0..=2),
            prop::collection::vec((guard(classes), 0u8..3), 2..=5),
        )
            .prop_map(|(classes, groups, promises)| Case {
                classes,
                groups: groups
                    .into_iter()
                    .map(|g| g.into_iter().collect())
                    .collect(),
                promises,
            })
    })
}

impl Case {
    fn policy(&self) -> String {
        let mut text = String::new();
        for c in 0..self.classes {
            text.push_str(&format!("class c{c};\n"));
        }
        for group in &self.groups {
            let names: Vec<String> = group.iter().map(|c| format!("c{c}")).collect();
            text.push_str(&format!("exclusive {{ {} }}\n", names.join(", ")));
        }
        text.push_str("bundle b {\n");
        for (g, value) in &self.promises {
            text.push_str(&format!(
                "  when {} {{ file \"/etc/x\" {{ content = \"v{value}\"; }} }}\n",
                g.text()
            ));
        }
        text.push_str("}\npolicy { b(); }\n");
        text
    }

    fn allowed(&self, on: &[bool]) -> bool {
        self.groups
            .iter()
            .all(|g| g.iter().filter(|c| on[**c]).count() <= 1)
    }

    /// Whether `on` activates two promises that want different values.
    fn conflicts_under(&self, on: &[bool]) -> bool {
        let active: Vec<u8> = self
            .promises
            .iter()
            .filter(|(g, _)| g.eval(on))
            .map(|(_, v)| *v)
            .collect();
        active.iter().any(|v| *v != active[0])
    }

    fn brute_force(&self) -> bool {
        (0u32..1 << self.classes).any(|bits| {
            let on: Vec<bool> = (0..self.classes).map(|c| bits & (1 << c) != 0).collect();
            self.allowed(&on) && self.conflicts_under(&on)
        })
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn contradictions_match_brute_force(case in case()) {
        let mut fs = FileSystem::new();
        fs.insert("case.policy", case.policy());
        let mut ws = Workspace::new(fs);
        ws.add_root(std::path::Path::new("case.policy")).unwrap();
        let outcome = check(&ws);
        let contradictions: Vec<_> = outcome
            .diagnostics
            .iter()
            .filter(|d| d.code.as_str() == "E0301")
            .collect();
        let other: Vec<_> = outcome
            .diagnostics
            .iter()
            .filter(|d| d.is_error() && d.code.as_str() != "E0301")
            .collect();
        prop_assert!(other.is_empty(), "unexpected errors: {:?}\n{}", other, case.policy());
        prop_assert_eq!(!contradictions.is_empty(), case.brute_force(), "policy:\n{}", case.policy());

        // Every witness is an assignment that respects the groups and makes
        // a conflicting pair active.
        for d in contradictions {
            let note = d.notes.iter().find(|n| n.starts_with("both ")).unwrap();
            let mut on = vec![false; case.classes];
            if let Some(list) = note.strip_prefix("both active when: ") {
                for name in list.split(", ") {
                    let c: usize = name.trim_start_matches('c').parse().unwrap();
                    on[c] = true;
                }
            }
            prop_assert!(case.allowed(&on), "witness {} breaks a group\n{}", note, case.policy());
            prop_assert!(case.conflicts_under(&on), "witness {} activates no conflict\n{}", note, case.policy());
        }
    }
}
