//! The promise-type schema: every promise type, its attributes, their types,
//! defaults, which are required or mutually exclusive, and a one-line doc
//! string for each (LANGUAGE.md section 4).
//!
//! It is defined once, here in `converge-format`, because three parties read
//! it: the compiler's type checker, the language server's hover and
//! completion, and the VM's operators. Each promise type, attribute and fact
//! carries its bundle id beside it ([`crate::ids`] gathers them into the id
//! tables), and each attribute its [`AttrRole`].

/// The type of an attribute value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrType {
    String,
    Int,
    Bool,
    /// A permission mode, `0..=0o7777`, written in octal.
    Mode,
    /// Seconds, written `30s`, `5m`, `2h`.
    Duration,
    /// One of a fixed set of bare words (`installed`, `running`, ...).
    Enum(&'static [&'static str]),
    /// A list of values of one type.
    List(&'static AttrType),
    /// A reference to another promise: `file "/x"` or `id "handle"`.
    Ref,
    /// The name of a declared class (set by a promise outcome).
    Class,
}

impl AttrType {
    /// How the type is written in policy source and in messages.
    pub fn describe(&self) -> String {
        match self {
            AttrType::String => "string".to_owned(),
            AttrType::Int => "int".to_owned(),
            AttrType::Bool => "bool".to_owned(),
            AttrType::Mode => "mode".to_owned(),
            AttrType::Duration => "duration".to_owned(),
            AttrType::Enum(values) => values.join(" | "),
            AttrType::List(inner) => format!("list<{}>", inner.describe()),
            AttrType::Ref => "ref".to_owned(),
            AttrType::Class => "class".to_owned(),
        }
    }
}

/// The value an attribute has when the promise does not set it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultValue {
    /// Not set means "not managed": the VM leaves that property alone.
    Unmanaged,
    Str(&'static str),
    Int(i64),
    Bool(bool),
    Mode(u32),
    Duration(u64),
    /// An enum value.
    Word(&'static str),
    EmptyList,
    /// A list of enum values (`watch`'s `attributes`).
    Words(&'static [&'static str]),
}

impl DefaultValue {
    /// How the default is shown in hover text and docs.
    pub fn describe(&self) -> String {
        match self {
            DefaultValue::Unmanaged => "not managed".to_owned(),
            DefaultValue::Str(s) => format!("{s:?}"),
            DefaultValue::Int(i) => i.to_string(),
            DefaultValue::Bool(b) => b.to_string(),
            DefaultValue::Mode(m) => format!("0o{m:o}"),
            DefaultValue::Duration(secs) => format!("{secs}s"),
            DefaultValue::Word(w) => (*w).to_owned(),
            DefaultValue::EmptyList => "[]".to_owned(),
            DefaultValue::Words(words) => format!("[{}]", words.join(", ")),
        }
    }
}

/// What an attribute says, which decides who reads it: the one list of
/// relational attributes, read by the compiler's contradiction analysis,
/// the writer and the VM's run-time contradiction check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrRole {
    /// What the object should look like (`mode`, `content`, `state`...):
    /// two promises on one object that want different values contradict.
    State,
    /// How the promise relates to other promises (`after`, `notify`,
    /// `on_repaired`, `on_kept`, `on_failed`): the bundle carries these as
    /// fields of the promise, never as attribute values.
    Relation,
    /// About the promise, not the object (`id`, `comment`): never part of
    /// the object's state, never a contradiction.
    Annotation,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttrSpec {
    /// The attribute's id in a bundle (`docs/bytecode.md`, "Id tables"):
    /// one id per attribute name across every promise type, never reused
    /// or renumbered (`format/tests/ids.rs`).
    pub id: u16,
    pub name: &'static str,
    pub role: AttrRole,
    pub ty: AttrType,
    pub default: DefaultValue,
    pub doc: &'static str,
}

/// What the promiser of a promise type names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromiserKind {
    /// An absolute path (checked at compile time when known).
    AbsolutePath,
    /// A package, service, user or group name.
    Name,
    /// A free-form label (commands and reports).
    Label,
}

/// Why `name` cannot be the promiser of a package, service, user or group
/// promise, if it cannot: such names end up as arguments of `dpkg`,
/// `systemctl`, `useradd` and the like, so one that starts with `-` would
/// be read as an option (`-oAPT::...`), and one with `;`, `$`, spaces or
/// quotes has no business there (THREATS.md T21). This one function is the
/// grammar: the compiler refuses such names with it (E0213), and the VM
/// refuses them again before any backend sees them.
pub fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.len() > 255 {
        Some("it is longer than 255 bytes")
    } else if name.starts_with('-') {
        Some("it starts with `-`, which the tools behind it would read as an option")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._+@:-".contains(c))
    {
        Some("only letters, digits and `._+@:-` are allowed")
    } else {
        None
    }
}

/// Attributes whose value names a file of the policy tree that the
/// compiler embeds in the bundle (a blob constant, the verifier's rule).
pub const EMBEDDED_ATTRS: &[&str] = &["source", "rpm"];

/// The first bytes of every rpm package file (its "lead").
pub const RPM_LEAD_MAGIC: [u8; 4] = [0xed, 0xab, 0xee, 0xdb];

/// Why the content of a package file named by `attr` (`rpm`) is not one,
/// if it is not: the compiler says so (E0501 at the attribute, in `policyc
/// check` and at build time), and the VM checks again before any tool
/// sees the file.
pub fn package_file_problem(attr: &str, bytes: &[u8]) -> Option<String> {
    match attr {
        "rpm" if !bytes.starts_with(&RPM_LEAD_MAGIC) => Some(format!(
            "it is not an rpm package: its first bytes are not rpm's lead magic `ed ab ee db` ({} bytes{})",
            bytes.len(),
            if bytes.is_empty() { "" } else { ", starting with other bytes" }
        )),
        _ => None,
    }
}

/// A constraint between attributes of one promise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// This attribute must be set.
    Required(&'static str),
    /// Exactly one of these must be set.
    ExactlyOne(&'static [&'static str]),
    /// At most one of these may be set.
    AtMostOne(&'static [&'static str]),
    /// If the first is set, the second must be too.
    Requires(&'static str, &'static str),
    /// This attribute is required unless `ensure = absent`.
    RequiredWhenPresent(&'static str),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromiseType {
    /// The promise type's id in a bundle, never reused or renumbered.
    pub id: u16,
    pub name: &'static str,
    pub promiser: PromiserKind,
    pub doc: &'static str,
    /// Attributes specific to this type (the common ones are in [`COMMON`]).
    pub attrs: &'static [AttrSpec],
    pub rules: &'static [Rule],
}

