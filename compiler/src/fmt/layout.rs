//! The canonical layout: which constructs break over lines, indentation,
//! alignment and blank lines, and where each comment goes.
//!
//! The printer walks the tree in source order and keeps a cursor into the
//! file's comments. Before each item, statement, attribute or list element
//! it writes the comments that come before it in the source, each on its own
//! line; after it, the comments that followed it on the same source line.
//! A comment somewhere no line starts (inside an expression) moves to the
//! end of that line; none is ever dropped (`super::format` checks).

use converge_grammar::ast::{
    AttrStmt, BodyDef, BundleDef, Call, Exclusive, Expr, ExprKind, Item, Module, PolicyDef,
    Promise, Stmt, TypeDef,
};
use converge_grammar::{Comment, Span};

use super::flat;

/// Lines longer than this are broken where the layout allows (lists, maps,
/// blocks); long expressions and strings are left as they are.
pub const WIDTH: usize = 100;

const INDENT: &str = "  ";

pub(super) struct Printer<'a> {
    src: &'a str,
    comments: &'a [Comment],
    /// The first comment not yet written.
    next: usize,
    out: String,
    depth: usize,
    /// Source offset just past the last thing written, to find blank lines.
    last_end: u32,
    /// Output offsets where a one-line comment follows code on its line;
    /// such comments line up across consecutive lines.
    marks: Vec<usize>,
}

impl<'a> Printer<'a> {
    pub(super) fn new(src: &'a str, comments: &'a [Comment]) -> Self {
        Printer {
            src,
            comments,
            next: 0,
            out: String::with_capacity(src.len() + src.len() / 8),
            depth: 0,
            last_end: 0,
            marks: Vec::new(),
        }
    }

    pub(super) fn module(mut self, module: &Module) -> String {
        let aligned = class_alignment(self.src, &module.items);
        let mut first = true;
        let mut prev: Option<&Item> = None;
        let starts: Vec<u32> = module.items.iter().map(|i| i.span().start).collect();
        for (i, (item, width)) in module.items.iter().zip(aligned).enumerate() {
            let span = item.span();
            let mut forced = prev.is_some_and(|p| separated(p, item));
            let before = self.next;
            first = self.leading(span.start, first, forced);
            forced &= self.next == before;
            if !first && (forced || self.blank_before(span.start)) && !self.ends_blank() {
                self.out.push('\n');
            }
            first = false;
            self.indent();
            self.item(item, width);
            self.trailing(span.end, starts.get(i + 1).copied().unwrap_or(u32::MAX));
            prev = Some(item);
        }
        self.leading(u32::MAX, first, false);
        let trimmed = self.out.trim_end().len();
        self.out.truncate(trimmed);
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        align_comments(&self.out, &self.marks)
    }

    // ------------------------------------------------------------ comments

    /// Writes the unwritten comments that start before `pos`, each on its
    /// own line, keeping one blank line where the source had any. `first`
    /// says nothing has been written in this block yet (no blank line
    /// then); `forced` asks for a blank line before the first comment.
    /// Returns whether the block is still empty.
    fn leading(&mut self, pos: u32, mut first: bool, forced: bool) -> bool {
        let mut forced = forced;
        while let Some(c) = self.comments.get(self.next) {
            if c.start >= pos {
                break;
            }
            if !first && (forced || self.blank_before(c.start)) && !self.ends_blank() {
                self.out.push('\n');
            }
            forced = false;
            first = false;
            self.indent();
            self.out.push_str(&c.text);
            self.out.push('\n');
            self.last_end = c.end;
            self.next += 1;
        }
        first
    }

    /// Ends the current line, after the comments that sat inside what was
    /// just written or after it on the same source line (but before
    /// `until`, where the next thing starts).
    fn trailing(&mut self, after: u32, until: u32) {
        self.last_end = self.last_end.max(after);
        while let Some(c) = self.comments.get(self.next) {
            let same_line = c.start >= after
                && c.start < until
                && !self
                    .src
                    .get(after as usize..c.start as usize)
                    .unwrap_or("\n")
                    .contains('\n');
            if c.start >= after && !same_line {
                break;
            }
            if !c.text.contains('\n') && self.marks.last() != Some(&self.out.len()) {
                self.trim_line_end();
                self.marks.push(self.out.len());
            }
            self.out.push(' ');
            self.out.push_str(&c.text);
            self.last_end = c.end;
            self.next += 1;
            if !c.is_block() {
                break;
            }
        }
        self.trim_line_end();
        self.out.push('\n');
    }

