//! The typed syntax tree of one `.policy` file (LANGUAGE.md sections 3-4).
//!
//! The tree is close to the text: nothing is resolved or checked here. Every
//! node carries a [`Span`]. Syntax errors that the parser recovered from
//! leave `Error` nodes in place, so later phases and the language server
//! still get a tree for the rest of the file; phases skip `Error` nodes
//! silently because the parser already reported them.

pub use smol_str::SmolStr;

use crate::span::{FileId, Span};
use crate::token::StrLit;

/// One parsed source file.
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    pub file: FileId,
    pub items: Vec<Item>,
}

/// A name as written, with its position. Names are `SmolStr`s: the short
/// ones (nearly all) live inline, so a large policy does not cost one heap
/// allocation per identifier.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    pub name: SmolStr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Import(Import),
    Class(ClassDef),
    Exclusive(Exclusive),
    Let(LetDef),
    Body(BodyDef),
    Bundle(BundleDef),
    Policy(PolicyDef),
    Type(TypeDef),
    /// Boxed: the largest item by far, and the parser moves items by value.
    Fact(Box<FactDef>),
    /// A top-level item the parser could not make sense of.
    Error(Span),
}

impl Item {
    pub fn span(&self) -> Span {
        match self {
            Item::Import(i) => i.span,
            Item::Class(i) => i.span,
            Item::Exclusive(i) => i.span,
            Item::Let(i) => i.span,
            Item::Body(i) => i.span,
            Item::Bundle(i) => i.span,
            Item::Policy(i) => i.span,
            Item::Type(i) => i.span,
            Item::Fact(i) => i.span,
            Item::Error(span) => *span,
        }
    }
}

/// `import "std/classes.policy";`
#[derive(Clone, Debug, PartialEq)]
pub struct Import {
    pub path: StrLit,
    pub path_span: Span,
    pub span: Span,
}

/// `class web = EXPR;` or, for a class set by outcomes or `--define`,
/// `class rebooted;`.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassDef {
    pub name: Ident,
    pub expr: Option<Expr>,
    pub span: Span,
}

/// `exclusive { debian, redhat }`: at most one of these is ever true.
#[derive(Clone, Debug, PartialEq)]
pub struct Exclusive {
    pub classes: Vec<Ident>,
    pub span: Span,
}

/// `let name: TYPE = EXPR;` (the type may be omitted).
#[derive(Clone, Debug, PartialEq)]
pub struct LetDef {
    pub name: Ident,
    pub ty: Option<TypeExpr>,
    pub value: Expr,
    pub span: Span,
}

/// `body name { attr = value; ... }`: a reusable set of attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct BodyDef {
    pub name: Ident,
    pub attrs: Vec<AttrStmt>,
    pub span: Span,
}

/// `bundle name(params) { statements }`.
#[derive(Clone, Debug, PartialEq)]
pub struct BundleDef {
    pub name: Ident,
    pub params: Vec<Param>,
    pub body: Vec<Stmt>,
    pub span: Span,
}

/// `port: int` or `docroot: string = "/srv/www"`.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: Ident,
    pub ty: TypeExpr,
    pub default: Option<Expr>,
    pub span: Span,
}

/// `type Site = { server_name: string, port: int = 80, };`: a record type
/// (LANGUAGE.md section 10).
#[derive(Clone, Debug, PartialEq)]
pub struct TypeDef {
    pub name: Ident,
    pub fields: Vec<FieldDef>,
    pub span: Span,
}

/// `fact datacenter: string from ["/usr/local/lib/converge/probes/dc"] timeout 5s;`
/// or `fact rack: int from file "/etc/converge/facts.d/rack";`: a host fact
/// the VM probes before it evaluates classes, read as `facts.NAME`
/// (LANGUAGE.md section 15).
#[derive(Clone, Debug, PartialEq)]
pub struct FactDef {
    pub name: Ident,
    pub ty: TypeExpr,
    pub source: FactSource,
    /// `timeout 5s`: the number as written (the checker wants a duration).
    pub timeout: Option<Expr>,
    pub span: Span,
}

/// Where a [`FactDef`] comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum FactSource {
    /// `from ["/usr/lib/probe", "--flag"]`: a program and its arguments
    /// (no shell), each word with its span.
    Program {
        argv: Vec<(StrLit, Span)>,
        span: Span,
    },
    /// `from file "/etc/converge/facts.d/rack"`: a file's content.
    File { path: (StrLit, Span), span: Span },
}

/// One field of a record type: `port: int = 80`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldDef {
    pub name: Ident,
    pub ty: TypeExpr,
    pub default: Option<Expr>,
    pub span: Span,
}

/// `policy { statements }`: the entry point.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyDef {
    pub body: Vec<Stmt>,
    pub span: Span,
}

