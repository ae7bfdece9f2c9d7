//! Lowering on every core (issue 22, item 4): the promises are cut into
//! consecutive parts; the first is lowered on this thread into the pools
//! that already hold the probes and classes, every other on a thread of its
//! own into pools of its own, and each of those is then merged, in order,
//! into the first ([`Lowerer::absorb`]).
//!
//! A part's pools hold its constants, programs and places in the order the
//! part first met them. Merging them in that order appends exactly what a
//! lowering of all the promises in one sequence would have appended at
//! that point, so every index, hence the bundle's bytes, is the same
//! whatever the number of parts (a test below lowers every golden policy
//! both ways).

use converge_format::bundle::format::{Item, Operand, Promise, PromiseParts, SourceLoc};
use converge_format::bundle::instr::Instr;

use super::Lowerer;
use crate::bundle::merge::Settled;
use crate::ir;

/// Fewer promises than this a part are not worth a thread: starting one
/// and merging its pools cost more than lowering them where they are.
const MIN_PART: usize = 4096;

/// How many parts to lower `promises` promises in: one per core, each
/// of at least [`MIN_PART`] promises.
pub(super) fn by_cores(promises: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    cores.min(promises / MIN_PART).max(1)
}

/// Every promise of `settled`, lowered in `parts` consecutive parts.
pub(super) fn lower_in_parts(
    main: &mut Lowerer<'_>,
    program: &ir::Program,
    settled: &Settled,
    parts: usize,
) -> Vec<Promise> {
    let total = settled.promises.len();
    let size = total.div_ceil(parts.max(1)).max(1);
    let (db, blobs) = (main.db, main.blobs);
    std::thread::scope(|scope| {
        let rest: Vec<_> = (size..total)
            .step_by(size)
            .map(|start| {
                let range = start..start.saturating_add(size).min(total);
                scope.spawn(move || {
                    let mut part = Lowerer::new(db, blobs);
                    let promises = part.promises(program, settled, range);
                    (part, promises)
                })
            })
            .collect();
        let mut out: Vec<Promise> = Vec::with_capacity(total);
        let first = main.promises(program, settled, 0..size.min(total));
        out.extend(first.into_iter().map(Promise::from));
        for handle in rest {
            let (part, promises) = handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            main.absorb(part, promises, &mut out);
        }
        out
    })
}

impl Lowerer<'_> {
    /// Merges the pools of `part`, lowered after everything in `self`,
    /// into `self`'s, and appends its promises to `out` with their indices
    /// renumbered into the merged pools.
    fn absorb(&mut self, part: Lowerer<'_>, promises: Vec<PromiseParts>, out: &mut Vec<Promise>) {
        let Lowerer {
            constants,
            programs,
            sources,
            diagnostics,
            ..
        } = part;
        let mut map = Renumber {
            constants: constants.into_iter().map(|c| self.constant(c)).collect(),
            programs: Vec::with_capacity(programs.len()),
            places: Vec::new(),
            missing: false,
        };
        // A program's `each` names programs before it, already merged.
        for program in programs {
            let mut code = program.code.0;
            for instr in &mut code {
                map.instr(instr);
            }
            let merged = self.program(code);
            map.programs.push(merged);
        }
        map.places = sources
            .into_entries()
            .into_iter()
            .map(|place| {
                let file = map.constant(place.file);
                self.sources.intern(SourceLoc {
                    file,
                    line: place.line,
                })
            })
            .collect();
        self.diagnostics.extend(diagnostics);
        for mut promise in promises {
            map.promise(&mut promise);
            out.push(Promise::from(promise));
        }
        if map.missing {
            self.internal(
                "a part of the lowering names a constant, program or place it does not hold"
                    .to_owned(),
            );
        }
    }
}

/// Where each constant, program and place of a part went in the merged
/// pools, by its index in the part.
struct Renumber {
    constants: Vec<u32>,
    programs: Vec<u32>,
    places: Vec<u32>,
    /// An index the part does not hold was met (a bug: no bundle).
    missing: bool,
}

impl Renumber {
    fn constant(&mut self, c: u32) -> u32 {
        Self::look_up(&self.constants, c, &mut self.missing)
    }

    fn program(&mut self, p: u32) -> u32 {
        Self::look_up(&self.programs, p, &mut self.missing)
    }