impl PromiseType {
    /// An attribute of this type, or a common attribute, by name.
    pub fn attr(&self, name: &str) -> Option<&'static AttrSpec> {
        self.attrs.iter().chain(COMMON).find(|a| a.name == name)
    }

    /// Every attribute valid on this type: its own, then the common ones
    /// it does not override (`comment` on `user`).
    pub fn all_attrs(&self) -> impl Iterator<Item = &'static AttrSpec> {
        let own = self.attrs;
        own.iter().chain(
            COMMON
                .iter()
                .filter(|c| !own.iter().any(|a| a.name == c.name)),
        )
    }

    /// The role of one of its attributes (its own overrides a common one).
    pub fn role(&self, name: &str) -> Option<AttrRole> {
        self.attr(name).map(|a| a.role)
    }

    /// An attribute of this type, or a common attribute, by its bundle id.
    pub fn attr_by_id(&self, id: u16) -> Option<&'static AttrSpec> {
        self.attrs.iter().chain(COMMON).find(|a| a.id == id)
    }
}

/// A promise type by name.
pub fn promise_type(name: &str) -> Option<&'static PromiseType> {
    PROMISE_TYPES.iter().find(|t| t.name == name)
}

/// A promise type by its bundle id.
pub fn promise_type_by_id(id: u16) -> Option<&'static PromiseType> {
    PROMISE_TYPES.iter().find(|t| t.id == id)
}

/// Every attribute of every promise type, each name once, in id order:
/// the attribute id table.
pub fn attributes() -> Vec<&'static AttrSpec> {
    let mut all: Vec<&'static AttrSpec> = Vec::new();
    for spec in PROMISE_TYPES.iter().flat_map(PromiseType::all_attrs) {
        if !all.iter().any(|a| a.name == spec.name) {
            all.push(spec);
        }
    }
    all.sort_by_key(|a| a.id);
    all
}

/// An attribute of any promise type, by its bundle id.
pub fn attribute_by_id(id: u16) -> Option<&'static AttrSpec> {
    PROMISE_TYPES
        .iter()
        .flat_map(PromiseType::all_attrs)
        .find(|a| a.id == id)
}

/// The role of an attribute, by name (any promise type).
pub fn attr_role(name: &str) -> Option<AttrRole> {
    PROMISE_TYPES
        .iter()
        .flat_map(PromiseType::all_attrs)
        .find(|a| a.name == name)
        .map(|a| a.role)
}

/// Whether the attribute says what the object looks like (its
/// [`AttrRole::State`]), as opposed to relating promises or annotating one.
pub fn describes_state(name: &str) -> bool {
    attr_role(name) == Some(AttrRole::State)
}

/// Whether the attribute says what an object of promise type `kind` looks
/// like: as [`describes_state`], with the type's own overrides (`comment` is
/// state on `user`, an annotation elsewhere).
pub fn describes_state_in(kind: &str, name: &str) -> bool {
    promise_type(kind).and_then(|t| t.role(name)) == Some(AttrRole::State)
}

/// Promise types that edit one part of a file, and the attributes naming
/// that part: two `setting`s of different keys (`block`s of different
/// markers) on one file are different objects and never contradict; two of
/// the same part must agree on everything else. The compiler's and the
/// VM's contradiction checks share this table.
pub const PART_IDENTITY: &[(&str, &[&str])] =
    &[("setting", &["section", "key"]), ("block", &["marker"])];

/// The attributes naming the part of a file a promise of type `kind`
/// edits (empty for types whose promiser names the whole object).
pub fn part_identity(kind: &str) -> &'static [&'static str] {
    PART_IDENTITY
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or(&[], |(_, attrs)| attrs)
}

/// Attributes whose value no report, dry-run line or diagnostic may show
/// (THREATS.md T24): they are shown as [`HIDDEN_VALUE`].
pub const HIDDEN_ATTRS: &[&str] = &["password"];

/// What is shown instead of a hidden attribute's value.
pub const HIDDEN_VALUE: &str = "<password>";

/// Whether the value of attribute `name` must never be shown.
pub fn hides_value(name: &str) -> bool {
    HIDDEN_ATTRS.contains(&name)
}

const ENSURE_VALUES: &[&str] = &["present", "absent"];
const LINE_PLACES: &[&str] = &["top", "bottom"];
const PACKAGE_STATES: &[&str] = &["installed", "removed", "latest"];
/// The package toolsets `manager` may force (the VM's `backend::toolset`).
/// `manager` stays a string in bundles (bundles of format 2.x carry
/// `"apt"` as a string constant): the compiler checks a constant value
/// against this list (E0203), the VM any value.
pub const PACKAGE_MANAGERS: &[&str] = &["apt", "dnf", "rpm"];
const SERVICE_STATES: &[&str] = &["running", "stopped"];
const NOTIFY_ACTIONS: &[&str] = &["restart", "reload"];
const PROCESS_STATES: &[&str] = &["running", "absent"];
const MOUNT_STATES: &[&str] = &["mounted", "unmounted", "present", "absent"];
const MODULE_STATES: &[&str] = &["loaded", "absent"];
/// Signals a `process` promise may send: each ends a process that does not
/// handle it.
pub const SIGNALS: &[&str] = &["TERM", "INT", "QUIT", "HUP", "KILL", "USR1", "USR2", "ALRM"];

const fn attr(
    id: u16,
    name: &'static str,
    ty: AttrType,
    default: DefaultValue,
    doc: &'static str,
) -> AttrSpec {
    AttrSpec {
        id,
        name,
        role: AttrRole::State,
        ty,
        default,
        doc,
    }
}

/// A common attribute that is not part of the object's state.
const fn with_role(spec: AttrSpec, role: AttrRole) -> AttrSpec {
    AttrSpec { role, ..spec }
}

const ENSURE: AttrSpec = attr(
    1,
    "ensure",
    AttrType::Enum(ENSURE_VALUES),
    DefaultValue::Word("present"),
    "Whether the object exists (`present`) or must not (`absent`).",
);
const MODE: AttrSpec = attr(
    2,
    "mode",
    AttrType::Mode,
    DefaultValue::Unmanaged,
    "Permission bits, in octal (`0o644`); new files get 0o644 and directories 0o755.",
);
const OWNER: AttrSpec = attr(
    3, "owner",
    AttrType::String,
    DefaultValue::Unmanaged,
    "Owning user name; new objects are owned by the VM's user, existing ones are left alone unless set.",
);
const GROUP: AttrSpec = attr(
    4,
    "group",
    AttrType::String,
    DefaultValue::Unmanaged,
    "Owning group name; new objects get the VM's group, existing ones are left alone unless set.",
);