    /// Whether any comment not yet written starts inside `span`.
    fn has_comment_in(&self, span: Span) -> bool {
        let rest = self.comments.get(self.next..).unwrap_or_default();
        let first = rest.partition_point(|c| c.start < span.start);
        rest.get(first).is_some_and(|c| c.start < span.end)
    }

    /// Whether the source has an empty line between the last thing written
    /// and `pos`.
    fn blank_before(&self, pos: u32) -> bool {
        has_blank_line(self.src, self.last_end, pos)
    }

    // ------------------------------------------------------------ output

    fn indent(&mut self) {
        for _ in 0..self.depth {
            self.out.push_str(INDENT);
        }
    }

    fn trim_line_end(&mut self) {
        let trimmed = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(trimmed);
    }

    fn ends_blank(&self) -> bool {
        self.out.is_empty() || self.out.ends_with("\n\n")
    }

    /// Characters on the current output line.
    fn column(&self) -> usize {
        let start = self.out.rfind('\n').map_or(0, |i| i + 1);
        self.out.get(start..).map_or(0, |l| l.chars().count())
    }

    /// Whether `text` fits on the current line, followed by `extra` more
    /// characters.
    fn fits(&self, text: &str, extra: usize) -> bool {
        !text.contains('\n') && self.column() + text.chars().count() + extra <= WIDTH
    }

    /// Writes `text` on one line when the construct was written on one line,
    /// holds no comment and fits; the caller lays it out otherwise.
    fn try_one_line(&mut self, span: Span, text: &str) -> bool {
        let one_line = !flat::slice(self.src, span).contains('\n');
        if one_line && !self.has_comment_in(span) && self.fits(text, 0) {
            self.out.push_str(text);
            return true;
        }
        false
    }

    // ------------------------------------------------------------ items

    fn item(&mut self, item: &Item, class_width: usize) {
        let src = self.src;
        match item {
            Item::Import(i) => {
                self.out.push_str("import ");
                self.out.push_str(flat::slice(src, i.path_span));
                self.out.push(';');
            }
            Item::Class(c) => {
                self.out.push_str("class ");
                self.out.push_str(&c.name.name);
                if let Some(e) = &c.expr {
                    pad(&mut self.out, c.name.name.len(), class_width);
                    self.out.push_str(" = ");
                    self.expr(e);
                }
                self.out.push(';');
            }
            Item::Exclusive(x) => self.exclusive(x),
            Item::Let(l) => {
                self.out.push_str("let ");
                self.out.push_str(&l.name.name);
                if let Some(t) = &l.ty {
                    self.out.push_str(": ");
                    self.out.push_str(&flat::ty(t));
                }
                self.out.push_str(" = ");
                self.expr(&l.value);
                self.out.push(';');
            }
            Item::Body(b) => self.body_def(b),
            Item::Bundle(b) => self.bundle_def(b),
            Item::Policy(p) => self.policy_def(p),
            Item::Type(t) => self.type_def(t),
            Item::Fact(f) => self.out.push_str(&flat::fact_def(src, f)),
            Item::Error(span) => self.out.push_str(flat::slice(src, *span)),
        }
    }

