//! From test files to suites ready to run: the workspace loads each test
//! file and the policy it imports, the policy is checked and lowered as
//! `policyc build` lowers it (in memory, unsigned), the body is verified as
//! the VM verifies a bundle, and every test is checked ([`super::sema`]).

use std::path::{Path, PathBuf};

use converge_format::bundle::format::{Body, Bytes, Constant, SealedSet};
use converge_grammar::ast::{TestItem, TestModule};
use converge_grammar::FileId;

use super::model::TestCase;
use super::sema::{check_test, Known};
use crate::bundle::lower::{lower, BuildInfo};
use crate::bundle::secrets::UNSEALED;
use crate::check::{check, CheckOutcome};
use crate::cli::inputs::InputError;
use crate::diagnostic::{Code, Diagnostic};
use crate::workspace::{FileSystem, Workspace};

/// The tests of one file and the policy they test.
#[derive(Debug)]
pub struct Suite {
    /// The test file, as diagnostics name it.
    pub file: String,
    /// The test file's path (fixture roots are relative to its directory).
    pub path: PathBuf,
    /// The policy file with the `policy` block (what `--run` builds).
    pub policy: PathBuf,
    /// The compiled policy, verified, its secrets shown as placeholders.
    pub body: Body,
    pub cases: Vec<TestCase>,
}

/// Every test file loaded, with the policy each imports.
#[derive(Debug)]
pub struct Loaded {
    pub ws: Workspace,
    pub modules: Vec<(FileId, TestModule)>,
}

/// Loads `files` (each a `*.test.policy`), with `policy_root` as the
/// policy tree of each when given.
pub fn load(files: &[PathBuf], policy_root: Option<&Path>) -> Result<Loaded, InputError> {
    let mut ws = Workspace::new(FileSystem::new());
    if let Some(dir) = policy_root {
        ws.set_policy_root(dir);
    }
    let mut modules = Vec::new();
    for file in files {
        let loaded = ws
            .add_test_file(file)
            .map_err(|(path, err)| InputError::Read { path, err })?;
        modules.push(loaded);
    }
    Ok(Loaded { ws, modules })
}

/// Checks the policies and the tests; the suites of the files without
/// errors, and every diagnostic.
pub fn prepare(loaded: &Loaded) -> (Vec<Suite>, Vec<Diagnostic>) {
    prepare_checked(&loaded.ws, &check(&loaded.ws), &loaded.modules)
}

/// [`prepare`] for a workspace already checked (`outcome`), as the
/// language server has it: the suites of `modules` without errors, and
/// every diagnostic of the check and of the tests.
pub fn prepare_checked(
    ws: &Workspace,
    outcome: &CheckOutcome,
    modules: &[(FileId, TestModule)],
) -> (Vec<Suite>, Vec<Diagnostic>) {
    let mut diagnostics = outcome.diagnostics.clone();
    let mut suites = Vec::new();
    for (id, module) in modules {
        if let Some(suite) = prepare_file(ws, outcome, *id, module, &mut diagnostics) {
            suites.push(suite);
        }
    }
    crate::diagnostic::sort(&mut diagnostics);
    diagnostics.dedup();
    (suites, diagnostics)
}

