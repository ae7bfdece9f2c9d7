//! Parsing a large file in pieces on several threads
//! (`converge_grammar::split`): the tree is the sequential parse's, and a
//! cut that does not fall between two items is caught, never trusted.

use converge_grammar::parse::parse_whole;
use converge_grammar::split::{cut_points, parse_in_pieces, MIN_PIECE_BYTES};
use converge_grammar::{parse, FileId};

const FILE: FileId = FileId(3);

/// `n` bundles of a few promises each, with strings, heredocs, comments
/// and interpolation, and a policy block calling them.
fn policy(n: usize) -> String {
    let mut src =
        String::from("// header\nclass web = sys.hostname =~ r\"^web\";\nlet greeting = \"hi\";\n");
    for i in 0..n {
        src.push_str(&format!(
            "/* bundle {i} */\nbundle b{i}(port: int = {i}) {{\n  file \"/etc/b{i}\" {{ content = \"listen ${{port}}\\n\"; mode = 0o644; }}\n  when web {{ service \"s{i}\" {{ state = running; }} }}\n  file \"/etc/h{i}\" {{\n    content = \"\"\"\n      {i} ${{greeting}}\n      \"\"\";\n  }}\n}}\n\n"
        ));
    }
    src.push_str("policy {\n");
    for i in 0..n {
        src.push_str(&format!("  b{i}();\n"));
    }
    src.push_str("}\n");
    src
}

#[test]
fn a_clean_file_parsed_in_pieces_is_the_sequential_tree() {
    let src = policy(40);
    let (whole, errors) = parse_whole(FILE, &src);
    assert!(errors.is_empty(), "{errors:?}");
    for pieces in [2, 3, 5, 16] {
        assert_eq!(cut_points(&src, pieces).len(), pieces - 1);
        let items = parse_in_pieces(FILE, &src, pieces)
            .unwrap_or_else(|| panic!("{pieces} pieces fell back to one"));
        assert_eq!(items, whole.items, "{pieces} pieces");
    }
}

/// A line inside a comment, a heredoc, a string or a block that starts
/// with `bundle ` looks like a place to cut; each piece then ends in an
/// error, and the file is parsed whole.
#[test]
fn a_cut_inside_a_comment_string_heredoc_or_block_falls_back_to_one_piece() {
    let decoys = [
        "/*\nbundle fake() {}\n*/\n",
        "  let s = \"one\nbundle fake() {}\ntwo\";\n",
        "  bundle h() {\n  file \"/h\" {\n    content = \"\"\"\nbundle fake() {}\n\"\"\";\n  }\n}\n",
        "  bundle outer() {\nbundle inner() {}\n}\n",
    ];
    for decoy in decoys {
        // The middle, where the cut is looked for from, falls in the long
        // comment line, so the first candidate is the decoy's line.
        let src = format!("let a = 1;\n// {}\n{decoy}", "x".repeat(200));
        let cuts = cut_points(&src, 2);
        assert_eq!(cuts.len(), 1, "{decoy:?}");
        assert!(
            src[cuts[0]..].starts_with("bundle fake") || src[cuts[0]..].starts_with("bundle inner"),
            "{decoy:?} cut at {:?}",
            &src[cuts[0]..]
        );
        assert_eq!(parse_in_pieces(FILE, &src, 2), None, "{decoy:?}");
        assert_eq!(parse(FILE, &src), parse_whole(FILE, &src), "{decoy:?}");
    }
}

#[test]
fn an_error_in_any_piece_falls_back_to_the_sequential_diagnostics() {
    let clean = policy(40);
    // A missing `;` in the last bundle, and a bad escape in the first.
    let broken = clean
        .replacen("mode = 0o644; }", "mode = 0o644 }", 1)
        .replace("/etc/h39", "/etc/\\q39");
    assert_eq!(parse_in_pieces(FILE, &broken, 4), None);
    let (_, errors) = parse_whole(FILE, &broken);
    assert_eq!(errors.len(), 2, "{errors:?}");
}

/// `parse` itself splits a file of several pieces' worth (on a machine
/// with more than one core) and gives the sequential result, errors
/// included.
#[test]
fn parse_of_a_large_file_equals_the_sequential_parse() {
    let mut src = policy(1);
    let mut i = 0;
    while src.len() < 2 * MIN_PIECE_BYTES + 1000 {
        src.push_str(&format!(
            "let v{i}: list<string> = [\"a{i}\", \"b\", \"${{greeting}} {i}\"];\n"
        ));
        i += 1;
    }
    assert!(!cut_points(&src, 2).is_empty());
    assert_eq!(parse(FILE, &src), parse_whole(FILE, &src));
    let broken = format!("{src}let oops = ;\n");
    let (module, errors) = parse(FILE, &broken);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!((module, errors), parse_whole(FILE, &broken));
}
