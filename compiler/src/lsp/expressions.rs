//! Completion inside expressions (LANGUAGE.md sections 10 to 12): the
//! fields of a record after `.`, the keys of a compile-time map after `[`,
//! and the built-in functions and `let`s where an expression may start.
//!
//! The chain before the cursor (`sites["web01"].backends`) is read from the
//! text, backwards, because while typing it is unfinished. Its first name
//! is resolved through the checker's name table (the innermost loop
//! variable or parameter in scope, else the global `let`), whose recorded
//! type ([`Names::type_of`]) the steps then follow. Keys come from the
//! value known at compile time: a map literal in the policy, or the data
//! file of a `let x: T = data("...")`, read as the checker reads it.
//!
//! [`Names::type_of`]: crate::sema::names::Names::type_of

use converge_grammar::ast::{Expr, ExprKind, Item, LetDef};
use converge_grammar::FileId;
use lsp_types::{CompletionItem, CompletionItemKind, Documentation, InsertTextFormat};

use super::analysis::Analysis;
use crate::ir::Value;
use crate::sema::functions::FUNCTIONS;
use crate::sema::names::{DefKind, Definition};
use crate::sema::types::Type;

/// One step of a chain after its first name.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// `.name`
    Field(String),
    /// `[key]`: the key when it is a plain string literal.
    Index(Option<String>),
}

/// `sites["web01"].backends`: a name and the steps after it.
#[derive(Debug, PartialEq)]
pub struct Chain {
    pub root: String,
    pub steps: Vec<Step>,
}

/// The chain that ends exactly at the end of `text`, if there is one.
pub fn chain_before(text: &str) -> Option<Chain> {
    let bytes = text.as_bytes();
    let mut end = bytes.len();
    let mut steps = Vec::new();
    loop {
        if end > 0 && bytes.get(end - 1) == Some(&b']') {
            let open = matching_bracket(bytes, end - 1)?;
            let inside = text.get(open + 1..end - 1)?.trim();
            steps.push(Step::Index(plain_string(inside)));
            end = open;
            continue;
        }
        let start = end
            - bytes[..end]
                .iter()
                .rev()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count();
        let word = text.get(start..end)?;
        if word.is_empty() || word.as_bytes()[0].is_ascii_digit() {
            return None;
        }
        if start > 0 && bytes.get(start - 1) == Some(&b'.') {
            steps.push(Step::Field(word.to_owned()));
            end = start - 1;
            continue;
        }
        steps.reverse();
        return Some(Chain {
            root: word.to_owned(),
            steps,
        });
    }
}

/// The `[` that opens the `]` at `close` (brackets inside string literals
/// are not counted).
fn matching_bracket(bytes: &[u8], close: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    for i in (0..=close).rev() {
        let b = *bytes.get(i)?;
        if b == b'"' && (i == 0 || bytes.get(i - 1) != Some(&b'\\')) {
            in_string = !in_string;
            continue;
        }
        if in_string {
            continue;
        }
        match b {
            b']' => depth += 1,
            b'[' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `"web01"` as `web01`; `None` for anything else (a fact, a variable).
fn plain_string(text: &str) -> Option<String> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains(['"', '\\', '$', '{'])).then(|| inner.to_owned())
}

/// What a chain's first name refers to at `offset` of `file`: the
/// innermost loop variable whose loop holds the cursor, else a parameter
/// of the bundle that holds it, else the global `let`.
fn variable_at<'a>(
    analysis: &'a Analysis,
    file: FileId,
    offset: u32,
    name: &str,
) -> Option<(&'a Definition, Option<&'a Type>)> {
    let holds = |span: Option<converge_grammar::Span>| {
        span.is_some_and(|s| s.file == file && s.start <= offset && offset <= s.end)
    };
    analysis
        .index
        .targets()
        .filter(|t| t.def.name == name && t.def.kind.is_variable())
        .filter_map(|t| {
            let rank = match t.def.kind {
                DefKind::LoopVar if holds(t.def.item) => {
                    // The innermost loop is the shortest.
                    t.def.item.map_or(0, |s| s.len())
                }
                DefKind::Param
                    if holds(
                        t.def
                            .parent
                            .and_then(|p| t.names.definition(p))
                            .and_then(|b| b.item),
                    ) =>
                {
                    u32::MAX - 1
                }
                DefKind::Let => u32::MAX,
                _ => return None,
            };
            Some((rank, t.def, t.names.type_of(t.id)))
        })
        .min_by_key(|(rank, _, _)| *rank)
        .map(|(_, def, ty)| (def, ty))
}