const HOST: AttrSpec = with_role(
    attr(
        102,
        "host",
        AttrType::Bool,
        DefaultValue::Bool(false),
        "Under `--root`, run the command (a `command`'s argv, a `file`'s `validate`) on the host rather than chrooted into the root.",
    ),
    AttrRole::Annotation,
);

/// `comment` on a `user` is the account's GECOS field (LANGUAGE.md section
/// 13, as in Puppet and Ansible): there it says what the object looks like,
/// so it overrides the common annotation of the same name and id with the
/// state role (two promises giving one user different comments contradict).
const USER_COMMENT: AttrSpec = attr(
    11,
    "comment",
    AttrType::String,
    DefaultValue::Unmanaged,
    "The GECOS field of /etc/passwd (the user's full name); on `user` this is state, not only a note about the promise.",
);

/// `comment` on a `setting` is the comment prefix of the file's format
/// (`#`, `;` in php.ini): it decides which lines are active, so it is state
/// there and overrides the common annotation of the same name and id, as
/// [`USER_COMMENT`] does.
const SETTING_COMMENT: AttrSpec = attr(
    11,
    "comment",
    AttrType::String,
    DefaultValue::Str("#"),
    "The comment prefix of the file's format (`;` in php.ini): lines starting with it (after blanks) are not active and are left alone; extra active copies of the key get it prepended.",
);

/// Attributes every promise type accepts.
pub const COMMON: &[AttrSpec] = &[
    with_role(
        attr(
            5,
            "id",
            AttrType::String,
            DefaultValue::Unmanaged,
            "A handle other promises can name with `id \"handle\"` in `after` and `notify`.",
        ),
        AttrRole::Annotation,
    ),
    with_role(
        attr(
            6,
            "after",
            AttrType::List(&AttrType::Ref),
            DefaultValue::EmptyList,
            "Promises that must be applied before this one.",
        ),
        AttrRole::Relation,
    ),
    with_role(
        attr(
            7,
            "notify",
            AttrType::List(&AttrType::Ref),
            DefaultValue::EmptyList,
            "Promises to trigger when this one is repaired (a service is restarted).",
        ),
        AttrRole::Relation,
    ),
    with_role(
        attr(
            8,
            "on_repaired",
            AttrType::Class,
            DefaultValue::Unmanaged,
            "A class defined for the rest of the run when this promise is repaired.",
        ),
        AttrRole::Relation,
    ),
    with_role(
        attr(
            9,
            "on_kept",
            AttrType::Class,
            DefaultValue::Unmanaged,
            "A class defined for the rest of the run when this promise was already kept.",
        ),
        AttrRole::Relation,
    ),
    with_role(
        attr(
            10,
            "on_failed",
            AttrType::Class,
            DefaultValue::Unmanaged,
            "A class defined for the rest of the run when this promise fails.",
        ),
        AttrRole::Relation,
    ),
    with_role(
        attr(
            11,
            "comment",
            AttrType::String,
            DefaultValue::Unmanaged,
            "Why this promise exists; shown in reports.",
        ),
        AttrRole::Annotation,
    ),
];

