//! Host facts (`sys.*`) and the hard classes derived from them (LANGUAGE.md
//! section 3).
//!
//! With `--root DIR`, what describes the *system image* is read inside the
//! root — `ROOT/etc/os-release`, `ROOT/etc/hostname`, `ROOT/etc/hosts` — so
//! a container or image root is described as itself, and tests get
//! deterministic facts from a temporary root. What describes the *machine*
//! (CPUs, memory, addresses, the clock) is read from the running kernel.
//!
//! The root is read through [`RootFs`] like everything else in it: no link
//! is followed (a planted `ROOT/etc/hostname` linking to a 0600 file
//! outside put its first line into reports), nothing but a regular file is
//! read (a FIFO hung the run while it held the lock) and no more than
//! [`MAX_FACT_FILE`] bytes (a link to `/dev/zero` grew without bound). A
//! file refused is a fact not found, as a missing one is.
//!
//! The machine facts `sys.ipv4`, `sys.cpus` and `sys.memory_mb` are read
//! from the kernel the first time something asks for them ([`Gathered`]),
//! once per [`Facts`]: a run whose policy never reads them does not read
//! `/proc/net/fib_trie` (large on a router), the cgroup files behind the
//! CPU count or `/proc/meminfo` at all. Nothing else reads them: the hard
//! classes and the run report are made of the other facts, and `policyvm
//! facts` and the agent's uploaded report, which show them, read them
//! then (docs/vm.md, "Facts are read when first used").

use std::path::Path;
use std::sync::OnceLock;

use crate::rootfs::{read_system_file, Kind, RootFs};

/// The most read of one file a fact comes from (`/etc/hosts`, `os-release`,
/// `/proc/meminfo`...): 1 MiB.
pub const MAX_FACT_FILE: u64 = 1 << 20;

pub use converge_eval::facts::{class_name, FactValue};

/// Every fact of the schema, gathered once per run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    pub hostname: String,
    pub fqdn: String,
    pub os: String,
    pub os_family: String,
    pub os_release: String,
    pub arch: String,
    pub ipv4: Gathered<Vec<String>>,
    pub cpus: Gathered<i64>,
    pub memory_mb: Gathered<i64>,
    pub weekday: String,
    pub hour: i64,
}

/// A fact read from the running kernel when it is first asked for, then
/// kept: the same value for the rest of the run, as an eagerly gathered
/// one would be.
#[derive(Clone, Debug)]
pub struct Gathered<T> {
    value: OnceLock<T>,
    /// `None` for a value given up front, whose cell is always full.
    read: Option<fn() -> T>,
}

impl<T: Default> Gathered<T> {
    /// A fact read by `read` on first use.
    pub fn later(read: fn() -> T) -> Gathered<T> {
        Gathered {
            value: OnceLock::new(),
            read: Some(read),
        }
    }

    /// A fact already known (tests, a host described by hand).
    pub fn known(value: T) -> Gathered<T> {
        Gathered {
            value: OnceLock::from(value),
            read: None,
        }
    }

    /// The value, read now if it has not been yet.
    pub fn get(&self) -> &T {
        self.value
            .get_or_init(|| self.read.map_or_else(T::default, |read| read()))
    }

    /// Whether the value has been read (or was given).
    pub fn is_read(&self) -> bool {
        self.value.get().is_some()
    }
}

/// Two facts are equal when their values are, read or not yet.
impl<T: PartialEq + Default> PartialEq for Gathered<T> {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl<T: Eq + Default> Eq for Gathered<T> {}

impl Facts {
    /// Gathers the facts of this host, with the system image at `root`.
    pub fn gather(root: &Path) -> Facts {
        let fs = RootFs::open(root).ok();
        let fs = fs.as_ref();
        let hostname = hostname_in(fs);
        let fqdn = fqdn(&hostname, &root_text(fs, "/etc/hosts").unwrap_or_default());
        let os_release = root_text(fs, "/etc/os-release")
            .or_else(|| root_text(fs, "/usr/lib/os-release"))
            .unwrap_or_default();
        let (os_family, version) = os_family(&os_release);
        let now = jiff::Timestamp::now().to_zoned(local_zone());
        Facts {
            hostname: hostname.clone(),
            fqdn,
            os: std::env::consts::OS.to_owned(),
            os_family,
            os_release: version,
            arch: std::env::consts::ARCH.to_owned(),
            ipv4: Gathered::later(|| {
                ipv4_addresses(&kernel_text("/proc/net/fib_trie").unwrap_or_default())
            }),
            cpus: Gathered::later(|| {
                std::thread::available_parallelism().map_or(1, |n| n.get() as i64)
            }),
            memory_mb: Gathered::later(|| {
                memory_mb(&kernel_text("/proc/meminfo").unwrap_or_default())
            }),
            weekday: weekday_name(now.weekday()).to_owned(),
            hour: i64::from(now.hour()),
        }
    }