    /// `exclusive { a, b }`; a long group (or one written with a trailing
    /// comma or holding comments) fills lines of names instead.
    fn exclusive(&mut self, x: &Exclusive) {
        let names: Vec<&str> = x.classes.iter().map(|c| c.name.as_str()).collect();
        let text = if names.is_empty() {
            "exclusive {}".to_owned()
        } else {
            format!("exclusive {{ {} }}", names.join(", "))
        };
        let last = x.classes.last().map(|c| c.span.end);
        let close = last
            .and_then(|l| self.find_char(l, b',').map_or(Some(l), Some))
            .and_then(|l| self.find_char(l + 1, b'}').or(self.find_char(l, b'}')));
        let Some(close) = close else {
            self.out.push_str(&text);
            return;
        };
        let braces = Span::new(x.span.file, x.span.start, close + 1);
        if !self.breaks_between(braces, last, &text, 0) {
            self.out.push_str(&text);
            return;
        }
        self.out.push_str("exclusive {");
        let first_start = x.classes.first().map_or(close, |c| c.span.start);
        self.trailing(
            self.find_char(x.span.start + 9, b'{')
                .map_or(x.span.start, |o| o + 1),
            first_start,
        );
        self.depth += 1;
        let mut first = true;
        let mut line_open = false;
        for (i, class) in x.classes.iter().enumerate() {
            let start = class.span.start;
            let until = x.classes.get(i + 1).map_or(close, |c| c.span.start);
            let pending = self
                .comments
                .get(self.next)
                .is_some_and(|c| c.start < start);
            if pending && line_open {
                self.trailing(self.last_end, start);
                line_open = false;
            }
            self.leading(start, first, false);
            first = false;
            let word = class.name.len() + 1;
            if line_open && self.column() + 1 + word > WIDTH {
                self.trim_line_end();
                self.out.push('\n');
                line_open = false;
            }
            if line_open {
                self.out.push(' ');
            } else {
                self.indent();
                line_open = true;
            }
            self.out.push_str(&class.name);
            self.out.push(',');
            self.last_end = class.span.end;
            let same_line_comment = self.comments.get(self.next).is_some_and(|c| {
                c.start < until
                    && !self
                        .src
                        .get(class.span.end as usize..c.start as usize)
                        .unwrap_or("\n")
                        .contains('\n')
            });
            if same_line_comment {
                self.trailing(class.span.end, until);
                line_open = false;
            }
        }
        if line_open {
            self.trim_line_end();
            self.out.push('\n');
        }
        self.leading(close, first, false);
        self.depth = self.depth.saturating_sub(1);
        self.indent();
        self.out.push('}');
        self.last_end = close + 1;
    }

    fn body_def(&mut self, b: &BodyDef) {
        let head = format!("body {}", b.name.name);
        let attrs: Vec<String> = b.attrs.iter().map(|a| flat::attr(self.src, a)).collect();
        if self.try_one_line(b.span, &format!("{head} {}", flat::braces(&attrs))) {
            return;
        }
        self.out.push_str(&head);
        self.attr_block(&b.attrs, b.name.span.end, b.span);
    }

    fn bundle_def(&mut self, b: &BundleDef) {
        let mut head = format!("bundle {}", b.name.name);
        if !b.params.is_empty() {
            let params: Vec<String> = b.params.iter().map(|p| flat::param(self.src, p)).collect();
            head.push_str(&format!("({})", params.join(", ")));
        }
        let one = format!("{head} {}", flat::block(self.src, &b.body));
        if self.try_one_line(b.span, &one) {
            return;
        }
        self.out.push_str(&head);
        let after = b.params.last().map_or(b.name.span.end, |p| p.span.end);
        self.stmt_block(&b.body, after, b.span);
    }

    /// `type Name = { field: T, ... };`, one field per line when it was
    /// written with a trailing comma, holds a comment or does not fit.
    fn type_def(&mut self, t: &TypeDef) {
        let src = self.src;
        let fields: Vec<String> = t.fields.iter().map(|f| flat::field_def(src, f)).collect();
        let text = if fields.is_empty() {
            format!("type {} = {{}};", t.name.name)
        } else {
            format!("type {} = {{ {} }};", t.name.name, fields.join(", "))
        };
        let open = self
            .find_char(t.name.span.end, b'=')
            .and_then(|eq| self.find_char(eq + 1, b'{'));
        let close = flat::slice(src, t.span)
            .rfind('}')
            .map(|i| t.span.start + i as u32);
        let (Some(open), Some(close)) = (open, close) else {
            self.out.push_str(&text);
            return;
        };
        let braces = Span::new(t.span.file, open, close + 1);
        let last = t.fields.last().map(|f| f.span.end);
        if t.fields.is_empty() || !self.breaks_between(braces, last, &text, 0) {
            self.out.push_str(&text);
            return;
        }
        self.out.push_str(&format!("type {} = ", t.name.name));
        let spans: Vec<Span> = t.fields.iter().map(|f| f.span).collect();
        self.broken(braces, ("{", "}"), &spans, |p, i| {
            let Some(f) = t.fields.get(i) else { return };
            p.out.push_str(&f.name.name);
            p.out.push_str(": ");
            p.out.push_str(&flat::ty(&f.ty));
            if let Some(d) = &f.default {
                p.out.push_str(" = ");
                p.expr(d);
            }
        });
        self.out.push(';');
    }

