//! Feeds arbitrary text to the parser. `parse` promises never to panic, and
//! whatever it returns must be usable by the renderers: every error span is
//! an in-bounds, ordered byte range whose ends are char boundaries (ariadne
//! and the JSON/SARIF output slice the source with it).
#![no_main]

use converge_grammar::{parse, FileId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let (module, errors) = parse(FileId(0), src);
    assert_eq!(module.file, FileId(0));
    for err in &errors {
        let (start, end) = (err.span.start as usize, err.span.end as usize);
        assert!(
            start <= end && end <= src.len(),
            "error span {start}..{end} out of bounds (len {}): {err:?}",
            src.len()
        );
        assert!(
            src.is_char_boundary(start) && src.is_char_boundary(end),
            "error span {start}..{end} not on char boundaries: {err:?}"
        );
        assert_eq!(err.span.file, FileId(0), "error in another file: {err:?}");
    }
});
