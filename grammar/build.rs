//! Generates the LR(1) parser from `src/grammar.lalrpop` into OUT_DIR.
fn main() {
    if let Err(err) = lalrpop::Configuration::new()
        .use_cargo_dir_conventions()
        .emit_rerun_directives(true)
        .process()
    {
        eprintln!("lalrpop failed: {err}");
        std::process::exit(1);
    }
}