    fn policy_def(&mut self, p: &PolicyDef) {
        let one = format!("policy {}", flat::block(self.src, &p.body));
        if self.try_one_line(p.span, &one) {
            return;
        }
        self.out.push_str("policy");
        self.stmt_block(&p.body, p.span.start + "policy".len() as u32, p.span);
    }

    // ------------------------------------------------------------ blocks

    /// ` {` and the comments on its line, or ` {}` for an empty block
    /// without comments (then returns false: nothing more to write).
    /// `head_end` is where the text before the `{` ends; `span` covers the
    /// whole construct, whose last character is the `}`.
    fn open_block(&mut self, head_end: u32, span: Span, first: Option<u32>) -> bool {
        let close = span.end.saturating_sub(1);
        let open = self.find_char(head_end, b'{').unwrap_or(head_end);
        if first.is_none() && !self.has_comment_in(Span::new(span.file, open, close)) {
            self.out.push_str(" {}");
            return false;
        }
        self.out.push_str(" {");
        self.trailing(open + 1, first.unwrap_or(close));
        self.depth += 1;
        true
    }

    fn close_block(&mut self, span: Span, first: bool) {
        let close = span.end.saturating_sub(1);
        self.leading(close, first, false);
        self.depth = self.depth.saturating_sub(1);
        self.indent();
        self.out.push('}');
        self.last_end = span.end;
    }

    fn stmt_block(&mut self, body: &[Stmt], head_end: u32, span: Span) {
        let starts: Vec<u32> = body.iter().map(|s| s.span().start).collect();
        if !self.open_block(head_end, span, starts.first().copied()) {
            return;
        }
        let close = span.end.saturating_sub(1);
        let mut first = true;
        for (i, s) in body.iter().enumerate() {
            let start = s.span().start;
            first = self.leading(start, first, false);
            if !first && self.blank_before(start) && !self.ends_blank() {
                self.out.push('\n');
            }
            first = false;
            self.indent();
            self.stmt(s);
            self.trailing(s.span().end, starts.get(i + 1).copied().unwrap_or(close));
        }
        self.close_block(span, first);
    }

    fn attr_block(&mut self, attrs: &[AttrStmt], head_end: u32, span: Span) {
        let starts: Vec<u32> = attrs.iter().map(|a| attr_span(a).start).collect();
        if !self.open_block(head_end, span, starts.first().copied()) {
            return;
        }
        let close = span.end.saturating_sub(1);
        let widths = attr_alignment(self.src, attrs);
        let mut first = true;
        for (i, (a, width)) in attrs.iter().zip(widths).enumerate() {
            let a_span = attr_span(a);
            first = self.leading(a_span.start, first, false);
            if !first && self.blank_before(a_span.start) && !self.ends_blank() {
                self.out.push('\n');
            }
            first = false;
            self.indent();
            match a {
                AttrStmt::Set(set) => {
                    self.out.push_str(&set.name.name);
                    pad(&mut self.out, set.name.name.len(), width);
                    self.out.push_str(" = ");
                    self.expr(&set.value);
                    self.out.push(';');
                }
                other => self.out.push_str(&flat::attr(self.src, other)),
            }
            self.trailing(a_span.end, starts.get(i + 1).copied().unwrap_or(close));
        }
        self.close_block(span, first);
    }

    // ------------------------------------------------------------ statements

