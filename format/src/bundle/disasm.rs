//! `policyvm inspect`: a bundle as readable text — header, classes,
//! programs and promises, each promise with the source line it came from.
//! The same text is what the golden tests snapshot.

use std::fmt::Write as _;

use super::error::hex;
use super::format::{Body, Constant, Item, Operand};
use super::functions::function_by_id;
use super::instr::Instr;
use crate::schema::{fact_by_id, promise_type_by_id};

pub fn disassemble(body: &Body, version: (u16, u16)) -> String {
    let d = Disasm { body };
    let mut out = String::new();
    let h = &body.header;
    let _ = writeln!(
        out,
        "bundle {:?} (format {}.{})",
        h.name, version.0, version.1
    );
    let _ = writeln!(out, "  serial        {}", h.serial);
    let _ = writeln!(out, "  pass limit    {}", h.pass_limit);
    let _ = writeln!(out, "  key id        {}", hex(&h.key_id));
    let _ = writeln!(out, "  compiler      {}", h.compiler_version);
    let _ = writeln!(out, "  source digest {}", hex(&h.source_digest));
    let _ = writeln!(
        out,
        "  {} constants, {} programs, {} classes, {} promises",
        body.constants.len(),
        body.programs.len(),
        body.classes.len(),
        body.promises.len()
    );

    // Format 2.3: the probe table, as the policy declared it.
    if body.probes().next().is_some() {
        let _ = writeln!(out, "\nprobes:");
        for (_, p) in body.probes() {
            let _ = writeln!(
                out,
                "  facts.{}: {} from {} timeout {}s",
                p.name,
                p.ty,
                p.describe_source(),
                p.timeout_secs
            );
        }
    }
    if !body.classes.is_empty() {
        let _ = writeln!(out, "\nclasses:");
        for class in body.classes.iter() {
            let name = d.name(class.name);
            match class.program {
                Some(p) => {
                    let _ = writeln!(out, "  {name} = {}", d.program(p));
                }
                None => {
                    let _ = writeln!(out, "  {name} (declared)");
                }
            }
        }
    }
    if !body.exclusive.is_empty() {
        let _ = writeln!(out, "\nexclusive:");
        for group in body.exclusive.iter() {
            let names: Vec<String> = group.iter().map(|c| d.name(*c)).collect();
            let _ = writeln!(out, "  {{ {} }}", names.join(", "));
        }
    }

    let _ = writeln!(out, "\npromises (in order of application):");
    for &i in body.order.iter() {
        let Some(p) = body.promises.get(i as usize) else {
            continue;
        };
        let kind = promise_type_by_id(p.kind);
        let source = body
            .sources
            .get(p.source as usize)
            .map(|s| format!("{}:{}", d.name(s.file), s.line))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  #{i} {} {}    {source}",
            kind.map_or("?", |k| k.name),
            d.item(p.promiser)
        );
        if let Some(g) = p.guard {
            let _ = writeln!(out, "      when {}", d.program(g));
        }
        if !p.loops().is_empty() {
            let facts: Vec<&str> = p
                .loops()
                .iter()
                .map(|f| fact_by_id(*f).map_or("?", |f| f.name))
                .collect();
            let _ = writeln!(out, "      for each of {}", facts.join(" x "));
        }
        for a in p.attrs.iter() {
            let name = kind
                .and_then(|k| k.attr_by_id(a.attr))
                .map_or("?", |s| s.name);
            let value = match &a.value {
                Operand::Item(item) => d.item(*item),
                Operand::List(items) => {
                    let items: Vec<String> = items.iter().map(|i| d.item(*i)).collect();
                    format!("[{}]", items.join(", "))
                }
            };
            let value = match (name, &a.value) {
                ("mode", Operand::Item(Item::Const(c))) => match body.constants.get(*c as usize) {
                    Some(Constant::Int(m)) => format!("0o{m:o}"),
                    _ => value,
                },
                _ => value,
            };
            let _ = writeln!(out, "      {name} = {value}");
        }
        let list = |items: &[u32]| {
            items
                .iter()
                .map(|i| format!("#{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !p.after().is_empty() {
            let _ = writeln!(out, "      after {}", list(p.after()));
        }
        if !p.notify().is_empty() {
            let _ = writeln!(out, "      notify {}", list(p.notify()));
        }
        for (what, class) in [
            ("repaired", p.on_repaired()),
            ("kept", p.on_kept()),
            ("failed", p.on_failed()),
        ] {
            if let Some(c) = class {
                let _ = writeln!(out, "      on {what} set {}", d.name(c));
            }
        }
    }
    // The programs `each` runs appear only by number where they are used;
    // their code is listed once, here.
    let bodies: std::collections::BTreeSet<u32> = body
        .programs
        .iter()
        .flat_map(|p| p.code.iter())
        .filter_map(|i| match i {
            Instr::Each(q) => Some(*q),
            _ => None,
        })
        .collect();
    if !bodies.is_empty() {
        let _ = writeln!(out, "\nprograms run by each:");
        for q in bodies {
            let _ = writeln!(out, "  {}", d.program(q));
        }
    }
    // Tables (format 2.3) appear by number in `lookup`; their entries are
    // listed once, here, a key per line.
    let tables = body
        .constants
        .iter()
        .enumerate()
        .filter_map(|(c, k)| match k {
            Constant::Table(t) => Some((c, t)),
            _ => None,
        });
    let mut heading = false;
    for (c, table) in tables {
        if !heading {
            let _ = writeln!(out, "\ntables:");
            heading = true;
        }
        // Strings quoted; ints and bools as they are.
        let text = |v: &str| {
            if table.kind == crate::ids::constant_kind::STR {
                format!("{v:?}")
            } else {
                v.to_owned()
            }
        };
        let default = table
            .default
            .as_deref()
            .map_or_else(|| "none".to_owned(), text);
        let _ = writeln!(out, "  t{c}: {} keys, default {default}", table.ends.len());
        for (key, value) in table.entries() {
            let _ = writeln!(out, "    {key:?} = {}", text(value));
        }
    }
    out
}

struct Disasm<'b> {
    body: &'b Body,
}

