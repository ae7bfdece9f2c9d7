//! Feeds arbitrary text to the parser of `*.test.policy` files (`policyc
//! test`, LANGUAGE.md section 16). Like `parse`: never a panic, and every
//! error span an in-bounds, ordered byte range on char boundaries, in the
//! file that was parsed (the renderers slice the source with it).
#![no_main]

use converge_grammar::{parse_tests, FileId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let (_module, errors) = parse_tests(FileId(0), src);
    for err in &errors {
        let (start, end) = (err.span.start as usize, err.span.end as usize);
        assert!(start <= end && end <= src.len(), "span {start}..{end}: {err:?}");
        assert!(src.is_char_boundary(start) && src.is_char_boundary(end), "{err:?}");
        assert_eq!(err.span.file, FileId(0), "{err:?}");
    }
});
