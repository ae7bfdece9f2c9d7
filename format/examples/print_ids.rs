//! Prints the id tables of the format as `format/tests/ids.rs` pins them:
//! `cargo run -q -p converge-format --example print_ids > format/tests/ids/MAJOR.MINOR.txt`
//! after a deliberate format version bump ("Compatibility" in
//! `docs/bytecode.md`). Never overwrite a pinned version's file.

fn main() {
    print!("{}", converge_format::ids::render());
}
