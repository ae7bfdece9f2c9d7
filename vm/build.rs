//! Links the `policyvm` binary with `hot-functions.ld`: the functions a run
//! executes are laid out together at the start of the text, so that a run
//! faults in few pages of it (the kernel maps a file page with its 64 KiB
//! neighbourhood; run code spread over the whole text made 3.5 MB of it
//! resident). The script only adds a section before `.text` (`INSERT`), its
//! patterns carry no symbol hash, and one that matches nothing is empty:
//! `bench/hot_functions.sh` regenerates it. See docs/performance.md, "The
//! run's code together".

/// Set by `bench/hot_functions.sh` while it profiles: valgrind names no
/// function of a section other than `.text`, so the run is profiled on a
/// binary in the linker's own layout.
const PLAIN_LAYOUT: &str = "CONVERGE_PLAIN_LAYOUT";

fn main() {
    let script = "hot-functions.ld";
    println!("cargo::rerun-if-changed={script}");
    println!("cargo::rerun-if-env-changed={PLAIN_LAYOUT}");
    // ELF linkers (GNU ld, gold, lld) read `INSERT BEFORE`; nothing else is
    // a target of this project.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var_os(PLAIN_LAYOUT).is_none()
    {
        let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".to_owned());
        println!("cargo::rustc-link-arg-bin=policyvm=-Wl,-T,{dir}/{script}");
        // Relative relocations packed as a bitmap (DT_RELR, glibc 2.36):
        // the loader reads every relocation of `.rela.dyn` at each start,
        // 300 kB of file pages in 24-byte entries; packed, a few kB.
        println!("cargo::rustc-link-arg-bin=policyvm=-Wl,-z,pack-relative-relocs");
    }
}