/// Every promise type of LANGUAGE.md section 4.
pub const PROMISE_TYPES: &[PromiseType] = &[
    PromiseType {
        id: 1,
        name: "file",
        promiser: PromiserKind::AbsolutePath,
        doc: "A regular file: existence, content, mode and ownership.",
        attrs: &[
            ENSURE,
            attr(
                12, "content",
                AttrType::String,
                DefaultValue::Unmanaged,
                "The whole content of the file.",
            ),
            attr(
                13, "source",
                AttrType::String,
                DefaultValue::Unmanaged,
                "A file next to the policy, embedded at compile time, copied verbatim.",
            ),
            attr(
                14, "template",
                AttrType::String,
                DefaultValue::Unmanaged,
                "A file next to the policy, embedded at compile time; `${...}` is expanded on the host.",
            ),
            MODE,
            OWNER,
            GROUP,
            attr(
                15, "backup",
                AttrType::Bool,
                DefaultValue::Bool(false),
                "Keep the previous content as a backup when the file is rewritten: in the VM's state directory (`backups/`, the newest 5 per file, at most 16 MiB each), never beside the file.",
            ),
            attr(
                100, "create",
                AttrType::Bool,
                DefaultValue::Bool(true),
                "Create the file when it is missing; `false` only manages an existing file (a missing one is skipped: \"absent and create = false\").",
            ),
            attr(
                101, "validate",
                AttrType::List(&AttrType::String),
                DefaultValue::Unmanaged,
                "An argv run on the staged new content before it replaces the file; the argv element `%s` is the staged copy's path. A non-zero exit fails the promise: the file is untouched and nothing is notified.",
            ),
            HOST,
        ],
        rules: &[Rule::AtMostOne(&["content", "source", "template"])],
    },
    PromiseType {
        id: 2,
        name: "directory",
        promiser: PromiserKind::AbsolutePath,
        doc: "A directory: existence, mode, ownership, and optionally no unmanaged entries.",
        attrs: &[
            ENSURE,
            MODE,
            OWNER,
            GROUP,
            attr(
                16, "purge",
                AttrType::Bool,
                DefaultValue::Bool(false),
                "Remove entries no promise manages; when false they are only reported as unmanaged.",
            ),
            attr(
                13, "source",
                AttrType::String,
                DefaultValue::Unmanaged,
                "A directory of the policy tree, embedded at compile time and copied recursively (binary files included; links inside it are refused); entries it does not have are unmanaged (removed with `purge`).",
            ),
            attr(
                120, "recurse",
                AttrType::Bool,
                DefaultValue::Bool(false),
                "Apply `mode_files`, `mode_dirs`, `owner` and `group` to the whole tree; links inside are never followed.",
            ),
            attr(
                121, "mode_files",
                AttrType::Mode,
                DefaultValue::Unmanaged,
                "With `recurse` or `source`: the mode of every regular file below the directory (a copied file otherwise gets 0o644, or 0o755 when its source is executable).",
            ),
            attr(
                122, "mode_dirs",
                AttrType::Mode,
                DefaultValue::Unmanaged,
                "With `recurse` or `source`: the mode of every directory below the top one (by default `mode`, else 0o755).",
            ),
            attr(
                123, "depth",
                AttrType::Int,
                DefaultValue::Unmanaged,
                "With `recurse`: how many levels below the directory are managed (1 = its direct children only); unlimited when not set.",
            ),
        ],
        rules: &[Rule::Requires("depth", "recurse")],
    },
    PromiseType {
        id: 3,
        name: "link",
        promiser: PromiserKind::AbsolutePath,
        doc: "A symbolic link.",
        attrs: &[
            ENSURE,
            attr(
                17, "target",
                AttrType::String,
                DefaultValue::Unmanaged,
                "Where the link points, written verbatim (read inside the root, as in a chroot).",
            ),
        ],
        rules: &[Rule::RequiredWhenPresent("target")],
    },
    PromiseType {
        id: 4,
        name: "line",
        promiser: PromiserKind::AbsolutePath,
        doc: "One line of an existing or promised file.",
        attrs: &[
            attr(
                18, "present",
                AttrType::String,
                DefaultValue::Unmanaged,
                "This exact line exists; appended at the end if missing.",
            ),
            attr(
                19, "absent",
                AttrType::String,
                DefaultValue::Unmanaged,
                "No line equals this; every copy is removed.",
            ),
            attr(
                20, "replace",
                AttrType::String,
                DefaultValue::Unmanaged,
                "A regex; every match on each line is replaced by `with`.",
            ),
            attr(
                21, "with",
                AttrType::String,
                DefaultValue::Unmanaged,
                "The replacement for `replace`; `$1`/`${name}` are capture groups (write it as r\"...\").",
            ),
            attr(
                140, "insert_after",
                AttrType::String,
                DefaultValue::Unmanaged,
                "A regex: a missing `present` line goes right after the LAST line it matches; appended at the end when none does.",
            ),
            attr(
                141, "insert_before",
                AttrType::String,
                DefaultValue::Unmanaged,
                "A regex: a missing `present` line goes right before the LAST line it matches; appended at the end when none does.",
            ),
            attr(
                142, "at",
                AttrType::Enum(LINE_PLACES),
                DefaultValue::Unmanaged,
                "Where a missing `present` line goes: `top` (line 1) or `bottom` (appended, the default).",
            ),
            attr(
                143, "replace_comments",
                AttrType::Bool,
                DefaultValue::Bool(false),
                "Let `replace` rewrite commented-out lines too (first non-blank character `#` or `;`); by default they are left alone.",
            ),
        ],
        rules: &[
            Rule::ExactlyOne(&["present", "absent", "replace"]),
            Rule::Requires("replace", "with"),
            Rule::Requires("with", "replace"),
            Rule::AtMostOne(&["insert_after", "insert_before", "at"]),
            Rule::Requires("insert_after", "present"),
            Rule::Requires("insert_before", "present"),
            Rule::Requires("at", "present"),
            Rule::Requires("replace_comments", "replace"),
        ],
    },
    PromiseType {
        id: 5,
        name: "package",
        promiser: PromiserKind::Name,
        doc: "A software package, through the host's package manager.",
        attrs: &[
            attr(
                22, "state",
                AttrType::Enum(PACKAGE_STATES),
                DefaultValue::Word("installed"),
                "`installed`, `removed`, or `latest` (upgraded whenever a newer version exists).",
            ),
            attr(
                23, "version",
                AttrType::String,
                DefaultValue::Unmanaged,
                "An exact version to install (`apt-get install name=version`, `dnf install name-version`); apt: the installed version must equal it; rpm: `[EPOCH:]VERSION[-RELEASE]`, the parts written must compare equal by rpm's rules.",
            ),
            attr(
                24, "manager",
                AttrType::String,
                DefaultValue::Unmanaged,
                "The toolset: `apt` (dpkg/apt), `dnf` (rpm/dnf) or `rpm` (rpm alone: package files and removals); by default from the root's /etc/os-release (`ID`, then `ID_LIKE`): the Debian family gets apt, the Red Hat family (rhel, fedora, centos, rocky, almalinux) dnf.",
            ),
            attr(
                25, "deb",
                AttrType::String,
                DefaultValue::Unmanaged,
                "A `.deb` file inside the root to install with `dpkg --install` instead of from the apt repositories (as Ansible's `apt: deb=`).",
            ),
            attr(
                211, "rpm",
                AttrType::String,
                DefaultValue::Unmanaged,
                "An `.rpm` file of the policy tree, embedded at compile time, installed with `dnf install FILE` (`rpm -U` with `manager = \"rpm\"`) instead of from the repositories.",
            ),
            attr(
                193, "update_cache_age",
                AttrType::Duration,
                DefaultValue::Unmanaged,
                "Refresh the apt index (`apt-get update`, at most once per run, before the batch) when its newest file in /var/lib/apt/lists is older than this, or missing (as Ansible's `cache_valid_time`).",
            ),
        ],
        rules: &[Rule::AtMostOne(&["deb", "rpm"])],
    },
    PromiseType {
        id: 6,
        name: "service",
        promiser: PromiserKind::Name,
        doc: "A system service: running or stopped, enabled at boot or not.",
        attrs: &[
            attr(
                22, "state",
                AttrType::Enum(SERVICE_STATES),
                DefaultValue::Unmanaged,
                "`running` or `stopped`.",
            ),
            attr(
                26, "enabled",
                AttrType::Bool,
                DefaultValue::Unmanaged,
                "Whether the service starts at boot.",
            ),
            attr(
                24, "manager",
                AttrType::String,
                DefaultValue::Unmanaged,
                "The service manager, `systemd` or `runit`; by default systemd when /run/systemd/system exists in the root, else runit when /etc/runit or /etc/service does, else systemd.",
            ),
            attr(
                27, "on_notify",
                AttrType::Enum(NOTIFY_ACTIONS),
                DefaultValue::Word("restart"),
                "What a notification does to the running service: `restart` it or `reload` its configuration.",
            ),
            attr(
                28, "service_dir",
                AttrType::String,
                DefaultValue::Str("/etc/service"),
                "runit: the directory runsvdir watches; the service is enabled when it has a link there.",
            ),
            attr(
                29, "service_src",
                AttrType::String,
                DefaultValue::Str("/etc/sv"),
                "runit: the directory holding the service definition (`NAME/run`) that enabling links to.",
            ),
        ],
        rules: &[],
    },
    PromiseType {
        id: 7,
        name: "command",
        promiser: PromiserKind::Label,
        doc: "A command run without a shell; convergent only with `unless` or `creates`.",
        attrs: &[
            attr(
                30, "run",
                AttrType::List(&AttrType::String),
                DefaultValue::Unmanaged,
                "The argv to run (no shell).",
            ),
            attr(
                31, "unless",
                AttrType::List(&AttrType::String),
                DefaultValue::Unmanaged,
                "An argv; the command is skipped when it exits 0.",
            ),
            attr(
                32, "creates",
                AttrType::String,
                DefaultValue::Unmanaged,
                "A path; the command is skipped when it exists.",
            ),
            attr(
                33, "timeout",
                AttrType::Duration,
                DefaultValue::Duration(60),
                "How long the command may run before it is killed and fails.",
            ),
            attr(
                34, "cwd",
                AttrType::String,
                DefaultValue::Unmanaged,
                "Working directory (inside the root).",
            ),
            HOST,
        ],
        rules: &[Rule::Required("run")],
    },
    PromiseType {
        id: 8,
        name: "user",
        promiser: PromiserKind::Name,
        doc: "A local user account.",
        attrs: &[
            ENSURE,
            attr(35, "uid", AttrType::Int, DefaultValue::Unmanaged, "Numeric user id."),
            attr(36, "shell", AttrType::String, DefaultValue::Unmanaged, "Login shell."),
            attr(37, "home", AttrType::String, DefaultValue::Unmanaged, "Home directory."),
            attr(
                38, "groups",
                AttrType::List(&AttrType::String),
                DefaultValue::Unmanaged,
                "Supplementary groups, converged as a set.",
            ),
            attr(
                39, "gid",
                AttrType::Int,
                DefaultValue::Unmanaged,
                "Primary group, by id (or `group`, by name; not both).",
            ),
            attr(
                4, "group",
                AttrType::String,
                DefaultValue::Unmanaged,
                "Primary group, by name (or `gid`); a `group` promise of the policy for it is applied first.",
            ),
            attr(
                190, "password",
                AttrType::String,
                DefaultValue::Unmanaged,
                "The password as a crypt(3) hash (`$y$...`, `$6$...`, `!` to lock), set with `chpasswd -e`; never shown in reports (a `secret` once secrets exist).",
            ),
            attr(
                191, "system",
                AttrType::Bool,
                DefaultValue::Bool(false),
                "Create it as a system account (`--system`: an id from the system range, no password aging); only read when it is created.",
            ),
            USER_COMMENT,
        ],
        rules: &[Rule::AtMostOne(&["gid", "group"])],
    },
    PromiseType {
        id: 9,
        name: "group",
        promiser: PromiserKind::Name,
        doc: "A local group.",
        attrs: &[
            ENSURE,
            attr(39, "gid", AttrType::Int, DefaultValue::Unmanaged, "Numeric group id."),
            attr(
                191, "system",
                AttrType::Bool,
                DefaultValue::Bool(false),
                "Create it as a system group (`--system`: an id from the system range); only read when it is created.",
            ),
            attr(
                192, "members",
                AttrType::List(&AttrType::String),
                DefaultValue::Unmanaged,
                "Its supplementary members, converged as a set (`gpasswd -M`): missing ones added, others removed; each must be an existing user.",
            ),
        ],
        rules: &[],
    },
    PromiseType {
        id: 10,
        name: "report",
        promiser: PromiserKind::Label,
        doc: "A message printed in the run report when the promise is active.",
        attrs: &[attr(
            40, "message",
            AttrType::String,
            DefaultValue::Unmanaged,
            "The text to report.",
        )],
        rules: &[Rule::Required("message")],
    },
    PromiseType {
        id: 11,
        name: "setting",
        promiser: PromiserKind::AbsolutePath,
        doc: "One key's value in a keyword or key=value file (sshd_config, sysctl.conf, login.defs, php.ini, systemd drop-ins), optionally in an ini `[section]`; only active lines count, other active copies of the key are commented out.",
        attrs: &[
            attr(
                144, "key",
                AttrType::String,
                DefaultValue::Unmanaged,
                "The key (a keyword in sshd_config/login.defs, compared case-insensitively there; exact otherwise).",
            ),
            attr(
                145, "value",
                AttrType::String,
                DefaultValue::Unmanaged,
                "The key's value; an active `key = value` line (blanks around the separator allowed) holding it is kept.",
            ),
            attr(
                146, "separator",
                AttrType::String,
                DefaultValue::Str("="),
                "Written between key and value in a new line: `\" \"` for sshd_config and login.defs (a `Match`/`Host` line is then a header too), `=` or `\" = \"` for sysctl.conf, ini files and systemd drop-ins.",
            ),
            attr(
                147, "section",
                AttrType::String,
                DefaultValue::Unmanaged,
                "The ini `[section]` (its name, without brackets) the key belongs to; unset means the part before the first header. A missing section is appended at the end.",
            ),
            SETTING_COMMENT,
        ],
        rules: &[Rule::Required("key"), Rule::Required("value")],
    },
    PromiseType {
        id: 12,
        name: "block",
        promiser: PromiserKind::AbsolutePath,
        doc: "Exactly these lines between `# BEGIN marker` and `# END marker` (whole lines at column 0), as Ansible's blockinfile: a present block is rewritten in place, a missing one appended at the end.",
        attrs: &[
            attr(
                148, "lines",
                AttrType::List(&AttrType::String),
                DefaultValue::Unmanaged,
                "The block's lines, in order; a line removed from the list disappears from the file.",
            ),
            attr(
                149, "marker",
                AttrType::String,
                DefaultValue::Unmanaged,
                "The text after `# BEGIN ` and `# END ` on the marker lines; one file can hold several blocks with different markers.",
            ),
        ],
        rules: &[Rule::Required("lines"), Rule::Required("marker")],
    },
    PromiseType {
        id: 13,
        name: "process",
        promiser: PromiserKind::Label,
        doc: "Processes whose command line matches a regex: running (started with an argv) or absent (signalled).",
        attrs: &[
            attr(
                160, "match",
                AttrType::String,
                DefaultValue::Unmanaged,
                "A regex matched against each process's command line (arguments joined by spaces); the VM and its ancestors never match.",
            ),
            attr(
                22, "state",
                AttrType::Enum(PROCESS_STATES),
                DefaultValue::Word("running"),
                "`running`: at least one (or `count`) matching process; `absent`: none (each is sent `signal`).",
            ),
            attr(
                161, "start",
                AttrType::List(&AttrType::String),
                DefaultValue::Unmanaged,
                "The argv that starts a missing process, detached (own session, stdio on /dev/null); chrooted into `--root`.",
            ),
            attr(
                162, "signal",
                AttrType::Enum(SIGNALS),
                DefaultValue::Word("TERM"),
                "The signal that makes a matching process exit (`state = absent`, or a surplus over `count`).",
            ),
            attr(
                163, "count",
                AttrType::Int,
                DefaultValue::Unmanaged,
                "With `state = running`: exactly this many matching processes (missing ones started, the newest surplus signalled).",
            ),
            attr(
                33, "timeout",
                AttrType::Duration,
                DefaultValue::Duration(10),
                "How long a started process may take to appear, and a signalled one to exit, before the promise fails.",
            ),
        ],
        rules: &[Rule::Required("match")],
    },
    PromiseType {
        id: 14,
        name: "mount",
        promiser: PromiserKind::AbsolutePath,
        doc: "A filesystem mount: its /etc/fstab entry and, on the real system, the live mount.",
        attrs: &[
            attr(
                165, "device",
                AttrType::String,
                DefaultValue::Unmanaged,
                "What is mounted: a device path, `UUID=...`, `LABEL=...`, `server:/export`, or a name such as `tmpfs`.",
            ),
            attr(
                166, "fstype",
                AttrType::String,
                DefaultValue::Unmanaged,
                "The filesystem type (`ext4`, `xfs`, `tmpfs`, `nfs`, ...); an unknown type is refused.",
            ),
            attr(
                167, "options",
                AttrType::List(&AttrType::String),
                DefaultValue::EmptyList,
                "Mount options, one per item (`[\"noatime\", \"nodev\"]`); none means `defaults`.",
            ),
            attr(
                22, "state",
                AttrType::Enum(MOUNT_STATES),
                DefaultValue::Word("mounted"),
                "`mounted` (fstab entry and live mount), `present` (fstab entry only), `unmounted` (not mounted, fstab untouched), `absent` (neither).",
            ),
        ],
        rules: &[],
    },
    PromiseType {
        id: 15,
        name: "kernel_module",
        promiser: PromiserKind::Name,
        doc: "A loadable kernel module: loaded or not, and whether that survives a reboot.",
        attrs: &[
            attr(
                22, "state",
                AttrType::Enum(MODULE_STATES),
                DefaultValue::Word("loaded"),
                "`loaded` (`modprobe`) or `absent` (`modprobe -r`).",
            ),
            attr(
                168, "persistent",
                AttrType::Bool,
                DefaultValue::Bool(true),
                "Also at boot: `/etc/modules-load.d/converge-NAME.conf` when loaded, a blacklist in `/etc/modprobe.d/converge-blacklist-NAME.conf` when absent; false leaves those files alone.",
            ),
        ],
        rules: &[],
    },
    PromiseType {
        id: 16,
        name: "sysctl",
        promiser: PromiserKind::Label,
        doc: "A kernel parameter (`net.ipv4.ip_forward`): its live value in /proc/sys and its value at boot.",
        attrs: &[
            attr(
                145, "value",
                AttrType::String,
                DefaultValue::Unmanaged,
                "The value, as `sysctl` shows it (blanks between fields are compared as one space).",
            ),
            attr(
                168, "persistent",
                AttrType::Bool,
                DefaultValue::Bool(true),
                "Also at boot: the key's own file `/etc/sysctl.d/60-converge-KEY.conf`; false leaves it alone.",
            ),
        ],
        rules: &[Rule::Required("value")],
    },
    // `watch` (issue 19, LANGUAGE.md section 15): ids 17 and 200-202.
    PromiseType {
        id: 17,
        name: "watch",
        promiser: PromiserKind::AbsolutePath,
        doc: "Change detection: records the digest and metadata of a file or tree in the VM's state directory and reports every entry added, removed or modified since the last run (outcome `changed`); the history is a hash chain whose head is in every report (docs/change-detection.md).",
        attrs: &[
            attr(
                120, "recurse",
                AttrType::Bool,
                DefaultValue::Bool(false),
                "Watch every entry below the directory too (links are recorded as links, never followed; at most 1,000,000 entries and 256 levels).",
            ),
            attr(
                200, "attributes",
                AttrType::List(&AttrType::Enum(WATCH_ATTRIBUTES)),
                DefaultValue::Words(WATCH_DEFAULT_ATTRIBUTES),
                "What is compared: `content` (SHA-256, re-read on every run), `mode`, `owner`, `group`, `links` (hard-link count), `size`, `mtime`.",
            ),
            attr(
                201, "exclude",
                AttrType::List(&AttrType::String),
                DefaultValue::EmptyList,
                "Globs of entries left out (`*.log`, `cache/**`): one without `/` matches an entry's name at any depth, one with `/` its path below the watched directory; an excluded directory is not entered.",
            ),
            with_role(
                attr(
                    202, "on_changed",
                    AttrType::Class,
                    DefaultValue::Unmanaged,
                    "A class defined for the rest of the run when the watch saw a change (outcome `changed`).",
                ),
                AttrRole::Relation,
            ),
        ],
        rules: &[],
    },
    // Neighbour watch (issue 19, item 3; docs/promise-types.md): type 18,
    // attributes 203-205.
    PromiseType {
        id: 18,
        name: "neighbours",
        promiser: PromiserKind::Label,
        doc: "Watches other hosts' watch histories: before each run the agent fetches each neighbour's latest signed report from the collector; this promise verifies it with the neighbour's key and checks its history extends the head seen last, so a rewrite is seen even if the collector hides it.",
        attrs: &[
            attr(
                203, "hosts",
                AttrType::List(&AttrType::String),
                DefaultValue::EmptyList,
                "The inventory names of the hosts to watch, e.g. `neighbours(inventory, 3)`.",
            ),
            attr(
                204, "on_rewrite",
                AttrType::Class,
                DefaultValue::Unmanaged,
                "A class defined for the rest of the run when a neighbour's history was rewritten, went backwards, cannot be verified or vanished, or its report's signature is bad.",
            ),
            with_role(
                attr(
                    205, "report_keys",
                    AttrType::List(&AttrType::String),
                    DefaultValue::EmptyList,
                    "Filled by the compiler from the inventory, never written: `NAME KEY [KEY...]` per inventory host, the report keys (current, then previous) a neighbour's report may be signed with.",
                ),
                AttrRole::Annotation,
            ),
        ],
        rules: &[Rule::Required("hosts")],
    },
    // Two-way verification (issue 25, LANGUAGE.md section 17): type 19,
    // attributes 206-210.
    PromiseType {
        id: 19,
        name: "unmanaged",
        promiser: PromiserKind::Label,
        doc: "Two-way verification: after the run's other promises of the type it names (`\"package\"`, `\"service\"`, `\"user\"` or `\"group\"`), lists what the host has that no active promise names (packages installed on purpose, enabled services, local accounts in an id range), reports each entry and, with `action = remove`, removes them within `max_remove` (docs/promise-types.md).",
        attrs: &[
            attr(
                206, "action",
                AttrType::Enum(UNMANAGED_ACTIONS),
                DefaultValue::Word("report"),
                "`report` lists the extra entries; `remove` also removes them (each a repair), refused when a promise of the type failed or was skipped in the run, or when more than `max_remove` would go.",
            ),
            attr(
                207, "ignore",
                AttrType::List(&AttrType::String),
                DefaultValue::EmptyList,
                "Globs of names never reported nor removed (`linux-image-*`, `converge-*`): `*`, `?`, `[...]` and `{a,b}` over the whole name.",
            ),
            attr(
                208, "min_id",
                AttrType::Int,
                DefaultValue::Int(UNMANAGED_MIN_ID),
                "`user` and `group`: the lowest uid or gid considered (local accounts; system ones are below).",
            ),
            attr(
                209, "max_id",
                AttrType::Int,
                DefaultValue::Int(UNMANAGED_MAX_ID),
                "`user` and `group`: the highest uid or gid considered (`nobody`, 65534, is above).",
            ),
            attr(
                210, "max_remove",
                AttrType::Int,
                DefaultValue::Int(UNMANAGED_MAX_REMOVE),
                "With `action = remove`: the most entries one run may remove; more and nothing is removed (an accidental empty policy never uninstalls a host).",
            ),
        ],
        rules: &[],
    },
];

