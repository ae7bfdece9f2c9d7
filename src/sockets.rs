//! Sockets seen through `/proc`: which a process holds, which of the
//! machine's are listening. The T22 tests use them to show that the VM and
//! the agent never listen.

/// The inodes of the sockets process `pid` holds open.
pub fn held_by(pid: u32) -> Vec<String> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let t = target.to_string_lossy().into_owned();
            Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect()
}

/// The inodes of every listening or bound socket in `/proc/net`: TCP in
/// state LISTEN (`0A`), any UDP socket, Unix sockets with the listening
/// flag.
pub fn listening() -> Vec<String> {
    let mut out = Vec::new();
    for (table, state_col, inode_col) in [
        ("tcp", 3, 9),
        ("tcp6", 3, 9),
        ("udp", usize::MAX, 9),
        ("udp6", usize::MAX, 9),
        ("unix", 3, 6),
    ] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/net/{table}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let listening = match table {
                "tcp" | "tcp6" => cols.get(state_col) == Some(&"0A"),
                "unix" => cols.get(state_col) == Some(&"00010000"),
                _ => true,
            };
            if let (true, Some(inode)) = (listening, cols.get(inode_col)) {
                out.push((*inode).to_owned());
            }
        }
    }
    out
}
