//! The value grammars of the kernel-facing promise types (`process`,
//! `mount`, `kernel_module`, `sysctl`), in one place because both sides
//! check them: the compiler refuses a constant that breaks them (with the
//! promise's file:line), and the VM refuses a value computed on the host
//! before any tool or file sees it.

/// Filesystem types a `mount` promise may name: the kernel's own, the
/// common FUSE and network ones, and `auto`/`none` (for `bind` mounts).
/// `fuse.NAME` is accepted for any NAME. A type outside this list is almost
/// always a typo (`ext5`, `tmfps`) that would only show at the next boot.
pub const FILESYSTEM_TYPES: &[&str] = &[
    "auto",
    "none",
    "ext2",
    "ext3",
    "ext4",
    "xfs",
    "btrfs",
    "f2fs",
    "jfs",
    "reiserfs",
    "vfat",
    "fat",
    "msdos",
    "exfat",
    "ntfs",
    "ntfs3",
    "ntfs-3g",
    "hfs",
    "hfsplus",
    "iso9660",
    "udf",
    "squashfs",
    "erofs",
    "cramfs",
    "romfs",
    "zfs",
    "bcachefs",
    "nilfs2",
    "ocfs2",
    "gfs2",
    "tmpfs",
    "ramfs",
    "devtmpfs",
    "proc",
    "sysfs",
    "devpts",
    "mqueue",
    "hugetlbfs",
    "cgroup",
    "cgroup2",
    "securityfs",
    "debugfs",
    "tracefs",
    "configfs",
    "pstore",
    "bpf",
    "efivarfs",
    "binfmt_misc",
    "autofs",
    "fusectl",
    "overlay",
    "fuse",
    "fuseblk",
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "9p",
    "virtiofs",
    "ceph",
    "glusterfs",
    "sshfs",
    "davfs",
    "swap",
];

/// Why `fstype` is not a filesystem type a `mount` promise accepts, if it
/// is not.
pub fn fstype_problem(fstype: &str) -> Option<String> {
    let fuse_name = fstype.strip_prefix("fuse.");
    if FILESYSTEM_TYPES.contains(&fstype)
        || fuse_name.is_some_and(|n| !n.is_empty() && n.chars().all(plain_word_char))
    {
        return None;
    }
    Some(format!(
        "`{}` is not a known filesystem type (known: ext4, xfs, btrfs, vfat, tmpfs, nfs, \
         cifs, overlay, fuse.NAME, none, auto, ...)",
        fstype.escape_debug()
    ))
}

fn plain_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_-.".contains(c)
}

/// Why a mount `device` or an option cannot go into `/etc/fstab` or a
/// `mount` argv, if it cannot: empty, starting with `-` (an option to
/// `mount`), or holding a blank, a `#`, a `,` (options only: it separates
/// them) or a control character.
pub fn fstab_field_problem(what: &str, value: &str) -> Option<String> {
    let why = if value.is_empty() {
        "it is empty"
    } else if value.starts_with('-') {
        "it starts with `-`, which `mount` would read as an option"
    } else if value
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '#')
    {
        "it holds a blank, a `#` or a control character (fstab fields cannot)"
    } else if what == "option" && value.contains(',') {
        "it holds a `,` (give each option as its own list item)"
    } else {
        return None;
    };
    Some(format!(
        "{what} `{}` is not usable: {why}",
        value.escape_debug()
    ))
}

/// The `mount` states two promises on one mount point may both hold:
/// `present` (an fstab entry) agrees with `mounted` and with `unmounted`,
/// and `unmounted` with `absent` (absent implies unmounted); equal states
/// agree. Every other pair contradicts (`mounted` with `unmounted` or
/// `absent`, `present` with `absent`). The compiler's contradiction
/// analysis and the VM's run-time check both ask this.
pub fn mount_states_agree(a: &str, b: &str) -> bool {
    a == b
        || matches!(
            (a, b),
            ("present", "mounted" | "unmounted")
                | ("mounted" | "unmounted", "present")
                | ("unmounted", "absent")
                | ("absent", "unmounted")
        )
}

/// Why `name` is not a kernel module name, if it is not: letters, digits,
/// `_` and `-` (which `modprobe` treats as one), not starting with `-`.
pub fn module_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > 64 {
        Some("a module name has 1 to 64 characters")
    } else if name.starts_with('-') {
        Some("it starts with `-`, which `modprobe` would read as an option")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        Some("a module name has only letters, digits, `_` and `-`")
    } else {
        None
    }
}

