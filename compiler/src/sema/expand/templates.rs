//! Rendering templates during expansion (LANGUAGE.md section 12): what is
//! known at compile time becomes text; a loop over a list only the host
//! knows, a condition only the host can decide and a value only the host
//! has become [`Value`]s the VM computes (`Each`, `Select`, template
//! parts). The VM never sees template text.

use converge_grammar::ast::{Expr, ExprKind, Ident};
use converge_grammar::template::Node;

use super::lookups::{self, map_choice_keyed};
use super::{Env, Expander};
use crate::ir::{Each, Guard, Value};
use crate::sema::names::DefId;

impl<'a> Expander<'a, '_> {
    /// The content a `template = "..."` attribute gives its file.
    pub(super) fn template_attr(&mut self, value: &Expr, env: &Env) -> Value {
        let converge_grammar::ast::ExprKind::Str(lit) = &value.kind else {
            return Value::Str(String::new());
        };
        let Some(path) = lit.as_plain() else {
            return Value::Str(String::new());
        };
        let Some(ws) = self.symbols.ws else {
            return Value::Str(String::new());
        };
        let nodes = match ws.document(value.span.file, &path) {
            Some(Ok(file)) => ws.template_nodes(*file),
            _ => None,
        };
        let Some(nodes) = nodes else {
            return Value::Str(String::new());
        };
        let before = self.by_name;
        self.by_name = true;
        let mut env = env.clone();
        let out = self.render(nodes, &mut env);
        self.by_name = before;
        out
    }

    /// Renders template nodes to one string value.
    pub(super) fn render(&mut self, nodes: &[Node], env: &mut Env) -> Value {
        let mut pieces = Vec::with_capacity(nodes.len());
        for node in nodes {
            pieces.push(self.render_node(node, env));
        }
        lookups::concat(pieces)
    }

    fn render_node(&mut self, node: &Node, env: &mut Env) -> Value {
        match node {
            Node::Text(text) => Value::Str(text.clone()),
            Node::Interp(expr) => self.eval(expr, env),
            Node::For {
                key,
                var,
                iter,
                body,
                ..
            } => {
                let list = self.eval(iter, env);
                self.render_loop(key.as_ref(), var, list, body, env)
            }
            Node::If {
                branches,
                otherwise,
                ..
            } => self.render_if(branches, otherwise.as_deref(), env),
        }
    }

    /// Runs `f` knowing that the host's `on` is `key` (when it is a key):
    /// lookups by `on` inside resolve to that key's entry at once, instead
    /// of making a choice over every key again (`Expander::assumed`).
    fn assuming(
        &mut self,
        on: &Value,
        key: Option<&str>,
        f: impl FnOnce(&mut Self) -> Value,
    ) -> Value {
        let Some(key) = key else { return f(self) };
        self.assumed.push((on.clone(), key.to_owned()));
        let out = f(self);
        self.assumed.pop();
        out
    }

    fn var_def(&mut self, name: &Ident) -> DefId {
        self.resolve(name.span).unwrap_or(DefId::PLACEHOLDER)
    }

    fn render_loop(
        &mut self,
        key: Option<&Ident>,
        var: &Ident,
        list: Value,
        body: &[Node],
        env: &mut Env,
    ) -> Value {
        match list {
            Value::List(items) => {
                let def = self.var_def(var);
                let mut pieces = Vec::with_capacity(items.len());
                for item in items {
                    env.push((def, var.name.clone(), item));
                    pieces.push(self.render(body, env));
                    env.pop();
                }
                lookups::concat(pieces)
            }
            Value::Map(entries) => {
                let def = self.var_def(var);
                let key_def = key.map(|k| (self.var_def(k), k));
                let mut pieces = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    if let Some((kd, k_ident)) = key_def {
                        env.push((kd, k_ident.name.clone(), Value::Str(k)));
                    }
                    env.push((def, var.name.clone(), v));
                    pieces.push(self.render(body, env));
                    env.pop();
                    if key_def.is_some() {
                        env.pop();
                    }
                }
                lookups::concat(pieces)
            }
            Value::Choice(c) => map_choice_keyed(*c, &mut |on, k, _, case| {
                self.assuming(on, k, |ex| ex.render_loop(key, var, case, body, env))
            }),
            Value::Missing(span) => Value::Missing(span),
            // A list only the host knows: the VM repeats the body.
            host => {
                let def = self.var_def(var);
                env.push((def, var.name.clone(), Value::Elem(var.name.to_string())));
                let rendered = self.render(body, env);
                env.pop();
                Value::Each(Box::new(Each {
                    list: host,
                    var: var.name.to_string(),
                    body: rendered,
                }))
            }
        }
    }

    fn render_if(
        &mut self,
        branches: &[(Expr, Vec<Node>)],
        otherwise: Option<&[Node]>,
        env: &mut Env,
    ) -> Value {
        let Some(((cond, body), rest)) = branches.split_first() else {
            return match otherwise {
                Some(nodes) => self.render(nodes, env),
                None => Value::Str(String::new()),
            };
        };
        // A class expression is a guard; any other condition a bool value,
        // which may be chosen by a key (then each case renders on its own,
        // and the analyses stay exact).
        let value = if let ExprKind::Compare { op, lhs, rhs } = &cond.kind {
            // A comparison stays a value per key where a side is chosen by
            // one: a key whose lookup finds nothing renders missing in its
            // own instance, so `analysis::missing` decides it exactly.
            let lhs = self.eval(lhs, env);
            let rhs = self.eval(rhs, env);
            super::compare_choice(*op, lhs, rhs)
        } else if is_class_expression(cond) {
            match self.guard(cond, env) {
                Guard::Const(b) => Value::Bool(b),
                g => Value::Select {
                    cond: Box::new(g),
                    then: Box::new(Value::Bool(true)),
                    otherwise: Box::new(Value::Bool(false)),
                },
            }
        } else {
            self.eval(cond, env)
        };
        self.branch(value, body, rest, otherwise, env)
    }

    fn branch(
        &mut self,
        cond: Value,
        body: &[Node],
        rest: &[(Expr, Vec<Node>)],
        otherwise: Option<&[Node]>,
        env: &mut Env,
    ) -> Value {
        match cond {
            Value::Bool(true) => self.render(body, env),
            Value::Bool(false) => self.render_if(rest, otherwise, env),
            Value::Choice(c) => map_choice_keyed(*c, &mut |on, k, _, case| {
                self.assuming(on, k, |ex| ex.branch(case, body, rest, otherwise, env))
            }),
            Value::Missing(span) => Value::Missing(span),
            other => {
                let then = self.render(body, env);
                let other_branch = self.render_if(rest, otherwise, env);
                Value::Select {
                    cond: Box::new(super::bool_guard(other)),
                    then: Box::new(then),
                    otherwise: Box::new(other_branch),
                }
            }
        }
    }
}

/// Whether a condition is written as a class expression (`web`,
/// `!canary`, `a && b`, `sys.os_family == "debian"`).
fn is_class_expression(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Path(p) => p.len() == 1,
        ExprKind::Not(_) | ExprKind::And(_) | ExprKind::Or(_) | ExprKind::Compare { .. } => true,
        _ => false,
    }
}