    fn stmt(&mut self, s: &Stmt) {
        let src = self.src;
        match s {
            Stmt::Promise(p) => self.promise(p),
            Stmt::When(w) => {
                if self.try_one_line(w.span, &flat::stmt(src, s)) {
                    return;
                }
                self.out.push_str(&flat::when_head(src, w));
                self.stmt_block(&w.body, w.guard.span.end, w.span);
            }
            Stmt::For(f) => {
                if self.try_one_line(f.span, &flat::stmt(src, s)) {
                    return;
                }
                self.out.push_str(&flat::for_head(src, f));
                self.stmt_block(&f.body, f.list.span.end, f.span);
            }
            Stmt::Call(c) => self.call(c),
            Stmt::Defaults(d) => {
                if self.try_one_line(d.span, &flat::stmt(src, s)) {
                    return;
                }
                self.out.push_str(&flat::defaults_head(d));
                self.attr_block(&d.attrs, d.head().end, d.span);
            }
            Stmt::Error(span) => self.out.push_str(flat::slice(src, *span)),
        }
    }

    fn promise(&mut self, p: &Promise) {
        let src = self.src;
        let attrs: Vec<String> = p.attrs.iter().map(|a| flat::attr(src, a)).collect();
        let head = flat::promise_head(src, p);
        if self.try_one_line(p.span, &format!("{head} {}", flat::braces(&attrs))) {
            return;
        }
        self.out.push_str(&head);
        self.attr_block(&p.attrs, p.promiser.span.end, p.span);
    }

    /// `name(args);`, one argument per line (named ones aligned) when the
    /// call was written with a trailing comma, holds a comment or is long.
    fn call(&mut self, c: &Call) {
        let src = self.src;
        let text = flat::call(src, c);
        let open = self.find_char(c.bundle.span.end, b'(');
        let close = flat::slice(src, c.span)
            .rfind(')')
            .map(|i| c.span.start + i as u32);
        let (Some(open), Some(close)) = (open, close) else {
            self.out.push_str(&text);
            return;
        };
        let parens = Span::new(c.span.file, open, close + 1);
        let last = c.args.last().map(|a| a.span.end);
        if c.args.is_empty() || !self.breaks_between(parens, last, &text, 0) {
            self.out.push_str(&text);
            return;
        }
        let width = c
            .args
            .iter()
            .filter_map(|a| a.name.as_ref().map(|n| n.name.len()))
            .max()
            .unwrap_or(0);
        let spans: Vec<Span> = c.args.iter().map(|a| a.span).collect();
        self.out.push_str(&c.bundle.name);
        self.broken(parens, ("(", ")"), &spans, |p, i| {
            let Some(a) = c.args.get(i) else { return };
            if let Some(name) = &a.name {
                p.out.push_str(&name.name);
                pad(&mut p.out, name.name.len(), width);
                p.out.push_str(" = ");
            }
            p.expr(&a.value);
        });
        self.out.push(';');
    }

    // ------------------------------------------------------------ expressions

    /// An expression at the current position: lists and maps break one
    /// element per line when they were written with a trailing comma, hold
    /// a comment, or do not fit; everything else stays on one line.
    fn expr(&mut self, e: &Expr) {
        let src = self.src;
        let text = flat::expr(src, e);
        match &e.kind {
            ExprKind::List(items) if !items.is_empty() && self.breaks(e, &text) => {
                let spans: Vec<Span> = items.iter().map(|i| i.span).collect();
                self.broken(e.span, ("[", "]"), &spans, |p, i| {
                    if let Some(item) = items.get(i) {
                        p.expr(item);
                    }
                });
            }
            ExprKind::Map(entries) if !entries.is_empty() && self.breaks(e, &text) => {
                let spans: Vec<Span> = entries.iter().map(|(k, v)| k.span.to(v.span)).collect();
                self.broken(e.span, ("{", "}"), &spans, |p, i| {
                    if let Some((k, v)) = entries.get(i) {
                        p.out.push_str(&flat::key(p.src, k));
                        p.out.push_str(": ");
                        p.expr(v);
                    }
                });
            }
            ExprKind::Record(fields) if !fields.is_empty() && self.breaks(e, &text) => {
                let spans: Vec<Span> = fields.iter().map(|(k, v)| k.span.to(v.span)).collect();
                self.broken(e.span, ("{", "}"), &spans, |p, i| {
                    if let Some((k, v)) = fields.get(i) {
                        p.out.push_str(&k.name);
                        p.out.push_str(": ");
                        p.expr(v);
                    }
                });
            }
            _ => self.out.push_str(&text),
        }
    }

