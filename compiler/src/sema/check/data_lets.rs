//! `let NAME: TYPE = data("path");` (LANGUAGE.md section 10): the data
//! file the workspace loaded, checked against the declared type. Every
//! problem inside the file is reported at its line and column there
//! (`crate::data`); the value is kept for expansion.

use converge_grammar::ast::{Expr, ExprKind};

use super::*;
use crate::diagnostic::{Code, Diagnostic};
use crate::sema::names::DefKind;
use crate::sema::types::Type;

impl<'a> Checker<'a> {
    pub(super) fn load_data(
        &mut self,
        name: &'a str,
        value: &Expr,
        path: Option<String>,
        ty: &Type,
    ) {
        if let ExprKind::Call { func, .. } = &value.kind {
            let id = self.names.builtin(DefKind::Function, "data");
            self.names.record(func.span, id);
        }
        let Some(path) = path else {
            self.push(
                Diagnostic::new(
                    Code::DataOutsideLet,
                    "the path of `data(...)` must be one literal string",
                    value.span,
                    "not a literal path",
                )
                .with_help(
                    "data files are read at compile time: write `data(\"data/sites.yaml\")`",
                ),
            );
            return;
        };
        let Some(ws) = self.symbols.ws else { return };
        match ws.document(value.span.file, &path) {
            Some(Ok(file)) => match crate::data::check_loaded(&ws.db, *file, &path, value.span, ty)
            {
                Ok(v) => {
                    self.data_values.insert(name, v);
                }
                Err(problems) => self.diagnostics.extend(problems),
            },
            Some(Err(d)) => self.push(d.clone()),
            None => {}
        }
    }
}
