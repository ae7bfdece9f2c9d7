//! The language server and the checker agree on every name (issue 15):
//! for every name written in every example and every UI test policy, go to
//! definition, find references and rename answer exactly what the
//! checker's name table says; and renaming each renamable name to a fresh
//! one gives a program that checks with the same diagnostics and the same
//! name table, modulo the name.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use converge_compiler::check::{check, CheckOutcome};
use converge_compiler::diagnostic::{Code, Diagnostic};
use converge_compiler::lsp::analysis::{Analysis, Settings};
use converge_compiler::lsp::position::{LineIndex, LspPositions};
use converge_compiler::lsp::server::Document;
use converge_compiler::lsp::{hover, navigation};
use converge_compiler::sema::names::{DefId, Names};
use converge_compiler::workspace::{FileSystem, Workspace};
use converge_grammar::{FileId, Span};
use lsp_types::{Location, Position, Url};

/// Every `.policy` file of `examples/` and `tests/ui/`.
fn corpus() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    let mut dirs = vec![root.join("examples"), root.join("tests/ui")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "policy") {
                files.push(path.canonicalize().unwrap());
            }
        }
    }
    files.sort();
    assert!(files.len() > 50, "the corpus is there: {files:?}");
    files
}

/// Checks `root` with `texts` overriding the disk.
fn check_with(root: &Path, texts: &HashMap<PathBuf, String>) -> (Workspace, FileId, CheckOutcome) {
    let mut fs = FileSystem::new();
    for (path, text) in texts {
        fs.insert(path.clone(), text.clone());
    }
    let mut ws = Workspace::new(fs);
    let id = ws.add_root(root).unwrap();
    let outcome = check(&ws);
    (ws, id, outcome)
}

/// A location as the server reports it: (uri, start, end).
type Loc = (String, Position, Position);

struct File<'a> {
    ws: &'a Workspace,
    lines: HashMap<FileId, LineIndex>,
}

impl File<'_> {
    /// Where a span is, as the server would say; `None` in the standard
    /// library, which has no file an editor can open.
    fn loc(&mut self, span: Span) -> Option<Loc> {
        if self.ws.is_stdlib[span.file.0 as usize] {
            return None;
        }
        let file = self.ws.db.get(span.file).unwrap();
        let lines = self
            .lines
            .entry(span.file)
            .or_insert_with(|| LineIndex::new(&file.text));
        let range = lines.range(&file.text, span.start, span.end);
        let uri = Url::from_file_path(&file.path).unwrap().to_string();
        Some((uri, range.start, range.end))
    }
}

fn locs(found: Vec<Location>) -> BTreeSet<Loc> {
    found
        .into_iter()
        .map(|l| (l.uri.to_string(), l.range.start, l.range.end))
        .collect()
}