    fn breaks(&self, e: &Expr, flat: &str) -> bool {
        let last = match &e.kind {
            ExprKind::List(items) => items.last().map(|i| i.span.end),
            ExprKind::Map(entries) => entries.last().map(|(_, v)| v.span.end),
            ExprKind::Record(fields) => fields.last().map(|(_, v)| v.span.end),
            _ => None,
        };
        self.breaks_between(e.span, last, flat, 1)
    }

    /// Whether a bracketed construct (`span` from its opening to its closing
    /// bracket, last element ending at `last`) must break: it was written
    /// with a trailing comma, holds a comment, or `flat` (followed by `extra`
    /// characters) does not fit.
    fn breaks_between(&self, span: Span, last: Option<u32>, flat: &str, extra: usize) -> bool {
        let trailing_comma = last.is_some_and(|last| {
            self.find_char(last, b',')
                .is_some_and(|c| c < span.end.saturating_sub(1))
        });
        trailing_comma || self.has_comment_in(span) || !self.fits(flat, extra)
    }

    /// Writes a list or map one element per line, each followed by a comma;
    /// `spans` are the elements' spans.
    fn broken(
        &mut self,
        span: Span,
        (open, close): (&str, &str),
        spans: &[Span],
        mut element: impl FnMut(&mut Self, usize),
    ) {
        let close_at = span.end.saturating_sub(1);
        self.out.push_str(open);
        self.trailing(span.start + 1, spans.first().map_or(close_at, |s| s.start));
        self.depth += 1;
        let mut first = true;
        for (i, elem_span) in spans.iter().enumerate() {
            first = self.leading(elem_span.start, first, false);
            if !first && self.blank_before(elem_span.start) && !self.ends_blank() {
                self.out.push('\n');
            }
            first = false;
            self.indent();
            element(self, i);
            self.out.push(',');
            self.trailing(
                elem_span.end,
                spans.get(i + 1).map_or(close_at, |s| s.start),
            );
        }
        self.leading(span.end.saturating_sub(1), first, false);
        self.depth = self.depth.saturating_sub(1);
        self.indent();
        self.out.push_str(close);
        self.last_end = span.end;
    }

    /// The offset of the first `ch` at or after `from` outside comments.
    fn find_char(&self, from: u32, ch: u8) -> Option<u32> {
        let bytes = self.src.as_bytes();
        let mut i = from as usize;
        while let Some(b) = bytes.get(i) {
            if let Ok(at) = self.comments.binary_search_by_key(&i, |c| c.start as usize) {
                i = self.comments.get(at).map_or(i + 1, |c| c.end as usize);
                continue;
            }
            if *b == ch {
                return Some(i as u32);
            }
            if !b.is_ascii_whitespace() && *b != b')' && *b != b',' {
                return None;
            }
            i += 1;
        }
        None
    }
}

fn attr_span(a: &AttrStmt) -> Span {
    match a {
        AttrStmt::Set(s) => s.span,
        AttrStmt::Use(u) => u.span,
        AttrStmt::Error(span) => *span,
    }
}

/// Pads a name of `len` characters to `width`.
fn pad(out: &mut String, len: usize, width: usize) {
    for _ in len..width {
        out.push(' ');
    }
}

/// Whether `src[from..to]` contains a line with nothing but whitespace.
fn has_blank_line(src: &str, from: u32, to: u32) -> bool {
    let Some(text) = src.get(from as usize..(to as usize).min(src.len())) else {
        return false;
    };
    let mut lines = text.split('\n');
    lines.next();
    let mut rest: Vec<&str> = lines.collect();
    // The last piece is the start of the line `to` is on, not a whole line.
    rest.pop();
    rest.iter().any(|l| l.trim().is_empty())
}

/// Whether a blank line always separates two top-level items: around
/// blocks, and between items of different kinds.
fn separated(prev: &Item, next: &Item) -> bool {
    let block = |i: &Item| matches!(i, Item::Body(_) | Item::Bundle(_) | Item::Policy(_));
    block(prev) || block(next) || std::mem::discriminant(prev) != std::mem::discriminant(next)
}

