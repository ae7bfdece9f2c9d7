use std::process::ExitCode;

/// jemalloc rather than glibc's malloc: `policyc check` on a large policy
/// makes tens of millions of small allocations and frees the syntax trees
/// while the expanded program grows (`sema::bodies`). glibc's malloc spent
/// about 15% of the run in its free lists there and kept the freed pages;
/// jemalloc's size classes keep the program's data dense and give pages
/// back a second after they are freed (`.cargo/config.toml`). Measured in
/// docs/performance.md ("policyc check on 1,000,000 promises"). The VM
/// keeps the system allocator: its target is a small resident set.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    converge_compiler::cli::main()
}