/// A type as written: `string`, `list<string>`, `map<string, int>`.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeExpr {
    pub name: Ident,
    pub args: Vec<TypeExpr>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    Promise(Promise),
    When(When),
    /// Boxed: a loop is rare and the largest statement (200 bytes against
    /// a promise's 128), and every statement is as large as the largest.
    For(Box<For>),
    Call(Call),
    /// `defaults { ... }` or `defaults TYPE { ... }` (LANGUAGE.md section
    /// 17). Parsed wherever a statement may stand, so that one in the wrong
    /// place gets a diagnostic that says where it belongs (the checker's
    /// E0270) rather than a bare syntax error.
    Defaults(Defaults),
    /// A statement the parser could not make sense of.
    Error(Span),
}

impl Stmt {
    pub fn span(&self) -> Span {
        match self {
            Stmt::Promise(s) => s.span,
            Stmt::When(s) => s.span,
            Stmt::For(s) => s.span,
            Stmt::Call(s) => s.span,
            Stmt::Defaults(s) => s.span,
            Stmt::Error(span) => *span,
        }
    }
}

/// `TYPE PROMISER { attributes }`, e.g. `file "/etc/motd" { ... }`.
#[derive(Clone, Debug, PartialEq)]
pub struct Promise {
    pub kind: Ident,
    pub promiser: Expr,
    pub attrs: Vec<AttrStmt>,
    pub span: Span,
}

/// `defaults { notify = [service "nginx"]; }` or `defaults file { mode =
/// 0o644; }`: attributes every promise of the bundle (of that type) takes
/// unless it sets them itself. `defaults` is a contextual word (it stays an
/// ordinary name elsewhere).
#[derive(Clone, Debug, PartialEq)]
pub struct Defaults {
    /// The word `defaults` as written.
    pub keyword: Ident,
    /// The promise type of `defaults TYPE { ... }`; `None` for every type.
    pub kind: Option<Ident>,
    pub attrs: Vec<AttrStmt>,
    pub span: Span,
}

impl Defaults {
    /// `defaults` or `defaults file`: where diagnostics about the whole
    /// block point.
    pub fn head(&self) -> Span {
        match &self.kind {
            Some(kind) => self.keyword.span.to(kind.span),
            None => self.keyword.span,
        }
    }
}

/// `when CLASSEXPR { statements }`.
#[derive(Clone, Debug, PartialEq)]
pub struct When {
    pub guard: Expr,
    pub body: Vec<Stmt>,
    pub span: Span,
}

/// `for x in LIST { statements }` or `for k, v in MAP { statements }`.
#[derive(Clone, Debug, PartialEq)]
pub struct For {
    /// `k` in `for k, v in MAP`; `None` for `for x in LIST`.
    pub key: Option<Ident>,
    pub var: Ident,
    pub list: Expr,
    pub body: Vec<Stmt>,
    pub span: Span,
}

/// `name(args);`: a bundle call.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub bundle: Ident,
    pub args: Vec<Arg>,
    pub span: Span,
}

/// A call argument, `port = 8080` or positional `8080`.
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum AttrStmt {
    /// `name = value;`
    Set(Attr),
    /// `use body_name;`: splice a body's attributes here.
    Use(Use),
    /// An attribute the parser could not make sense of.
    Error(Span),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Attr {
    pub name: Ident,
    pub value: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Use {
    pub body: Ident,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExprKind {
    Str(StrLit),
    /// `octal` is true when written `0o...`.
    Int {
        value: i64,
        octal: bool,
    },
    /// Seconds.
    Duration(u64),
    Bool(bool),
    /// `name` or `sys.hostname`: a variable, class, fact or enum value;
    /// resolution decides which.
    Path(Vec<Ident>),
    List(Vec<Expr>),
    /// `{ "key": value, ... }`; `{}` is an empty map (the checker accepts it
    /// as a record where a record is expected).
    Map(Vec<(Expr, Expr)>),
    /// `{ server_name: "x", port: 80 }`: a record literal, keys are bare
    /// identifiers (LANGUAGE.md section 10).
    Record(Vec<(Ident, Expr)>),
    /// `base.name` where `base` is not a plain dotted name: `sites[k].port`,
    /// `f(x).y`, `(a ?? b).c`. Plain `a.b.c` stays a `Path`.
    Field {
        base: Box<Expr>,
        /// Boxed, like `func` below: an inline name would make every
        /// expression 80 bytes instead of 48 (issue 22, item 4).
        name: Box<Ident>,
    },
    /// `base[index]`: a map or list lookup.
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
    },
    /// `a ?? b ?? c`: the first operand whose lookups all succeed; flat like
    /// `Or`, and looser than `||`.
    Coalesce(Vec<Expr>),
    /// `join(xs, ",")`: a built-in function called inside an expression (a
    /// call standing as a statement is a bundle call, [`Call`]). The
    /// arguments are a boxed slice: with a `Vec` this variant was the one
    /// making every expression 56 bytes instead of 48 (issue 22, item 4).
    Call {
        func: Box<Ident>,
        args: Box<[Expr]>,
    },
    /// `file "/etc/x"` or `id "handle"`: a reference to a promise, used in
    /// `after` and `notify` (boxed: it is rare and would double the size of
    /// every expression).
    Ref(Box<RefExpr>),
    Not(Box<Expr>),
    /// `a && b && c`: a chain is one node with all its operands, so a long
    /// chain does not make a deep tree.
    And(Vec<Expr>),
    /// `a || b || c`, flat like `And`.
    Or(Vec<Expr>),
    Compare {
        op: CompareOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
}

/// The parts of a reference expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefExpr {
    pub kind: Ident,
    pub target: StrLit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `==`
    Eq,
    /// `!=`
    NotEq,
    /// `=~`
    Match,
    /// `in`
    In,
}

impl CompareOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CompareOp::Eq => "==",
            CompareOp::NotEq => "!=",
            CompareOp::Match => "=~",
            CompareOp::In => "in",
        }
    }
}