fn prepare_file(
    ws: &Workspace,
    outcome: &CheckOutcome,
    id: FileId,
    module: &TestModule,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Suite> {
    let closure = ws.closure(id);
    let broken = diagnostics
        .iter()
        .any(|d| d.is_error() && d.primary_span().is_some_and(|s| closure.contains(&s.file)));
    if broken {
        return None;
    }
    let Some(checked) = outcome
        .programs
        .iter()
        .find(|p| p.files.first() == Some(&id))
    else {
        let imports: Vec<_> = module
            .items
            .iter()
            .filter_map(|i| match i {
                TestItem::Import(import) => Some(import.path_span),
                _ => None,
            })
            .collect();
        let d = match imports.first() {
            Some(span) => Diagnostic::new(
                Code::TestWithoutPolicy,
                "the files this test file imports hold no `policy` block",
                *span,
                "imported here",
            ),
            None => Diagnostic::unlocated(
                Code::TestWithoutPolicy,
                format!("`{}` imports no policy", ws.db.name(id)),
            ),
        };
        diagnostics.push(d.with_help(
            "import the policy file with the `policy` block: `import \"../site.policy\";`",
        ));
        return None;
    };
    let groups = ws
        .inventory(&checked.files)
        .map(|(_, inventory)| {
            inventory
                .hosts
                .iter()
                .flat_map(|h| h.groups.iter().map(|g| g.get_ref().clone()))
                .collect()
        })
        .unwrap_or_default();
    let known = Known {
        program: &checked.program,
        groups,
    };
    let mut cases: Vec<TestCase> = Vec::new();
    let errors_before = diagnostics.len();
    let mut names: Vec<(String, converge_grammar::Span)> = Vec::new();
    for item in &module.items {
        let TestItem::Test(test) = item else { continue };
        if let Some(name) = test.name.as_plain() {
            if let Some((_, first)) = names.iter().find(|(n, _)| *n == name) {
                diagnostics.push(
                    Diagnostic::new(
                        Code::TestGivenTwice,
                        format!("two tests are named {name:?}"),
                        test.name_span,
                        "named again here",
                    )
                    .with_secondary(*first, "first test of that name")
                    .with_help("give each test its own name: reports and CI name tests by it"),
                );
            }
            names.push((name, test.name_span));
        }
        if let Some(case) = check_test(&ws.db, test, &known, diagnostics) {
            cases.push(case);
        }
    }
    if diagnostics.len() > errors_before {
        return None;
    }
    let info = BuildInfo {
        name: "test".to_owned(),
        key_id: [0; 8],
        serial: 1,
    };
    let mut body = match lower(&ws.db, &checked.files, &checked.program, &info) {
        Ok(body) => body,
        Err(lowering) => {
            diagnostics.extend(lowering);
            return None;
        }
    };
    show_secrets_as_placeholders(&mut body);
    if let Err(e) = converge_format::bundle::verify::verify_body(&body) {
        diagnostics.push(Diagnostic::unlocated(
            Code::InternalError,
            format!("the compiled policy does not verify as the VM would: {e}"),
        ));
        return None;
    }
    let policy = checked
        .files
        .iter()
        .skip(1)
        .find(|f| {
            ws.module(**f).is_some_and(|m| {
                m.items
                    .iter()
                    .any(|i| matches!(i, converge_grammar::ast::Item::Policy(_)))
            })
        })
        .and_then(|f| ws.db.get(*f))
        .map(|f| f.path.clone())
        .unwrap_or_default();
    Some(Suite {
        file: ws.db.name(id).to_owned(),
        path: ws.db.get(id).map(|f| f.path.clone()).unwrap_or_default(),
        policy,
        body,
        cases,
    })
}

/// The age header alone: what the verifier checks of a sealed value.
const AGE_HEADER: &[u8] = b"age-encryption.org/v1\n";

/// `policyc test` never decrypts a secret nor seals one to a host: the
/// secrets of the body are left in one sealed set that no one can open, so
/// the body verifies as a real bundle does, and the preview shows
/// `<secret NAME>` in their place.
fn show_secrets_as_placeholders(body: &mut Body) {
    let unsealed = body
        .constants
        .iter()
        .any(|c| matches!(c, Constant::Secret(s) if s.set == UNSEALED));
    if !unsealed {
        return;
    }
    let set = u32::try_from(body.constants.len()).unwrap_or(u32::MAX);
    body.constants
        .0
        .push(Constant::SealedSet(Box::new(SealedSet {
            ciphertext: Bytes(AGE_HEADER.to_vec()),
        })));
    let mut index = 0u32;
    for c in body.constants.0.iter_mut() {
        if let Constant::Secret(s) = c {
            if s.set == UNSEALED {
                s.set = set;
                s.index = index;
                index = index.saturating_add(1);
            }
        }
    }
}
