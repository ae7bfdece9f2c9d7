//! Which split lookups the writer merges, and what the merged promise
//! looks like: built from real policies through `check` and `lower`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use converge_format::bundle::format::{Body, Constant, Item, Operand, Promise};
use converge_format::bundle::instr::Instr;

use super::*;
use crate::bundle::lower::{lower, BuildInfo};
use crate::check::check;
use crate::workspace::{FileSystem, Workspace};

/// `keys` hosts `h00`, `h01`, ... as map entries `"hNN": VALUE(NN)`.
fn entries(keys: usize, value: impl Fn(usize) -> String) -> String {
    (0..keys)
        .map(|i| format!("\"h{i:02}\": {}", value(i)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The program and bundle body of `policy` (a whole `site.policy`).
fn build(policy: &str) -> (ir::Program, Body) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("site.policy");
    std::fs::write(&path, policy).unwrap();
    let mut ws = Workspace::new(FileSystem::new());
    ws.add_root(&path).unwrap();
    let mut outcome = check(&ws);
    let errors: Vec<_> = outcome
        .diagnostics
        .iter()
        .filter(|d| d.severity == crate::diagnostic::Severity::Error)
        .map(|d| d.message.clone())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let checked = outcome.programs.pop().unwrap();
    let info = BuildInfo {
        name: "t".into(),
        key_id: [0; 8],
        serial: 1,
    };
    let body = lower(&ws.db, &checked.files, &checked.program, &info).unwrap();
    converge_format::bundle::verify::verify_body(&body).unwrap();
    (checked.program, body)
}

fn code(body: &Body, item: Item) -> Vec<Instr> {
    match item {
        Item::Code(p) => body.programs.get(p as usize).unwrap().code.0.clone(),
        Item::Const(c) => panic!("constant {c}, not a program"),
    }
}

fn content(body: &Body, p: &Promise) -> Vec<Instr> {
    match &p.attrs.iter().find(|a| a.attr == 12).unwrap().value {
        Operand::Item(item) => code(body, *item),
        Operand::List(_) => panic!("a list"),
    }
}

/// The table a `lookup` of `code` reads: its entries as `(key, value
/// constant)`, and its default constant.
fn table(body: &Body, code: &[Instr]) -> (Vec<(String, Constant)>, Option<Constant>) {
    let t = code
        .iter()
        .find_map(|i| match i {
            Instr::Lookup(t) => Some(*t),
            _ => None,
        })
        .expect("a lookup");
    let value = |kind: u8, text: &str| match kind {
        converge_format::ids::constant_kind::STR => Constant::Str(text.to_owned().into()),
        converge_format::ids::constant_kind::INT => Constant::Int(text.parse().unwrap()),
        _ => Constant::Bool(text == "true"),
    };
    match body.constants.get(t as usize).unwrap() {
        Constant::Table(table) => (
            table
                .entries()
                .map(|(k, v)| (k.to_owned(), value(table.kind, v)))
                .collect(),
            table.default.as_deref().map(|d| value(table.kind, d)),
        ),
        other => panic!("{other:?} is not a table"),
    }
}

fn hostname() -> Instr {
    Instr::Fact(u32::from(
        converge_format::schema::fact("sys.hostname").unwrap().id,
    ))
}

/// Twenty keys and a `??`: twenty-one instances for the analyses, one
/// promise in the bundle, always active, its content the table's.
#[test]
fn a_lookup_with_a_default_is_one_promise_with_a_table() {
    let policy = format!(
        "let motd: map<string, string> = {{ {} }};\n\
         bundle b {{ file \"/etc/motd\" {{ content = motd[sys.hostname] ?? \"welcome\"; }} }}\n\
         policy {{ b(); }}\n",
        entries(20, |i| format!("\"hello {i}\""))
    );
    let (program, body) = build(&policy);
    assert_eq!(program.promises.len(), 21);
    assert_eq!(body.promises.len(), 1);
    assert_eq!(body.order.0, [0]);
    let p = body.promises.get(0).unwrap();
    assert_eq!(p.guard, None);
    let code = content(&body, p);
    assert!(
        matches!(code.as_slice(), [f, Instr::Lookup(_)] if *f == hostname()),
        "{code:?}"
    );
    let (entries, default) = table(&body, &code);
    assert_eq!(entries.len(), 20);
    assert_eq!(
        entries.get(7),
        Some(&("h07".to_owned(), Constant::Str("hello 7".into())))
    );
    assert_eq!(default, Some(Constant::Str("welcome".into())));
}

/// Without a `??`, guarded so that only hosts with a key reach it: one
/// promise, a table without a default, and a guard that also requires the
/// key to be one of the table's (one `in` over a list constant).
#[test]
fn a_lookup_without_a_default_is_guarded_by_its_keys() {
    let keys: Vec<String> = (0..12).map(|i| format!("h{i:02}")).collect();
    let quoted: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
    let policy = format!(
        "let port: map<string, int> = {{ {} }};\n\
         bundle b {{ when sys.hostname in [{}] {{ file \"/etc/port\" {{ content = \"${{port[sys.hostname]}}\"; }} }} }}\n\
         policy {{ b(); }}\n",
        entries(12, |i| format!("{}", 8000 + i)),
        quoted.join(", ")
    );
    let (program, body) = build(&policy);
    assert_eq!(program.promises.len(), 12);
    assert_eq!(body.promises.len(), 1);
    let p = body.promises.get(0).unwrap();
    let guard = body
        .programs
        .get(p.guard.unwrap() as usize)
        .unwrap()
        .code
        .0
        .clone();
    let list = body
        .constants
        .iter()
        .position(|c| *c == Constant::List(keys.clone().into()))
        .expect("the keys as a list constant") as u32;
    assert!(
        guard.ends_with(&[hostname(), Instr::Const(list), Instr::In, Instr::And]),
        "{guard:?}"
    );
    let (entries, default) = table(&body, &content(&body, p));
    assert_eq!(entries.len(), 12);
    assert_eq!(default, None);
    assert_eq!(
        entries.first(),
        Some(&("h00".to_owned(), Constant::Str("8000".into())))
    );
}

/// A string built on the host whose literal parts differ per key: one
/// promise, a lookup inside the concat, the fact in its place.
#[test]
fn literal_parts_around_a_fact_are_looked_up_inside_the_concat() {
    let policy = format!(
        "let port: map<string, int> = {{ {} }};\n\
         bundle b {{ file \"/etc/port\" {{ content = \"port=${{port[sys.hostname] ?? 80}} os=${{sys.os}}\\n\"; }} }}\n\
         policy {{ b(); }}\n",
        entries(3, |i| format!("{}", 8000 + i))
    );
    let (_, body) = build(&policy);
    assert_eq!(body.promises.len(), 1);
    let code = content(&body, body.promises.get(0).unwrap());
    let os = Instr::Fact(u32::from(
        converge_format::schema::fact("sys.os").unwrap().id,
    ));
    assert!(
        matches!(code.as_slice(), [h, Instr::Lookup(_), o, Instr::Const(_), Instr::Concat(3)] if *h == hostname() && *o == os),
        "{code:?}"
    );
    let (entries, default) = table(&body, &code);
    assert_eq!(
        entries.get(2),
        Some(&("h02".to_owned(), Constant::Str("port=8002 os=".into())))
    );
    assert_eq!(default, Some(Constant::Str("port=80 os=".into())));
}

/// Rendered files that differ in a line: the table keeps only the
/// differing middle, the common text around it is pushed once.
#[test]
fn common_text_around_the_differing_part_is_pushed_once() {
    let policy = format!(
        "let motd: map<string, string> = {{ {} }};\n\
         bundle b {{ file \"/etc/motd\" {{ content = \"# managed by converge, do not edit\\nmotd = ${{motd[sys.hostname] ?? \"none\"}}\\n# end of the file\\n\"; }} }}\n\
         policy {{ b(); }}\n",
        entries(3, |i| format!("\"hello {i}\""))
    );
    let (_, body) = build(&policy);
    assert_eq!(body.promises.len(), 1);
    let code = content(&body, body.promises.get(0).unwrap());
    let constant = |i: &Instr| match i {
        Instr::Const(c) => body.constants.get(*c as usize).cloned(),
        _ => None,
    };
    assert!(
        matches!(code.as_slice(), [_, h, Instr::Lookup(_), _, Instr::Concat(3)] if *h == hostname()),
        "{code:?}"
    );
    assert_eq!(
        code.first().and_then(constant),
        Some(Constant::Str(
            "# managed by converge, do not edit\nmotd = ".into()
        ))
    );
    assert_eq!(
        code.get(3).and_then(constant),
        Some(Constant::Str("\n# end of the file\n".into()))
    );
    let (entries, default) = table(&body, &code);
    assert_eq!(
        entries.get(1),
        Some(&("h01".to_owned(), Constant::Str("hello 1".into())))
    );
    assert_eq!(default, Some(Constant::Str("none".into())));
}

/// An int attribute: a table of ints, its program an int.
#[test]
fn an_int_attribute_is_looked_up_as_an_int() {
    let policy = format!(
        "let uids: map<string, int> = {{ {} }};\n\
         bundle b {{ user \"app\" {{ uid = uids[sys.hostname] ?? 1000; }} }}\n\
         policy {{ b(); }}\n",
        entries(3, |i| format!("{}", 2000 + i))
    );
    let (_, body) = build(&policy);
    assert_eq!(body.promises.len(), 1);
    let p = body.promises.get(0).unwrap();
    let Operand::Item(uid) = &p.attrs.iter().find(|a| a.attr == 35).unwrap().value else {
        panic!("a list")
    };
    let (entries, default) = table(&body, &code(&body, *uid));
    assert_eq!(
        entries.get(2),
        Some(&("h02".to_owned(), Constant::Int(2002)))
    );
    assert_eq!(default, Some(Constant::Int(1000)));
}

/// A list attribute whose items differ per key: one promise, each
/// differing item a lookup, the others constants.
#[test]
fn list_items_that_differ_are_looked_up_item_by_item() {
    let policy = format!(
        "let greeting: map<string, string> = {{ {} }};\n\
         bundle b {{ command \"greet\" {{ run = [\"/bin/echo\", greeting[sys.hostname] ?? \"hi\"]; }} }}\n\
         policy {{ b(); }}\n",
        entries(3, |i| format!("\"hello {i}\""))
    );
    let (_, body) = build(&policy);
    assert_eq!(body.promises.len(), 1);
    let p = body.promises.get(0).unwrap();
    let run = p.attrs.iter().find(|a| a.attr == 30).unwrap();
    let Operand::List(items) = &run.value else {
        panic!("{run:?}")
    };
    assert!(matches!(items.first(), Some(Item::Const(_))), "{items:?}");
    let second = code(&body, *items.get(1).unwrap());
    let (entries, default) = table(&body, &second);
    assert_eq!(entries.len(), 3);
    assert_eq!(default, Some(Constant::Str("hi".into())));
}

/// What cannot be looked up on the host stays one promise per instance, as
/// before: a mode (a constant in a bundle), and values of different
/// shapes (a constant for the keys, a fact for the other hosts).
#[test]
fn instances_that_differ_otherwise_are_not_merged() {
    let modes = format!(
        "let modes: map<string, int> = {{ {} }};\n\
         bundle b {{ file \"/etc/m\" {{ content = \"x\"; mode = modes[sys.hostname] ?? 0o644; }} }}\n\
         policy {{ b(); }}\n",
        entries(3, |i| format!("{}", 0o600 + i))
    );
    let (program, body) = build(&modes);
    assert_eq!(program.promises.len(), 4);
    assert_eq!(body.promises.len(), 4);
    assert!(body
        .constants
        .iter()
        .all(|c| !matches!(c, Constant::Table(_))));

    let shapes = format!(
        "let name: map<string, string> = {{ {} }};\n\
         bundle b {{ file \"/etc/name\" {{ content = name[sys.hostname] ?? sys.os; }} }}\n\
         policy {{ b(); }}\n",
        entries(3, |i| format!("\"n{i}\""))
    );
    let (program, body) = build(&shapes);
    assert_eq!(program.promises.len(), 4);
    assert_eq!(body.promises.len(), 4);
}

/// A value that differs inside a loop over a host list (a `{% for %}`
/// over `sys.ipv4` whose body reads the host's record): one promise, the
/// body run by `each` looks the differing text up.
#[test]
fn a_value_that_differs_inside_a_host_loop_is_looked_up_there() {
    let inside_each = format!(
        "let port: map<string, int> = {{ {} }};\n\
         bundle b {{ file \"/etc/ips\" {{ content = \"{{% for ip in sys.ipv4 %}}${{ip}}:${{port[sys.hostname] ?? 80}} {{% endfor %}}\"; }} }}\n\
         policy {{ b(); }}\n",
        entries(3, |i| format!("{}", 8000 + i))
    );
    let (program, body) = build(&inside_each);
    assert_eq!(program.promises.len(), 4);
    assert_eq!(body.promises.len(), 1);
    let code = content(&body, body.promises.get(0).unwrap());
    let each = code
        .iter()
        .find_map(|i| match i {
            Instr::Each(p) => Some(*p),
            _ => None,
        })
        .expect("an each");
    let inner = body.programs.get(each as usize).unwrap().code.0.clone();
    let (entries, default) = table(&body, &inner);
    assert_eq!(
        entries.get(1),
        Some(&("h01".to_owned(), Constant::Str(":8001 ".into())))
    );
    assert_eq!(default, Some(Constant::Str(":80 ".into())));
}

/// The merged promise takes the first instance's place: the edges of
/// other promises to any instance point at it, and the order is
/// renumbered.
#[test]
fn edges_to_the_instances_point_at_the_merged_promise() {
    let policy = format!(
        "let motd: map<string, string> = {{ {} }};\n\
         bundle b {{\n\
           directory \"/etc/app\" {{ }}\n\
           file \"/etc/app/motd\" {{ content = motd[sys.hostname] ?? \"welcome\"; }}\n\
           command \"reload\" {{ run = [\"/bin/true\"]; after = [file \"/etc/app/motd\"]; }}\n\
         }}\n\
         policy {{ b(); }}\n",
        entries(4, |i| format!("\"hello {i}\""))
    );
    let (program, body) = build(&policy);
    assert_eq!(program.promises.len(), 7);
    assert_eq!(body.promises.len(), 3);
    let file = body
        .promises
        .iter()
        .position(|p| p.attrs.iter().any(|a| a.attr == 12))
        .unwrap() as u32;
    let dir = body.promises.iter().position(|p| p.kind == 2).unwrap() as u32;
    let command = body.promises.iter().position(|p| p.kind == 7).unwrap();
    assert_eq!(body.promises.get(file as usize).unwrap().after()[..], [dir]);
    assert_eq!(body.promises.get(command).unwrap().after()[..], [file]);
    let mut order = body.order.0.clone();
    order.sort_unstable();
    assert_eq!(order, [0, 1, 2]);
}

fn merge_of(members: Vec<usize>) -> Merge {
    Merge {
        keys: members.iter().map(|i| vec![format!("k{i}")]).collect(),
        members,
        on: Value::Fact("sys.hostname".into()),
        base: Guard::Const(true),
        attrs: Vec::new(),
    }
}

/// `settle` on plain index lists: a merge whose members' edges differ is
/// dropped, and one that depended on it being merged is checked again.
#[test]
fn settle_drops_merges_whose_members_differ_in_edges() {
    // 0,1: instances of A; 2,3: instances of B; 4: C. B's instances are
    // after A's instances 0 and 1 (the same once A is merged); A's
    // instance 1 is after C, instance 0 is not.
    let after = vec![vec![], vec![4], vec![0, 1], vec![0, 1], vec![]];
    let notify = vec![Vec::new(); 5];
    let settled = settle(
        vec![merge_of(vec![0, 1]), merge_of(vec![2, 3])],
        5,
        &after,
        &notify,
        &[4, 0, 1, 2, 3],
    );
    // A cannot be merged; then B's instances are after [0, 1] in both.
    assert_eq!(settled.merges, vec![merge_of(vec![2, 3])]);
    assert_eq!(
        settled.promises,
        vec![(0, None), (1, None), (2, Some(0)), (4, None)]
    );
    assert_eq!(settled.after, vec![vec![], vec![3], vec![0, 1], vec![]]);
    assert_eq!(settled.order, vec![3, 0, 1, 2]);

    // Both merge when A's instances agree.
    let after = vec![vec![4], vec![4], vec![0, 1], vec![1], vec![]];
    let settled = settle(
        vec![merge_of(vec![0, 1]), merge_of(vec![2, 3])],
        5,
        &after,
        &notify,
        &[4, 0, 1, 2, 3],
    );
    assert_eq!(settled.merges.len(), 2);
    assert_eq!(
        settled.promises,
        vec![(0, Some(0)), (2, Some(1)), (4, None)]
    );
    assert_eq!(settled.after, vec![vec![2], vec![0], vec![]]);
    assert_eq!(settled.order, vec![2, 0, 1]);
}