/// Why `key` is not a sysctl key, if it is not. Both spellings are
/// accepted: dotted (`net.ipv4.ip_forward`) and slashed
/// (`net/ipv4/conf/eth0.1/rp_filter`, needed when a component holds a dot).
/// Components are letters, digits, `_`, `-`, `:`, `@` (and `.` in the
/// slashed form); no empty component, no `.`/`..`, no wildcard, no
/// leading `-`.
pub fn sysctl_key_problem(key: &str) -> Option<&'static str> {
    let slashed = key.contains('/');
    let separator = if slashed { '/' } else { '.' };
    if key.is_empty() || key.len() > 255 {
        return Some("a sysctl key has 1 to 255 characters");
    }
    if key.starts_with('-') {
        return Some("it starts with `-`, which `sysctl` would read as an option");
    }
    for part in key.split(separator) {
        if part.is_empty() || part == "." || part == ".." {
            return Some("it has an empty, `.` or `..` component");
        }
        let ok = |c: char| c.is_ascii_alphanumeric() || "_-:@".contains(c) || (slashed && c == '.');
        if !part.chars().all(ok) {
            return Some("components have only letters, digits and `_-:@` (and `.` when the key is written with `/`)");
        }
    }
    None
}

/// The path of a sysctl key below `/proc/sys`: `net.ipv4.ip_forward` is
/// `net/ipv4/ip_forward`; a slashed key is that path already.
pub fn sysctl_path(key: &str) -> String {
    if key.contains('/') {
        key.to_owned()
    } else {
        key.replace('.', "/")
    }
}

/// Why a sysctl `value` cannot be written, if it cannot: a newline or
/// another control character but a tab would add a line to the file.
pub fn sysctl_value_problem(value: &str) -> Option<&'static str> {
    value
        .chars()
        .any(|c| c.is_control() && c != '\t')
        .then_some("it holds a newline or another control character")
}

/// A sysctl value as compared: fields separated by one space (the kernel
/// shows `32768\t60999`, a policy writes `32768 60999`).
pub fn sysctl_normalised(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filesystem_types() {
        for ok in ["ext4", "tmpfs", "fuse.sshfs", "none", "nfs4"] {
            assert_eq!(fstype_problem(ok), None, "{ok}");
        }
        for bad in ["ext5", "", "fuse.", "fuse.a b", "-t"] {
            assert!(fstype_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn fstab_fields() {
        assert_eq!(fstab_field_problem("device", "UUID=1234-AB"), None);
        assert_eq!(fstab_field_problem("option", "size=10m"), None);
        assert!(fstab_field_problem("device", "/dev/sda1 /etc").is_some());
        assert!(fstab_field_problem("device", "-oremount").is_some());
        assert!(fstab_field_problem("option", "ro,exec").is_some());
        assert!(fstab_field_problem("option", "").is_some());
        assert!(fstab_field_problem("device", "a#b").is_some());
    }

    #[test]
    fn mount_state_pairs() {
        assert!(mount_states_agree("mounted", "present"));
        assert!(mount_states_agree("absent", "unmounted"));
        assert!(mount_states_agree("present", "unmounted"));
        assert!(!mount_states_agree("mounted", "absent"));
        assert!(!mount_states_agree("mounted", "unmounted"));
        assert!(!mount_states_agree("present", "absent"));
    }

    #[test]
    fn module_names() {
        assert_eq!(module_name_problem("br_netfilter"), None);
        assert_eq!(module_name_problem("nf-conntrack"), None);
        assert!(module_name_problem("-r").is_some());
        assert!(module_name_problem("a.b").is_some());
        assert!(module_name_problem("").is_some());
    }

    #[test]
    fn sysctl_keys() {
        assert_eq!(sysctl_key_problem("net.ipv4.ip_forward"), None);
        assert_eq!(sysctl_key_problem("net/ipv4/conf/eth0.1/rp_filter"), None);
        for bad in [
            "",
            "-w",
            "net..x",
            "net/../x",
            "net.ipv4.*",
            "a b",
            "k=v",
            "net/./x",
        ] {
            assert!(sysctl_key_problem(bad).is_some(), "{bad}");
        }
        assert_eq!(sysctl_path("net.ipv4.ip_forward"), "net/ipv4/ip_forward");
        assert_eq!(
            sysctl_path("net/ipv4/conf/eth0.1/rp_filter"),
            "net/ipv4/conf/eth0.1/rp_filter"
        );
        assert_eq!(sysctl_normalised(" 32768\t60999\n"), "32768 60999");
        assert!(sysctl_value_problem("1\nkernel.x = 2").is_some());
        assert_eq!(sysctl_value_problem("32768\t60999"), None);
    }
}
