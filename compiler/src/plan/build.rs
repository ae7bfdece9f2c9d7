//! Building one side of a plan in memory: the same check and lowering as
//! `policyc build`, without a key, without sealing secrets (the plan never
//! decrypts one) and without writing anything.

use std::collections::HashMap;
use std::hash::{Hash as _, Hasher as _};
use std::path::Path;

use converge_format::bundle::format::Body;
use converge_format::inventory::Inventory;

use crate::bundle::lower::{lower, BuildInfo};
use crate::bundle::secrets::{read_secret, uses};
use crate::check::check;
use crate::cli::inputs::{load, TreeArgs};
use crate::diagnostic::{Diagnostic, Severity};
use crate::render::render_human;

/// One policy, built for the plan.
#[derive(Debug)]
pub struct Built {
    pub body: Body,
    /// A version of each secret the policy reads, by name: a digest of its
    /// encrypted file, so the plan can say a secret changed without
    /// decrypting it (a file re-encrypted with the same plaintext shows as
    /// changed too).
    pub secrets: HashMap<String, u64>,
    /// The inventory the program was checked against, if it has one.
    pub inventory: Option<Inventory>,
}

/// Why a side could not be built.
#[derive(Debug)]
pub enum BuildError {
    /// The input cannot be read (exit 66).
    Input(String),
    /// The policy has errors (exit 1): the rendered diagnostics.
    Errors(String),
}

/// Checks and lowers `path` (an entry file with a `policy` block, or a
/// directory holding exactly one program), with `inventory` instead of the
/// tree's own when given.
pub fn build(path: &Path, inventory: Option<&Path>, color: bool) -> Result<Built, BuildError> {
    let tree = TreeArgs {
        policy_root: None,
        inventory: inventory.map(Path::to_path_buf),
    };
    let ws = load(&[path.to_path_buf()], &tree).map_err(|e| BuildError::Input(e.to_string()))?;
    let outcome = check(&ws);
    let errors: Vec<Diagnostic> = outcome
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .cloned()
        .collect();
    if !errors.is_empty() {
        return Err(BuildError::Errors(render_human(&ws.db, &errors, color)));
    }
    let mut programs = outcome.programs;
    let checked = match programs.len() {
        1 => programs.remove(0),
        0 => {
            return Err(BuildError::Errors(format!(
                "`{}` has no `policy` block: name the entry file (or the tree) of the policy\n",
                path.display()
            )))
        }
        _ => {
            let roots: Vec<String> = programs
                .iter()
                .filter_map(|p| p.files.first())
                .filter_map(|f| ws.db.get(*f).map(|s| s.path.display().to_string()))
                .collect();
            return Err(BuildError::Errors(format!(
                "`{}` holds {} programs ({}): name the entry file of the one to plan\n",
                path.display(),
                roots.len(),
                roots.join(", ")
            )));
        }
    };
    let info = BuildInfo {
        name: "plan".to_owned(),
        key_id: [0; 8],
        serial: 0,
    };
    let body = lower(&ws.db, &checked.files, &checked.program, &info)
        .map_err(|d| BuildError::Errors(render_human(&ws.db, &d, color)))?;
    let mut secrets = HashMap::new();
    for u in uses(&checked.program) {
        let bytes = read_secret(&ws.db, &u.secret)
            .map_err(|d| BuildError::Errors(render_human(&ws.db, &[d], color)))?;
        let mut h = rustc_hash::FxHasher::default();
        bytes.hash(&mut h);
        secrets.insert(u.secret.name.clone(), h.finish());
    }
    let inventory = ws
        .inventory(&checked.files)
        .map(|(_, inventory)| inventory.clone());
    Ok(Built {
        body,
        secrets,
        inventory,
    })
}