/// The type after one step, where the checker would find one.
fn step_type(ty: &Type, step: &Step) -> Option<Type> {
    match (ty, step) {
        (Type::Record(record), Step::Field(name)) => record.field(name).map(|f| f.ty.clone()),
        (Type::Map(inner), _) => Some((**inner).clone()),
        (Type::List(inner), Step::Index(_)) => Some((**inner).clone()),
        _ => None,
    }
}

/// The fields of the record the chain before `.` names.
pub fn fields(
    analysis: &Analysis,
    file: FileId,
    offset: u32,
    chain: &Chain,
) -> Vec<CompletionItem> {
    let Some((_, Some(ty))) = variable_at(analysis, file, offset, &chain.root) else {
        return Vec::new();
    };
    let mut ty = ty.clone();
    for step in &chain.steps {
        match step_type(&ty, step) {
            Some(next) => ty = next,
            None => return Vec::new(),
        }
    }
    let Type::Record(record) = ty else {
        return Vec::new();
    };
    record
        .fields
        .iter()
        .map(|f| CompletionItem {
            label: f.name.clone(),
            kind: Some(CompletionItemKind::FIELD),
            detail: Some(f.ty.describe()),
            documentation: analysis
                .text(f.span.file)
                .get(f.span.range())
                .map(|text| Documentation::String(format!("field of `{}`: {text}", record.name))),
            ..CompletionItem::default()
        })
        .collect()
}

/// The keys of the compile-time map the chain before `[` names, each
/// inserted as a string literal.
pub fn keys(analysis: &Analysis, file: FileId, offset: u32, chain: &Chain) -> Vec<CompletionItem> {
    let Some((def, _)) = variable_at(analysis, file, offset, &chain.root) else {
        return Vec::new();
    };
    if def.kind != DefKind::Let {
        return Vec::new();
    }
    let Some(found) = known_let(analysis, &chain.root, 0) else {
        return Vec::new();
    };
    let keys = match found {
        Known::Expr(expr) => expr_keys(analysis, expr, &chain.steps, 0),
        Known::Value(value) => value_keys(&value, &chain.steps),
    };
    keys.into_iter()
        .map(|key| CompletionItem {
            label: format!("\"{key}\""),
            kind: Some(CompletionItemKind::VALUE),
            detail: Some(format!("key of `{}`", chain.root)),
            filter_text: Some(key),
            ..CompletionItem::default()
        })
        .collect()
}

/// How deep `let a = b;` chains are followed for keys.
const MAX_LET_HOPS: usize = 16;

/// What is known at compile time of a global `let`: its value expression,
/// or the value of its data file.
enum Known<'a> {
    Expr(&'a Expr),
    Value(Value),
}

fn known_let<'a>(analysis: &'a Analysis, name: &str, hops: usize) -> Option<Known<'a>> {
    if hops > MAX_LET_HOPS {
        return None;
    }
    let (file, def) = find_let(analysis, name)?;
    if let ExprKind::Call { func, args } = &def.value.kind {
        if func.name == "data" {
            let [arg] = &args[..] else { return None };
            let ExprKind::Str(lit) = &arg.kind else {
                return None;
            };
            let path = lit.as_plain()?;
            let doc = analysis.ws.document(file, &path)?.as_ref().ok()?;
            let target = variable_at(analysis, file, def.span.start, name)?.1?;
            let value =
                crate::data::check_loaded(&analysis.ws.db, *doc, &path, arg.span, target).ok()?;
            return Some(Known::Value(value));
        }
    }
    Some(Known::Expr(&def.value))
}