/// The promise types an `unmanaged` promise can name (its promiser).
pub const UNMANAGED_TYPES: &[&str] = &["package", "service", "user", "group"];

/// What an `unmanaged` promise does with the extra entries (`action`).
pub const UNMANAGED_ACTIONS: &[&str] = &["report", "remove"];

/// The default `min_id` of an `unmanaged "user"` or `"group"`: Debian's
/// and Red Hat's first id for people (`FIRST_UID`, `UID_MIN`).
pub const UNMANAGED_MIN_ID: i64 = 1000;

/// The default `max_id`: the last id `adduser` gives people on Debian
/// (`LAST_UID`), below `nobody` (65534).
pub const UNMANAGED_MAX_ID: i64 = 59999;

/// The default `max_remove` (LANGUAGE.md section 17).
pub const UNMANAGED_MAX_REMOVE: i64 = 10;

/// The attribute of a `neighbours` promise the compiler fills from the
/// inventory; a policy that sets it is refused.
pub const NEIGHBOUR_KEYS_ATTR: &str = "report_keys";

/// Outcome classes a bundle carries as attribute values (a word constant)
/// rather than as fields of the promise: `on_repaired`, `on_kept` and
/// `on_failed` are fields of every promise; `on_changed` belongs to
/// `watch` alone (format 2.4).
pub const CLASS_ATTRIBUTES: &[&str] = &["on_changed"];