    /// A fact by its schema name.
    pub fn get(&self, name: &str) -> Option<FactValue> {
        Some(match name {
            "sys.hostname" => FactValue::Str(self.hostname.clone()),
            "sys.fqdn" => FactValue::Str(self.fqdn.clone()),
            "sys.os" => FactValue::Str(self.os.clone()),
            "sys.os_family" => FactValue::Str(self.os_family.clone()),
            "sys.os_release" => FactValue::Str(self.os_release.clone()),
            "sys.arch" => FactValue::Str(self.arch.clone()),
            "sys.ipv4" => FactValue::List(self.ipv4.get().clone()),
            "sys.cpus" => FactValue::Int(*self.cpus.get()),
            "sys.memory_mb" => FactValue::Int(*self.memory_mb.get()),
            "sys.time.weekday" => FactValue::Str(self.weekday.clone()),
            "sys.time.hour" => FactValue::Int(self.hour),
            _ => return None,
        })
    }

    /// The hard classes these facts define, sorted: `any`, the kernel, the
    /// OS family, the architecture, the weekday, the hour and
    /// `host_<hostname>`.
    pub fn hard_classes(&self) -> Vec<String> {
        converge_eval::facts::hard_classes(|name| self.get(name))
    }
}

/// The evaluator reads the host's facts; a host knows every one.
impl converge_eval::facts::FactSource for Facts {
    fn get(&self, name: &str) -> Option<FactValue> {
        Facts::get(self, name)
    }

    fn hard_classes(&self) -> Vec<String> {
        Facts::hard_classes(self)
    }
}

/// The service manager of the system image at `root`, the default of a
/// `service` promise's `manager`: systemd when `ROOT/run/systemd/system`
/// exists (systemd's own test, `sd_booted`), else runit when `ROOT/etc/runit`
/// or `ROOT/etc/service` does, else systemd.
pub fn service_manager(root: &Path) -> &'static str {
    let fs = RootFs::open(root).ok();
    let is_dir = |path: &str| {
        fs.as_ref()
            .and_then(|fs| fs.lstat(path).ok().flatten())
            .is_some_and(|m| m.kind == Kind::Dir)
    };
    if is_dir("/run/systemd/system") {
        "systemd"
    } else if is_dir("/etc/runit") || is_dir("/etc/service") {
        "runit"
    } else {
        "systemd"
    }
}

/// `sys.hostname`: `ROOT/etc/hostname`, else the kernel's, else
/// `localhost`.
pub fn hostname(root: &Path) -> String {
    hostname_in(RootFs::open(root).ok().as_ref())
}

fn hostname_in(fs: Option<&RootFs>) -> String {
    first_line(root_text(fs, "/etc/hostname"))
        .or_else(|| first_line(kernel_text("/proc/sys/kernel/hostname")))
        .unwrap_or_else(|| "localhost".to_owned())
}

