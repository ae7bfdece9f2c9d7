//! The `policyvm` binary keeps the code a run executes together
//! (vm/build.rs, vm/hot-functions.ld; docs/performance.md, "The run's code
//! together"): this fails if the linker script stops being applied or
//! stops matching, which would silently give back about 1.4 MB of every
//! run's resident memory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use converge::binary;

/// The sizes of an ELF64 little-endian file's sections, by name.
fn sections(elf: &[u8]) -> Vec<(String, u64)> {
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) as usize;
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap());
    assert_eq!(&elf[..5], b"\x7fELF\x02", "not an ELF64 file");
    let table = u64_at(0x28) as usize;
    let (size, count, names) = (u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let header = |i: usize| table + i * size;
    let strings = u64_at(header(names) + 0x18) as usize;
    (0..count)
        .map(|i| {
            let name_at = strings + u32_at(header(i));
            let end = elf[name_at..].iter().position(|b| *b == 0).unwrap();
            let name = String::from_utf8_lossy(&elf[name_at..name_at + end]).into_owned();
            (name, u64_at(header(i) + 0x20))
        })
        .collect()
}

#[test]
fn the_run_code_of_policyvm_is_in_its_own_section_first() {
    let elf = std::fs::read(binary("policyvm")).unwrap();
    let sections = sections(&elf);
    let names: Vec<&str> = sections.iter().map(|(n, _)| n.as_str()).collect();
    let hot = names.iter().position(|n| *n == ".text.hot");
    let text = names.iter().position(|n| *n == ".text");
    let (Some(hot), Some(text)) = (hot, text) else {
        panic!("policyvm has no .text.hot section before .text: {names:?}");
    };
    assert!(hot < text, "{names:?}");
    // A few hundred functions of the VM, the format crate, std and the
    // crates they use; far less would mean the patterns stopped matching.
    let size = sections[hot].1;
    assert!(size > 256 * 1024, ".text.hot holds only {size} bytes");
}

#[test]
fn the_hot_function_patterns_carry_no_symbol_hash() {
    let script = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("vm/hot-functions.ld"),
    )
    .unwrap();
    let patterns: Vec<&str> = script
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("*(.text."))
        .collect();
    assert!(patterns.len() > 100, "{} patterns", patterns.len());
    for p in patterns {
        assert!(p.ends_with(')'), "{p}");
        // A legacy-mangled name's hash is `17h` and 16 hex digits: a
        // pattern that kept it would match only the build it came from.
        let hash = regex_free_hash(p);
        assert!(!hash, "{p} names a symbol hash");
        // A v0 name's crate hash (`Cs<hash>_`) is another toolchain's
        // next time: only `Cs*_` may stand there.
        let crate_hash = p
            .match_indices("Cs")
            .any(|(at, _)| !p[at + 2..].starts_with("*_") && is_v0_crate_hash(&p[at + 2..]));
        assert!(!crate_hash, "{p} names a crate hash");
        // callgrind's recursion mark is not part of a name.
        assert!(!p.contains('\''), "{p}");
    }
}

/// Whether `rest` starts with a base-62 disambiguator and `_`, as after
/// `Cs` in a v0 name (at least 6 digits: the hashes are 11 or so).
fn is_v0_crate_hash(rest: &str) -> bool {
    let digits = rest.bytes().take_while(u8::is_ascii_alphanumeric).count();
    digits >= 6 && rest.as_bytes().get(digits) == Some(&b'_')
}

/// Whether `p` holds `17h` followed by 16 hex digits.
fn regex_free_hash(p: &str) -> bool {
    p.match_indices("17h").any(|(at, _)| {
        let rest = &p[at + 3..];
        rest.len() >= 16 && rest[..16].bytes().all(|b| b.is_ascii_hexdigit())
    })
}