/// What a `watch` promise can compare (its `attributes`).
pub const WATCH_ATTRIBUTES: &[&str] = &[
    "content", "mode", "owner", "group", "links", "size", "mtime",
];

/// What a `watch` compares when `attributes` is not set.
pub const WATCH_DEFAULT_ATTRIBUTES: &[&str] = &["content", "mode", "owner", "group"];

/// A host fact the VM gathers (`sys.*`), known to the compiler by name and
/// type (LANGUAGE.md section 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FactSpec {
    /// The fact's id in a bundle (`fact` instructions, run-time loops),
    /// never reused or renumbered.
    pub id: u16,
    /// The full dotted name, `sys.hostname`.
    pub name: &'static str,
    pub ty: AttrType,
    pub doc: &'static str,
}

/// Every fact of LANGUAGE.md section 3.
pub const FACTS: &[FactSpec] = &[
    FactSpec {
        id: 1,
        name: "sys.hostname",
        ty: AttrType::String,
        doc: "The short host name.",
    },
    FactSpec {
        id: 2,
        name: "sys.fqdn",
        ty: AttrType::String,
        doc: "The fully qualified domain name.",
    },
    FactSpec {
        id: 3,
        name: "sys.os",
        ty: AttrType::String,
        doc: "The kernel, e.g. \"linux\".",
    },
    FactSpec {
        id: 4,
        name: "sys.os_family",
        ty: AttrType::String,
        doc: "The OS family from /etc/os-release (\"debian\", \"redhat\", \"alpine\", ...).",
    },
    FactSpec {
        id: 5,
        name: "sys.os_release",
        ty: AttrType::String,
        doc: "The OS version from /etc/os-release (VERSION_ID).",
    },
    FactSpec {
        id: 6,
        name: "sys.arch",
        ty: AttrType::String,
        doc: "The CPU architecture (\"x86_64\", \"aarch64\").",
    },
    FactSpec {
        id: 7,
        name: "sys.ipv4",
        ty: AttrType::List(&AttrType::String),
        doc: "The host's IPv4 addresses.",
    },
    FactSpec {
        id: 8,
        name: "sys.cpus",
        ty: AttrType::Int,
        doc: "The number of CPUs.",
    },
    FactSpec {
        id: 9,
        name: "sys.memory_mb",
        ty: AttrType::Int,
        doc: "Total memory in MiB.",
    },
    FactSpec {
        id: 10,
        name: "sys.time.weekday",
        ty: AttrType::String,
        doc: "The weekday in local time (\"monday\" .. \"sunday\").",
    },
    FactSpec {
        id: 11,
        name: "sys.time.hour",
        ty: AttrType::Int,
        doc: "The hour in local time, 0..23.",
    },
];