/// A text file of the root, if it is a regular file of at most
/// [`MAX_FACT_FILE`] bytes reached without links.
fn root_text(fs: Option<&RootFs>, path: &str) -> Option<String> {
    let bytes = fs?.read_file_limited(path, MAX_FACT_FILE).ok()??;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// A text file of the running kernel, bounded like [`root_text`].
fn kernel_text(path: &str) -> Option<String> {
    let bytes = read_system_file(Path::new(path), MAX_FACT_FILE)?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

fn first_line(text: Option<String>) -> Option<String> {
    let text = text?;
    let first = text.lines().next()?.trim();
    (!first.is_empty()).then(|| first.to_owned())
}

/// `web01.example.com` from the hostname, or from `/etc/hosts` (the first
/// dotted name on a line that also names the host), or the hostname.
fn fqdn(hostname: &str, hosts: &str) -> String {
    if hostname.contains('.') {
        return hostname.to_owned();
    }
    let short = hostname.split('.').next().unwrap_or(hostname);
    for line in hosts.lines() {
        let line = line.split('#').next().unwrap_or("");
        let names: Vec<&str> = line.split_whitespace().skip(1).collect();
        if names
            .iter()
            .any(|n| *n == short || n.split('.').next() == Some(short))
        {
            if let Some(dotted) = names
                .iter()
                .find(|n| n.contains('.') && n.starts_with(short))
            {
                return (*dotted).to_owned();
            }
        }
    }
    hostname.to_owned()
}

/// The OS family and version from os-release: `ID`, then each of `ID_LIKE`,
/// mapped to a family (`ubuntu` is `debian`, `rocky` is `redhat`, ...).
fn os_family(os_release: &str) -> (String, String) {
    let field = |key: &str| {
        os_release.lines().find_map(|l| {
            let value = l.strip_prefix(key)?.strip_prefix('=')?;
            Some(value.trim().trim_matches('"').trim_matches('\'').to_owned())
        })
    };
    let version = field("VERSION_ID").unwrap_or_default();
    let mut ids: Vec<String> = field("ID").into_iter().collect();
    if let Some(like) = field("ID_LIKE") {
        ids.extend(like.split_whitespace().map(str::to_owned));
    }
    let family = ids
        .iter()
        .find_map(|id| match id.as_str() {
            "debian" | "ubuntu" | "raspbian" | "linuxmint" | "devuan" => Some("debian"),
            "rhel" | "redhat" | "centos" | "fedora" | "rocky" | "almalinux" | "ol" | "amzn" => {
                Some("redhat")
            }
            "alpine" => Some("alpine"),
            "arch" | "manjaro" | "endeavouros" => Some("arch"),
            "suse" | "sles" | "opensuse" | "opensuse-leap" | "opensuse-tumbleweed" => Some("suse"),
            "gentoo" => Some("gentoo"),
            _ => None,
        })
        .map(str::to_owned)
        .or_else(|| ids.first().cloned())
        .unwrap_or_default();
    (family, version)
}

/// The local IPv4 addresses from `/proc/net/fib_trie` (the `/32 host LOCAL`
/// entries), without loopback, sorted.
fn ipv4_addresses(fib_trie: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut last_leaf: Option<&str> = None;
    for line in fib_trie.lines() {
        let trimmed = line.trim();
        if let Some(leaf) = trimmed.strip_prefix("|-- ") {
            last_leaf = Some(leaf.trim());
        } else if trimmed.contains("/32 host LOCAL") {
            if let Some(addr) = last_leaf {
                if !addr.starts_with("127.") && !out.iter().any(|a| a == addr) {
                    out.push(addr.to_owned());
                }
            }
        }
    }
    out.sort();
    out
}

fn memory_mb(meminfo: &str) -> i64 {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// The time zone `sys.time.*` is read in: the machine's, as jiff's
/// `TimeZone::system()` finds it (`TZ`, else `/etc/localtime`), but without
/// its first step when `/etc/localtime` links into the zoneinfo database:
/// jiff then lists the whole database (every directory of
/// `/usr/share/zoneinfo`) to learn the zone's name, which no fact shows.
/// That walk was a sixth of the CPU time of a converged run of 200
/// packages (docs/performance.md, "Toolsets"). The TZif data the link
/// leads to is the same either way; `TZ`, or an `/etc/localtime` that is
/// missing or not TZif, still goes to jiff.
fn local_zone() -> jiff::tz::TimeZone {
    if std::env::var_os("TZ").is_none() {
        let tzif = read_system_file(Path::new("/etc/localtime"), MAX_FACT_FILE)
            .and_then(|data| jiff::tz::TimeZone::tzif("localtime", &data).ok());
        if let Some(zone) = tzif {
            return zone;
        }
    }
    jiff::tz::TimeZone::system()
}

fn weekday_name(day: jiff::civil::Weekday) -> &'static str {
    use jiff::civil::Weekday::*;
    match day {
        Monday => "monday",
        Tuesday => "tuesday",
        Wednesday => "wednesday",
        Thursday => "thursday",
        Friday => "friday",
        Saturday => "saturday",
        Sunday => "sunday",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_families_from_os_release() {
        let debian =
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\n";
        assert_eq!(os_family(debian), ("debian".into(), "12".into()));
        let ubuntu = "ID=ubuntu\nID_LIKE=debian\nVERSION_ID=\"24.04\"\n";
        assert_eq!(os_family(ubuntu), ("debian".into(), "24.04".into()));
        let rocky = "ID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\nVERSION_ID=\"9.3\"\n";
        assert_eq!(os_family(rocky), ("redhat".into(), "9.3".into()));
        let alpine = "ID=alpine\nVERSION_ID=3.19.1\n";
        assert_eq!(os_family(alpine), ("alpine".into(), "3.19.1".into()));
        let unknown = "ID=plan9\n";
        assert_eq!(os_family(unknown), ("plan9".into(), String::new()));
        assert_eq!(os_family(""), (String::new(), String::new()));
    }

    #[test]
    fn fqdn_from_hosts() {
        let hosts = "127.0.0.1 localhost\n10.0.0.5 web01.example.com web01 # the web server\n";
        assert_eq!(fqdn("web01", hosts), "web01.example.com");
        assert_eq!(fqdn("db01", hosts), "db01");
        assert_eq!(fqdn("a.b.c", ""), "a.b.c");
    }

    #[test]
    fn local_addresses_from_fib_trie() {
        let trie = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 10.0.2.15\n        /32 host LOCAL\n     |-- 10.0.2.255\n        /32 link BROADCAST\n     |-- 127.0.0.1\n        /32 host LOCAL\nLocal:\n     |-- 10.0.2.15\n        /32 host LOCAL\n     |-- 192.168.1.7\n        /32 host LOCAL\n";
        assert_eq!(ipv4_addresses(trie), vec!["10.0.2.15", "192.168.1.7"]);
    }

    #[test]
    fn memory_and_class_names() {
        assert_eq!(
            memory_mb("MemTotal:       24685172 kB\nMemFree: 1 kB\n"),
            24106
        );
        assert_eq!(class_name("web-01.example"), "web_01_example");
    }

    #[test]
    fn facts_of_a_root() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("etc")).unwrap();
        std::fs::write(root.path().join("etc/hostname"), "web-01\n").unwrap();
        std::fs::write(
            root.path().join("etc/os-release"),
            "ID=debian\nVERSION_ID=\"12\"\n",
        )
        .unwrap();
        std::fs::write(
            root.path().join("etc/hosts"),
            "10.0.0.1 web-01.corp web-01\n",
        )
        .unwrap();
        let facts = Facts::gather(root.path());
        assert_eq!(facts.hostname, "web-01");
        assert_eq!(facts.fqdn, "web-01.corp");
        assert_eq!(facts.os_family, "debian");
        assert_eq!(facts.os_release, "12");
        assert!(*facts.cpus.get() >= 1);
        let classes = facts.hard_classes();
        for class in ["any", "debian", "host_web_01"] {
            assert!(classes.iter().any(|c| c == class), "{class} in {classes:?}");
        }
        assert!(
            classes.iter().all(|c| crate::schema::is_hard_class(c)),
            "{classes:?}"
        );
        // Every fact of the schema has a value.
        for spec in crate::schema::FACTS {
            assert!(facts.get(spec.name).is_some(), "{}", spec.name);
        }
    }

    /// The machine facts are read when first asked for, not by `gather`:
    /// the hard classes (every run evaluates them) leave them unread, and
    /// the value read later is the kernel's, as an eager read gives it.
    #[test]
    fn machine_facts_are_read_on_first_use() {
        let root = tempfile::tempdir().unwrap();
        let facts = Facts::gather(root.path());
        let classes = facts.hard_classes();
        assert!(classes.iter().any(|c| c == "any"), "{classes:?}");
        assert!(!facts.ipv4.is_read());
        assert!(!facts.cpus.is_read());
        assert!(!facts.memory_mb.is_read());

        let eager_cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as i64);
        assert_eq!(facts.get("sys.cpus"), Some(FactValue::Int(eager_cpus)));
        assert!(facts.cpus.is_read());
        assert!(!facts.ipv4.is_read() && !facts.memory_mb.is_read());

        let eager_ipv4 = ipv4_addresses(&kernel_text("/proc/net/fib_trie").unwrap_or_default());
        assert_eq!(facts.get("sys.ipv4"), Some(FactValue::List(eager_ipv4)));
        let eager_mb = memory_mb(&kernel_text("/proc/meminfo").unwrap_or_default());
        assert_eq!(facts.get("sys.memory_mb"), Some(FactValue::Int(eager_mb)));
        assert!(facts.ipv4.is_read() && facts.memory_mb.is_read());
    }

    #[test]
    fn a_known_machine_fact_is_never_read() {
        let given = Gathered::known(7_i64);
        assert!(given.is_read());
        assert_eq!(*given.get(), 7);
        assert_eq!(given, Gathered::later(|| 7));
        assert_ne!(given, Gathered::later(|| 8));
    }

    #[test]
    fn the_local_zone_is_the_systems() {
        // The same offsets as jiff's own system zone, at instants on both
        // sides of any daylight saving change.
        let system = jiff::tz::TimeZone::system();
        let local = local_zone();
        let now = jiff::Timestamp::now();
        for days in [0i64, 91, 182, 273] {
            let t = now
                .checked_add(jiff::SignedDuration::from_hours(days * 24))
                .unwrap();
            assert_eq!(local.to_offset(t), system.to_offset(t), "{t}");
        }
    }

    #[test]
    fn the_service_manager_follows_the_image() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(service_manager(root.path()), "systemd");
        std::fs::create_dir_all(root.path().join("etc/service")).unwrap();
        assert_eq!(service_manager(root.path()), "runit");
        std::fs::create_dir_all(root.path().join("run/systemd/system")).unwrap();
        assert_eq!(service_manager(root.path()), "systemd");
    }
}
