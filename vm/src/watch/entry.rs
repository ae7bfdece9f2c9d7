//! What `watch` records of one entry, and the database of one watched
//! path: every entry, sorted by path, in a compact binary form (postcard)
//! written with the one atomic write.

use serde::{Deserialize, Serialize};

/// The type of an entry. FIFOs, sockets and devices are recorded by type
/// and never opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntryKind {
    File,
    Dir,
    Link,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    /// Seen in a listing but its metadata could not be read.
    Unknown,
}

impl EntryKind {
    pub fn word(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "directory",
            EntryKind::Link => "link",
            EntryKind::Fifo => "fifo",
            EntryKind::Socket => "socket",
            EntryKind::CharDevice => "char device",
            EntryKind::BlockDevice => "block device",
            EntryKind::Unknown => "unknown",
        }
    }
}

/// What stands for an entry's content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Content {
    /// Not compared (a directory, a FIFO, content not watched).
    None,
    /// The SHA-256 of a regular file's bytes.
    Digest([u8; 32]),
    /// A link's target, escaped (never followed).
    Target(String),
    /// It could not be read, and why.
    Unreadable(String),
    /// It changed while it was read, twice.
    Unstable,
}

impl Content {
    pub fn describe(&self) -> String {
        match self {
            Content::None => "-".to_owned(),
            Content::Digest(d) => converge_format::chain::format_digest(d),
            Content::Target(t) => format!("-> {t}"),
            Content::Unreadable(why) => format!("unreadable ({why})"),
            Content::Unstable => "unstable (changed while it was read)".to_owned(),
        }
    }
}

/// One entry of a watched tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The policy path, its names escaped (`crate::rootfs::escape_name`).
    pub path: String,
    pub kind: EntryKind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u64,
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: u32,
    pub content: Content,
}

/// The database of one watched path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Database {
    /// The format of this file.
    pub version: u32,
    /// The watched path.
    pub path: String,
    /// What was compared (the promise's `attributes`, sorted) and left
    /// out (`exclude`): when either changes, a new baseline is taken.
    pub attributes: Vec<String>,
    pub exclude: Vec<String>,
    pub recurse: bool,
    /// Sorted by path.
    pub entries: Vec<Entry>,
}

pub const DATABASE_VERSION: u32 = 1;

impl Database {
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        postcard::to_allocvec(self).map_err(|e| format!("cannot encode the watch database: {e}"))
    }

    pub fn decode(bytes: &[u8]) -> Result<Database, String> {
        let db: Database = postcard::from_bytes(bytes)
            .map_err(|e| format!("the entries database is not readable: {e}"))?;
        if db.version != DATABASE_VERSION {
            return Err(format!("entries database version {}", db.version));
        }
        if !db.entries.windows(2).all(|w| match w {
            [a, b] => a.path < b.path,
            _ => true,
        }) {
            return Err("the entries database is not sorted".to_owned());
        }
        Ok(db)
    }

    /// Whether `other` watched the same things (else its entries are not
    /// comparable with these: a new baseline).
    pub fn same_selection(&self, other: &Database) -> bool {
        self.path == other.path
            && self.attributes == other.attributes
            && self.exclude == other.exclude
            && self.recurse == other.recurse
    }
}