/// A fact by its full dotted name.
pub fn fact(name: &str) -> Option<&'static FactSpec> {
    FACTS.iter().find(|f| f.name == name)
}

/// A fact by its bundle id.
pub fn fact_by_id(id: u32) -> Option<&'static FactSpec> {
    FACTS.iter().find(|f| u32::from(f.id) == id)
}

/// OS families the VM recognises (from `ID` and `ID_LIKE` in os-release).
pub const OS_FAMILIES: &[&str] = &["debian", "redhat", "alpine", "arch", "suse", "gentoo"];

/// CPU architectures the VM names as hard classes.
pub const ARCHITECTURES: &[&str] = &[
    "x86_64", "aarch64", "armv7l", "i686", "riscv64", "ppc64le", "s390x",
];

pub const WEEKDAYS: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// Whether the VM defines this class itself from facts (LANGUAGE.md section
/// 3): `any`, `linux`, an OS family, an architecture, a weekday, `hr00` ..
/// `hr23`, or `host_<hostname>`. The compiler knows these without a
/// declaration.
pub fn is_hard_class(name: &str) -> bool {
    matches!(name, "any" | "linux")
        || OS_FAMILIES.contains(&name)
        || ARCHITECTURES.contains(&name)
        || WEEKDAYS.contains(&name)
        || is_hour_class(name)
        || name.strip_prefix("host_").is_some_and(|h| !h.is_empty())
}