/// The width each item's class name is padded to: `=` lines up across a run
/// of class definitions not broken by a blank line or another kind of item.
fn class_alignment(src: &str, items: &[Item]) -> Vec<usize> {
    let mut widths = vec![0; items.len()];
    let mut run: Vec<usize> = Vec::new();
    let mut prev_end: Option<u32> = None;
    let flush = |run: &mut Vec<usize>, widths: &mut Vec<usize>| {
        let width = run
            .iter()
            .filter_map(|i| match items.get(*i) {
                Some(Item::Class(c)) if c.expr.is_some() => Some(c.name.name.len()),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        for i in run.drain(..) {
            if let Some(w) = widths.get_mut(i) {
                *w = width;
            }
        }
    };
    for (i, item) in items.iter().enumerate() {
        let broken = prev_end.is_some_and(|end| has_blank_line(src, end, item.span().start));
        if !matches!(item, Item::Class(_)) || broken {
            flush(&mut run, &mut widths);
        }
        if matches!(item, Item::Class(_)) {
            run.push(i);
        }
        prev_end = Some(item.span().end);
    }
    flush(&mut run, &mut widths);
    widths
}

/// The width each attribute name is padded to: `=` lines up across a run of
/// attributes not broken by a blank line.
fn attr_alignment(src: &str, attrs: &[AttrStmt]) -> Vec<usize> {
    let mut widths = vec![0; attrs.len()];
    let mut start = 0;
    for i in 0..=attrs.len() {
        let broken = match (i.checked_sub(1).and_then(|p| attrs.get(p)), attrs.get(i)) {
            (Some(prev), Some(next)) => {
                has_blank_line(src, attr_span(prev).end, attr_span(next).start)
            }
            (_, None) => true,
            (None, Some(_)) => false,
        };
        if broken {
            let run = attrs.get(start..i).unwrap_or_default();
            let width = run
                .iter()
                .filter_map(|a| match a {
                    AttrStmt::Set(s) => Some(s.name.name.len()),
                    _ => None,
                })
                .max()
                .unwrap_or(0);
            for w in widths.get_mut(start..i).unwrap_or_default() {
                *w = width;
            }
            start = i;
        }
    }
    widths
}

/// Lines up the comments that end consecutive lines of code, two spaces
/// after the longest code of the run. `marks` are the output offsets where
/// such a comment's line has its code end.
fn align_comments(out: &str, marks: &[usize]) -> String {
    // (line start, code end) of each marked line, by line number.
    let mut lines: Vec<(usize, usize, usize)> = Vec::new();
    let mut line_no = 0;
    let mut line_start = 0;
    let mut marks = marks.iter().peekable();
    for (i, b) in out.bytes().enumerate() {
        if b != b'\n' {
            continue;
        }
        while let Some(&&m) = marks.peek() {
            if m > i {
                break;
            }
            if m >= line_start {
                lines.push((line_no, line_start, m));
            }
            marks.next();
        }
        line_no += 1;
        line_start = i + 1;
    }
    let mut result = String::with_capacity(out.len() + lines.len() * 4);
    let mut copied = 0;
    let mut i = 0;
    while i < lines.len() {
        let mut j = i + 1;
        while lines
            .get(j)
            .zip(lines.get(j - 1))
            .is_some_and(|(b, a)| b.0 == a.0 + 1)
        {
            j += 1;
        }
        let run = lines.get(i..j).unwrap_or_default();
        let width = run
            .iter()
            .map(|(_, start, end)| out.get(*start..*end).map_or(0, |c| c.chars().count()))
            .max()
            .unwrap_or(0);
        for (_, start, end) in run {
            let code = out.get(*start..*end).map_or(0, |c| c.chars().count());
            result.push_str(out.get(copied..*end).unwrap_or(""));
            // The comment starts with its own space after the mark.
            for _ in code..width + 1 {
                result.push(' ');
            }
            copied = *end;
        }
        i = j;
    }
    result.push_str(out.get(copied..).unwrap_or(""));
    result
}