/// A template tag inside a string or template file (LANGUAGE.md section 12):
/// `{% for x in xs %}`, `{% if c %}`, `{% elif c %}`, `{% else %}`,
/// `{% endfor %}`, `{% endif %}`. The span covers `{%` to `%}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tag {
    pub kind: TagKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TagKind {
    For {
        key: Option<Ident>,
        var: Ident,
        iter: Expr,
    },
    If(Expr),
    Elif(Expr),
    Else,
    EndFor,
    EndIf,
}

impl TagKind {
    /// The tag's word as written: `for`, `if`, `endif`...
    pub fn word(&self) -> &'static str {
        match self {
            TagKind::For { .. } => "for",
            TagKind::If(_) => "if",
            TagKind::Elif(_) => "elif",
            TagKind::Else => "else",
            TagKind::EndFor => "endfor",
            TagKind::EndIf => "endif",
        }
    }
}

/// One parsed `*.test.policy` file (LANGUAGE.md section 16): imports of
/// the policy under test and `test` blocks. Parsed by
/// [`crate::parse::parse_tests`], never as part of a policy.
#[derive(Clone, Debug, PartialEq)]
pub struct TestModule {
    pub file: FileId,
    pub items: Vec<TestItem>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TestItem {
    Import(Import),
    Test(TestDef),
    /// An item the parser could not make sense of.
    Error(Span),
}

/// `test "name" { facts {...}; define [...]; expect ...; }`.
#[derive(Clone, Debug, PartialEq)]
pub struct TestDef {
    pub name: StrLit,
    pub name_span: Span,
    pub stmts: Vec<TestStmt>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TestStmt {
    /// `facts { hostname = "web01"; sys.cpus = 4; datacenter = "eu-1"; }`.
    Facts {
        facts: Vec<TestFact>,
        span: Span,
    },
    /// `define [canary, web];`: classes set as with `policyvm run --define`.
    Define {
        classes: Vec<Ident>,
        span: Span,
    },
    /// `root = "fixtures/web";`: the fixture root `policyc test --run`
    /// copies and runs the VM on.
    Root {
        path: Expr,
        span: Span,
    },
    Expect(Expect),
    /// A statement the parser could not make sense of.
    Error(Span),
}

impl TestStmt {
    pub fn span(&self) -> Span {
        match self {
            TestStmt::Facts { span, .. }
            | TestStmt::Define { span, .. }
            | TestStmt::Root { span, .. }
            | TestStmt::Error(span) => *span,
            TestStmt::Expect(e) => e.span,
        }
    }
}

/// One fact of a test: `hostname = "web01"` (a `sys.` fact may be written
/// without its prefix), `sys.cpus = 4`, or a declared probe fact
/// `datacenter = "eu-1"` (also `facts.datacenter`).
#[derive(Clone, Debug, PartialEq)]
pub struct TestFact {
    pub name: Vec<Ident>,
    pub value: Expr,
    pub span: Span,
}

/// `expect TYPE "promiser" { attr = value; contains = "..."; }`,
/// `expect TYPE "promiser";` or `expect no TYPE "promiser";`.
#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
    /// `expect no`: the promise must not be active.
    pub absent: bool,
    pub kind: Ident,
    pub promiser: StrLit,
    pub promiser_span: Span,
    pub attrs: Vec<AttrStmt>,
    pub span: Span,
}
