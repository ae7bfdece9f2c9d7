//! The registry of diagnostic codes. A code is stable forever: it is never
//! renumbered or reused, because CI configurations and SARIF baselines refer
//! to it. Ranges: `E00xx` syntax, `E01xx` names and imports, `E02xx` types,
//! `E03xx` contradictions and cycles, `E07xx` data files, `E08xx` the
//! inventory, `E10xx` secrets, `E11xx` policy tests (`policyc test`),
//! `W0xxx` warnings. Every code has a page
//! in `docs/src/diagnostics.md` (a test checks this).

use super::Severity;

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $severity:ident, $title:literal; )*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum Code {
            $( $(#[$doc])* $variant, )*
        }

        impl Code {
            /// Every code, in registry order.
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            /// The stable code, e.g. `E0001`.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code,)* }
            }

            /// The severity a diagnostic with this code has by default.
            pub fn severity(self) -> Severity {
                match self { $(Code::$variant => Severity::$severity,)* }
            }

            /// A short title for the whole class of problem (SARIF rule name,
            /// docs heading).
            pub fn title(self) -> &'static str {
                match self { $(Code::$variant => $title,)* }
            }
        }
    };
}

codes! {
    /// A token that the grammar does not allow at this point.
    UnexpectedToken = "E0001", Error, "unexpected token";
    /// The file ended inside an item.
    UnexpectedEof = "E0002", Error, "unexpected end of file";
    /// A character that starts no token.
    UnexpectedChar = "E0003", Error, "unexpected character";
    /// A string, raw string or heredoc without its closing quote.
    UnterminatedString = "E0004", Error, "unterminated string";
    /// A `/*` comment without `*/`.
    UnterminatedComment = "E0005", Error, "unterminated block comment";
    /// A backslash escape other than `\n \t \r \\ \" \$`.
    InvalidEscape = "E0006", Error, "invalid escape sequence";
    /// `${` without a closing `}` in the same string.
    UnterminatedInterpolation = "E0007", Error, "unterminated interpolation";
    /// `${...}` whose inside was not a dotted name. Since v0.2 `${...}` takes
    /// any expression and a malformed one is reported as `E0001`; the code
    /// stays reserved.
    InvalidInterpolation = "E0008", Error, "invalid interpolation";
    /// A malformed integer literal (`0o9`, `0x`, `12ab`).
    InvalidNumber = "E0009", Error, "invalid number";
    /// An integer or duration that does not fit in 64 bits.
    NumberTooLarge = "E0010", Error, "number too large";
    /// A duration with a unit other than `s`, `m`, `h`.
    InvalidDurationUnit = "E0011", Error, "invalid duration unit";
    /// Brackets, braces, parentheses or `!` nested deeper than the limit.
    NestingTooDeep = "E0012", Error, "nesting too deep";
    /// A template tag `{%` or comment `{#` without its `%}` or `#}`.
    UnterminatedTag = "E0013", Error, "unterminated template tag";
    /// `{% word %}` where `word` is none of `for`, `if`, `elif`, `else`,
    /// `endfor`, `endif`.
    UnknownTag = "E0014", Error, "unknown template tag";
    /// Template tags that do not nest: an unclosed `{% for %}`/`{% if %}`, a
    /// stray `{% endif %}`/`{% else %}`/`{% elif %}`/`{% endfor %}`, a second
    /// `{% else %}`, an `{% elif %}` after `{% else %}`.
    UnbalancedTags = "E0015", Error, "unbalanced template tags";

    /// An imported file that does not exist (or a `std/` file the stdlib lacks).
    ImportNotFound = "E0101", Error, "imported file not found";
    /// Files that import each other in a loop.
    ImportCycle = "E0102", Error, "import cycle";
    /// An import path with interpolation.
    ImportNotPlain = "E0103", Error, "import path must be a plain string";
    /// Two definitions of one name of one kind, or two `policy` blocks.
    DuplicateDefinition = "E0104", Error, "duplicate definition";
    /// A class name that is neither defined, declared nor a hard class.
    UndefinedClass = "E0105", Error, "undefined class";
    /// A name that is not a let, parameter or loop variable in scope.
    UndefinedVariable = "E0106", Error, "undefined variable";
    /// `use` of a body that does not exist.
    UndefinedBody = "E0107", Error, "undefined body";
    /// A call of a bundle that does not exist.
    UndefinedBundle = "E0108", Error, "undefined bundle";
    /// `sys.x` that is not a known fact.
    UnknownFact = "E0109", Error, "unknown fact";
    /// A promise type that does not exist.
    UnknownPromiseType = "E0110", Error, "unknown promise type";
    /// An attribute the promise type does not have.
    UnknownAttribute = "E0111", Error, "unknown attribute";
    /// `after`/`notify` naming a promise that the policy does not make.
    UnknownReference = "E0112", Error, "reference to no promise";
    /// A named argument that the bundle has no parameter for.
    UnknownParameter = "E0113", Error, "unknown parameter";
    /// Definitions that depend on themselves: classes, lets, bodies, bundle calls.
    DefinitionCycle = "E0114", Error, "definition cycle";

    /// A value of the wrong type.
    TypeMismatch = "E0201", Error, "type mismatch";
    /// A type name that does not exist.
    UnknownType = "E0202", Error, "unknown type";
    /// A word that is not one of the attribute's allowed values.
    InvalidEnumValue = "E0203", Error, "invalid value";
    /// A mode above 0o7777 or below zero.
    ModeOutOfRange = "E0204", Error, "mode out of range";
    /// A file-like promiser that is not an absolute path.
    RelativePath = "E0205", Error, "path is not absolute";
    /// A regular expression the regex engine rejects.
    InvalidRegex = "E0206", Error, "invalid regular expression";
    /// A required attribute is missing.
    MissingAttribute = "E0207", Error, "missing required attribute";
    /// Attributes that cannot be used together (two content sources).
    ConflictingAttributes = "E0208", Error, "conflicting attributes";
    /// Missing, extra or repeated arguments in a bundle call.
    WrongArguments = "E0209", Error, "wrong arguments";
    /// The same attribute set twice in one promise or body.
    DuplicateAttribute = "E0210", Error, "attribute set twice";
    /// An expression used where it cannot be: a class expression as a value,
    /// a comparison of two constants, a `for` over something not a list.
    InvalidExpression = "E0211", Error, "invalid expression";
    /// `on_repaired = c` where `c` is defined by an expression.
    NotAnOutcomeClass = "E0212", Error, "class cannot be set by an outcome";
    /// A package, service, user or group name that such names never are.
    InvalidName = "E0213", Error, "invalid name";
    /// A `file` promise's `validate` argv without an element that is
    /// exactly `%s` (the staged copy's path).
    ValidateWithoutStagedPath = "E0230", Error, "validate without %s";

    /// Two promises on one object want different values for one attribute,
    /// and some host can make both active.
    Contradiction = "E0301", Error, "contradictory promises";
    /// `ensure = absent` with another promise on that object or inside
    /// that path.
    AbsentConflict = "E0302", Error, "promise on an absent object";
    /// `line present X` with `line absent X`, or a line that the file's
    /// fixed content does not satisfy.
    LineContradiction = "E0303", Error, "contradictory line promises";
    /// `after`, `notify`, outcome classes and containment order promises
    /// in a loop.
    OrderingCycle = "E0304", Error, "dependency cycle";

    /// A `source` or `template` file that cannot be embedded in a bundle.
    EmbedFailed = "E0501", Error, "cannot embed file";

    /// A bug in the compiler itself (an analysis failed).
    InternalError = "E0900", Error, "internal compiler error";

    /// A `command` with neither `unless` nor `creates` runs every time the agent runs.
    NonConvergentCommand = "W0001", Warning, "command is not convergent";
    /// A `let` nobody reads.
    UnusedLet = "W0002", Warning, "unused let";
    /// A `body` nobody uses.
    UnusedBody = "W0003", Warning, "unused body";
    /// A `bundle` the policy never calls.
    UnusedBundle = "W0004", Warning, "unused bundle";
    /// A guard that no assignment of classes makes true.
    GuardNeverTrue = "W0005", Warning, "promise can never be active";
    /// A mode written in decimal (`644` instead of `0o644`).
    DecimalMode = "W0006", Warning, "mode written in decimal";
    /// Two promises on one object whose values depend on facts and may
    /// differ on some host; the VM refuses both there.
    PossibleContradiction = "W0007", Warning, "possible contradiction at run time";
    /// An `after`/`notify` reference whose target is computed from facts:
    /// the compiler cannot tell which promise it names, so it orders nothing.
    RuntimeReference = "W0008", Warning, "reference depends on host facts";

    /// An `import` of a file that is not a `.policy` file (a key, a
    /// configuration file): refused before it is read.
    ImportNotPolicy = "E0115", Error, "import of a file that is not policy";
    /// An `import`, `source` or `template` path that is absolute, that `..`
    /// takes out of the policy tree, or that a symbolic link leads out of it.
    OutsidePolicyTree = "E0502", Error, "path outside the policy tree";
    /// Expansion past a limit: bundle calls nested deeper than 64, or more
    /// than 500,000 instances (promises, calls, loop iterations).
    ExpansionLimit = "E0601", Error, "expansion limit reached";
    /// A guard question the solver could not answer within its budget: the
    /// policy is refused rather than passed unproven.
    TooComplexToProve = "E0602", Error, "too complex to prove";
    /// A `line` promise that would change its file on every run: a line
    /// with a line break, or a replacement whose output matches again.
    LineNeverSettles = "E0305", Error, "line promise never settles";

    /// A data file (`data("x.yaml")`) that is not valid TOML, YAML or JSON,
    /// nests too deeply, or holds too many values.
    DataSyntax = "E0701", Error, "malformed data file";
    /// A record in a data file without a field that has no default.
    DataMissingField = "E0702", Error, "missing field in data file";
    /// A key in a data file record that its type does not declare.
    DataUnknownField = "E0703", Error, "unknown field in data file";
    /// A value in a data file of another type than the declared one.
    DataTypeMismatch = "E0704", Error, "wrong type in data file";
    /// A key written twice in one map of a data file.
    DataDuplicateKey = "E0705", Error, "duplicate key in data file";
    /// A mode, duration or int in a data file that is of the right kind
    /// but not a valid value (out of range, not octal, unknown unit).
    DataInvalidValue = "E0706", Error, "invalid value in data file";
    /// A null or empty value in a data file where a value is required.
    DataMissingValue = "E0707", Error, "empty value in data file";
    /// A data file that cannot be read: unsupported extension, missing,
    /// not UTF-8, too large.
    DataUnreadable = "E0708", Error, "cannot read data file";

    /// A call of a function the language does not have (LANGUAGE.md
    /// section 11).
    UnknownFunction = "E0116", Error, "unknown function";
    /// A field a record type does not have: in a literal or an access.
    UnknownField = "E0117", Error, "unknown record field";
    /// A record literal where no type says which record it is.
    RecordNeedsType = "E0220", Error, "record literal without a type";
    /// A record literal that leaves out a field without a default.
    MissingField = "E0221", Error, "missing record field";
    /// A function called with the wrong number or types of arguments.
    BadArguments = "E0222", Error, "wrong arguments";
    /// `data(...)` anywhere but as the whole value of a `let` with a
    /// declared type, or with a path that is not a literal.
    DataOutsideLet = "E0223", Error, "`data` outside a typed let";
    /// A lookup of a key a compile-time map does not have, or an index past
    /// the end of a compile-time list, without `??`.
    KeyNotFound = "E0224", Error, "key not found";
    /// A lookup whose key only the host knows, without `??`, on a host
    /// where it can be missing (LANGUAGE.md section 11).
    MaybeMissing = "E0225", Error, "lookup may be missing on a host";
    /// A `template` whose path is not a literal string (the compiler must
    /// read and check every template).
    TemplatePathNotLiteral = "E0226", Error, "template path is not a literal";
    /// A record type that contains itself.
    RecursiveType = "E0227", Error, "recursive record type";
    /// A value that cannot be used where it stands: a list or record
    /// interpolated into a string, a loop over a map without a key
    /// variable, an `{% if %}` on something that is not a condition.
    TemplateType = "E0228", Error, "value cannot be used here";

    /// A `fact` declaration the VM could not run: a type no probe output
    /// is parsed as, an empty argv, a word with `${...}`, a timeout that is
    /// not a duration from 1s to 60s (LANGUAGE.md section 15).
    InvalidProbe = "E0240", Error, "invalid probe declaration";
    /// `facts.NAME` read as a whole record or map: the VM reads probe
    /// facts a field or key at a time.
    ProbeFactWhole = "E0241", Error, "probe fact read whole";
    /// A glob in a `watch` promise's `exclude` that is not one (an
    /// unclosed `[` or `{`, an absolute path, empty).
    InvalidGlob = "E0250", Error, "invalid glob";
    /// An inventory (`inventory.toml`, LANGUAGE.md section 16) that is not
    /// TOML.
    InventorySyntax = "E0801", Error, "malformed inventory";
    /// An inventory entry of the wrong shape: an unknown or missing field,
    /// a value of the wrong type.
    InventoryShape = "E0802", Error, "inventory entry of the wrong shape";
    /// A host or group name the inventory does not accept.
    InventoryName = "E0803", Error, "invalid name in inventory";
    /// A host listed twice in the inventory, or two hosts whose names give
    /// one `host_` class.
    InventoryDuplicateHost = "E0804", Error, "host listed twice in inventory";
    /// A report key or age recipient in the inventory that is not one.
    InventoryBadKey = "E0805", Error, "invalid key in inventory";
    /// The inventory file exists but cannot be read.
    InventoryUnreadable = "E0806", Error, "cannot read inventory";
    /// A `host_NAME` class that names no host of the inventory.
    UnknownHost = "E0807", Error, "host not in inventory";
    /// A `group_NAME` class that names no group of the inventory.
    UnknownGroup = "E0808", Error, "group not in inventory";

    /// `neighbours(...)` or a `neighbours` promise without an inventory:
    /// the hosts to watch and their keys come from it.
    NeighboursWithoutInventory = "E0812", Error, "neighbour watch without an inventory";
    /// A `neighbours` promise that sets `report_keys`, which the compiler
    /// fills from the inventory.
    NeighbourKeysWritten = "E0813", Error, "report_keys is the compiler's";
    /// A value computed from a secret (LANGUAGE.md section 14) flowing
    /// anywhere but `file` content (or a `template`) and `user` password:
    /// a promiser, a path, a guard, a class, a `report`, a command's argv,
    /// any other attribute.
    SecretFlow = "E1001", Error, "secret flows where it may not";
    /// A `file` whose content is secret without a `mode`, or with one that
    /// gives others any permission.
    SecretFileMode = "E1002", Error, "secret file readable by others";
    /// `secret(...)` whose path is not a literal, or whose file is missing,
    /// too large, not an age file, or has a stem that cannot name a secret.
    SecretUnreadable = "E1003", Error, "cannot read secret file";
    /// Two secret files with one stem: every output names a secret by its
    /// stem, so two would be indistinguishable.
    SecretNameClash = "E1004", Error, "two secrets with one name";
    /// `policyc build` without an `--identity` that decrypts a secret.
    SecretNotDecrypted = "E1005", Error, "cannot decrypt secret";
    /// A secret the build cannot seal: no inventory, an entitled host
    /// without `age_recipient`, or no host entitled to it at all.
    SecretNoRecipient = "E1006", Error, "secret without recipients";

    /// A test's `facts` names a fact that is neither a `sys.` fact nor a
    /// `fact` the policy declares.
    UnknownTestFact = "E1101", Error, "unknown fact in a test";
    /// A test fact's value is not of the fact's type.
    TestFactType = "E1102", Error, "test fact of the wrong type";
    /// A fact, a `facts` or `root` statement, an expectation's attribute
    /// or a test name given twice.
    TestGivenTwice = "E1103", Error, "given twice in a test";
    /// A class in a test's `define` that the policy neither declares nor
    /// defines, and that is no hard class.
    UnknownTestClass = "E1104", Error, "unknown class in a test";
    /// `expect TYPE` with a promise type that does not exist.
    UnknownTestPromiseType = "E1105", Error, "unknown promise type in a test";
    /// An expectation checks an attribute its promise type does not have,
    /// or one a resolved promise does not carry (`after`, `notify`).
    UnknownTestAttribute = "E1106", Error, "unknown attribute in an expectation";
    /// An expectation's value is not of the attribute's type, is not a
    /// literal, or is a `matches` pattern that is not a regular expression.
    TestExpectationValue = "E1107", Error, "invalid expectation value";
    /// A test file whose imports hold no `policy` block: there is nothing
    /// to test.
    TestWithoutPolicy = "E1108", Error, "test file without a policy";
    /// A test's `root` is not a plain relative path to a directory of the
    /// policy tree.
    TestFixtureRoot = "E1109", Error, "invalid fixture root";
    /// A test without any `expect`: it could never fail.
    TestExpectsNothing = "E1110", Error, "test expects nothing";
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique_and_well_formed() {
        let mut seen = HashSet::new();
        for code in Code::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "duplicate code {s}");
            assert_eq!(s.len(), 5, "{s}");
            let prefix_ok = match code.severity() {
                Severity::Error => s.starts_with('E'),
                Severity::Warning => s.starts_with('W'),
            };
            assert!(prefix_ok, "{s} has the wrong prefix for its severity");
            assert!(s[1..].bytes().all(|b| b.is_ascii_digit()), "{s}");
        }
    }
}