    fn look_up(table: &[u32], i: u32, missing: &mut bool) -> u32 {
        match table.get(i as usize) {
            Some(&merged) => merged,
            None => {
                *missing = true;
                i
            }
        }
    }

    /// Every instruction is listed, none by a wildcard: a new instruction
    /// with an operand in a pool must be renumbered here to compile.
    fn instr(&mut self, instr: &mut Instr) {
        match instr {
            Instr::Const(c) | Instr::Class(c) | Instr::Match(c) | Instr::Probe(c) => {
                *c = self.constant(*c)
            }
            Instr::Lookup(t) => *t = self.constant(*t),
            Instr::Each(p) => *p = self.program(*p),
            Instr::Fact(_)
            | Instr::LoopVar(_)
            | Instr::Concat(_)
            | Instr::Func(_)
            | Instr::Elem(_)
            | Instr::Not
            | Instr::And
            | Instr::Or
            | Instr::Eq
            | Instr::Ne
            | Instr::In
            | Instr::Select
            | Instr::Coalesce => {}
        }
    }

    fn item(&mut self, item: &mut Item) {
        match item {
            Item::Const(c) => *c = self.constant(*c),
            Item::Code(p) => *p = self.program(*p),
        }
    }

    /// The promise's pool indices; its facts and its `after` and `notify`
    /// (indices of promises, already the bundle's) stay.
    fn promise(&mut self, p: &mut PromiseParts) {
        let PromiseParts {
            kind: _,
            promiser,
            attrs,
            guard,
            loops: _,
            after: _,
            notify: _,
            on_repaired,
            on_kept,
            on_failed,
            source,
        } = p;
        self.item(promiser);
        for attr in attrs.0.iter_mut() {
            match &mut attr.value {
                Operand::Item(item) => self.item(item),
                Operand::List(items) => items.0.iter_mut().for_each(|item| self.item(item)),
            }
        }
        if let Some(g) = guard {
            *g = self.program(*g);
        }
        for class in [on_repaired, on_kept, on_failed].into_iter().flatten() {
            *class = self.constant(*class);
        }
        *source = Self::look_up(&self.places, *source, &mut self.missing);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::path::Path;

    use converge_format::bundle::format::Body;

    use crate::bundle::lower::{lower_in, BuildInfo};
    use crate::goldens;

    /// The body of `policy`, its promises lowered in `parts` parts.
    fn lowered(policy: &Path, parts: usize) -> Body {
        let (ws, checked) = goldens::checked(policy);
        let info = BuildInfo {
            name: "t".into(),
            key_id: [0; 8],
            serial: 1,
        };
        lower_in(
            &ws.db,
            &checked.files,
            &checked.program,
            &info,
            None,
            Some(parts),
        )
        .unwrap()
    }

    /// Host loops (`each`), guards, outcome classes and places met first
    /// in a later part: what the goldens write in their first promise.
    const LATE: &str = r#"
class web = sys.hostname in ["web01", "web02"];
class motd_changed;
bundle late {
  report "first" { message = "first"; }
  file "/etc/motd" { template = "motd.tpl"; on_repaired = motd_changed; }
  when web && motd_changed {
    file "/etc/web" { content = "${upper(sys.hostname)} ${join(split(sys.fqdn, "."), "-")}\n"; }
  }
  file "/etc/again" { template = "motd.tpl"; after = [file "/etc/motd"]; }
}
policy { late(); }
"#;

    const MOTD: &str = "{% for label in split(sys.fqdn, \".\") %}\n{% for part in split(sys.hostname, \"0\") %}\n${label}/${part}\n{% endfor %}\n{% endfor %}\n";

    #[test]
    fn a_body_is_the_same_whatever_the_number_of_parts() {
        let dir = tempfile::tempdir().unwrap();
        let late = dir.path().join("late.policy");
        std::fs::write(&late, LATE).unwrap();
        std::fs::write(dir.path().join("motd.tpl"), MOTD).unwrap();
        for policy in goldens::policies().into_iter().chain([late]) {
            let whole = lowered(&policy, 1);
            let n = whole.promises.len();
            assert!(n >= 2, "{}: {n} promises", policy.display());
            for parts in [2, 3, n] {
                assert_eq!(
                    lowered(&policy, parts),
                    whole,
                    "{} in {parts} parts",
                    policy.display()
                );
            }
        }
    }
}