#[test]
fn definition_references_and_rename_agree_with_the_checker() {
    let mut names_seen = 0;
    let mut renamed = 0;
    for path in corpus() {
        let text = std::fs::read_to_string(&path).unwrap();
        let open = HashMap::from([(path.clone(), text.clone())]);
        let analysis = Analysis::run(&path, &open, &Settings::default()).unwrap();
        let doc = Document::new(path.clone(), text.clone(), 1);
        let (ws, root, outcome) = check_with(&path, &open);
        let mut file = File {
            ws: &ws,
            lines: HashMap::new(),
        };
        // Renames to check, once per definition: an edit from each place
        // the name is written must be the same.
        let mut rename_edits: BTreeMap<(usize, DefId), BTreeSet<Loc>> = BTreeMap::new();
        for (t, names) in outcome.names.iter().enumerate() {
            for o in names.occurrences() {
                if o.span.file != root {
                    continue;
                }
                names_seen += 1;
                let def = names.definition(o.def).unwrap();
                let at = doc.lines.position(&text, o.span.start);
                let what = format!(
                    "{} `{}` at {at:?} in {}",
                    kind(def),
                    def.name,
                    path.display()
                );

                let expected: BTreeSet<Loc> =
                    def.span.and_then(|s| file.loc(s)).into_iter().collect();
                let found = locs(navigation::definition(&analysis, &doc, at));
                assert_eq!(found, expected, "definition of {what}");

                let uses: BTreeSet<Loc> =
                    names.uses(o.def).filter_map(|u| file.loc(u.span)).collect();
                let found = locs(navigation::references(
                    &analysis,
                    &[&analysis],
                    &doc,
                    at,
                    true,
                ));
                assert_eq!(found, uses, "references of {what}");

                assert!(
                    hover::hover(&analysis, &doc, at).is_some(),
                    "hover on {what}"
                );

                let renamable = def.kind.is_renamable()
                    && def.span.is_some_and(|s| !ws.is_stdlib[s.file.0 as usize]);
                let new_name = fresh_name(&def.name);
                match navigation::rename(&analysis, &[&analysis], &doc, at, &new_name) {
                    Ok(edit) => {
                        assert!(renamable, "{what} is renamed");
                        let mut edits = BTreeSet::new();
                        for (uri, list) in edit.changes.unwrap_or_default() {
                            for e in list {
                                assert_eq!(e.new_text, new_name);
                                edits.insert((uri.to_string(), e.range.start, e.range.end));
                            }
                        }
                        assert_eq!(edits, uses, "rename of {what} edits every use");
                        let previous = rename_edits.insert((t, o.def), edits.clone());
                        if let Some(previous) = previous {
                            assert_eq!(previous, edits, "rename of {what} from every use");
                        }
                    }
                    Err(why) => assert!(!renamable, "{what} is not renamed: {why}"),
                }
            }
        }
        // Renaming one of two definitions of a name (an error) legitimately
        // removes the error: those programs are not re-checked.
        let duplicates = outcome
            .diagnostics
            .iter()
            .any(|d| d.code == Code::DuplicateDefinition);
        for ((t, id), edits) in rename_edits {
            if duplicates {
                continue;
            }
            let names = &outcome.names[t];
            let def = names.definition(id).unwrap();
            let new_name = fresh_name(&def.name);
            assert_renamed_program_is_the_same(
                &path, &ws, &outcome, t, &def.name, &new_name, &edits,
            );
            renamed += 1;
        }
    }
    eprintln!("{names_seen} names, {renamed} renames");
    assert!(names_seen > 800, "{names_seen} names");
    assert!(renamed > 150, "{renamed} renames");
}

fn kind(def: &converge_compiler::sema::names::Definition) -> String {
    format!("{:?}", def.kind)
}

/// A name no policy of the corpus uses.
fn fresh_name(old: &str) -> String {
    format!("zq_renamed_{old}")
}

/// Applies the edits of a rename to every file they touch, checks the
/// result, and compares it with the original: the same diagnostics and the
/// same name table, with every position moved by the edits and the new name
/// read as the old.
fn assert_renamed_program_is_the_same(
    root: &Path,
    ws: &Workspace,
    before: &CheckOutcome,
    table: usize,
    old: &str,
    new: &str,
    edits: &BTreeSet<Loc>,
) {
    // Byte ranges of the edits, by file.
    let mut by_file: HashMap<FileId, Vec<(u32, u32)>> = HashMap::new();
    let mut texts: HashMap<PathBuf, String> = HashMap::new();
    for (id, file) in ws.db.iter() {
        if ws.is_stdlib[id.0 as usize] {
            continue;
        }
        let uri = Url::from_file_path(&file.path).unwrap().to_string();
        let lines = LineIndex::new(&file.text);
        let mut ranges: Vec<(u32, u32)> = edits
            .iter()
            .filter(|(u, _, _)| *u == uri)
            .map(|(_, s, e)| (lines.offset(&file.text, *s), lines.offset(&file.text, *e)))
            .collect();
        ranges.sort();
        let mut text = file.text.clone();
        for (s, e) in ranges.iter().rev() {
            assert_eq!(&text[*s as usize..*e as usize], old);
            text.replace_range(*s as usize..*e as usize, new);
        }
        texts.insert(file.path.clone(), text);
        by_file.insert(id, ranges);
    }
    let grow = new.len() as i64 - old.len() as i64;
    let moved = |span: Span| -> Span {
        let shift = |offset: u32| -> u32 {
            let before = by_file
                .get(&span.file)
                .map_or(0, |r| r.iter().filter(|(_, e)| *e <= offset).count());
            (offset as i64 + before as i64 * grow) as u32
        };
        Span::new(span.file, shift(span.start), shift(span.end))
    };
    let (ws_after, _, after) = check_with(root, &texts);
    assert_eq!(ws_after.db.len(), ws.db.len(), "the same files");
    let what = format!("renaming `{old}` in {}", root.display());

    let unname = |s: &str| s.replace(new, old);
    let shown = |d: &Diagnostic, moved: &dyn Fn(Span) -> Span| {
        let labels: Vec<(Span, String, bool)> = d
            .labels
            .iter()
            .map(|l| (moved(l.span), unname(&l.message), l.primary))
            .collect();
        (d.code, d.severity, unname(&d.message), labels)
    };
    let expected: Vec<_> = before
        .diagnostics
        .iter()
        .map(|d| shown(d, &moved))
        .collect();
    let found: Vec<_> = after.diagnostics.iter().map(|d| shown(d, &|s| s)).collect();
    assert_eq!(found, expected, "diagnostics after {what}");

    // The same table: every name still refers to the same definition.
    let table_of = |names: &Names, moved: &dyn Fn(Span) -> Span| -> BTreeSet<_> {
        names
            .occurrences()
            .iter()
            .map(|o| {
                let def = names.definition(o.def).unwrap();
                let name = if def.span.is_some() {
                    unname(&def.name)
                } else {
                    def.name.to_string()
                };
                (
                    moved(o.span),
                    format!("{:?}", def.kind),
                    name,
                    def.span.map(moved),
                )
            })
            .collect()
    };
    let expected = table_of(&before.names[table], &moved);
    let found = table_of(&after.names[table], &|s| s);
    assert_eq!(found, expected, "name table after {what}");
}

