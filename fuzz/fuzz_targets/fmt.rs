//! Feeds arbitrary text to the formatter. It must never panic; text with
//! syntax errors is refused; otherwise the result (which `format` itself
//! checks parses to the same tree and keeps every comment) is a fixed
//! point: formatting it again changes nothing.
#![no_main]

use converge_compiler::fmt::{format, FormatError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    match format(src) {
        Ok(once) => match format(&once) {
            Ok(twice) => assert_eq!(once, twice, "not idempotent"),
            Err(err) => panic!("formatted text refused: {err}\n{once}"),
        },
        Err(FormatError::Syntax(_)) => {}
        Err(err @ FormatError::NotPreserved(_)) => panic!("{err}"),
    }
});
