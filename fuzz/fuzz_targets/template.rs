//! Feeds arbitrary text to the template parser as a template file.
//! `parse_template` and `nodes` promise never to panic, and every error
//! either returns must be renderable: an in-bounds, ordered byte range on
//! char boundaries of the template, naming the template's file. Every
//! expression in the result points into the template too.
#![no_main]

use converge_grammar::ast::TagKind;
use converge_grammar::token::StrPart;
use converge_grammar::{nodes, parse_template, FileId, Span};
use libfuzzer_sys::fuzz_target;

const FILE: FileId = FileId(7);

fn check(src: &str, span: Span, what: &dyn std::fmt::Debug) {
    let (start, end) = (span.start as usize, span.end as usize);
    assert!(
        start <= end && end <= src.len(),
        "span {start}..{end} out of bounds (len {}): {what:?}",
        src.len()
    );
    assert!(
        src.is_char_boundary(start) && src.is_char_boundary(end),
        "span {start}..{end} not on char boundaries: {what:?}"
    );
    assert_eq!(span.file, FILE, "span in another file: {what:?}");
}

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let (parts, errors) = parse_template(FILE, src);
    for err in &errors {
        check(src, err.span, err);
    }
    for part in &parts {
        match part {
            StrPart::Lit(_) => {}
            StrPart::Interp(e) => check(src, e.span, e),
            StrPart::Tag(t) => {
                check(src, t.span, t);
                if let TagKind::For { iter: e, .. } | TagKind::If(e) | TagKind::Elif(e) = &t.kind
                {
                    check(src, e.span, e);
                }
            }
        }
    }
    if let Err(errors) = nodes(&parts) {
        for err in &errors {
            check(src, err.span, err);
        }
    }
});
