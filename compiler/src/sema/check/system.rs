//! The value rules of the kernel-facing promise types (`process`, `mount`,
//! `kernel_module`, `sysctl`) and of `package`'s `manager` on values known
//! at compile time, with the
//! grammars of `converge_format::system` that the VM applies again to
//! values computed on the host.

use converge_format::schema::{PromiseType, PACKAGE_MANAGERS};
use converge_format::system::{
    fstab_field_problem, fstype_problem, sysctl_value_problem, FILESYSTEM_TYPES,
};
use converge_grammar::ast::{Expr, ExprKind, Promise};

use super::{AttrSource, Checker};
use crate::diagnostic::{Code, Diagnostic};
use crate::suggest::did_you_mean;

/// The largest `count` of a `process` promise (the VM's own bound).
const MAX_COUNT: i64 = 256;

/// A plain string or bare word, if the value is one.
fn text(expr: &Expr) -> Option<String> {
    match &expr.kind {
        ExprKind::Str(lit) => lit.as_plain(),
        ExprKind::Path(path) if path.len() == 1 => path.first().map(|i| i.name.to_string()),
        _ => None,
    }
}

impl<'a> Checker<'a> {
    /// Checks what the schema cannot say about these four types.
    pub(super) fn check_system_promise(
        &mut self,
        pt: &PromiseType,
        p: &Promise,
        attrs: &[AttrSource<'_>],
    ) {
        let find = |name: &str| attrs.iter().find(|a| a.name.name == name);
        match pt.name {
            "package" => {
                if let Some(a) = find("manager") {
                    if let Some(m) = text(a.value) {
                        if !PACKAGE_MANAGERS.contains(&m.as_str()) {
                            let mut d = Diagnostic::new(
                                Code::InvalidEnumValue,
                                format!(
                                    "`manager = \"{}\"` is no package toolset",
                                    m.escape_debug()
                                ),
                                a.value.span,
                                format!("expected one of {}", PACKAGE_MANAGERS.join(", ")),
                            );
                            if let Some(s) = did_you_mean(&m, PACKAGE_MANAGERS.iter().copied()) {
                                d = d.with_help(format!("did you mean `{s}`?"));
                            } else {
                                d = d.with_help("leave `manager` out to choose by the host's os-release: apt on the Debian family, dnf on the Red Hat family");
                            }
                            self.push(d);
                        }
                    }
                }
            }
            "process" => {
                if let Some(m) = find("match") {
                    self.check_process_regex(m.value);
                }
                let absent =
                    find("state").is_some_and(|s| text(s.value).as_deref() == Some("absent"));
                for name in ["start", "count"] {
                    if let (true, Some(a)) = (absent, find(name)) {
                        self.push(
                            Diagnostic::new(
                                Code::ConflictingAttributes,
                                format!("`{name}` means nothing on a process that must be absent"),
                                a.name.span,
                                format!("`{name}` set here"),
                            )
                            .with_help("remove it, or promise `state = running`"),
                        );
                    }
                }
                if let Some(a) = find("count") {
                    if let ExprKind::Int { value, .. } = a.value.kind {
                        if !(0..=MAX_COUNT).contains(&value) {
                            self.push(
                                Diagnostic::new(
                                    Code::InvalidEnumValue,
                                    format!("`count = {value}` is out of range"),
                                    a.value.span,
                                    format!("expected 0 to {MAX_COUNT}"),
                                )
                                .with_help("a process promise counts at most 256 processes"),
                            );
                        }
                    }
                }
            }
            "mount" => {
                let state = find("state")
                    .and_then(|s| text(s.value))
                    .unwrap_or_else(|| "mounted".into());
                if matches!(state.as_str(), "mounted" | "present") {
                    for name in ["device", "fstype"] {
                        if find(name).is_none() {
                            self.missing_attr(
                                pt,
                                p.kind.span.to(p.promiser.span),
                                name,
                                " unless `state` is `unmounted` or `absent`",
                            );
                        }
                    }
                }
                if let Some(a) = find("fstype") {
                    if let Some(t) = text(a.value) {
                        if let Some(why) = fstype_problem(&t) {
                            let mut d = Diagnostic::new(
                                Code::InvalidEnumValue,
                                why,
                                a.value.span,
                                "unknown filesystem type",
                            );
                            if let Some(s) = did_you_mean(&t, FILESYSTEM_TYPES.iter().copied()) {
                                d = d.with_help(format!("did you mean `{s}`?"));
                            }
                            self.push(d);
                        }
                    }
                }
                if let Some(a) = find("device") {
                    if let Some(why) = text(a.value).and_then(|d| fstab_field_problem("device", &d))
                    {
                        self.push(Diagnostic::new(
                            Code::InvalidEnumValue,
                            why,
                            a.value.span,
                            "not a usable device",
                        ));
                    }
                }
                if let Some(ExprKind::List(items)) = find("options").map(|a| &a.value.kind) {
                    for item in items {
                        if let Some(why) =
                            text(item).and_then(|o| fstab_field_problem("option", &o))
                        {
                            self.push(
                                Diagnostic::new(Code::InvalidEnumValue, why, item.span, "not a usable option")
                                    .with_help("write each option as its own item: `options = [\"noatime\", \"nodev\"];`"),
                            );
                        }
                    }
                }
            }
            "sysctl" => {
                if let Some(a) = find("value") {
                    if let Some(why) = text(a.value).and_then(|v| sysctl_value_problem(&v)) {
                        self.push(Diagnostic::new(
                            Code::InvalidEnumValue,
                            format!("this sysctl value is not usable: {why}"),
                            a.value.span,
                            "not a usable value",
                        ));
                    }
                }
            }
            _ => {}
        }
    }

    /// A process regex must compile, and must not match every command line
    /// (it would match the VM, its ancestors and init too).
    fn check_process_regex(&mut self, expr: &Expr) {
        let ExprKind::Str(lit) = &expr.kind else {
            return;
        };
        let Some(pattern) = lit.as_plain() else {
            return;
        };
        match regex::Regex::new(&pattern) {
            Err(e) => self.push(Diagnostic::new(
                Code::InvalidRegex,
                format!("`match` is not a valid regular expression: {e}"),
                expr.span,
                "invalid regex",
            )),
            Ok(re) if re.is_match("") => self.push(
                Diagnostic::new(
                    Code::InvalidRegex,
                    format!("`match = {pattern:?}` matches every command line, the VM's own and init's too"),
                    expr.span,
                    "matches the empty string",
                )
                .with_help("match the program meant, e.g. `match = \"^/usr/sbin/nginx\";`")
                .with_note("the VM never signals itself or its ancestors; a regex that matches them fails the promise on the host"),
            ),
            Ok(_) => {}
        }
    }
}