/// The expanded program of `src` (which must check without errors), or
/// the diagnostics.
fn expand(src: &str) -> Result<converge_compiler::ir::Program, Vec<Diagnostic>> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.policy");
    std::fs::write(&path, src).unwrap();
    let (_, _, mut outcome) = check_with(&path, &HashMap::new());
    if outcome.diagnostics.iter().any(Diagnostic::is_error) {
        return Err(outcome.diagnostics);
    }
    Ok(outcome.programs.remove(0).program)
}

fn attr(program: &converge_compiler::ir::Program, name: &str) -> converge_compiler::ir::Value {
    program.promises[0].attr(name).unwrap().clone()
}

/// A body's values are resolved where the body is written: they see the
/// `let`s, never the variables of the bundle that happens to use it. The
/// checker checked `owner_name` as the `let`; expansion used to take the
/// parameter of the same name.
#[test]
fn a_body_value_is_the_let_not_a_variable_of_the_user() {
    let program = expand(concat!(
        "let owner_name = \"root\";\n",
        "body owned { owner = owner_name; }\n",
        "bundle b(owner_name: string) {\n",
        "  file \"/etc/x\" { content = owner_name; use owned; }\n",
        "}\n",
        "policy { b(owner_name = \"alice\"); }\n",
    ))
    .unwrap();
    use converge_compiler::ir::Value;
    assert_eq!(attr(&program, "owner"), Value::Str("root".into()));
    assert_eq!(attr(&program, "content"), Value::Str("alice".into()));
}

/// `on_repaired = done` names the class `done`, as the checker says, even
/// where a variable `done` is in scope; expansion used to put the
/// variable's value there.
#[test]
fn an_outcome_class_is_a_class_even_beside_a_variable() {
    let program = expand(concat!(
        "class done;\n",
        "bundle b(done: string) {\n",
        "  file \"/etc/x\" { content = done; on_repaired = done; }\n",
        "}\n",
        "policy { b(done = \"other\"); }\n",
    ))
    .unwrap();
    use converge_compiler::ir::Value;
    assert_eq!(attr(&program, "on_repaired"), Value::Word("done".into()));
}

/// A bare word in an enum attribute is the variable of that name when one
/// is in scope (a `let` included), for the checker as for expansion: an
/// `int` let named like an enum word is a type error, not an int compiled
/// into `state`.
#[test]
fn an_enum_word_that_names_a_let_is_the_let() {
    let errors = expand(concat!(
        "let installed = 5;\n",
        "bundle b { package \"nginx\" { state = installed; } }\n",
        "policy { b(); }\n",
    ))
    .unwrap_err();
    assert!(
        errors.iter().any(|d| d.code == Code::TypeMismatch),
        "{errors:#?}"
    );
    let program = expand(concat!(
        "let wanted = \"removed\";\n",
        "bundle b { package \"nginx\" { state = wanted; } }\n",
        "policy { b(); }\n",
    ))
    .unwrap();
    use converge_compiler::ir::Value;
    assert_eq!(attr(&program, "state"), Value::Str("removed".into()));
}