fn find_let<'a>(analysis: &'a Analysis, name: &str) -> Option<(FileId, &'a LetDef)> {
    analysis.ws.modules.iter().find_map(|m| {
        m.items.iter().find_map(|item| match item {
            Item::Let(def) if def.name.name == name => Some((m.file, def)),
            _ => None,
        })
    })
}

/// The keys of the map an expression holds after `steps`.
fn expr_keys(analysis: &Analysis, expr: &Expr, steps: &[Step], hops: usize) -> Vec<String> {
    if let ExprKind::Path(path) = &expr.kind {
        if let [name] = path.as_slice() {
            return match known_let(analysis, &name.name, hops + 1) {
                Some(Known::Expr(e)) => expr_keys(analysis, e, steps, hops + 1),
                Some(Known::Value(v)) => value_keys(&v, steps),
                None => Vec::new(),
            };
        }
    }
    let Some((step, rest)) = steps.split_first() else {
        let ExprKind::Map(entries) = &expr.kind else {
            return Vec::new();
        };
        let mut keys: Vec<String> = entries
            .iter()
            .filter_map(|(k, _)| match &k.kind {
                ExprKind::Str(lit) => lit.as_plain(),
                _ => None,
            })
            .collect();
        keys.sort();
        keys.dedup();
        return keys;
    };
    let next: Vec<&Expr> = match (&expr.kind, step) {
        (ExprKind::Map(entries), Step::Index(key)) => entries
            .iter()
            .filter(|(k, _)| match (&k.kind, key) {
                (ExprKind::Str(lit), Some(key)) => lit.as_plain().as_deref() == Some(key),
                (_, None) => true,
                _ => false,
            })
            .map(|(_, v)| v)
            .collect(),
        (ExprKind::Record(fields), Step::Field(name)) => fields
            .iter()
            .filter(|(n, _)| n.name == name.as_str())
            .map(|(_, v)| v)
            .collect(),
        (ExprKind::List(items), Step::Index(_)) => items.iter().collect(),
        _ => Vec::new(),
    };
    let mut keys: Vec<String> = next
        .into_iter()
        .flat_map(|e| expr_keys(analysis, e, rest, hops))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The keys of the map a value holds after `steps` (an unknown key takes
/// every entry).
fn value_keys(value: &Value, steps: &[Step]) -> Vec<String> {
    let Some((step, rest)) = steps.split_first() else {
        return match value {
            Value::Map(entries) => entries.iter().map(|(k, _)| k.clone()).collect(),
            _ => Vec::new(),
        };
    };
    let next: Vec<&Value> = match (value, step) {
        (Value::Map(entries), Step::Index(Some(key))) => entries
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v)
            .collect(),
        (Value::Map(entries), Step::Index(None)) => entries.iter().map(|(_, v)| v).collect(),
        (Value::Record(fields), Step::Field(name)) => fields
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v)
            .collect(),
        (Value::List(items), Step::Index(_)) => items.iter().collect(),
        _ => Vec::new(),
    };
    let mut keys: Vec<String> = next.into_iter().flat_map(|v| value_keys(v, rest)).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The built-in functions, with their signatures, inserted as a call;
/// `data` only as the whole value of a `let` (`after_let`), the one place
/// it is allowed.
pub fn functions(after_let: bool) -> Vec<CompletionItem> {
    FUNCTIONS
        .iter()
        .filter(|f| after_let || f.name != "data")
        .map(|f| CompletionItem {
            label: f.name.to_owned(),
            kind: Some(CompletionItemKind::FUNCTION),
            detail: Some(f.signature.to_owned()),
            documentation: Some(Documentation::String(f.doc.to_owned())),
            insert_text: Some(format!("{}($1)", f.name)),
            insert_text_format: Some(InsertTextFormat::SNIPPET),
            ..CompletionItem::default()
        })
        .collect()
}

/// The global `let`s of the program, with their types.
pub fn lets(analysis: &Analysis) -> Vec<CompletionItem> {
    let mut items: Vec<CompletionItem> = analysis
        .index
        .targets()
        .filter(|t| {
            t.def.kind == DefKind::Let && t.def.span.is_some_and(|s| !analysis.is_stdlib(s.file))
        })
        .map(|t| CompletionItem {
            label: t.def.name.to_string(),
            kind: Some(CompletionItemKind::VARIABLE),
            detail: t.names.type_of(t.id).map(Type::describe),
            ..CompletionItem::default()
        })
        .collect();
    items.sort_by(|a, b| a.label.cmp(&b.label));
    items.dedup_by(|a, b| a.label == b.label);
    items
}

/// What to offer in an expression whose text so far is `text` (the
/// partly typed word already removed): fields after `.`, keys after `[`,
/// else functions and `let`s.
pub fn complete(analysis: &Analysis, file: FileId, offset: u32, text: &str) -> Vec<CompletionItem> {
    let trimmed = text.trim_end();
    if let Some(base) = trimmed.strip_suffix('.') {
        return chain_before(base)
            .map(|c| fields(analysis, file, offset, &c))
            .unwrap_or_default();
    }
    // `sites[` or `sites["we`.
    let open = trimmed.strip_suffix('"').unwrap_or(trimmed);
    if let Some(base) = open.strip_suffix('[') {
        if let Some(chain) = chain_before(base.trim_end()) {
            return keys(analysis, file, offset, &chain);
        }
    }
    let mut items = functions(is_let_value(trimmed));
    items.extend(lets(analysis));
    items
}

/// Whether the text ends with `let NAME =` or `let NAME: TYPE =`.
fn is_let_value(text: &str) -> bool {
    let Some(before) = text.strip_suffix('=') else {
        return false;
    };
    let line = before.rsplit(['\n', ';']).next().unwrap_or("").trim_start();
    line.strip_prefix("let ")
        .is_some_and(|rest| !rest.contains(['=', '{', '(']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_are_read_backwards_from_the_cursor() {
        assert_eq!(
            chain_before("content = sites[\"web01\"].backends"),
            Some(Chain {
                root: "sites".into(),
                steps: vec![
                    Step::Index(Some("web01".into())),
                    Step::Field("backends".into())
                ]
            })
        );
        assert_eq!(
            chain_before("${hosts[sys.hostname]"),
            Some(Chain {
                root: "hosts".into(),
                steps: vec![Step::Index(None)]
            })
        );
        assert_eq!(
            chain_before("x = site"),
            Some(Chain {
                root: "site".into(),
                steps: vec![]
            })
        );
        assert_eq!(chain_before("x = 1"), None);
        assert_eq!(chain_before("x = "), None);
        assert_eq!(chain_before("x = a]"), None);
    }

    #[test]
    fn data_is_offered_only_as_the_value_of_a_let() {
        assert!(is_let_value("let sites: map<string, Site> ="));
        assert!(is_let_value("class a;\nlet x ="));
        assert!(!is_let_value("let x = { \"a\": 1, \"b\" ="));
        assert!(!is_let_value("  content ="));
        let names = |after_let| -> Vec<String> {
            functions(after_let).into_iter().map(|i| i.label).collect()
        };
        assert!(names(true).contains(&"data".to_owned()));
        assert!(!names(false).contains(&"data".to_owned()));
        assert!(names(false).contains(&"join".to_owned()));
    }

    #[test]
    fn keys_follow_steps_through_values() {
        let value = Value::Map(vec![
            (
                "a".into(),
                Value::Record(vec![(
                    "ports".into(),
                    Value::Map(vec![("http".into(), Value::Int(80))]),
                )]),
            ),
            (
                "b".into(),
                Value::Record(vec![("ports".into(), Value::Map(vec![]))]),
            ),
        ]);
        assert_eq!(value_keys(&value, &[]), vec!["a", "b"]);
        let steps = [Step::Index(None), Step::Field("ports".into())];
        assert_eq!(value_keys(&value, &steps), vec!["http"]);
        let steps = [Step::Index(Some("b".into())), Step::Field("ports".into())];
        assert!(value_keys(&value, &steps).is_empty());
    }
}