impl Disasm<'_> {
    fn constant(&self, c: u32) -> String {
        match self.body.constants.get(c as usize) {
            Some(Constant::Str(s)) => format!("{s:?}"),
            Some(Constant::Word(w)) => w.to_string(),
            Some(Constant::Int(i)) => i.to_string(),
            Some(Constant::Bool(b)) => b.to_string(),
            Some(Constant::Duration(s)) => format!("{s}s"),
            Some(Constant::Blob(b)) => format!("<{} bytes>", b.0.len()),
            Some(Constant::List(items)) => {
                let items: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
                format!("[{}]", items.join(", "))
            }
            Some(Constant::Probe(p)) => format!("<probe {}>", p.name),
            Some(Constant::Table(_)) => format!("t{c}"),
            Some(Constant::Secret(sealed)) => format!("<secret {}>", sealed.name),
            Some(Constant::SealedSet(_)) => format!("<sealed set {c}>"),
            Some(Constant::BlobRef(b)) => format!("<blob sha256:{} {} bytes>", b.name(), b.size),
            None => format!("<constant {c}?>"),
        }
    }

    fn name(&self, c: u32) -> String {
        match self.body.constants.get(c as usize) {
            Some(Constant::Str(s) | Constant::Word(s)) => s.to_string(),
            _ => self.constant(c),
        }
    }

    fn item(&self, item: Item) -> String {
        match item {
            Item::Const(c) => self.constant(c),
            Item::Code(p) => format!("({})", self.program(p)),
        }
    }

    /// A program as its instructions, `; `-separated.
    fn program(&self, p: u32) -> String {
        let Some(program) = self.body.programs.get(p as usize) else {
            return format!("<program {p}?>");
        };
        let parts: Vec<String> = program
            .code
            .iter()
            .map(|i| match *i {
                Instr::Const(c) => format!("const {}", self.constant(c)),
                Instr::Fact(f) => format!("fact {}", fact_by_id(f).map_or("?", |f| f.name)),
                Instr::LoopVar(v) => format!("loopvar {v}"),
                Instr::Class(c) => format!("class {}", self.name(c)),
                Instr::Match(c) => format!("match {}", self.constant(c)),
                Instr::Concat(n) => format!("concat {n}"),
                Instr::Func(f) => match function_by_id(f) {
                    Some(func) => format!("func {}", func.name),
                    None => format!("func <function {f}?>"),
                },
                Instr::Each(q) => format!("each p{q}"),
                Instr::Elem(d) => format!("elem {d}"),
                Instr::Probe(c) => format!("probe facts.{}", self.name(c)),
                Instr::Lookup(t) => format!("lookup {}", self.constant(t)),
                other => other.mnemonic().to_owned(),
            })
            .collect();
        format!("p{p}: {}", parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::format::{ClassEntry, List};
    use crate::bundle::functions::function;

    /// The probe table (format 2.3) and the `probe` instruction.
    #[test]
    fn probes_are_listed_and_read_by_name() {
        use crate::bundle::probe::{Probe, ProbeSource};
        let mut body = Body::with_programs(
            vec![
                Constant::Probe(Box::new(Probe {
                    name: "hw".into(),
                    ty: "{cpus:int}".into(),
                    source: ProbeSource::Program(vec!["/usr/lib/hw".to_owned()].into()),
                    timeout_secs: 5,
                })),
                Constant::Probe(Box::new(Probe {
                    name: "rack".into(),
                    ty: "int".into(),
                    source: ProbeSource::File("/etc/rack".into()),
                    timeout_secs: 10,
                })),
                Constant::Str("hw.cpus".into()),
                Constant::Word("big".into()),
                Constant::Int(8),
            ],
            vec![vec![Instr::Probe(2), Instr::Const(4), Instr::Eq]],
        );
        body.classes = List(vec![ClassEntry {
            name: 3,
            program: Some(0),
        }]);
        let text = disassemble(&body, (2, 3));
        assert!(
            text.contains(
                "\nprobes:\n  facts.hw: {cpus:int} from [\"/usr/lib/hw\"] timeout 5s\n  \
                 facts.rack: int from file \"/etc/rack\" timeout 10s\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("  big = p0: probe facts.hw.cpus; const 8; eq\n"),
            "{text}"
        );
    }

    /// The format 2.2 instructions and list constants as `inspect` shows
    /// them, and the programs `each` runs listed once at the end.
    #[test]
    fn format_2_2_instructions_are_shown_by_name() {
        let join = function("join").unwrap().id;
        let mut body = Body::with_programs(
            vec![
                Constant::List(vec!["a".to_owned(), "b\"".to_owned()].into()),
                Constant::Str(",".into()),
                Constant::Word("web".into()),
                Constant::Bool(true),
            ],
            vec![
                vec![Instr::Elem(0), Instr::Const(1), Instr::Concat(2)],
                vec![
                    Instr::Const(3),
                    Instr::Const(0),
                    Instr::Each(0),
                    Instr::Const(0),
                    Instr::Const(1),
                    Instr::Func(join),
                    Instr::Select,
                    Instr::Const(1),
                    Instr::Coalesce,
                    Instr::Func(99),
                    Instr::Const(1),
                    Instr::Eq,
                ],
            ],
        );
        body.classes = List(vec![ClassEntry {
            name: 2,
            program: Some(1),
        }]);
        let text = disassemble(&body, (2, 2));
        assert!(
            text.contains(
                "  web = p1: const true; const [\"a\", \"b\\\"\"]; each p0; \
                 const [\"a\", \"b\\\"\"]; const \",\"; func join; select; const \",\"; \
                 coalesce; func <function 99?>; const \",\"; eq\n"
            ),
            "{text}"
        );
        assert!(
            text.ends_with("\nprograms run by each:\n  p0: elem 0; const \",\"; concat 2\n"),
            "{text}"
        );
    }

    /// Format 2.3: `lookup` names its table, and each table is listed once
    /// at the end with its default and one line per key.
    #[test]
    fn lookups_name_their_table_and_tables_are_listed_at_the_end() {
        use crate::bundle::format::Table;
        use crate::ids::constant_kind::{INT, STR};
        let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        let mut body = Body::with_programs(
            vec![
                Constant::Str("a\n".into()),
                Constant::Str("b".into()),
                Constant::Table(Box::new(Table::new(
                    STR,
                    vec![pair("h2", "b"), pair("h1", "a\n")],
                    Some("b".into()),
                ))),
                Constant::Table(Box::new(Table::new(INT, vec![pair("h1", "80")], None))),
                Constant::Word("web".into()),
            ],
            vec![vec![
                Instr::Fact(1),
                Instr::Lookup(2),
                Instr::Fact(1),
                Instr::Lookup(3),
                Instr::Eq,
            ]],
        );
        body.classes = List(vec![ClassEntry {
            name: 4,
            program: Some(0),
        }]);
        let text = disassemble(&body, (2, 3));
        assert!(
            text.contains(
                "  web = p0: fact sys.hostname; lookup t2; fact sys.hostname; lookup t3; eq\n"
            ),
            "{text}"
        );
        assert!(
            text.ends_with(
                "\ntables:\n  t2: 2 keys, default \"b\"\n    \"h1\" = \"a\\n\"\n    \"h2\" = \"b\"\n  \
                 t3: 1 keys, default none\n    \"h1\" = 80\n"
            ),
            "{text}"
        );
    }
}
