//! The exclude and name globs of `watch`, `directory recurse` and
//! `unmanaged` come from policy, so a hostile or careless policy author
//! controls them; the paths they are matched against come from the host's
//! file system. Compiling any list of globs and matching any path must
//! never panic, and a list of globs the checker accepts one by one is only
//! refused for its length.
#![no_main]

use converge_format::globs::{glob_problem, name_glob_problem, Excludes, NameGlobs};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first line is the path matched; the others are the globs.
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let path = lines.next().unwrap_or_default();
    let name = path.rsplit('/').next().unwrap_or_default();
    let globs: Vec<String> = lines.map(str::to_owned).collect();
    let accepted = globs.iter().all(|g| glob_problem(g).is_none());
    match Excludes::new(&globs) {
        Ok(excludes) => {
            assert!(accepted);
            let _ = excludes.excludes(path.as_bytes(), name.as_bytes());
        }
        Err((_, why)) => assert!(!accepted || why.starts_with("more than"), "{why}"),
    }
    let accepted = globs.iter().all(|g| name_glob_problem(g).is_none());
    match NameGlobs::new(&globs) {
        Ok(names) => {
            assert!(accepted);
            let _ = names.matches(path);
        }
        Err((_, why)) => assert!(!accepted || why.starts_with("more than"), "{why}"),
    }
});