fn is_hour_class(name: &str) -> bool {
    name.strip_prefix("hr")
        .filter(|h| h.len() == 2 && h.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|h| h.parse::<u8>().ok())
        .is_some_and(|h| h < 24)
}

/// The fixed hard class names (everything but `host_*`), for suggestions and
/// completion.
pub fn hard_class_names() -> Vec<String> {
    let mut names: Vec<String> = ["any", "linux"].iter().map(|s| (*s).to_owned()).collect();
    names.extend(OS_FAMILIES.iter().map(|s| (*s).to_owned()));
    names.extend(ARCHITECTURES.iter().map(|s| (*s).to_owned()));
    names.extend(WEEKDAYS.iter().map(|s| (*s).to_owned()));
    names.extend((0..24).map(|h| format!("hr{h:02}")));
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique() {
        let mut types = HashSet::new();
        for t in PROMISE_TYPES {
            assert!(types.insert(t.name), "duplicate promise type {}", t.name);
            let mut attrs = HashSet::new();
            for a in t.all_attrs() {
                assert!(
                    attrs.insert(a.name),
                    "duplicate attribute {}.{}",
                    t.name,
                    a.name
                );
                assert!(!a.doc.is_empty(), "{}.{} has no doc", t.name, a.name);
            }
        }
    }

    /// Ids are what a bundle carries: zero is never assigned (a zeroed
    /// field is never valid), no two things of one kind share one, and an
    /// attribute name has the same id on every promise type.
    #[test]
    fn ids_are_unique_nonzero_and_one_per_attribute_name() {
        let mut types = HashSet::new();
        for t in PROMISE_TYPES {
            assert!(t.id != 0 && types.insert(t.id), "promise type id {}", t.id);
        }
        let mut facts = HashSet::new();
        for f in FACTS {
            assert!(f.id != 0 && facts.insert(f.id), "fact id {}", f.id);
        }
        let mut by_name = std::collections::HashMap::new();
        let mut by_id = std::collections::HashMap::new();
        for a in PROMISE_TYPES.iter().flat_map(PromiseType::all_attrs) {
            assert_ne!(a.id, 0, "{}", a.name);
            assert_eq!(*by_name.entry(a.name).or_insert(a.id), a.id, "{}", a.name);
            assert_eq!(*by_id.entry(a.id).or_insert(a.name), a.name, "id {}", a.id);
            // One role per name, but a type's own attribute may override
            // a common annotation (`comment` is GECOS on `user`).
            let overrides =
                COMMON.iter().any(|c| c.name == a.name && c.id == a.id) && !COMMON.contains(a);
            assert!(
                overrides || attr_role(a.name) == Some(a.role),
                "{} has one role",
                a.name
            );
        }
        assert_eq!(attributes().len(), by_name.len());
        for t in PROMISE_TYPES {
            assert_eq!(promise_type_by_id(t.id), Some(t));
            for a in t.all_attrs() {
                assert_eq!(t.attr_by_id(a.id), Some(a));
            }
        }
    }

    /// The one list of relational attributes.
    #[test]
    fn roles() {
        let not_state: Vec<&str> = attributes()
            .iter()
            .filter(|a| a.role != AttrRole::State)
            .map(|a| a.name)
            .collect();
        assert_eq!(
            not_state,
            [
                "id",
                "after",
                "notify",
                "on_repaired",
                "on_kept",
                "on_failed",
                "comment",
                "host",
                "on_changed",
                "report_keys"
            ]
        );
        assert!(describes_state("mode") && !describes_state("after"));
        assert!(!describes_state("no such attribute"));
    }

    #[test]
    fn rules_name_real_attributes() {
        for t in PROMISE_TYPES {
            let names: Vec<&str> = t
                .rules
                .iter()
                .flat_map(|r| match *r {
                    Rule::Required(a) | Rule::RequiredWhenPresent(a) => vec![a],
                    Rule::ExactlyOne(list) | Rule::AtMostOne(list) => list.to_vec(),
                    Rule::Requires(a, b) => vec![a, b],
                })
                .collect();
            for name in names {
                assert!(
                    t.attr(name).is_some(),
                    "{} rule names unknown {name}",
                    t.name
                );
            }
        }
    }

    #[test]
    fn hard_classes() {
        for name in [
            "any",
            "linux",
            "debian",
            "x86_64",
            "monday",
            "hr00",
            "hr23",
            "host_web01",
        ] {
            assert!(is_hard_class(name), "{name}");
        }
        for name in ["web", "hr24", "hr1", "host_", "Debian"] {
            assert!(!is_hard_class(name), "{name}");
        }
        assert!(hard_class_names().iter().all(|n| is_hard_class(n)));
        assert_eq!(fact("sys.ipv4").unwrap().ty.describe(), "list<string>");
    }

    #[test]
    fn lookup() {
        let file = promise_type("file").unwrap();
        assert_eq!(file.attr("mode").unwrap().ty, AttrType::Mode);
        assert_eq!(file.attr("notify").unwrap().ty.describe(), "list<ref>");
        assert!(file.attr("state").is_none());
        assert!(promise_type("files").is_none());
        let pkg = promise_type("package").unwrap();
        assert_eq!(
            pkg.attr("state").unwrap().ty.describe(),
            "installed | removed | latest"
        );
    }
}
